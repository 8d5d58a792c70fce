//! What the crate gets for one kernel: a plan from every committed table whose
//! fingerprint matches, the variants those plans name plus the default, compiled
//! as fatbins, and the generated dispatch source.

use std::path::{Path, PathBuf};

use autotune_runtime::KernelSpec;
use autotune_table::progress::Progress;
use autotune_table::summary::{BakedPlan, KernelSummary, SkippedTable};
use autotune_table::table::{self, FALLBACK, KernelTable, TuningTable, Unreadable};

use autotune_runtime::dispatch::{Choice, Range};

use crate::codegen::{Generated, ImageData, OriginData, PlanData};
use crate::error::BuildError;
use crate::fingerprint::{KernelInputs, relative};
use crate::nvcc::{CompileJob, Nvcc, NvccError, Target, arch_number};

#[derive(Debug)]
pub struct BakeInput<'a> {
    pub spec: &'static KernelSpec,
    pub root: &'a Path,
    pub tables: &'a [(PathBuf, Result<TuningTable, Unreadable>)],
    pub inputs: &'a KernelInputs,
    pub nvcc: Result<&'a Nvcc, &'a NvccError>,
    /// Architectures to compile for besides the tables' own: `AUTOTUNE_ARCH`, or
    /// the defaults this nvcc supports, and the local GPU's when tuning.
    pub archs: &'a [String],
    pub out_dir: &'a Path,
    pub cache_dir: &'a Path,
}

/// What was baked: a line for the build's one warning, and the same as data.
#[derive(Debug, Clone, PartialEq)]
pub struct Baked {
    /// `rms_norm: tuned for NVIDIA H200 (kernels/tuning/nvidia-h200.json)`.
    pub line: String,
    pub summary: KernelSummary,
}

pub fn bake(input: &BakeInput<'_>) -> Result<Baked, BuildError> {
    let spec = input.spec;
    let mut notes: Vec<String> = Vec::new();
    let mut baked_plans: Vec<BakedPlan> = Vec::new();
    let mut skipped: Vec<SkippedTable> = Vec::new();
    let mut images: Vec<ImageData> = vec![ImageData {
        name: spec.point_name(spec.default),
        values: spec.default.to_vec(),
        binary: None,
    }];
    let mut plans: Vec<PlanData> = Vec::new();
    let mut archs: Vec<String> = input.archs.to_vec();
    for (path, table) in input.tables {
        let shown = relative(path, input.root);
        let mut skip = |reason: String| {
            notes.push(format!("{shown} {reason}"));
            skipped.push(SkippedTable {
                table: shown.clone(),
                reason,
            });
        };
        let table = match table {
            Ok(table) => table,
            Err(unreadable) => {
                skip(format!("is unreadable ({})", unreadable.reason));
                continue;
            }
        };
        let arch = table.gpu.arch_specific();
        let shapes: Vec<_> = spec
            .tuned_shapes()
            .into_iter()
            .filter_map(|(name, shape)| Some((name.clone(), shape, table.kernels.get(&name)?)))
            .collect();
        if shapes.is_empty() {
            continue;
        }
        if let Ok(nvcc) = input.nvcc
            && !nvcc.supports(&arch)
        {
            skip(format!(
                "is for {} ({arch}), which nvcc {} cannot target: skipped",
                table.gpu.name, nvcc.version
            ));
            continue;
        }
        let mut tuned_shapes = Vec::new();
        for (name, shape, entry) in shapes {
            // `gemm@n=4096,k=4096 ...` where a kernel has shapes, the table's path alone
            // otherwise.
            let at = if shape.is_empty() {
                String::new()
            } else {
                format!(" at {shape}")
            };
            let differences = input.inputs.differences(&entry.fingerprint);
            if !differences.is_empty() {
                skip(format!(
                    "is stale for {}{at} ({})",
                    table.gpu.name,
                    differences.join("; ")
                ));
                continue;
            }
            let Some(ranges) = plan_ranges(spec, entry, &mut images) else {
                skip(format!("names variants `{name}` does not have"));
                continue;
            };
            // Only a kernel with shapes lends a plan to a call at another shape.
            let borrowed = if spec.shapes.is_empty() {
                ranges.clone()
            } else {
                borrowed_ranges(entry, &ranges, &images)
            };
            baked_plans.push(BakedPlan {
                table: shown.clone(),
                gpu: table.gpu.clone(),
                tuned_on: entry.tuned_on.clone(),
            });
            tuned_shapes.push(shape.to_string());
            plans.push(PlanData {
                origin: OriginData {
                    path: shown.clone(),
                    gpu: table.gpu.name.clone(),
                    compute_capability: (
                        table.gpu.compute_capability[0],
                        table.gpu.compute_capability[1],
                    ),
                    sm_count: table.gpu.sm_count,
                },
                shape: shape.values().to_vec(),
                ranges,
                borrowed,
                above: autotune_table::above::describe(
                    entry.above.as_ref(),
                    &entry.key,
                    spec.sizes.last().copied().unwrap_or(0),
                ),
            });
        }
        if tuned_shapes.is_empty() {
            continue;
        }
        archs.push(arch);
        let at = if spec.shapes.is_empty() {
            String::new()
        } else {
            format!(" at {}", tuned_shapes.join(" | "))
        };
        let tuned_on = baked_plans
            .last()
            .map(|p| p.tuned_on.clone())
            .unwrap_or_default();
        notes.push(format!(
            "tuned for {}{at} on {tuned_on} ({shown})",
            table.gpu.name
        ));
    }
    if plans.is_empty() {
        notes.push(format!("defaults ({})", spec.point_name(spec.default)));
    }
    archs.sort_by_key(|a| (arch_number(a), a.clone()));
    archs.dedup();
    let not_compiled = match input.nvcc {
        Err(reason) => Some(reason.to_string()),
        Ok(nvcc) => {
            let dependencies = input.inputs.compile_inputs();
            let jobs: Vec<CompileJob> = images
                .iter()
                .map(|image| {
                    let label = spec.slug(&image.values);
                    let target = Target::Fatbin(archs.clone());
                    CompileJob::of_point(
                        spec,
                        input.root,
                        label,
                        &image.values,
                        target,
                        &dependencies,
                    )
                })
                .collect();
            let (results, _) =
                nvcc.compile_all(&jobs, input.cache_dir, &Progress::silent(input.spec.name));
            let mut failure = None;
            for (image, result) in images.iter_mut().zip(results) {
                match result {
                    Ok(compiled) => image.binary = Some(compiled.binary),
                    Err(message) => {
                        failure = Some(format!("{} failed to compile: {message}", image.name))
                    }
                }
            }
            if let Some(failure) = &failure {
                return Err(BuildError::Kernel {
                    kernel: spec.name.to_string(),
                    message: failure.clone(),
                });
            }
            None
        }
    };
    let note = format!("{}: {}", spec.name, notes.join("; "));
    let compiled = not_compiled.is_none();
    let generated = Generated {
        kernel: spec.name.to_string(),
        shape_args: spec.shape_args.iter().map(|a| a.to_string()).collect(),
        fallback: spec
            .vendor
            .map_or_else(|| FALLBACK.to_string(), |v| v.name.to_string()),
        images,
        plans,
        default: 0,
        note: note.clone(),
        not_compiled,
    };
    let text = generated.render()?;
    let path = input
        .out_dir
        .join("autotune")
        .join(format!("{}.rs", spec.name));
    // Rewrite only on change, so that an unchanged plan does not recompile the crate.
    if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
        table::write_text_atomic(&path, &text)?;
    }
    Ok(Baked {
        line: note,
        summary: KernelSummary {
            name: spec.name.to_string(),
            plans: baked_plans,
            skipped,
            default: spec.point_name(spec.default),
            compiled,
        },
    })
}

