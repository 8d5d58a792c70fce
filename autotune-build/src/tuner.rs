//! Tuning one kernel on the local GPU: compile every point, prune what ptxas says
//! cannot run well, sweep the rest, and write the result as a table entry.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use autotune_runtime::KernelSpec;
use autotune_spec::range::push_merged;
use autotune_table::hex;
use autotune_table::progress::Progress;
use autotune_table::table::{
    FALLBACK, Fingerprint, GpuRecord, KernelTable, KeyRange, Rejection, Role, Seconds, SizeRecord,
    Stage, VENDOR, VariantRecord,
};

use crate::error::{BuildError, KernelFault};
use crate::fingerprint::KernelInputs;
use crate::nvcc::{CompileJob, Nvcc, Target};
use crate::ptxas::Resources;
use crate::served::{Served, served};
use crate::settings::Settings;
use crate::sweep::{self, SweepPlan, SweepResult};
use crate::vendor_points::{self, VendorChoice};
use crate::worker::JobVariant;

/// Shared memory a block may opt in to where the probe did not record it (tables
/// from before it did): Hopper's 227 KiB.
const MAX_SHARED_BYTES: u32 = 227 * 1024;

/// What tuning needs besides the kernel.
#[derive(Debug)]
pub struct Tuner<'a> {
    pub root: &'a Path,
    pub work_dir: PathBuf,
    pub cache_dir: PathBuf,
    pub nvcc: &'a Nvcc,
    pub gpu: &'a GpuRecord,
    /// The CUDA devices the sweep runs on, all of `gpu`'s model.
    pub devices: Vec<usize>,
    pub settings: &'a Settings,
    /// The executable that acts as the sweep's worker (this build script).
    pub exe: PathBuf,
}

/// A compile job, with the name, values and role of what it compiles.
#[derive(Debug, Clone)]
pub struct PointJob {
    pub name: String,
    pub values: Vec<u32>,
    pub fallback: bool,
    pub job: CompileJob,
}

/// One compile job per point of `spec`, then one per point of its fallback that
/// `fallback_points` names (the points its own plan runs; its default without one).
/// `dependencies` key the compile cache ([`CompileJob::dependencies`]).
pub fn compile_jobs(
    spec: &'static KernelSpec,
    root: &Path,
    target: &Target,
    fallback_points: &[Vec<u32>],
    dependencies: &[PathBuf],
) -> Vec<PointJob> {
    let job = |spec: &'static KernelSpec, label: String, values: &[u32]| {
        CompileJob::of_point(spec, root, label, values, target.clone(), dependencies)
    };
    let mut jobs: Vec<PointJob> = spec
        .points
        .iter()
        .map(|point| PointJob {
            name: spec.point_name(point),
            values: point.to_vec(),
            fallback: false,
            job: job(spec, spec.compile_slug(point), point),
        })
        .collect();
    if let Some(fallback) = spec.fallback {
        let default = [fallback.default.to_vec()];
        let points = if fallback_points.is_empty() {
            &default[..]
        } else {
            fallback_points
        };
        for point in points {
            jobs.push(PointJob {
                name: format!("{FALLBACK}:{}", fallback.point_name(point)),
                values: point.clone(),
                fallback: true,
                job: job(
                    fallback,
                    format!(
                        "fallback-{}-{}",
                        fallback.name,
                        fallback.compile_slug(point)
                    ),
                    point,
                ),
            });
        }
    }
    jobs
}

/// One kernel at one shape to tune, and what its table entry starts from.
#[derive(Debug, Clone, Copy)]
pub struct TuneJob<'a> {
    pub spec: &'static KernelSpec,
    /// The table entry's name (`gemm@n=4096,k=4096` for a shape).
    pub entry: &'a str,
    /// The shape's values; empty without shapes.
    pub shape: &'a [u64],
    pub inputs: &'a KernelInputs,
    pub fingerprint: &'a Fingerprint,
    /// The fallback's own (fresh) table entry, whose plan decides which fallback
    /// variant is timed at each key.
    pub fallback_table: Option<&'a KernelTable>,
    /// The entry this tuning replaces (stale, or forced), whose tuned winners a
    /// budgeted search times first (`SweepPlan::seeds`).
    pub previous: Option<&'a KernelTable>,
}

