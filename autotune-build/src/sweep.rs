//! The sweep's supervising half: hands tasks to worker processes, one per GPU,
//! records what they report (in a journal, so a killed build resumes where it
//! stopped), replaces a worker that crashes or hangs (rejecting the variant it was
//! running), and refines boundaries between sizes whose winners differ.
//!
//! Several GPUs of one model share the work through a board of units (see
//! `board`). At a key with many points to time, every GPU takes an interleaved
//! share of them and times the incumbent too, as its anchor: a challenger is
//! compared with the incumbent as timed on its own GPU, and its time is scaled by
//! the ratio of the anchors onto the first GPU's clock. A key with few points goes
//! whole to whichever GPU is free; searches post each batch the same way.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::board::{Board, Unit};
use crate::error::BuildError;
use autotune_table::progress::{Phase, Progress};
use autotune_table::ranges::{self, Decision, SizeTimings, Timed};
use autotune_table::strategy::Strategy;
use autotune_table::table::{Measurement, Rejection, Stage};
use crate::timing::TimingConfig;
use crate::worker::{Event, Job, JobVariant, Task};
use crate::worker_process::Worker;
use autotune_runtime::KernelSpec;

/// A size of the grid (or of refinement) is split across GPUs when each gets at
/// least this many points of it: each share costs its GPU two timings of the
/// incumbent at that size. A search splits every batch, since a size's anchors
/// serve all its batches.
const MIN_SHARE: usize = 4;

/// What to sweep and how.
#[derive(Debug)]
pub struct SweepPlan {
    pub spec: &'static KernelSpec,
    /// The executable that acts as a worker under `AUTOTUNE_WORKER`.
    pub exe: PathBuf,
    pub work_dir: PathBuf,
    pub variants: Vec<JobVariant>,
    /// Variants already out before the sweep (compile errors, resources).
    pub rejected: Vec<Option<Rejection>>,
    /// What a challenger must beat, by ranges of the key `(first, last, variant)`:
    /// the fallback as its own plan runs it when declared, else the default.
    pub incumbents: Vec<(u64, u64, usize)>,
    /// The CUDA devices to time on, all of one model. At each key, times are brought
    /// onto the scale of the lowest-numbered one that timed the incumbent there.
    pub devices: Vec<usize>,
    pub seed: u64,
    pub timing: TimingConfig,
    pub min_margin: f64,
    pub refine_rounds: u32,
    pub task_timeout: Duration,
    /// Identifies the sweep for resumption: a journal with another header is stale.
    pub journal_header: String,
    /// Which points to time at each size.
    pub strategy: Strategy,
    /// Where a search starts: the declared default.
    pub default: usize,
}

impl SweepPlan {
    /// The incumbent at `key`.
    pub fn incumbent_at(&self, key: u64) -> usize {
        self.incumbents
            .iter()
            .find(|&&(first, last, _)| first <= key && key <= last)
            .map_or(0, |&(_, _, v)| v)
    }
}

/// Everything the sweep learned.
#[derive(Debug)]
pub struct SweepResult {
    /// Per variant: its measurements, ascending key (second timings excluded; at a
    /// key timed on several devices, on the reference device's scale, as decided).
    pub measurements: Vec<Vec<Measurement>>,
    pub rejected: Vec<Option<Rejection>>,
    pub decisions: Vec<Decision>,
    /// Keys where the case itself could not be built, with the reason.
    pub failed_keys: BTreeMap<u64, String>,
    pub resumed: usize,
    pub seconds: f64,
    /// Per device used: how many tasks it ran and for how many seconds.
    pub devices: Vec<DeviceShare>,
}

/// One GPU's part of a sweep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeviceShare {
    pub device: usize,
    pub tasks: usize,
    pub seconds: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct TaskId {
    key: u64,
    variant: usize,
    repeat: bool,
    /// The CUDA device it ran on.
    #[serde(default)]
    device: usize,
}

