//! The sweep's supervising half, its scheduling: hands tasks to worker processes,
//! one per GPU, passes what they report to the record (`record`: outcomes, the
//! journal a killed build resumes from, anchors, decisions), replaces a worker
//! that crashes or hangs (rejecting the variant it was running), and refines
//! boundaries between sizes whose winners differ.
//!
//! Several GPUs of one model share the work through a board of units (see
//! `board`). At a key with many points to time, every GPU takes an interleaved
//! share of them and times the incumbent too, as its anchor: a challenger is
//! compared with the incumbent as timed on its own GPU, and its time is scaled by
//! the ratio of the anchors onto the first GPU's clock. A key with few points goes
//! whole to whichever GPU is free; searches post each batch the same way.

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use autotune_runtime::KernelSpec;
use autotune_runtime::spec::Above;
use autotune_spec::KeyRange;
use autotune_table::clocks::{ClockRecord, ClockSample};
use autotune_table::off_grid::{OffGridCheck, OffGridOutcome, OffGridRecord};
use autotune_table::phases::Phases;
use autotune_table::progress::{Phase, Progress};
use autotune_table::ranges::{self, Decision};
use autotune_table::strategy::Strategy;
use autotune_table::table::{Measurement, Rejection, Stage};

use crate::board::{Board, Unit};
use crate::error::{BuildError, WorkerFault};
use crate::record::{self, Facts, Outcome, Record, TaskId};
use crate::served::{self, Beyond};
use crate::tail_keys;
use crate::worker::{Event, Job, JobVariant, Task};
use crate::worker_process::Worker;
use autotune_gate::timing::TimingConfig;

/// A size of the grid (or of refinement) is split across GPUs when each gets at
/// least this many points of it: each share costs its GPU two timings of the
/// incumbent at that size. A search splits every batch, since a size's anchors
/// serve all its batches.
const MIN_SHARE: usize = 4;

/// What to sweep and how.
#[derive(Debug)]
pub struct SweepPlan {
    pub spec: &'static KernelSpec,
    /// The shape every task runs at (`shapes = [...]`), empty without shapes.
    pub shape: Vec<u64>,
    /// The table entry this sweep makes (`gemm@n=4096,k=4096`, or the kernel's name).
    pub entry: String,
    /// The executable that acts as a worker under `AUTOTUNE_WORKER`.
    pub exe: PathBuf,
    pub work_dir: PathBuf,
    pub variants: Vec<JobVariant>,
    /// Variants already out before the sweep (compile errors, resources).
    pub rejected: Vec<Option<Rejection>>,
    /// What a challenger must beat, by ranges of the key `(first, last, variant)`:
    /// the fallback as its own plan runs it when declared, else the default.
    pub incumbents: Vec<KeyRange<usize>>,
    /// The CUDA devices to time on, all of one model. At each key, times are brought
    /// onto the scale of the lowest-numbered one that timed the incumbent there.
    pub devices: Vec<usize>,
    pub seed: u64,
    /// Input draws each checked variant must be right on (`AUTOTUNE_CHECK_SEEDS`).
    pub check_seeds: u32,
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
    /// Variants a search times right after the default and may climb from: the
    /// winners of the table this sweep replaces (a stale one), where it has any.
    pub seeds: Vec<usize>,
}

impl SweepPlan {
    /// The incumbent at `key`.
    pub fn incumbent_at(&self, key: u64) -> usize {
        record::incumbent_at(&self.incumbents, key)
    }