/// Every point compiled, with what pruned the ones that will not be timed.
struct Candidates {
    variants: Vec<JobVariant>,
    rejected: Vec<Option<Rejection>>,
    resources: Vec<Option<Resources>>,
    compile_s: Vec<Option<f64>>,
    /// The whole compile's wall time.
    seconds: f64,
}

impl Tuner<'_> {
    /// Tunes one kernel at one shape: compile and prune every point, sweep them on
    /// the GPU, and assemble the table entry from the decisions.
    pub fn tune(
        &self,
        job: &TuneJob<'_>,
        log: &mut (dyn Write + Send),
    ) -> Result<KernelTable, BuildError> {
        let started = std::time::Instant::now();
        let spec = job.spec;
        let progress = Progress::from_env(job.entry);
        let fallback_plan = fallback_plan(spec, job.fallback_table);
        let mut candidates = self.compile(job, &fallback_plan, &progress, log);
        let default = spec
            .default_index()
            .ok_or_else(|| BuildError::kernel(spec.name, KernelFault::DefaultNotAPoint))?;
        let incumbents = incumbents(&candidates.variants, default, &fallback_plan);
        let variants = &candidates.variants;
        let mut plan = SweepPlan {
            spec,
            shape: job.shape.to_vec(),
            entry: job.entry.to_string(),
            exe: self.exe.clone(),
            work_dir: self.work_dir.clone(),
            variants: variants.clone(),
            rejected: candidates.rejected.clone(),
            incumbents,
            devices: self.devices.clone(),
            seed: self.settings.seed,
            check_seeds: self.settings.check_seeds,
            timing: self.settings.timing(),
            min_margin: self.settings.min_margin,
            refine_rounds: self.settings.refine_rounds,
            task_timeout: self.settings.task_timeout,
            journal_header: journal_header(
                job.entry,
                job.fingerprint,
                self.gpu,
                variants,
                self.settings,
            ),
            strategy: self.settings.strategy,
            default,
            seeds: job
                .previous
                .map_or_else(Vec::new, |table| seeds(&plan_points(table), variants)),
        };
        let vendor = self.vendor_points(&mut plan, &mut candidates, job, &progress, log)?;
        let result = sweep::run(&plan, &progress, log)?;
        log_device_shares(&result, log);
        // Times taken while the GPU throttled for heat are not compared.
        if let Some(clocks) = result.clocks.as_ref().filter(|c| c.moved().is_some()) {
            return Err(BuildError::kernel(
                spec.name,
                KernelFault::Throttled(*clocks),
            ));
        }
        let mut table = self.entry(job, &plan, &candidates, &result);
        if let Some(vendor) = vendor {
            table.vendor_plan = vendor.plan;
            table.vendor_sizes = vendor.sizes;
        }
        table.seconds.total = started.elapsed().as_secs_f64();
        write_summary(&table, log);
        table
            .validate()
            .map_err(|invalid| BuildError::kernel(spec.name, KernelFault::InvalidTable(invalid)))?;
        Ok(table)
    }

    /// Where the vendor has points of its own (`vendor_points = N`): sweeps them
    /// against its default launch ([`vendor_points::choose`]), adds the points that
    /// own a range to the sweep as fallback variants, and makes each the incumbent
    /// of its ranges. `None` for any other kernel.
    fn vendor_points(
        &self,
        plan: &mut SweepPlan,
        candidates: &mut Candidates,
        job: &TuneJob<'_>,
        progress: &Progress,
        log: &mut (dyn Write + Send),
    ) -> Result<Option<VendorChoice>, BuildError> {
        let spec = job.spec;
        let (Some(vendor), Some(index)) = (
            spec.vendor.filter(|v| v.points > 0),
            plan.variants.iter().position(|v| v.vendor),
        ) else {
            return Ok(None);
        };
        let choice = vendor_points::choose(plan, index, vendor.points, progress, log)?;
        if let Some(clocks) = choice.clocks.as_ref().filter(|c| c.moved().is_some()) {
            return Err(BuildError::kernel(
                spec.name,
                KernelFault::Throttled(*clocks),
            ));
        }
        for point in &choice.points {
            candidates.variants.push(point.clone());
            candidates.rejected.push(None);
            candidates.resources.push(None);
            candidates.compile_s.push(None);
        }
        plan.variants.clone_from(&candidates.variants);
        plan.rejected.clone_from(&candidates.rejected);
        plan.incumbents = choice.incumbents(&plan.variants, index);
        plan.journal_header = journal_header(
            job.entry,
            job.fingerprint,
            self.gpu,
            &plan.variants,
            self.settings,
        );
        Ok(Some(choice))
    }

    /// Compiles every point of the kernel and the fallback points its plan runs, and
    /// prunes the ones that failed to compile, spill, or need more shared memory
    /// than a block of this GPU can have; the vendor's kernel joins as the fallback.
    fn compile(
        &self,
        job: &TuneJob<'_>,
        fallback_plan: &[KeyRange<Vec<u32>>],
        progress: &Progress,
        log: &mut (dyn Write + Send),
    ) -> Candidates {
        let spec = job.spec;
        let mut fallback_points: Vec<Vec<u32>> =
            fallback_plan.iter().map(|r| r.choice.clone()).collect();
        fallback_points.sort();
        fallback_points.dedup();
        // The device's own architecture (sm_90a on an H100 or H200), unless
        // AUTOTUNE_ARCH names one.
        let arch = self
            .settings
            .archs
            .first()
            .cloned()
            .unwrap_or_else(|| self.gpu.arch_specific());
        let jobs = compile_jobs(
            spec,
            self.root,
            &Target::Cubin(arch.clone()),
            &fallback_points,
            &job.inputs.compile_inputs(),
        );
        let compile_jobs: Vec<CompileJob> = jobs.iter().map(|p| p.job.clone()).collect();
        let (compiled, seconds) =
            crate::image::compile_all(Some(self.nvcc), &compile_jobs, &self.cache_dir, progress);
        // Images, not variants: points that differ only in launch-only values share one.
        let mut images: Vec<(&PathBuf, bool)> = compiled
            .iter()
            .filter_map(|c| c.as_ref().ok().map(|c| (&c.binary, c.cached)))
            .collect();
        images.sort();
        images.dedup();
        let fresh = images.iter().filter(|(_, cached)| !cached).count();
        let _ = writeln!(
            log,
            "{}: {} variants, {} images compiled for {arch} in {seconds:.1} s ({fresh} by nvcc, {} cached)",
            job.entry,
            jobs.len(),
            images.len(),
            images.len() - fresh
        );
        let mut candidates = self.candidates(&jobs, compiled, seconds, log);
        // The vendor's kernel: nothing to compile, timed as the fallback.
        if let Some(vendor) = &spec.vendor {
            let name = format!("{VENDOR}:{}", vendor.name);
            candidates.variants.push(JobVariant {
                binary: PathBuf::from(&name),
                name,
                values: Vec::new(),
                entries: Vec::new(),
                fallback: true,
                vendor: true,
            });
            candidates.rejected.push(None);
            candidates.resources.push(None);
            candidates.compile_s.push(None);
        }
        candidates
    }

    /// The compiled points as the sweep's variants, each pruned one with why (said
    /// in `log`), each image's compile time on its first point only.
    fn candidates(
        &self,
        jobs: &[PointJob],
        compiled: Vec<Result<crate::nvcc::Compiled, crate::nvcc::NvccError>>,
        seconds: f64,
        log: &mut (dyn Write + Send),
    ) -> Candidates {
        let mut candidates = Candidates {
            variants: Vec::new(),
            rejected: Vec::new(),
            resources: Vec::new(),
            compile_s: Vec::new(),
            seconds,
        };
        // A compile's time goes to the first point of its image only: points that
        // differ in launch-only values share one.
        let mut timed_images = std::collections::HashSet::new();
        for (point, result) in jobs.iter().zip(compiled) {
            let (binary, rejection, used, compile_s) = match result {
                Err(error) => {
                    let rejection = Rejection {
                        stage: Stage::Compile,
                        reason: error.to_string(),
                    };
                    (PathBuf::new(), Some(rejection), None, None)
                }
                Ok(c) => {
                    let first = timed_images.insert(c.binary.clone());
                    (
                        c.binary,
                        self.pruned(c.resources),
                        c.resources,
                        first.then_some(c.seconds),
                    )
                }
            };
            if let Some(r) = &rejection {
                let _ = writeln!(
                    log,
                    "  {:<32} pruned ({:?}): {}",
                    point.name,
                    r.stage,
                    first_line(&r.reason)
                );
            }
            candidates.variants.push(JobVariant {
                name: point.name.clone(),
                values: point.values.clone(),
                binary,
                entries: point.job.entries.clone(),
                fallback: point.fallback,
                vendor: false,
            });
            candidates.rejected.push(rejection);
            candidates.resources.push(used);
            candidates.compile_s.push(compile_s);
        }
        candidates
    }

    /// Why a compiled variant is not timed: it spills (unless allowed), or its static
    /// shared memory exceeds what a block of this GPU may opt in to (Hopper's 227 KiB
    /// where the probe did not record it).
    fn pruned(&self, resources: Option<Resources>) -> Option<Rejection> {
        let max_shared = match self.gpu.shared_per_block {
            0 => MAX_SHARED_BYTES,
            recorded => recorded,
        };
        match resources {
            Some(r) if r.spills() && !self.settings.allow_spills => Some(Rejection {
                stage: Stage::Resources,
                reason: format!(
                    "spills {} bytes stored / {} loaded (AUTOTUNE_ALLOW_SPILLS=1 keeps it)",
                    r.spill_store_bytes, r.spill_load_bytes
                ),
            }),
            Some(r) if r.shared_bytes > max_shared => Some(Rejection {
                stage: Stage::Resources,
                reason: format!(
                    "{} bytes of static shared memory, over the {max_shared} a block can have",
                    r.shared_bytes
                ),
            }),
            _ => None,
        }
    }

    /// The table entry of a finished sweep: each variant's record, the decision at
    /// each size, and the ranges (every fallback variant counted as the fallback).
    fn entry(
        &self,
        job: &TuneJob<'_>,
        plan: &SweepPlan,
        candidates: &Candidates,
        result: &SweepResult,
    ) -> KernelTable {
        let (spec, variants, default) = (job.spec, &candidates.variants, plan.default);
        let incumbent = plan.incumbents.last().map_or(default, |r| r.choice);
        let name = |index: usize| variants[index].name.clone();
        let owner = |index: usize| {
            if variants[index].fallback {
                FALLBACK.to_string()
            } else {
                name(index)
            }
        };
        let sizes: Vec<SizeRecord> = result.decisions.iter().map(|d| d.record(name)).collect();
        let Served { above, ranges } = served(
            spec,
            &result.decisions,
            &result.rejected,
            &result.beyond,
            incumbent,
            default,
        );
        let mut merged: Vec<KeyRange<String>> = Vec::new();
        for range in ranges {
            push_merged(&mut merged, range.first, range.last, owner(range.choice));
        }
        KernelTable {
            above: Some(above),
            fingerprint: job.fingerprint.clone(),
            tuned_on: today(),
            seed: self.settings.seed,
            key: spec.key.to_string(),
            default: name(default),
            fallback: variants
                .iter()
                .any(|v| v.fallback)
                .then(|| fallback_name(spec)),
            check: (!result.checks.is_empty()).then(|| result.checks.join("; ")),
            tuned_by: None,
            timing: self.timing_note(),
            min_margin: self.settings.min_margin,
            variants: variant_records(candidates, result),
            sizes,
            ranges: merged,
            off_grid: Some(result.off_grid.clone()),
            clocks: result.clocks,
            vendor_plan: Vec::new(),
            vendor_sizes: Vec::new(),
            seconds: Seconds {
                compile: candidates.seconds,
                sweep: result.seconds,
                total: 0.0,
                gpus: u32::try_from(result.devices.len()).unwrap_or(u32::MAX),
                phases: Some(result.phases),
            },
        }
    }

    /// How the entry was timed, for its `timing` field.
    fn timing_note(&self) -> String {
        format!(
            "{}; points: {}{}",
            self.settings.timing().describe(),
            self.settings.strategy,
            match self.settings.check_seeds {
                1 => String::new(),
                draws => format!("; checked on {draws} input draws"),
            }
        )
    }
}