impl TaskId {
    fn of(task: &Task, device: usize) -> Self {
        Self {
            key: task.key,
            variant: task.variant,
            repeat: task.repeat,
            device,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
enum Outcome {
    Measured(Measurement),
    Rejected {
        stage: Stage,
        reason: String,
    },
    /// The variant's wrapper refused this key's arguments: not timed here, not out.
    Unfit(String),
    CaseFailed(String),
}

#[derive(Debug, Serialize, Deserialize)]
struct JournalLine {
    id: TaskId,
    outcome: Outcome,
}

/// What the sweep has learned so far; the device lanes share it behind a lock.
struct Record<'a> {
    log: &'a mut (dyn Write + Send),
    measured: BTreeMap<TaskId, Measurement>,
    rejected: Vec<Option<Rejection>>,
    /// `(key, variant)` pairs whose wrapper refused the key's arguments.
    unfit: BTreeSet<(u64, usize)>,
    failed_keys: BTreeMap<u64, String>,
    resumed: usize,
}

struct Sweep<'a> {
    plan: &'a SweepPlan,
    journal: PathBuf,
    progress: &'a Progress,
    record: Mutex<Record<'a>>,
}

/// One GPU's worker and what it has done.
struct Lane {
    index: usize,
    device: usize,
    worker: Option<Worker>,
    share: DeviceShare,
}

/// Runs the whole sweep: every valid variant at every size (or a search at each),
/// then up to `refine_rounds` rounds of boundary refinement.
pub fn run(
    plan: &SweepPlan,
    progress: &Progress,
    log: &mut (dyn Write + Send),
) -> Result<SweepResult, BuildError> {
    let started = Instant::now();
    if plan.devices.is_empty() {
        return Err(BuildError::Worker("no device to sweep on".into()));
    }
    std::fs::create_dir_all(&plan.work_dir)
        .map_err(BuildError::io("cannot create", &plan.work_dir))?;
    let sweep = Sweep {
        plan,
        journal: plan.work_dir.join(format!("{}.journal", plan.spec.name)),
        progress,
        record: Mutex::new(Record {
            log,
            measured: BTreeMap::new(),
            rejected: plan.rejected.clone(),
            unfit: BTreeSet::new(),
            failed_keys: BTreeMap::new(),
            resumed: 0,
        }),
    };
    let mut lanes: Vec<Lane> = plan
        .devices
        .iter()
        .enumerate()
        .map(|(index, &device)| Lane {
            index,
            device,
            worker: None,
            share: DeviceShare {
                device,
                tasks: 0,
                seconds: 0.0,
            },
        })
        .collect();
    sweep.replay_journal()?;
    let lane_count = lanes.len();
    if plan.strategy == Strategy::Grid {
        let all: Vec<usize> = (0..plan.variants.len()).collect();
        let units = sweep.units(
            plan.spec.sizes.iter().map(|&key| (key, all.clone())),
            lane_count,
            MIN_SHARE,
        );
        sweep.run_units(&mut lanes, units, Vec::new())?;
    } else {
        let mut keys = plan.spec.sizes.to_vec();
        if lane_count > 1 {
            keys.sort_by_key(|&key| std::cmp::Reverse(key));
        }
        sweep.run_units(&mut lanes, Vec::new(), keys)?;
    }
    let mut decisions = sweep.decisions();
    for _ in 0..plan.refine_rounds {
        let points = ranges::refinement_points(&decisions);
        if points.is_empty() {
            break;
        }
        for &(key, a, b) in &points {
            sweep.say(format_args!(
                "  refining between {} and {}: timing at {}={key}",
                plan.variants[a].name, plan.variants[b].name, plan.spec.key
            ));
        }
        let units = sweep.units(
            points.into_iter().map(|(key, a, b)| (key, vec![a, b])),
            lane_count,
            MIN_SHARE,
        );
        sweep.run_units(&mut lanes, units, Vec::new())?;
        decisions = sweep.decisions();
    }
    let mut devices = Vec::new();
    for lane in lanes {
        if let Some(worker) = lane.worker {
            // Closing its stdin ends it; stop() then only reaps it.
            let _ = worker.stop();
        }
        devices.push(lane.share);
    }
    let record = sweep.record();
    let mut measurements = vec![Vec::new(); plan.variants.len()];
    let mut seen = BTreeSet::new();
    let mut anchors: BTreeMap<u64, Anchors> = BTreeMap::new();
    // Ordered by key, variant, repeat, device: the first of a (key, variant) is the
    // reference device's. Times go onto its scale, as the decisions saw them.
    for (id, m) in &record.measured {
        if !id.repeat && seen.insert((id.key, id.variant)) {
            let s = anchors
                .entry(id.key)
                .or_insert_with(|| sweep.anchors_at(&record, id.key))
                .scale(id.device);
            measurements[id.variant].push(Measurement {
                median_us: m.median_us * s,
                p25_us: m.p25_us * s,
                p75_us: m.p75_us * s,
                min_us: m.min_us * s,
                ..m.clone()
            });
        }
    }
    let (rejected, failed_keys, resumed) = (
        record.rejected.clone(),
        record.failed_keys.clone(),
        record.resumed,
    );
    drop(record);
    // The journal has served its purpose once the caller has the results.
    let _ = std::fs::remove_file(&sweep.journal);
    Ok(SweepResult {
        measurements,
        rejected,
        decisions,
        failed_keys,
        resumed,
        seconds: started.elapsed().as_secs_f64(),
        devices,
    })
}

impl<'a> Sweep<'a> {
    fn record(&self) -> MutexGuard<'_, Record<'a>> {
        // A lane that panicked holding the lock left complete entries behind.
        self.record.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn say(&self, line: std::fmt::Arguments<'_>) {
        let _ = writeln!(self.record().log, "{line}");
    }

    /// Units for `(key, points)`: a key with enough points for every lane to get
    /// `min_share` is split into one interleaved share per lane; others go whole.
    /// With several lanes, the largest keys (the longest to time) come first. What
    /// is done already is left out, and the rest announced to the progress bars.
    fn units(
        &self,
        work: impl Iterator<Item = (u64, Vec<usize>)>,
        lanes: usize,
        min_share: usize,
    ) -> Vec<Unit> {
        let mut units = Vec::new();
        let mut work: Vec<(u64, Vec<usize>)> = work.collect();
        if lanes > 1 {
            work.sort_by_key(|(key, _)| std::cmp::Reverse(*key));
        }
        for (key, points) in work {
            let incumbent = self.plan.incumbent_at(key);
            let challengers: Vec<usize> = points.into_iter().filter(|&v| v != incumbent).collect();
            if lanes > 1 && challengers.len() >= min_share * lanes {
                for lane in 0..lanes {
                    let share: Vec<usize> = challengers
                        .iter()
                        .skip(lane)
                        .step_by(lanes)
                        .copied()
                        .collect();
                    units.push(Unit {
                        key,
                        tasks: self.unit_tasks(key, &share),
                        lane: Some(lane),
                    });
                }
            } else {
                units.push(Unit {
                    key,
                    tasks: self.unit_tasks(key, &challengers),
                    lane: None,
                });
            }
        }
        let record = self.record();
        for unit in &mut units {
            // A share's device is known; a whole unit's anchor is left to its lane.
            let device = unit.lane.map(|lane| self.plan.devices[lane]);
            unit.tasks.retain(|t| match device {
                Some(device) => !self.is_done(&record, t, device),
                None => t.variant == self.plan.incumbent_at(t.key) || !self.is_done(&record, t, 0),
            });
        }
        drop(record);
        units.retain(|u| !u.tasks.is_empty());
        // Announced whole, so that a bar's total does not grow as lanes take units.
        for unit in &units {
            self.announce(&unit.tasks);
        }
        units
    }

    /// `tasks` will be run (or skipped, which counts as handled).
    fn announce(&self, tasks: &[Task]) {
        let checks = tasks.iter().filter(|t| t.check).count();
        self.progress.expect(Phase::Verify, checks as i64);
        self.progress.expect(Phase::Time, tasks.len() as i64);
    }

    /// Runs `units` on the lanes, each lane in its own thread taking the next unit
    /// it may run, and searches at `searches` (as many at a time as there are
    /// lanes), which post their batches as units; the first error stops every lane
    /// after its current unit.
    fn run_units(
        &self,
        lanes: &mut [Lane],
        units: Vec<Unit>,
        searches: Vec<u64>,
    ) -> Result<(), BuildError> {
        let searchers = lanes.len().min(searches.len());
        let board = Board::new(units, searchers);
        let keys = Mutex::new(VecDeque::from(searches));
        std::thread::scope(|scope| {
            for _ in 0..searchers {
                let (board, keys) = (&board, &keys);
                scope.spawn(move || {
                    let mut outcome = Ok(());
                    while outcome.is_ok() {
                        let next = keys.lock().ok().and_then(|mut keys| keys.pop_front());
                        let Some(key) = next else { break };
                        outcome = self.search_key(board, key);
                    }
                    board.poster_done(outcome);
                });
            }
            for lane in lanes.iter_mut() {
                let board = &board;
                scope.spawn(move || {
                    let mut last_key = None;
                    while let Some(taken) = board.take(lane.index, last_key) {
                        last_key = Some(taken.unit.key);
                        let outcome = self.run_tasks(lane, &taken.unit.tasks);
                        board.done(&taken, outcome);
                    }
                });
            }
        });
        board.into_failure().map_or(Ok(()), Err)
    }

    /// At `key`: the incumbent, the `others`, then the incumbent again (unchecked),
    /// skipping fallback variants its plan does not run there.
    fn unit_tasks(&self, key: u64, others: &[usize]) -> Vec<Task> {
        let incumbent = self.plan.incumbent_at(key);
        let mut order = vec![incumbent];
        // Fallback variants other than the one its plan runs at this key are not timed here.
        order.extend(
            others
                .iter()
                .copied()
                .filter(|&v| v != incumbent && !self.plan.variants[v].fallback),
        );
        let mut tasks: Vec<Task> = order
            .into_iter()
            .map(|variant| Task {
                key,
                variant,
                check: true,
                repeat: false,
            })
            .collect();
        tasks.push(Task {
            key,
            variant: incumbent,
            check: false,
            repeat: true,
        });
        tasks
    }

    /// Whether `task` needs no running on `device`: its variant is out, its key has
    /// no case, or it was measured (the incumbent: on this device, as its anchor).
    fn is_done(&self, record: &Record<'_>, task: &Task, device: usize) -> bool {
        if record.rejected[task.variant].is_some()
            || record.failed_keys.contains_key(&task.key)
            || record.unfit.contains(&(task.key, task.variant))
        {
            return true;
        }
        let id = TaskId::of(task, device);
        if task.variant == self.plan.incumbent_at(task.key) {
            return record.measured.contains_key(&id);
        }
        let any = TaskId { device: 0, ..id }..=TaskId {
            device: usize::MAX,
            ..id
        };
        record.measured.range(any).next().is_some()
    }

    /// The median of `variant` at `key` on the reference scale, if timed and not out.
    fn median(&self, key: u64, variant: usize) -> Option<f64> {
        let timings = self.timings_at(&self.record(), key);
        timings
            .timed
            .iter()
            .find(|t| t.variant == variant)
            .map(|t| t.median)
    }

    /// A budgeted search at `key` over the space's points, its batches posted to
    /// `board` for the lanes (the fallback is timed as the incumbent, not searched).
    fn search_key(&self, board: &Board, key: u64) -> Result<(), BuildError> {
        let plan = self.plan;
        let tuned: Vec<usize> = (0..plan.variants.len())
            .filter(|&v| !plan.variants[v].fallback)
            .collect();
        let points: Vec<Vec<u32>> = tuned
            .iter()
            .map(|&v| plan.variants[v].values.clone())
            .collect();
        let start = tuned.iter().position(|&v| v == plan.default).unwrap_or(0);
        let lanes = plan.devices.len();
        let mut failed = false;
        // Each batch goes on the board, split over the lanes when it is large enough.
        let mut measure = |batch: &[usize]| -> Vec<Option<f64>> {
            let variants: Vec<usize> = batch.iter().map(|&i| tuned[i]).collect();
            if !failed {
                let units = self.units(std::iter::once((key, variants.clone())), lanes, 1);
                failed = !board.run_batch(units);
            }
            variants.iter().map(|&v| self.median(key, v)).collect()
        };
        // A time budget is the kernel's: each key gets its share, the lanes
        // searching keys side by side.
        let started = Instant::now();
        let share = plan.strategy.seconds().map(|seconds| {
            seconds * plan.devices.len() as f64 / plan.spec.sizes.len().max(1) as f64
        });
        let spent = || share.is_some_and(|share| started.elapsed().as_secs_f64() >= share);
        let timed = plan.strategy.search(&points, start, &mut measure, &spent);
        if failed {
            // The lane that failed recorded why.
            return Ok(());
        }
        self.say(format_args!(
            "  {}={key}: {} timed {} of {} points",
            plan.spec.key,
            plan.strategy,
            timed.len(),
            points.len()
        ));
        Ok(())
    }

    fn replay_journal(&self) -> Result<(), BuildError> {
        let Ok(text) = std::fs::read_to_string(&self.journal) else {
            return Ok(());
        };
        let mut lines = text.lines();
        if lines.next() != Some(self.plan.journal_header.as_str()) {
            let _ = std::fs::remove_file(&self.journal);
            return Ok(());
        }
        let mut resumed = 0;
        for line in lines {
            // A line cut short by a kill is simply not replayed.
            let Ok(entry) = serde_json::from_str::<JournalLine>(line) else {
                continue;
            };
            if entry.id.variant >= self.plan.variants.len() {
                continue;
            }
            resumed += 1;
            self.apply(entry.id, entry.outcome, false, None)?;
        }
        if resumed > 0 {
            let mut record = self.record();
            record.resumed = resumed;
            let _ = writeln!(
                record.log,
                "  resumed {resumed} results from {}",
                self.journal.display()
            );
        }
        Ok(())
    }

    fn apply(
        &self,
        id: TaskId,
        outcome: Outcome,
        journal: bool,
        seconds: Option<f64>,
    ) -> Result<(), BuildError> {
        let mut record = self.record();
        if journal {
            self.append_journal(&JournalLine {
                id,
                outcome: outcome.clone(),
            })?;
        }
        let name = &self.plan.variants[id.variant].name;
        let key = format!("{}={}", self.plan.spec.key, id.key);
        let gpu = if self.plan.devices.len() > 1 {
            format!("gpu{} ", id.device)
        } else {
            String::new()
        };
        match outcome {
            Outcome::Measured(m) => {
                let tb_s = if m.bytes > 0 {
                    format!("  {:.2} TB/s", m.bytes as f64 / m.median_us / 1e6)
                } else {
                    String::new()
                };
                let check = if m.error >= 0.0 {
                    format!("  err {:.1e}", m.error)
                } else {
                    "  (again)".to_string()
                };
                let check = if m.repeats == 1 {
                    format!("{check}  (hopeless: one launch)")
                } else {
                    check
                };
                let took = seconds.map(|s| format!("  [{s:.2} s]")).unwrap_or_default();
                let _ = writeln!(
                    record.log,
                    "  {gpu}{key:<12} {name:<32} {:>10.2} us  IQR ±{:.1}%  n={}{check}{tb_s}{took}",
                    m.median_us,
                    m.spread() * 100.0,
                    m.repeats
                );
                record.measured.insert(id, m);
            }
            Outcome::Rejected { stage, reason } => {
                let _ = writeln!(
                    record.log,
                    "  {gpu}{key:<12} {name:<32} REJECTED ({stage:?}): {reason}"
                );
                if record.rejected[id.variant].is_none() {
                    record.rejected[id.variant] = Some(Rejection { stage, reason });
                }
            }
            Outcome::Unfit(reason) => {
                let _ = writeln!(
                    record.log,
                    "  {gpu}{key:<12} {name:<32} not at this key (its wrapper refused the arguments): {reason}"
                );
                record.unfit.insert((id.key, id.variant));
            }
            Outcome::CaseFailed(reason) => {
                let _ = writeln!(record.log, "  {gpu}{key:<12} no case: {reason}");
                record.failed_keys.insert(id.key, reason);
            }
        }
        Ok(())
    }

    /// Appends one line (the caller holds the record's lock, which orders lines).
    fn append_journal(&self, line: &JournalLine) -> Result<(), BuildError> {
        let fresh = !self.journal.exists();
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.journal)
            .map_err(BuildError::io("cannot open", &self.journal))?;
        let mut text = String::new();
        if fresh {
            text.push_str(&self.plan.journal_header);
            text.push('\n');
        }
        text.push_str(&serde_json::to_string(line).map_err(|e| BuildError::Worker(e.to_string()))?);
        text.push('\n');
        file.write_all(text.as_bytes())
            .map_err(BuildError::io("cannot write", &self.journal))
    }

