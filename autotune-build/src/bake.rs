//! What the crate gets for one kernel: a plan from every committed table whose
//! fingerprint matches, the variants those plans name plus the default, compiled
//! as fatbins, and the generated dispatch source.

use std::path::{Path, PathBuf};

use autotune_runtime::KernelSpec;
use autotune_spec::KeyRange;
use autotune_spec::shape::Shape;
use autotune_table::progress::Progress;
use autotune_table::summary::{BakedPlan, KernelSummary, SkippedTable, WithoutPlan};
use autotune_table::table::{self, FALLBACK, KernelTable, TuningTable, Unreadable};

use autotune_runtime::dispatch::{Choice, Range};

use crate::codegen::{Generated, ImageData, OriginData, PlanData, PointData};
use crate::error::{BuildError, KernelFault};
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

/// Bakes one kernel: its plans from the tables that match, its images compiled,
/// its dispatch source written to `OUT_DIR/autotune/<kernel>.rs`.
/// What was baked is returned as data ([`KernelSummary::account`] is its line).
pub fn bake(input: &BakeInput<'_>) -> Result<KernelSummary, BuildError> {
    let spec = input.spec;
    let mut found = Found {
        baked_plans: Vec::new(),
        skipped: Vec::new(),
        images: vec![ImageData {
            name: spec.point_name(spec.default),
            values: spec.default.to_vec(),
            binary: None,
        }],
        plans: Vec::new(),
        archs: input.archs.to_vec(),
    };
    for (path, table) in input.tables {
        found.add_table(input, path, table);
    }
    // Why no table gave a plan, where none did: a table skipped says why itself.
    let without_plan = found
        .plans
        .is_empty()
        .then_some(if !found.skipped.is_empty() {
            WithoutPlan::TablesSkipped
        } else if input.tables.is_empty() {
            WithoutPlan::NoTableYet
        } else {
            WithoutPlan::NoTableHasIt
        });
    let incumbent = match (spec.vendor, spec.fallback) {
        (Some(vendor), _) => Some(vendor.name.to_string()),
        (None, Some(fallback)) => Some(fallback.name.to_string()),
        (None, None) => None,
    };
    found.archs.sort_by_key(|a| (arch_number(a), a.clone()));
    found.archs.dedup();
    let not_compiled = match input.nvcc {
        // A kernel that is all precompiled images needs no nvcc.
        Err(reason) if !spec.is_precompiled() => Some(reason.to_string()),
        nvcc => {
            compile_images(input, nvcc.ok(), &mut found.images, &found.archs)?;
            None
        }
    };
    let summary = KernelSummary {
        name: spec.name.to_string(),
        plans: found.baked_plans,
        skipped: found.skipped,
        default: spec.point_name(spec.default),
        incumbent: incumbent.clone(),
        without_plan,
        compiled: not_compiled.is_none(),
    };
    let note = summary.account();
    let generated = Generated {
        kernel: spec.name.to_string(),
        shape_args: spec.shape_args.iter().map(|a| a.to_string()).collect(),
        // The incumbent by its name: the vendor library's, or the fallback wrapper's
        // (`describe` says "topk_keep_all for every n_ctx", not "fallback").
        fallback: incumbent.unwrap_or_else(|| FALLBACK.to_string()),
        images: found.images,
        plans: found.plans,
        default: 0,
        incumbent: spec.fallback.is_some() || spec.vendor.is_some(),
        note: note.clone(),
        not_compiled,
    };
    write_if_changed(
        &input
            .out_dir
            .join("autotune")
            .join(format!("{}.rs", spec.name)),
        &generated.render()?,
    )?;
    Ok(summary)
}

/// Writes the generated plan only on change, so that an unchanged plan does not
/// recompile the crate.
fn write_if_changed(path: &Path, text: &str) -> Result<(), BuildError> {
    let current = autotune_spec::guarded::read::read_to_string(
        path,
        autotune_spec::guarded::read::MAX_SOURCE_BYTES,
    )
    .ok();
    if current.as_deref() != Some(text) {
        table::write_text_atomic(path, text)?;
    }
    Ok(())
}

