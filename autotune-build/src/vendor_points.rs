//! The vendor at its best (`vendor_points = N`): a library such as cuBLASLt ranks
//! algorithms for each problem, and its first choice is not always its fastest.
//! Before a kernel's sweep, the vendor is asked for up to N points of its own at
//! every size; the points are then swept against its default launch under the
//! sweep's own rule (each checked against the reference, timed, and given a key
//! only where its interleaved duel with the default clears the margin, again in a
//! fresh process). The winner of each range is the incumbent that our variants
//! must beat there, and what dispatch runs where none of ours does.

use std::io::Write;
use std::path::PathBuf;

use autotune_spec::KeyRange;
use autotune_spec::range::push_merged;
use autotune_table::clocks::ClockRecord;
use autotune_table::progress::Progress;
use autotune_table::strategy::Strategy;
use autotune_table::table::{SizeRecord, VENDOR, vendor_point_name};

use crate::error::{BuildError, WorkerFault};
use crate::served::{Served, served};
use crate::sweep::{self, SweepPlan, SweepResult};
use crate::worker::{Event, Job, JobVariant, Task};
use crate::worker_process::Worker;

/// What the vendor's own sweep chose.
#[derive(Debug)]
pub struct VendorChoice {
    /// The points that own a range of `plan`, as variants of the kernel's sweep:
    /// fallback variants, each timed as the incumbent where `plan` runs it.
    pub points: Vec<JobVariant>,
    /// Which of the vendor's launches (by variant name) is the incumbent per range
    /// of the key: its default or one of `points`.
    pub plan: Vec<KeyRange<String>>,
    /// The decision at every key of the vendor's sweep.
    pub sizes: Vec<SizeRecord>,
    /// The GPU's clocks over the vendor's sweep (none without one, or without NVML).
    pub clocks: Option<ClockRecord>,
}

impl VendorChoice {
    /// `plan` as ranges of indices into `variants` (the kernel's sweep's, whose
    /// variant `vendor` is the vendor's default launch): each point's own index,
    /// `vendor` for the default (and for a point `variants` lacks).
    pub fn incumbents(&self, variants: &[JobVariant], vendor: usize) -> Vec<KeyRange<usize>> {
        self.plan
            .iter()
            .map(|range| {
                let index = variants.iter().position(|v| v.name == range.choice);
                KeyRange::new(range.first, range.last, index.unwrap_or(vendor))
            })
            .collect()
    }
}

/// Asks the vendor for its points at every size of `plan` (whose variant
/// `vendor` is its default launch), sweeps them against that launch, and says
/// which owns each range. Without points anywhere, the default owns every key.
pub fn choose(
    plan: &SweepPlan,
    vendor: usize,
    count: u32,
    progress: &Progress,
    log: &mut (dyn Write + Send),
) -> Result<VendorChoice, BuildError> {
    let default = plan.variants[vendor].clone();
    let asked = ask(plan, &default, count, log)?;
    let library = default
        .name
        .strip_prefix(&format!("{VENDOR}:"))
        .unwrap_or(&default.name)
        .to_string();
    for (key, words) in &asked {
        let _ = writeln!(
            log,
            "  {}={key}: {} of {count} points of {library}'s own",
            plan.spec.key,
            words.len()
        );
    }
    let points = distinct_points(&library, &asked);
    if points.is_empty() {
        return Ok(VendorChoice {
            points,
            plan: vec![KeyRange::new(0, u64::MAX, default.name)],
            sizes: Vec::new(),
            clocks: None,
        });
    }
    let _ = writeln!(
        log,
        "  sweeping {} points of {library}'s own against its default launch",
        points.len()
    );
    let own = own_sweep(plan, default, points);
    let result = sweep::run(&own, progress, log)?;
    Ok(decided(&own, &result))
}

/// Every point `asked` holds, once, in the order first given: the variants of the
/// vendor's own sweep (challengers of its default launch there).
fn distinct_points(library: &str, asked: &Asked) -> Vec<JobVariant> {
    let mut points: Vec<JobVariant> = Vec::new();
    for words in asked.iter().flat_map(|(_, words)| words) {
        let name = vendor_point_name(library, words);
        if !points.iter().any(|p| p.name == name) {
            points.push(JobVariant {
                binary: PathBuf::from(&name),
                name,
                values: words.clone(),
                entries: Vec::new(),
                fallback: false,
                vendor: true,
            });
        }
    }
    points
}