    /// Runs `tasks` on `lane`, in its running worker or new ones: a worker that
    /// dies or hangs takes its current variant with it, and a new one resumes after it.
    fn run_tasks(&self, lane: &mut Lane, tasks: &[Task]) -> Result<(), BuildError> {
        let mut steps = Steps::default();
        let outcome = self.run_pending(lane, tasks, &mut steps);
        // What was skipped (its variant or key went out, or it was done before) or
        // left by an error counts as handled, so that the bars end full.
        let checks = tasks.iter().filter(|t| t.check).count();
        self.progress
            .advance(Phase::Verify, checks.saturating_sub(steps.verify));
        self.progress
            .advance(Phase::Time, tasks.len().saturating_sub(steps.time));
        outcome
    }

    fn run_pending(
        &self,
        lane: &mut Lane,
        tasks: &[Task],
        steps: &mut Steps,
    ) -> Result<(), BuildError> {
        loop {
            let pending: Vec<Task> = {
                let record = self.record();
                tasks
                    .iter()
                    .copied()
                    .filter(|t| !self.is_done(&record, t, lane.device))
                    .collect()
            };
            if pending.is_empty() {
                return Ok(());
            }
            let progressed = self.run_job(lane, &pending, steps)?;
            if !progressed {
                return Err(BuildError::Worker(format!(
                    "a worker for `{}` on device {} stopped before finishing any task; see the log above",
                    self.plan.spec.name, lane.device
                )));
            }
        }
    }