/// What the tables gave one kernel so far.
struct Found {
    baked_plans: Vec<BakedPlan>,
    skipped: Vec<SkippedTable>,
    /// The default first, then each variant a plan names, once.
    images: Vec<ImageData>,
    plans: Vec<PlanData>,
    /// What the images are compiled for: the build's, and each baked table's GPU's.
    archs: Vec<String>,
}

impl Found {
    /// The plans of one table (one per tuned shape) that match the kernel's inputs,
    /// or why it gives none.
    fn add_table(
        &mut self,
        input: &BakeInput<'_>,
        path: &Path,
        table: &Result<TuningTable, Unreadable>,
    ) {
        let spec = input.spec;
        let shown = relative(path, input.root);
        let table = match table {
            Ok(table) => table,
            Err(unreadable) => {
                self.skip(&shown, format!("is unreadable ({})", unreadable.reason));
                return;
            }
        };
        let arch = table.gpu.arch_specific();
        let shapes: Vec<_> = spec
            .tuned_shapes()
            .into_iter()
            .filter_map(|(name, shape)| Some((name.clone(), shape, table.kernels.get(&name)?)))
            .collect();
        if shapes.is_empty() {
            return;
        }
        if let Ok(nvcc) = input.nvcc
            && !nvcc.supports(&arch)
        {
            self.skip(
                &shown,
                format!(
                    "is for {} ({arch}), which nvcc {} cannot target: skipped",
                    table.gpu.name, nvcc.version
                ),
            );
            return;
        }
        let mut tuned_any = false;
        // The stale shapes, by why they are stale: one line per reason.
        let mut stale: Vec<(String, Vec<String>)> = Vec::new();
        for (name, shape, entry) in shapes {
            let differences = input.inputs.differences(&entry.fingerprint);
            if !differences.is_empty() {
                let why = differences.join("; ");
                match stale.iter_mut().find(|(reason, _)| *reason == why) {
                    Some((_, shapes)) => shapes.push(shape.to_string()),
                    None => stale.push((why, vec![shape.to_string()])),
                }
                continue;
            }
            let Some(ranges) = plan_ranges(spec, entry, &mut self.images) else {
                self.skip(&shown, format!("names variants `{name}` does not have"));
                continue;
            };
            self.add_plan(spec, &shown, table, entry, &shape, ranges);
            tuned_any = true;
        }
        for (why, shapes) in stale {
            // `at n=4096,k=4096 | n=14336,k=4096` where a kernel has shapes, nothing
            // otherwise.
            let at = match shapes.join(" | ") {
                shapes if shapes.is_empty() => shapes,
                shapes => format!(" at {shapes}"),
            };
            self.skip(
                &shown,
                format!("is stale for {}{at} ({why})", table.gpu.name),
            );
        }
        if tuned_any {
            self.archs.push(arch);
        }
    }