/// Each variant's record: role, resources, compile time, rejection, measurements.
fn variant_records(candidates: &Candidates, result: &SweepResult) -> Vec<VariantRecord> {
    candidates
        .variants
        .iter()
        .enumerate()
        .map(|(index, v)| VariantRecord {
            name: v.name.clone(),
            values: v.values.clone(),
            role: match (v.vendor, v.fallback) {
                (true, _) => Role::Vendor,
                (false, true) => Role::Fallback,
                (false, false) => Role::Tuned,
            },
            resources: candidates.resources[index],
            compile_s: candidates.compile_s.get(index).copied().flatten(),
            rejected: result.rejected[index].clone(),
            measurements: result.measurements[index].clone(),
        })
        .collect()
}

/// What the table calls the fallback: its wrapper (`softmax_library`) or the vendor
/// library (`cuBLAS`).
fn fallback_name(spec: &KernelSpec) -> String {
    match (spec.fallback, spec.vendor) {
        (Some(wrapper), _) => wrapper.name.to_string(),
        (None, Some(vendor)) => vendor.name.to_string(),
        (None, None) => FALLBACK.to_string(),
    }
}

/// The points the fallback's own plan runs, by range of the key (its default where
/// that plan runs its own fallback); empty without a fallback table.
fn fallback_plan(
    spec: &KernelSpec,
    fallback_table: Option<&KernelTable>,
) -> Vec<KeyRange<Vec<u32>>> {
    let fallback_default = spec
        .fallback
        .map(|f| f.default.to_vec())
        .unwrap_or_default();
    fallback_table
        .map(|table| {
            plan_points(table)
                .into_iter()
                .map(|r| r.map(|v| v.unwrap_or_else(|| fallback_default.clone())))
                .collect()
        })
        .unwrap_or_default()
}