    /// What the record needs of this plan.
    fn facts(&self) -> Facts {
        Facts {
            key_name: self.spec.key.to_string(),
            names: self.variants.iter().map(|v| v.name.clone()).collect(),
            incumbents: self.incumbents.clone(),
            candidate: self
                .variants
                .iter()
                .map(|v| {
                    !v.fallback
                        && !self.spec.candidates.is_empty()
                        && v.values.first().is_some_and(|&source| source > 0)
                })
                .collect(),
            sizes: self.spec.sizes.to_vec(),
            min_margin: self.min_margin,
            several_devices: self.devices.len() > 1,
            journal: self.work_dir.join(format!(
                "{}.journal",
                autotune_spec::names::file_fragment(&self.entry)
            )),
            journal_header: self.journal_header.clone(),
        }
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
    /// How the variants that passed were checked ([`Verdict::describe_check`]),
    /// each way once, in the order first seen.
    ///
    /// [`Verdict::describe_check`]: autotune_gate::Verdict::describe_check
    pub checks: Vec<String>,
    /// Where the workers' time went (the jobs a resumed sweep replayed from its
    /// journal are not in it).
    pub phases: Phases,
    pub seconds: f64,
    /// Per device used: how many tasks it ran and for how many seconds.
    pub devices: Vec<DeviceShare>,
    /// What was timed above the largest declared size.
    pub beyond: Beyond,
    /// Each baked variant checked at keys of its ranges off the timed grid.
    pub off_grid: OffGridRecord,
    /// The GPU's clocks and temperature over the sweep, where NVML could be read
    /// (the first device's, where several timed).
    pub clocks: Option<ClockRecord>,
}

/// One GPU's part of a sweep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeviceShare {
    pub device: usize,
    pub tasks: usize,
    pub seconds: f64,
}

struct Sweep<'a> {
    plan: &'a SweepPlan,
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
        return Err(BuildError::Worker(WorkerFault::NoDevice));
    }
    std::fs::create_dir_all(&plan.work_dir)
        .map_err(BuildError::io("cannot create", &plan.work_dir))?;
    let sweep = Sweep {
        plan,
        progress,
        record: Mutex::new(Record::new(plan.facts(), plan.rejected.clone(), log)),
    };
    let mut lanes: Vec<Lane> = plan
        .devices
        .iter()
        .enumerate()
        .map(|(index, &device)| Lane::new(index, device))
        .collect();
    sweep.record().replay_journal()?;
    sweep.run_grid_or_search(&mut lanes)?;
    let decisions = sweep.record().decisions();
    let beyond = sweep.probe_above(&mut lanes, &decisions)?;
    sweep.refine(&mut lanes)?;
    sweep.confirm(&mut lanes)?;
    let off_grid = sweep.check_off_grid(&mut lanes, &beyond)?;
    let decisions = sweep.record().decisions();
    let mut devices = Vec::new();
    for lane in lanes {
        if let Some(worker) = lane.worker {
            // Closing its stdin ends it; stop() then only reaps it.
            let _ = worker.stop();
        }
        devices.push(lane.share);
    }
    let record = sweep.record();
    let measurements = record.measurements();
    let clocks = record.clocks();
    let (rejected, failed_keys, resumed, checks, phases) = (
        record.rejected().to_vec(),
        record.failed_keys().clone(),
        record.resumed(),
        record.checks().to_vec(),
        record.phases(),
    );
    record.remove_journal();
    drop(record);
    Ok(SweepResult {
        measurements,
        rejected,
        decisions,
        failed_keys,
        resumed,
        checks,
        phases,
        seconds: started.elapsed().as_secs_f64(),
        devices,
        beyond,
        off_grid,
        clocks,
    })
}

impl Lane {
    /// Lane `index` on `device`, its worker not started yet.
    fn new(index: usize, device: usize) -> Self {
        Lane {
            index,
            device,
            worker: None,
            share: DeviceShare {
                device,
                tasks: 0,
                seconds: 0.0,
            },
        }
    }
}

impl<'a> Sweep<'a> {
    /// Every variant at every key (the grid), split into units across the lanes;
    /// or the search, key by key (the largest first where there are several lanes).
    fn run_grid_or_search(&self, lanes: &mut [Lane]) -> Result<(), BuildError> {
        let plan = self.plan;
        let lane_count = lanes.len();
        if plan.strategy == Strategy::Grid {
            let all: Vec<usize> = (0..plan.variants.len()).collect();
            let units = self.units(
                plan.spec.sizes.iter().map(|&key| (key, all.clone())),
                lane_count,
                MIN_SHARE,
            );
            return self.run_units(lanes, units, Vec::new());
        }
        let mut keys = plan.spec.sizes.to_vec();
        if lane_count > 1 {
            keys.sort_by_key(|&key| std::cmp::Reverse(key));
        }
        self.run_units(lanes, Vec::new(), keys)
    }