/// The ranges a shape that was not tuned takes from `entry`'s plan
/// ([`autotune_table::ranges::borrowed`]): a variant keeps a range only where it led
/// the fallback by [`BORROW_LEAD`] at every key measured inside it. The plan itself
/// where the kernel has no fallback.
///
/// [`BORROW_LEAD`]: autotune_table::ranges::BORROW_LEAD
fn borrowed_ranges(entry: &KernelTable, ranges: &[Range], images: &[ImageData]) -> Vec<Range> {
    let Some(fallback) = entry
        .variants
        .iter()
        .find(|v| matches!(v.role, table::Role::Fallback | table::Role::Vendor))
    else {
        return ranges.to_vec();
    };
    let keys: Vec<u64> = fallback.measurements.iter().map(|m| m.key).collect();
    let lead = |choice: Choice, key: u64| {
        let Choice::Variant(index) = choice else {
            return None;
        };
        let values = &images.get(index)?.values;
        let record = entry.variants.iter().find(|v| &v.values == values)?;
        Some(fallback.median_at(key)? / record.median_at(key)?)
    };
    autotune_table::ranges::borrowed(
        ranges,
        &keys,
        Choice::Fallback,
        autotune_table::ranges::BORROW_LEAD,
        lead,
    )
}

/// The ranges of `entry`'s plan as choices among `images` (adding the variants
/// they name); `None` where it names a variant this kernel does not have, or the
/// fallback of a kernel that declares none.
fn plan_ranges(
    spec: &KernelSpec,
    entry: &KernelTable,
    images: &mut Vec<ImageData>,
) -> Option<Vec<Range>> {
    let mut ranges = Vec::new();
    for range in &entry.ranges {
        let choice = if range.choice == FALLBACK {
            if !spec.has_fallback() {
                return None;
            }
            Choice::Fallback
        } else {
            let record = entry.variant(&range.choice)?;
            if !spec.points.contains(&record.values.as_slice()) {
                return None;
            }
            let index = match images.iter().position(|i| i.values == record.values) {
                Some(index) => index,
                None => {
                    images.push(ImageData {
                        name: spec.point_name(&record.values),
                        values: record.values.clone(),
                        binary: None,
                    });
                    images.len() - 1
                }
            };
            Choice::Variant(index)
        };
        ranges.push(Range::new(range.first, range.last, choice));
    }
    Some(ranges)
}