/// What a challenger must beat at each key: the default without a fallback, else
/// the fallback variant its plan runs there.
fn incumbents(
    variants: &[JobVariant],
    default: usize,
    fallback_plan: &[KeyRange<Vec<u32>>],
) -> Vec<KeyRange<usize>> {
    let index_of = |values: &[u32]| {
        variants
            .iter()
            .position(|v| v.fallback && v.values == values)
    };
    match variants.iter().position(|v| v.fallback) {
        None => vec![KeyRange::new(0, u64::MAX, default)],
        Some(first) if fallback_plan.is_empty() => vec![KeyRange::new(0, u64::MAX, first)],
        Some(first) => fallback_plan
            .iter()
            .map(|r| r.as_ref().map(|v| index_of(v).unwrap_or(first)))
            .collect(),
    }
}

/// With several GPUs, how the sweep's tasks and time were shared among them.
fn log_device_shares(result: &SweepResult, log: &mut dyn Write) {
    if result.devices.len() > 1 {
        let shares: Vec<String> = result
            .devices
            .iter()
            .map(|d| format!("gpu{}: {} tasks in {:.1} s", d.device, d.tasks, d.seconds))
            .collect();
        let _ = writeln!(
            log,
            "  sweep: {:.1} s on {} GPUs ({})",
            result.seconds,
            result.devices.len(),
            shares.join(", ")
        );
    }
}