    fn record(&self) -> MutexGuard<'_, Record<'a>> {
        // A lane that panicked holding the lock left complete entries behind.
        self.record.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn say(&self, line: std::fmt::Arguments<'_>) {
        self.record().say(line);
    }

    /// Up to `refine_rounds` rounds: both winners of adjacent keys whose winners
    /// differ timed at each key where one of them was not, and between the keys,
    /// so that the boundary lies where they cross.
    fn refine(&self, lanes: &mut [Lane]) -> Result<(), BuildError> {
        let plan = self.plan;
        for _ in 0..plan.refine_rounds {
            let points = {
                let record = self.record();
                ranges::refinement_points(&record.decisions(), |key, variant| {
                    record.has_timed(key, variant)
                })
            };
            if points.is_empty() {
                break;
            }
            for &(key, a, b) in &points {
                self.say(format_args!(
                    "  refining between {} and {}: timing at {}={key}",
                    plan.variants[a].name, plan.variants[b].name, plan.spec.key
                ));
            }
            let units = self.units(
                points.into_iter().map(|(key, a, b)| (key, vec![a, b])),
                lanes.len(),
                MIN_SHARE,
            );
            self.run_units(lanes, units, Vec::new())?;
        }
        Ok(())
    }

    /// Every key a challenger would take from the incumbent is decided again by
    /// the two timed against each other in interleaved rounds (`Task::against`,
    /// [`autotune_table::duel`]): the challenger keeps it only where the interval
    /// of their ratio clears the margin, and then again in a fresh worker process
    /// (a new CUDA context, the modules loaded again: what one process's state made
    /// of the two does not carry over). A key handed back may move a boundary, so
    /// the boundaries are refined again and the new keys' challengers met too, for
    /// as many rounds as refinement has. A key handed back may have a next
    /// challenger ([`crate::record::CHALLENGERS_PER_KEY`]): the rounds go on, without
    /// refining, until no challenger holds a key undueled or unconfirmed.
    fn confirm(&self, lanes: &mut [Lane]) -> Result<(), BuildError> {
        let plan = self.plan;
        if plan.timing.duel_rounds == 0 {
            return Ok(());
        }
        let rounds = plan.refine_rounds + crate::record::CHALLENGERS_PER_KEY as u32;
        for round in 0..=rounds {
            let duels = self.record().undueled();
            if !duels.is_empty() {
                self.duel(lanes, &duels, false)?;
            }
            let again = self.record().unconfirmed();
            if !again.is_empty() {
                // Each lane's next job starts a worker of its own.
                for lane in lanes.iter_mut() {
                    if let Some(worker) = lane.worker.take() {
                        let _ = worker.stop();
                    }
                }
                self.duel(lanes, &again, true)?;
            }
            if duels.is_empty() && again.is_empty() {
                break;
            }
            if round < plan.refine_rounds {
                self.refine(lanes)?;
            }
        }
        Ok(())
    }

    /// Times each `(key, challenger, incumbent)` of `duels` in interleaved rounds,
    /// a unit a key; `fresh`: the confirmations, in fresh workers
    /// ([`Task::repeat`] on a duel).
    fn duel(
        &self,
        lanes: &mut [Lane],
        duels: &[(u64, usize, usize)],
        fresh: bool,
    ) -> Result<(), BuildError> {
        let plan = self.plan;
        let keys: Vec<String> = duels.iter().map(|d| d.0.to_string()).collect();
        let again = if fresh {
            " again, each in a fresh worker,"
        } else {
            ""
        };
        self.say(format_args!(
            "  timing each challenger against the incumbent{again} in {} interleaved rounds at {}={}",
            plan.timing.duel_rounds,
            plan.spec.key,
            keys.join(", ")
        ));
        let units: Vec<Unit> = duels
            .iter()
            .map(|&(key, challenger, incumbent)| Unit {
                key,
                tasks: vec![Task {
                    key,
                    variant: challenger,
                    check: false,
                    repeat: fresh,
                    incumbent: false,
                    verify: false,
                    against: Some(incumbent),
                    points: 0,
                }],
                lane: None,
            })
            .collect();
        for unit in &units {
            self.announce(&unit.tasks);
        }
        self.run_units(lanes, units, Vec::new())
    }

    /// Checks every variant the decisions would bake at keys of the ranges it
    /// serves that no tile divides ([`tail_keys`]), in full and untimed. A variant
    /// wrong at any of them is out for the whole kernel: the keys are decided again
    /// without it, the boundaries refined again, and the new owners checked, until
    /// every variant baked was found right where it is served (each round puts one
    /// out or ends).
    fn check_off_grid(
        &self,
        lanes: &mut [Lane],
        beyond: &Beyond,
    ) -> Result<OffGridRecord, BuildError> {
        let plan = self.plan;
        let started = Instant::now();
        let incumbent = plan.incumbents.last().map_or(plan.default, |r| r.choice);
        let mut asked: Vec<(u64, usize)> = Vec::new();
        for _ in 0..=plan.variants.len() {
            let (decisions, rejected) = {
                let record = self.record();
                (record.decisions(), record.rejected().to_vec())
            };
            let out_before = rejected.iter().flatten().count();
            let largest = decisions.last().map_or(0, |d| d.key);
            let baked = served::served(
                plan.spec,
                &decisions,
                &rejected,
                beyond,
                incumbent,
                plan.default,
            );
            let units = self.off_grid_units(&baked.ranges, largest, &mut asked);
            if units.is_empty() {
                break;
            }
            let keys: Vec<String> = units.iter().map(|u| u.key.to_string()).collect();
            self.say(format_args!(
                "  checking what is baked off the timed grid at {}={}",
                plan.spec.key,
                keys.join(", ")
            ));
            for unit in &units {
                self.announce(&unit.tasks);
            }
            self.run_units(lanes, units, Vec::new())?;
            if self.record().rejected().iter().flatten().count() == out_before {
                break;
            }
            self.refine(lanes)?;
            self.confirm(lanes)?;
        }
        Ok(OffGridRecord {
            seed: plan.seed,
            checks: self.off_grid_checks(&asked),
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    /// The verify tasks at the keys [`tail_keys::keys_in`] draws in each baked
    /// range, one unit a key, leaving out what was `asked` before (and adding to it).
    fn off_grid_units(
        &self,
        ranges: &[KeyRange<usize>],
        largest: u64,
        asked: &mut Vec<(u64, usize)>,
    ) -> Vec<Unit> {
        let plan = self.plan;
        let mut by_key: BTreeMap<u64, Vec<Task>> = BTreeMap::new();
        for range in ranges {
            for key in tail_keys::keys_in(range, largest, plan.spec.key_max, plan.seed) {
                if asked.contains(&(key, range.choice)) {
                    continue;
                }
                asked.push((key, range.choice));
                by_key.entry(key).or_default().push(Task {
                    key,
                    variant: range.choice,
                    check: true,
                    repeat: false,
                    incumbent: false,
                    verify: true,
                    against: None,
                    points: 0,
                });
            }
        }
        by_key
            .into_iter()
            .map(|(key, tasks)| Unit {
                key,
                tasks,
                lane: None,
            })
            .collect()
    }

    /// What each check off the grid found: its outcome, or why there is none (the
    /// variant was already out, or the case refused the key).
    fn off_grid_checks(&self, asked: &[(u64, usize)]) -> Vec<OffGridCheck> {
        let record = self.record();
        let found = record.off_grid();
        asked
            .iter()
            .map(|&(key, variant)| OffGridCheck {
                key,
                variant: self.plan.variants[variant].name.clone(),
                outcome: found.get(&(key, variant)).cloned().unwrap_or_else(|| {
                    match &record.rejected()[variant] {
                        Some(out) => OffGridOutcome::AlreadyOut {
                            reason: out.to_string(),
                        },
                        None => OffGridOutcome::NotChecked {
                            reason: "no case at this key".to_string(),
                        },
                    }
                }),
            })
            .collect()
    }

    /// With `above = measure`, times the largest size's pick against the incumbent
    /// at twice that size, so that the keys above it are decided by a measurement
    /// rather than left to the incumbent blindly (refinement then places the
    /// boundary between the two keys if the pick loses there).
    fn probe_above(
        &self,
        lanes: &mut [Lane],
        decisions: &[Decision],
    ) -> Result<Beyond, BuildError> {
        let plan = self.plan;
        let (Above::Measure, Some(&top)) = (plan.spec.above, plan.spec.sizes.last()) else {
            return Ok(Beyond::NotAsked);
        };
        let Some(at_top) = decisions.iter().find(|d| d.key == top) else {
            return Ok(Beyond::Failed {
                key: top,
                reason: format!("nothing valid was timed at {}={top}", plan.spec.key),
            });
        };
        if at_top.winner == plan.incumbent_at(top) {
            return Ok(Beyond::IncumbentOwnsTop);
        }
        let Some(key) = top.checked_mul(2).filter(|&k| k <= plan.spec.key_max) else {
            return Ok(Beyond::OutOfRange);
        };
        self.say(format_args!(
            "  above the largest size: timing {} against the incumbent at {}={key}",
            plan.variants[at_top.winner].name, plan.spec.key
        ));
        let units = self.units(
            std::iter::once((key, vec![at_top.winner])),
            lanes.len(),
            MIN_SHARE,
        );
        self.record().set_probing(true);
        let probed = self.run_units(lanes, units, Vec::new());
        self.record().set_probing(false);
        probed?;
        let record = self.record();
        if record.decisions().iter().any(|d| d.key == key) {
            return Ok(Beyond::Probed { key });
        }
        let reason = record.failed_keys().get(&key).cloned().unwrap_or_else(|| {
            "no valid timing there (the wrapper refused the arguments?)".to_string()
        });
        Ok(Beyond::Failed { key, reason })
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
                Some(device) => !record.is_done(t, device),
                None => t.variant == self.plan.incumbent_at(t.key) || !record.is_done(t, 0),
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
                incumbent: variant == incumbent,
                verify: false,
                against: None,
                points: 0,
            })
            .collect();
        tasks.push(Task {
            key,
            variant: incumbent,
            check: false,
            repeat: true,
            incumbent: true,
            verify: false,
            against: None,
            points: 0,
        });
        tasks
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
        let seeds: Vec<usize> = plan
            .seeds
            .iter()
            .filter_map(|&s| tuned.iter().position(|&v| v == s))
            .collect();
        let lanes = plan.devices.len();
        let mut failed = false;
        // Each batch goes on the board, split over the lanes when it is large enough.
        let mut measure = |batch: &[usize]| -> Vec<Option<f64>> {
            let variants: Vec<usize> = batch.iter().map(|&i| tuned[i]).collect();
            if !failed {
                let units = self.units(std::iter::once((key, variants.clone())), lanes, 1);
                failed = !board.run_batch(units);
            }
            let record = self.record();
            variants.iter().map(|&v| record.median(key, v)).collect()
        };
        // A time budget is the kernel's: each key gets its share, the lanes
        // searching keys side by side.
        let started = Instant::now();
        let share = plan.strategy.seconds().map(|seconds| {
            seconds * plan.devices.len() as f64 / plan.spec.sizes.len().max(1) as f64
        });
        let spent = || share.is_some_and(|share| started.elapsed().as_secs_f64() >= share);
        let timed = plan
            .strategy
            .search(&points, start, &seeds, &mut measure, &spent);
        if failed {
            // The lane that failed recorded why.
            return Ok(());
        }
        let seeded = if seeds.is_empty() {
            String::new()
        } else {
            format!(
                ", the default and {} baked by the stale table first",
                seeds.len()
            )
        };
        self.say(format_args!(
            "  {}={key}: {} timed {} of {} points{seeded}",
            plan.spec.key,
            plan.strategy,
            timed.len(),
            points.len()
        ));
        Ok(())
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
                    .filter(|t| !record.is_done(t, lane.device))
                    .collect()
            };
            if pending.is_empty() {
                return Ok(());
            }
            let progressed = self.run_job(lane, &pending, steps)?;
            if !progressed {
                return Err(BuildError::Worker(WorkerFault::Stopped {
                    kernel: self.plan.spec.name.to_string(),
                    device: lane.device,
                }));
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
        let job_started = Instant::now();
        let worker = self.send_job(lane, tasks)?;
        let mut current: Option<(usize, Instant)> = None;
        let mut counted = Counted::new(self.progress, steps, tasks.len());
        let mut progressed = false;
        let ending = loop {
            let line = match worker.events.recv_timeout(plan.task_timeout) {
                Ok(line) => line,
                Err(mpsc::RecvTimeoutError::Timeout) => break Ending::Hung,
                Err(mpsc::RecvTimeoutError::Disconnected) => break Ending::Died,
            };
            let Ok(event) = serde_json::from_str::<Event>(&line) else {
                self.say(format_args!("  worker: {line}"));
                continue;
            };
            let (task_index, outcome) = match self.reported(event) {
                Reported::Done => break Ending::Done,
                Reported::Started(task) => {
                    current = Some((task, Instant::now()));
                    continue;
                }
                Reported::Checked(task, check) => {
                    self.record().checked_by(check);
                    counted.check(task);
                    continue;
                }
                Reported::Spent(phases, clocks) => {
                    self.record().spent(&phases, &clocks);
                    continue;
                }
                Reported::Other => continue,
                Reported::Finished(task, outcome) => (task, outcome),
            };
            let Some(task) = tasks.get(task_index) else {
                continue;
            };
            let seconds = took(&mut current, task_index);
            progressed = true;
            counted.finish(task_index, task);
            lane.share.tasks += 1;
            self.record()
                .apply(TaskId::of(task, lane.device), outcome, true, seconds)?;
        };
        if let Ending::Done = ending {
            lane.worker = Some(worker);
            lane.share.seconds += job_started.elapsed().as_secs_f64();
            return Ok(progressed);
        }
        let (status, stderr) = worker.stop();
        lane.share.seconds += job_started.elapsed().as_secs_f64();
        let Some((index, task)) = current.and_then(|(i, _)| Some((i, tasks.get(i)?))) else {
            self.say(format_args!("  worker exited with {status}:\n{stderr}"));
            return Ok(progressed);
        };
        // The task it was on when it hung or died is out.
        let outcome = match ending {
            Ending::Hung => Outcome::Rejected {
                stage: Stage::Timeout,
                reason: format!("no result within {} s", plan.task_timeout.as_secs()),
            },
            _ => Outcome::Rejected {
                stage: Stage::Crash,
                reason: format!("the worker died ({status}): {}", last_line(&stderr)),
            },
        };
        counted.finish(index, task);
        let id = TaskId::of(task, lane.device);
        self.record().apply(id, outcome, true, None)?;
        Ok(true)
    }

    /// Sends the job of `tasks` to the lane's worker, started (or restarted, where
    /// it died between jobs) as needed.
    fn send_job(&self, lane: &mut Lane, tasks: &[Task]) -> Result<Worker, BuildError> {
        let plan = self.plan;
        let job = Job {
            kernel: plan.spec.name.to_string(),
            device: lane.device,
            seed: plan.seed,
            check_seeds: plan.check_seeds,
            timing: plan.timing,
            shape: plan.shape.clone(),
            variants: plan.variants.clone(),
            tasks: tasks.to_vec(),
        };
        let line = serde_json::to_string(&job)
            .map_err(|e| BuildError::Worker(WorkerFault::Encode(e)))?
            + "\n";
        let send = |worker: &mut Worker| {
            worker
                .stdin
                .write_all(line.as_bytes())
                .and_then(|()| worker.stdin.flush())
        };
        let mut worker = match lane.worker.take() {
            Some(worker) => worker,
            None => Worker::spawn(&plan.exe, plan.spec.name)?,
        };
        if send(&mut worker).is_err() {
            // It died between jobs; a fresh one gets the job.
            worker.stop();
            worker = Worker::spawn(&plan.exe, plan.spec.name)?;
            send(&mut worker).map_err(|e| BuildError::Worker(WorkerFault::Send(e)))?;
        }
        Ok(worker)
    }

    /// What a worker's event says about the job.
    fn reported(&self, event: Event) -> Reported {
        match event {
            Event::Done => Reported::Done,
            Event::Started { task } => Reported::Started(task),
            Event::Checked { task, check } => Reported::Checked(task, check),
            Event::Spent { phases, clocks } => Reported::Spent(phases, clocks),
            Event::Verified { task } => Reported::Finished(task, Outcome::Verified),
            // Only asked for before a sweep (`vendor_points`), never in one.
            Event::Points { .. } => Reported::Other,
            Event::Dueled {
                task,
                incumbent_us,
                challenger_us,
            } => Reported::Finished(
                task,
                Outcome::Dueled {
                    incumbent_us,
                    challenger_us,
                },
            ),
            Event::Measured { task, measurement } => {
                Reported::Finished(task, Outcome::Measured(measurement))
            }
            Event::Rejected {
                task,
                stage,
                reason,
            } => Reported::Finished(task, Outcome::Rejected { stage, reason }),
            Event::Unfit { task, reason } => Reported::Finished(task, Outcome::Unfit(reason)),
            Event::CaseFailed { task, reason } => {
                Reported::Finished(task, Outcome::CaseFailed(reason))
            }
            Event::Fatal { task, reason } => {
                self.say(format_args!(
                    "  worker: the context is lost after task {task}: {reason}"
                ));
                let outcome = Outcome::Rejected {
                    stage: Stage::Crash,
                    reason: format!("crashed the CUDA context: {reason}"),
                };
                Reported::Finished(task, outcome)
            }
        }
    }
}

/// A worker's event, as the job's bookkeeping sees it.
enum Reported {
    Done,
    Started(usize),
    /// The task's variant passed its check, described.
    Checked(usize, String),
    /// The task's outcome (measured, or out for a reason).
    Finished(usize, Outcome),
    /// The job's time by phase.
    Spent(Phases, Vec<ClockSample>),
    /// Nothing the job's bookkeeping uses.
    Other,
}

/// Progress steps one unit's jobs made, per phase.
#[derive(Debug, Default)]
struct Steps {
    verify: usize,
    time: usize,
}

/// The seconds task `index` took, where `current` is it (the task the worker said
/// it started), which it then no longer is.
fn took(current: &mut Option<(usize, Instant)>, index: usize) -> Option<f64> {
    match *current {
        Some((task, started)) if task == index => {
            *current = None;
            Some(started.elapsed().as_secs_f64())
        }
        _ => None,
    }
}

/// A job's tasks counted through the progress bars' two phases, each task once
/// per phase whatever the worker reports.
struct Counted<'p> {
    progress: &'p Progress,
    steps: &'p mut Steps,
    /// Per task: checked, and finished (with any outcome).
    checked: Vec<bool>,
    finished: Vec<bool>,
}

impl<'p> Counted<'p> {
    fn new(progress: &'p Progress, steps: &'p mut Steps, tasks: usize) -> Self {
        Self {
            progress,
            steps,
            checked: vec![false; tasks],
            finished: vec![false; tasks],
        }
    }

    fn step(&mut self, phase: Phase) {
        self.progress.step(phase);
        match phase {
            Phase::Verify => self.steps.verify += 1,
            _ => self.steps.time += 1,
        }
    }

    /// Task `index` was checked.
    fn check(&mut self, index: usize) {
        if let Some(flag) = self.checked.get_mut(index)
            && !*flag
        {
            *flag = true;
            self.step(Phase::Verify);
        }
    }

    /// Task `index` is through both phases.
    fn finish(&mut self, index: usize, task: &Task) {
        if task.check {
            self.check(index);
        }
        if let Some(flag) = self.finished.get_mut(index)
            && !*flag
        {
            *flag = true;
            self.step(Phase::Time);
        }
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