    /// Hands `tasks` to the lane's worker (started if needed) and records what it
    /// reports until it is done, dies or hangs. Returns whether anything was learned.
    fn run_job(
        &self,
        lane: &mut Lane,
        tasks: &[Task],
        steps: &mut Steps,
    ) -> Result<bool, BuildError> {
        let plan = self.plan;
        let job = Job {
            kernel: plan.spec.name.to_string(),
            device: lane.device,
            seed: plan.seed,
            timing: plan.timing,
            variants: plan.variants.clone(),
            tasks: tasks.to_vec(),
        };
        let line =
            serde_json::to_string(&job).map_err(|e| BuildError::Worker(e.to_string()))? + "\n";
        let job_started = Instant::now();
        let mut worker = match lane.worker.take() {
            Some(worker) => worker,
            None => Worker::spawn(plan)?,
        };
        if worker
            .stdin
            .write_all(line.as_bytes())
            .and_then(|()| worker.stdin.flush())
            .is_err()
        {
            // It died between jobs; a fresh one gets the job.
            worker.stop();
            worker = Worker::spawn(plan)?;
            worker
                .stdin
                .write_all(line.as_bytes())
                .map_err(|e| BuildError::Worker(format!("cannot send a job: {e}")))?;
            worker
                .stdin
                .flush()
                .map_err(|e| BuildError::Worker(format!("cannot send a job: {e}")))?;
        }
        let mut current: Option<(usize, Instant)> = None;
        // Per task: checked, and finished (with any outcome).
        let mut checked = vec![false; tasks.len()];
        let mut finished = vec![false; tasks.len()];
        let mut step = |phase: Phase| {
            self.progress.step(phase);
            match phase {
                Phase::Verify => steps.verify += 1,
                _ => steps.time += 1,
            }
        };
        let mut progressed = false;
        let ending = loop {
            match worker.events.recv_timeout(plan.task_timeout) {
                Ok(line) => {
                    let Ok(event) = serde_json::from_str::<Event>(&line) else {
                        self.say(format_args!("  worker: {line}"));
                        continue;
                    };
                    let (task_index, outcome) = match event {
                        Event::Done => break Ending::Done,
                        Event::Started { task } => {
                            current = Some((task, Instant::now()));
                            continue;
                        }
                        Event::Checked { task } => {
                            if let Some(flag) = checked.get_mut(task)
                                && !*flag
                            {
                                *flag = true;
                                step(Phase::Verify);
                            }
                            continue;
                        }
                        Event::Measured { task, measurement } => {
                            (task, Outcome::Measured(measurement))
                        }
                        Event::Rejected {
                            task,
                            stage,
                            reason,
                        } => (task, Outcome::Rejected { stage, reason }),
                        Event::Unfit { task, reason } => (task, Outcome::Unfit(reason)),
                        Event::CaseFailed { task, reason } => (task, Outcome::CaseFailed(reason)),
                        Event::Fatal { task, reason } => {
                            self.say(format_args!(
                                "  worker: the context is lost after task {task}: {reason}"
                            ));
                            (
                                task,
                                Outcome::Rejected {
                                    stage: Stage::Crash,
                                    reason: format!("crashed the CUDA context: {reason}"),
                                },
                            )
                        }
                    };
                    let Some(task) = tasks.get(task_index) else {
                        continue;
                    };
                    let seconds = match current {
                        Some((index, started)) if index == task_index => {
                            current = None;
                            Some(started.elapsed().as_secs_f64())
                        }
                        _ => None,
                    };
                    progressed = true;
                    finish(task_index, task, &mut checked, &mut finished, &mut step);
                    lane.share.tasks += 1;
                    self.apply(TaskId::of(task, lane.device), outcome, true, seconds)?;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => break Ending::Hung,
                Err(mpsc::RecvTimeoutError::Disconnected) => break Ending::Died,
            }
        };
        if let Ending::Done = ending {
            lane.worker = Some(worker);
            lane.share.seconds += job_started.elapsed().as_secs_f64();
            return Ok(progressed);
        }
        let (status, stderr) = worker.stop();
        lane.share.seconds += job_started.elapsed().as_secs_f64();
        if let Some((index, _)) = current
            && let Some(task) = tasks.get(index)
        {
            let (stage, reason) = match ending {
                Ending::Hung => (
                    Stage::Timeout,
                    format!("no result within {} s", plan.task_timeout.as_secs()),
                ),
                _ => (
                    Stage::Crash,
                    format!("the worker died ({status}): {}", last_line(&stderr)),
                ),
            };
            finish(index, task, &mut checked, &mut finished, &mut step);
            self.apply(
                TaskId::of(task, lane.device),
                Outcome::Rejected { stage, reason },
                true,
                None,
            )?;
            progressed = true;
        } else {
            self.say(format_args!("  worker exited with {status}:\n{stderr}"));
        }
        Ok(progressed)
    }

    /// The incumbent's two medians at `key` per device that timed it (its anchors),
    /// and the factor that brings each device's times onto the reference's (the
    /// lowest-numbered device with an anchor). A device without an anchor keeps 1.
    fn anchors_at(&self, record: &Record<'_>, key: u64) -> Anchors {
        let incumbent = self.plan.incumbent_at(key);
        let mut anchors: BTreeMap<usize, (f64, Option<f64>)> = BTreeMap::new();
        for (id, m) in record.measured.range(key_range(key)) {
            if id.variant == incumbent {
                let entry = anchors.entry(id.device).or_insert((f64::NAN, None));
                if id.repeat {
                    entry.1 = Some(m.median_us);
                } else {
                    entry.0 = m.median_us;
                }
            }
        }
        anchors.retain(|_, (first, _)| first.is_finite() && *first > 0.0);
        let reference = anchors.values().next().map(|&(first, _)| first);
        Anchors {
            scale: anchors
                .iter()
                .filter_map(|(&device, &(first, _))| Some((device, reference? / first)))
                .collect(),
            repeat_noise: anchors
                .values()
                .filter_map(|&(first, again)| again.map(|again| (again - first).abs() / first))
                .reduce(f64::max),
        }
    }

    /// What was timed at `key`, on the reference device's scale; the repeat noise
    /// is the largest over the devices.
    fn timings_at(&self, record: &Record<'_>, key: u64) -> SizeTimings {
        let anchors = self.anchors_at(record, key);
        let mut timed: Vec<Timed> = Vec::new();
        for (id, m) in record.measured.range(key_range(key)) {
            if id.repeat
                || record.rejected[id.variant].is_some()
                || timed.iter().any(|t| t.variant == id.variant)
            {
                continue;
            }
            let s = anchors.scale(id.device);
            timed.push(Timed {
                variant: id.variant,
                median: m.median_us * s,
                p25: m.p25_us * s,
                p75: m.p75_us * s,
            });
        }
        SizeTimings {
            key,
            timed,
            repeat_noise: anchors.repeat_noise,
            refinement: !self.plan.spec.sizes.contains(&key),
        }
    }

    /// The decision at every key with valid timings, ascending.
    fn decisions(&self) -> Vec<Decision> {
        let record = self.record();
        let keys: BTreeSet<u64> = record.measured.keys().map(|id| id.key).collect();
        keys.into_iter()
            .filter_map(|key| {
                let timings = self.timings_at(&record, key);
                ranges::decide(&timings, self.plan.incumbent_at(key), self.plan.min_margin)
            })
            .collect()
    }
}

/// Every task id at `key`.
fn key_range(key: u64) -> std::ops::RangeInclusive<TaskId> {
    let first = TaskId {
        key,
        variant: 0,
        repeat: false,
        device: 0,
    };
    first..=TaskId {
        variant: usize::MAX,
        repeat: true,
        device: usize::MAX,
        ..first
    }
}

/// The incumbent's timings at one key, per device.
struct Anchors {
    /// Per device: the reference anchor over this device's.
    scale: BTreeMap<usize, f64>,
    /// The largest relative difference between a device's two incumbent timings.
    repeat_noise: Option<f64>,
}

impl Anchors {
    fn scale(&self, device: usize) -> f64 {
        self.scale.get(&device).copied().unwrap_or(1.0)
    }
}

/// Progress steps one unit's jobs made, per phase.
#[derive(Debug, Default)]
struct Steps {
    verify: usize,
    time: usize,
}

/// Counts task `index` of a job as through both phases.
fn finish(
    index: usize,
    task: &Task,
    checked: &mut [bool],
    finished: &mut [bool],
    step: &mut impl FnMut(Phase),
) {
    if task.check && !checked[index] {
        checked[index] = true;
        step(Phase::Verify);
    }
    if !finished[index] {
        finished[index] = true;
        step(Phase::Time);
    }
}

/// How a job ended.
enum Ending {
    Done,
    Died,
    Hung,
}

fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no output")
}