/// The variants (of `variants`, the fallback's left out) that a table's `plan`
/// (`plan_points`) baked for its ranges, in the order of the ranges, each once and
/// only where the space still has it: where a retune starts its search.
fn seeds(plan: &[KeyRange<Option<Vec<u32>>>], variants: &[JobVariant]) -> Vec<usize> {
    let mut seeds = Vec::new();
    for values in plan.iter().filter_map(|r| r.choice.as_ref()) {
        if let Some(i) = variants
            .iter()
            .position(|v| !v.fallback && v.values == *values)
            && !seeds.contains(&i)
        {
            seeds.push(i);
        }
    }
    seeds
}

/// The points a table's plan runs, by range of the key; `None` where it runs its
/// own fallback (a fallback's fallback is not followed: its default stands in).
fn plan_points(table: &KernelTable) -> Vec<KeyRange<Option<Vec<u32>>>> {
    table
        .ranges
        .iter()
        .map(|r| {
            r.as_ref().map(|name| {
                table
                    .variant(name)
                    .filter(|v| v.role == Role::Tuned)
                    .map(|v| v.values.clone())
            })
        })
        .collect()
}

fn journal_header(
    entry: &str,
    fingerprint: &Fingerprint,
    gpu: &GpuRecord,
    variants: &[JobVariant],
    settings: &Settings,
) -> String {
    let mut hash = Sha256::new();
    hash.update(serde_json::to_string(fingerprint).unwrap_or_default());
    hash.update(serde_json::to_string(gpu).unwrap_or_default());
    hash.update(serde_json::to_string(&settings.timing()).unwrap_or_default());
    for v in variants {
        hash.update(&v.name);
        hash.update(v.binary.to_string_lossy().as_bytes());
    }
    format!("autotune journal {entry} {}", hex(&hash.finalize()))
}