/// The vendor's own sweep: `points` against `default` (the incumbent at every
/// key) on the grid of `plan`'s sizes, as `plan` times and decides.
fn own_sweep(plan: &SweepPlan, default: JobVariant, points: Vec<JobVariant>) -> SweepPlan {
    let mut variants = vec![default];
    variants.extend(points);
    let names: Vec<&str> = variants.iter().map(|v| v.name.as_str()).collect();
    SweepPlan {
        spec: plan.spec,
        shape: plan.shape.clone(),
        entry: format!("{} {VENDOR}", plan.entry),
        exe: plan.exe.clone(),
        work_dir: plan.work_dir.clone(),
        rejected: vec![None; variants.len()],
        incumbents: vec![KeyRange::new(0, u64::MAX, 0)],
        devices: plan.devices.clone(),
        seed: plan.seed,
        check_seeds: plan.check_seeds,
        timing: plan.timing,
        min_margin: plan.min_margin,
        refine_rounds: plan.refine_rounds,
        task_timeout: plan.task_timeout,
        journal_header: format!("{} {VENDOR} {}", plan.journal_header, names.join(" ")),
        strategy: Strategy::Grid,
        default: 0,
        seeds: Vec::new(),
        variants,
    }
}

/// What the vendor's own sweep `own` decided: the owner of each range, and the
/// points that own one as fallback variants of the kernel's sweep.
fn decided(own: &SweepPlan, result: &SweepResult) -> VendorChoice {
    let name = |v: usize| own.variants[v].name.clone();
    let Served { ranges, .. } = served(
        own.spec,
        &result.decisions,
        &result.rejected,
        &result.beyond,
        0,
        0,
    );
    let mut owners: Vec<KeyRange<String>> = Vec::new();
    for range in ranges {
        push_merged(&mut owners, range.first, range.last, name(range.choice));
    }
    let points = own.variants[1..]
        .iter()
        .filter(|p| owners.iter().any(|r| r.choice == p.name))
        .map(|p| JobVariant {
            fallback: true,
            ..p.clone()
        })
        .collect();
    VendorChoice {
        points,
        plan: owners,
        sizes: result.decisions.iter().map(|d| d.record(name)).collect(),
        clocks: result.clocks,
    }
}

/// The vendor's points at each size asked, best first.
type Asked = Vec<(u64, Vec<Vec<u32>>)>;

/// The vendor's points at each size of `plan`, best first, from one worker on
/// the plan's first device. A size where the vendor gave none (or could not be
/// asked) has none.
fn ask(
    plan: &SweepPlan,
    default: &JobVariant,
    count: u32,
    log: &mut (dyn Write + Send),
) -> Result<Asked, BuildError> {
    let device = plan.devices.first().copied().unwrap_or(0);
    let job = Job {
        kernel: plan.spec.name.to_string(),
        device,
        seed: plan.seed,
        check_seeds: plan.check_seeds,
        timing: plan.timing,
        shape: plan.shape.clone(),
        variants: vec![default.clone()],
        tasks: plan
            .spec
            .sizes
            .iter()
            .map(|&key| Task {
                key,
                variant: 0,
                check: false,
                repeat: false,
                incumbent: false,
                verify: false,
                against: None,
                points: count,
            })
            .collect(),
    };
    let line =
        serde_json::to_string(&job).map_err(|e| BuildError::Worker(WorkerFault::Encode(e)))? + "\n";
    let mut worker = Worker::spawn(&plan.exe, plan.spec.name)?;
    worker
        .stdin
        .write_all(line.as_bytes())
        .and_then(|()| worker.stdin.flush())
        .map_err(|e| BuildError::Worker(WorkerFault::Send(e)))?;
    let mut asked: Asked = Vec::new();
    // Until it is done, dies or hangs.
    while let Ok(line) = worker.events.recv_timeout(plan.task_timeout) {
        match serde_json::from_str::<Event>(&line) {
            Ok(Event::Points { task, points }) => {
                if let Some(task) = job.tasks.get(task) {
                    asked.push((task.key, points));
                }
            }
            Ok(
                Event::Rejected { task, reason, .. }
                | Event::CaseFailed { task, reason }
                | Event::Fatal { task, reason },
            ) => {
                let key = job.tasks.get(task).map_or(0, |t| t.key);
                let _ = writeln!(
                    log,
                    "  {}={key}: no points of the vendor's own: {reason}",
                    plan.spec.key
                );
            }
            Ok(Event::Done) => break,
            _ => {}
        }
    }
    let (status, stderr) = worker.stop();
    if asked.len() < job.tasks.len() && !stderr.is_empty() {
        let _ = writeln!(
            log,
            "  the worker asked for points exited with {status}:\n{stderr}"
        );
    }
    Ok(asked)
}