    /// A fresh entry's plan (at `shape`), with what the summary records of it.
    fn add_plan(
        &mut self,
        spec: &KernelSpec,
        shown: &str,
        table: &TuningTable,
        entry: &KernelTable,
        shape: &Shape<'_>,
        ranges: Vec<Range>,
    ) {
        // Only a kernel with shapes lends a plan to a call at another shape.
        let borrowed = if spec.shapes.is_empty() {
            ranges.clone()
        } else {
            borrowed_ranges(spec, entry, &ranges, &self.images)
        };
        self.baked_plans.push(BakedPlan {
            table: shown.to_string(),
            gpu: table.gpu.clone(),
            tuned_on: entry.tuned_on.clone(),
            shape: if shape.is_empty() {
                String::new()
            } else {
                shape.to_string()
            },
        });
        self.plans.push(PlanData {
            origin: OriginData {
                path: shown.to_string(),
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
            vendor_points: vendor_points(entry),
        });
    }

    fn skip(&mut self, shown: &str, reason: String) {
        self.skipped.push(SkippedTable {
            table: shown.to_string(),
            reason,
        });
    }
}

/// Compiles every image as a fatbin for `archs` (a precompiled one is taken as it
/// is, with or without `nvcc`); a failure fails the build (the default, and every
/// variant a fresh table names, must compile).
fn compile_images(
    input: &BakeInput<'_>,
    nvcc: Option<&Nvcc>,
    images: &mut [ImageData],
    archs: &[String],
) -> Result<(), BuildError> {
    let spec = input.spec;
    let dependencies = input.inputs.compile_inputs();
    let jobs: Vec<CompileJob> = images
        .iter()
        .map(|image| {
            let label = spec.compile_slug(&image.values);
            let target = Target::Fatbin(archs.to_vec());
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
        crate::image::compile_all(nvcc, &jobs, input.cache_dir, &Progress::silent(spec.name));
    let mut failure = None;
    for (image, result) in images.iter_mut().zip(results) {
        match result {
            Ok(compiled) => image.binary = Some(compiled.binary),
            Err(error) => {
                failure = Some(KernelFault::Compile {
                    variant: image.name.clone(),
                    error,
                })
            }
        }
    }
    match failure {
        Some(fault) => Err(BuildError::kernel(spec.name, fault)),
        None => Ok(()),
    }
}

/// The ranges a shape that was not tuned takes from `entry`'s plan
/// ([`autotune_table::ranges::borrowed`]): a variant keeps a range only where it led
/// the incumbent by [`BORROW_LEAD`] at every key measured inside it, and the
/// incumbent gets the rest. The incumbent is what a call would run without tuning:
/// the declared fallback (ours or a vendor's), else the default variant.
///
/// [`BORROW_LEAD`]: autotune_table::ranges::BORROW_LEAD
fn borrowed_ranges(
    spec: &KernelSpec,
    entry: &KernelTable,
    ranges: &[Range],
    images: &[ImageData],
) -> Vec<Range> {
    let fallback = entry
        .variants
        .iter()
        .find(|v| matches!(v.role, table::Role::Fallback | table::Role::Vendor));
    let (incumbent, choice) = match fallback {
        Some(record) => (Some(record), Choice::Fallback),
        None => (
            entry.variants.iter().find(|v| v.values == spec.default),
            // The default is always image 0 (`bake` puts it there first).
            Choice::Variant(0),
        ),
    };
    let Some(incumbent) = incumbent else {
        // No incumbent was timed (a table that does not list it): lend nothing.
        return vec![Range::new(0, u64::MAX, choice)];
    };
    let keys: Vec<u64> = incumbent.measurements.iter().map(|m| m.key).collect();
    let lead = |choice: Choice, key: u64| {
        let Choice::Variant(index) = choice else {
            return None;
        };
        let values = &images.get(index)?.values;
        let record = entry.variants.iter().find(|v| &v.values == values)?;
        Some(incumbent.median_at(key)? / record.median_at(key)?)
    };
    autotune_table::ranges::borrowed(
        ranges,
        &keys,
        choice,
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

/// The vendor's point per range of `entry`'s vendor plan, by its name and values
/// (`None` for its default launch, which has none); empty without a vendor plan.
fn vendor_points(entry: &KernelTable) -> Vec<KeyRange<Option<PointData>>> {
    entry
        .vendor_plan
        .iter()
        .map(|range| {
            let point = entry
                .variant(&range.choice)
                .filter(|v| !v.values.is_empty())
                .map(|v| PointData {
                    name: entry.known_as(&v.name),
                    words: v.values.clone(),
                });
            KeyRange::new(range.first, range.last, point)
        })
        .collect()
}