fn write_summary(table: &KernelTable, log: &mut dyn Write) {
    let _ = writeln!(
        log,
        "  decisions (incumbent `{}`, min margin {:.1}%):",
        table.incumbent_name(),
        table.min_margin * 100.0
    );
    for size in &table.sizes {
        let _ = writeln!(
            log,
            "    {}={:<10} {:<32} {:>10.2} us   incumbent {:>10.2} us   margin {:+.1}%  noise {:.1}%{}{}",
            table.key,
            size.key,
            size.winner,
            size.winner_us,
            size.incumbent_us,
            size.margin * 100.0,
            size.noise * 100.0,
            if size.refinement {
                "  (refinement)"
            } else {
                ""
            },
            size.duel
                .map(|d| format!("  rounds {}", d.describe()))
                .unwrap_or_default()
        );
    }
    let _ = writeln!(log, "  ranges:");
    for range in &table.ranges {
        let last = if range.last == u64::MAX {
            "max".to_string()
        } else {
            range.last.to_string()
        };
        let _ = writeln!(log, "    {}..={last}: {}", range.first, range.choice);
    }
    let out: Vec<String> = table
        .variants
        .iter()
        .filter_map(|v| {
            v.rejected
                .as_ref()
                .map(|r| format!("{} ({:?})", v.name, r.stage))
        })
        .collect();
    if !out.is_empty() {
        let _ = writeln!(log, "  rejected: {}", out.join(", "));
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// Today's UTC date, `YYYY-MM-DD`.
pub fn today() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400) as i64;
    // Civil from days (H. Hinnant).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_plans_winners_seed_the_search_once_each_and_only_where_they_still_exist() {
        let variant = |values: &[u32], fallback: bool| JobVariant {
            name: format!("{values:?}"),
            values: values.to_vec(),
            binary: PathBuf::new(),
            entries: Vec::new(),
            fallback,
            vendor: false,
        };
        // The fallback has the same values as a tuned point: it is not a seed.
        let variants = [
            variant(&[1], false),
            variant(&[2], true),
            variant(&[2], false),
            variant(&[4], false),
        ];
        let plan = [
            KeyRange::new(0, 63, Some(vec![4])),
            KeyRange::new(64, 127, None), // the fallback's range
            KeyRange::new(128, 511, Some(vec![2])),
            KeyRange::new(512, 1023, Some(vec![4])),
            KeyRange::new(1024, u64::MAX, Some(vec![8])), // a point the space no longer has
        ];
        assert_eq!(seeds(&plan, &variants), [3, 2]);
    }

    #[test]
    fn today_is_a_date() {
        let today = super::today();
        assert_eq!(today.len(), 10);
        assert!(today.starts_with("20"));
    }
}
