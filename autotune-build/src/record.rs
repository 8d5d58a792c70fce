//! What a sweep has learned, apart from how it was scheduled: every outcome a
//! worker reported (measured, rejected, unfit for a key, no case at a key), the
//! journal that lets a killed sweep resume, the anchors that bring one GPU's times
//! onto another's scale, and the decisions at each key. Testable without a worker
//! process: feed it outcomes, read its decisions.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;

use autotune_spec::KeyRange;
use autotune_table::clocks::{ClockRecord, ClockSample};
use autotune_table::duel::{Duel, DuelVerdict};
use autotune_table::off_grid::OffGridOutcome;
use autotune_table::phases::Phases;
use autotune_table::ranges::{self, Decision, SizeTimings, Timed};
use autotune_table::table::{Measurement, Rejection, Stage};
use serde::{Deserialize, Serialize};

use crate::error::BuildError;
use crate::worker::Task;

/// One task as run on one device: the record's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TaskId {
    pub key: u64,
    pub variant: usize,
    pub repeat: bool,
    /// The CUDA device it ran on.
    #[serde(default)]
    pub device: usize,
    /// A check off the timed grid ([`Task::verify`]), not a timing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub verify: bool,
    /// The incumbent a duel timed the variant against ([`Task::against`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub against: Option<usize>,
}

impl TaskId {
    pub fn of(task: &Task, device: usize) -> Self {
        Self {
            key: task.key,
            variant: task.variant,
            repeat: task.repeat,
            device,
            verify: task.verify,
            against: task.against,
        }
    }
}

/// What became of one task.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Outcome {
    Measured(Measurement),
    /// A check off the timed grid found the variant right.
    Verified,
    /// A duel's interleaved rounds ([`Task::against`]): the incumbent's times and
    /// the challenger's, paired by round.
    Dueled {
        incumbent_us: Vec<f64>,
        challenger_us: Vec<f64>,
    },
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

/// What the record needs to know of the sweep it records.
#[derive(Debug, Clone)]
pub struct Facts {
    /// The key argument's name, for log lines (`n_rows`).
    pub key_name: String,
    /// Each variant's name, for log lines.
    pub names: Vec<String>,
    /// What a challenger must beat, by ranges of the key.
    pub incumbents: Vec<KeyRange<usize>>,
    /// Per variant: whether it comes from a candidate source (which must beat the
    /// incumbent source's best, see [`ranges::decide_with_candidates`]).
    pub candidate: Vec<bool>,
    /// The declared sizes (other keys are refinements).
    pub sizes: Vec<u64>,
    pub min_margin: f64,
    /// Log lines name the device when there are several.
    pub several_devices: bool,
    /// The journal file and its first line: a journal with another is stale.
    pub journal: PathBuf,
    pub journal_header: String,
}

/// The most a sweep's journal may hold (a line a task, a few hundred bytes each).
const MAX_JOURNAL_BYTES: u64 = 256 << 20;

/// The challengers that meet the incumbent in duels at one key, fastest median
/// first, each only where the one before handed the key back
/// ([`Record::decisions`]).
pub const CHALLENGERS_PER_KEY: usize = 3;

/// The incumbent at `key` among `incumbents` (variant 0 where none is declared).
pub fn incumbent_at(incumbents: &[KeyRange<usize>], key: u64) -> usize {
    incumbents
        .iter()
        .find(|r| r.contains(key))
        .map_or(0, |r| r.choice)
}

/// What the sweep has learned so far; the device lanes share it behind a lock.
pub struct Record<'a> {
    facts: Facts,
    log: &'a mut (dyn Write + Send),
    measured: BTreeMap<TaskId, Measurement>,
    rejected: Vec<Option<Rejection>>,
    /// `(key, variant)` pairs whose wrapper refused the key's arguments.
    unfit: BTreeSet<(u64, usize)>,
    failed_keys: BTreeMap<u64, String>,
    resumed: usize,
    /// How passing variants were checked, each way once.
    checks: Vec<String>,
    /// Where the workers' time went, summed over the jobs.
    phases: Phases,
    /// Jobs run now are the probe above the largest size.
    probing: bool,
    /// What each check off the timed grid found, by key and variant.
    off_grid: BTreeMap<(u64, usize), OffGridOutcome>,
    /// Keys off the grid where the case could not be built, with the reason.
    off_grid_failed_keys: BTreeMap<u64, String>,
    /// The GPU's clocks over the sweep, as the workers read them around each job.
    clocks: Option<ClockRecord>,
    /// Each duel by key, challenger and incumbent: its rounds' verdict, or `None`
    /// where it could not be run to the end (the incumbent keeps the key then).
    duels: BTreeMap<(u64, usize, usize), Option<Duel>>,
    /// Each confirmation of a duel the challenger won, in a fresh worker process
    /// ([`TaskId::repeat`] on a duel), keyed as the duels.
    confirmations: BTreeMap<(u64, usize, usize), Option<Duel>>,
}

impl std::fmt::Debug for Record<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Record")
            .field("facts", &self.facts)
            .field("measured", &self.measured.len())
            .field("resumed", &self.resumed)
            .finish_non_exhaustive()
    }
}

impl<'a> Record<'a> {
    /// An empty record; `rejected` are the variants out before the sweep.
    pub fn new(
        facts: Facts,
        rejected: Vec<Option<Rejection>>,
        log: &'a mut (dyn Write + Send),
    ) -> Self {
        Self {
            facts,
            log,
            measured: BTreeMap::new(),
            rejected,
            unfit: BTreeSet::new(),
            failed_keys: BTreeMap::new(),
            resumed: 0,
            checks: Vec::new(),
            phases: Phases::default(),
            probing: false,
            off_grid: BTreeMap::new(),
            off_grid_failed_keys: BTreeMap::new(),
            duels: BTreeMap::new(),
            confirmations: BTreeMap::new(),
            clocks: None,
        }
    }

    pub fn incumbent_at(&self, key: u64) -> usize {
        incumbent_at(&self.facts.incumbents, key)
    }

    /// A line for the log.
    pub fn say(&mut self, line: std::fmt::Arguments<'_>) {
        let _ = writeln!(self.log, "{line}");
    }

    pub fn rejected(&self) -> &[Option<Rejection>] {
        &self.rejected
    }

    pub fn failed_keys(&self) -> &BTreeMap<u64, String> {
        &self.failed_keys
    }

    /// How many outcomes came from a journal.
    pub fn resumed(&self) -> usize {
        self.resumed
    }

    /// Notes how a variant that passed was checked.
    pub fn checked_by(&mut self, check: String) {
        if !check.is_empty() && !self.checks.contains(&check) {
            self.checks.push(check);
        }
    }

    /// How the variants that passed were checked, each way once.
    pub fn checks(&self) -> &[String] {
        &self.checks
    }

    /// Whether the jobs run from now on probe above the largest size.
    pub fn set_probing(&mut self, probing: bool) {
        self.probing = probing;
    }

    /// A job's time by phase, as its worker measured it, and its GPU's clocks read
    /// at the job's start and end.
    pub fn spent(&mut self, phases: &Phases, clocks: &[ClockSample]) {
        for &sample in clocks {
            match &mut self.clocks {
                Some(record) => record.add(sample),
                None => self.clocks = Some(ClockRecord::new(sample)),
            }
        }
        if self.probing {
            self.phases.add(&phases.as_probe());
        } else {
            self.phases.add(phases);
        }
    }

    /// The GPU's clocks over the sweep so far, where NVML could be read.
    pub fn clocks(&self) -> Option<ClockRecord> {
        self.clocks
    }

    /// Where the workers' time went so far.
    pub fn phases(&self) -> Phases {
        self.phases
    }

    /// Whether `task` needs no running on `device`: its variant is out, its key has
    /// no case, or it was measured (the incumbent: on this device, as its anchor).
    pub fn is_done(&self, task: &Task, device: usize) -> bool {
        if let Some(against) = task.against {
            let duels = if task.repeat {
                &self.confirmations
            } else {
                &self.duels
            };
            return self.rejected[task.variant].is_some()
                || self.rejected[against].is_some()
                || duels.contains_key(&(task.key, task.variant, against));
        }
        if task.verify {
            return self.rejected[task.variant].is_some()
                || self.off_grid.contains_key(&(task.key, task.variant))
                || self.off_grid_failed_keys.contains_key(&task.key);
        }
        if self.rejected[task.variant].is_some()
            || self.failed_keys.contains_key(&task.key)
            || self.unfit.contains(&(task.key, task.variant))
        {
            return true;
        }
        let id = TaskId::of(task, device);
        if task.variant == self.incumbent_at(task.key) {
            return self.measured.contains_key(&id);
        }
        let any = TaskId { device: 0, ..id }..=TaskId {
            device: usize::MAX,
            ..id
        };
        self.measured.range(any).next().is_some()
    }

    /// The median of `variant` at `key` on the reference scale, if timed and not out.
    pub fn median(&self, key: u64, variant: usize) -> Option<f64> {
        self.timings_at(key)
            .timed
            .iter()
            .find(|t| t.variant == variant)
            .map(|t| t.median)
    }

    /// Replays the journal, if it belongs to this sweep (else removes it).
    pub fn replay_journal(&mut self) -> Result<(), BuildError> {
        let Ok(text) =
            autotune_spec::guarded::read::read_to_string(&self.facts.journal, MAX_JOURNAL_BYTES)
        else {
            return Ok(());
        };
        let mut lines = text.lines();
        if lines.next() != Some(self.facts.journal_header.as_str()) {
            let _ = std::fs::remove_file(&self.facts.journal);
            return Ok(());
        }
        let mut resumed = 0;
        for line in lines {
            // A line cut short by a kill is simply not replayed.
            let Ok(entry) = serde_json::from_str::<JournalLine>(line) else {
                continue;
            };
            let known = |v: usize| v < self.facts.names.len();
            if !known(entry.id.variant) || !entry.id.against.is_none_or(known) {
                continue;
            }
            resumed += 1;
            self.apply(entry.id, entry.outcome, false, None)?;
        }
        if resumed > 0 {
            self.resumed = resumed;
            let journal = self.facts.journal.display().to_string();
            self.say(format_args!("  resumed {resumed} results from {journal}"));
        }
        Ok(())
    }

    /// Records `outcome` of `id` (in the journal too when `journal`), with a log
    /// line; `seconds` is how long the task took, where known.
    pub fn apply(
        &mut self,
        id: TaskId,
        outcome: Outcome,
        journal: bool,
        seconds: Option<f64>,
    ) -> Result<(), BuildError> {
        if journal {
            self.append_journal(&JournalLine {
                id,
                outcome: outcome.clone(),
            })?;
        }
        let name = &self.facts.names[id.variant];
        let key = format!("{}={}", self.facts.key_name, id.key);
        let gpu = if self.facts.several_devices {
            format!("gpu{} ", id.device)
        } else {
            String::new()
        };
        match outcome {
            outcome if id.verify => self.apply_off_grid(id, outcome, &gpu, &key, name.clone()),
            outcome if id.against.is_some() => self.apply_duel(id, outcome, &gpu, &key),
            Outcome::Verified | Outcome::Dueled { .. } => {}
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
                let check = if m.checked_once {
                    format!("{check}  (slower than the best: checked once)")
                } else {
                    check
                };
                let took = seconds.map(|s| format!("  [{s:.2} s]")).unwrap_or_default();
                let _ = writeln!(
                    self.log,
                    "  {gpu}{key:<12} {name:<32} {:>10.2} us  IQR ±{:.1}%  n={}{check}{tb_s}{took}",
                    m.median_us,
                    m.spread() * 100.0,
                    m.repeats
                );
                self.measured.insert(id, m);
            }
            Outcome::Rejected { stage, reason } => {
                let _ = writeln!(
                    self.log,
                    "  {gpu}{key:<12} {name:<32} REJECTED ({stage:?}): {reason}"
                );
                if self.rejected[id.variant].is_none() {
                    self.rejected[id.variant] = Some(Rejection { stage, reason });
                }
            }
            Outcome::Unfit(reason) => {
                let _ = writeln!(
                    self.log,
                    "  {gpu}{key:<12} {name:<32} not at this key (its wrapper refused the arguments): {reason}"
                );
                self.unfit.insert((id.key, id.variant));
            }
            Outcome::CaseFailed(reason) => {
                let _ = writeln!(self.log, "  {gpu}{key:<12} no case: {reason}");
                self.failed_keys.insert(id.key, reason);
            }
        }
        Ok(())
    }

    /// Records what a check off the timed grid found (see [`Task::verify`]).
    fn apply_off_grid(&mut self, id: TaskId, outcome: Outcome, gpu: &str, key: &str, name: String) {
        let found = match outcome {
            Outcome::Verified => OffGridOutcome::Right,
            Outcome::Rejected { stage, reason } => {
                if self.rejected[id.variant].is_none() {
                    self.rejected[id.variant] = Some(Rejection {
                        stage,
                        reason: reason.clone(),
                    });
                }
                OffGridOutcome::Wrong { reason }
            }
            Outcome::Unfit(reason) => OffGridOutcome::NotChecked { reason },
            Outcome::CaseFailed(reason) => {
                self.off_grid_failed_keys.insert(id.key, reason.clone());
                OffGridOutcome::NotChecked { reason }
            }
            // A check-only task is never timed.
            Outcome::Measured(_) | Outcome::Dueled { .. } => return,
        };
        let said = match &found {
            OffGridOutcome::Right => "right".to_string(),
            OffGridOutcome::Wrong { reason } => format!("REJECTED (WrongResult): {reason}"),
            OffGridOutcome::NotChecked { reason } => format!("not checked: {reason}"),
            OffGridOutcome::AlreadyOut { reason } => format!("not needed, out already: {reason}"),
        };
        let _ = writeln!(self.log, "  {gpu}{key:<12} {name:<32} off the grid: {said}");
        self.off_grid.insert((id.key, id.variant), found);
    }

    /// Records what a duel found ([`Task::against`]). A duel that could not be run
    /// to the end leaves the key to the incumbent; a challenger that crashed or hung
    /// in it is out, as anywhere else.
    fn apply_duel(&mut self, id: TaskId, outcome: Outcome, gpu: &str, key: &str) {
        let Some(against) = id.against else { return };
        let names = (&self.facts.names[id.variant], &self.facts.names[against]);
        let duel = match outcome {
            Outcome::Dueled {
                incumbent_us,
                challenger_us,
            } => Duel::from_rounds(&incumbent_us, &challenger_us),
            Outcome::Rejected { stage, reason } => {
                let _ = writeln!(
                    self.log,
                    "  {gpu}{key:<12} {} against {}: not timed to the end ({stage:?}): {reason}",
                    names.0, names.1
                );
                if matches!(stage, Stage::Crash | Stage::Timeout)
                    && self.rejected[id.variant].is_none()
                {
                    self.rejected[id.variant] = Some(Rejection { stage, reason });
                }
                None
            }
            _ => None,
        };
        if let Some(duel) = &duel {
            let timings = self.timings_at(id.key);
            let median = |v: usize| timings.timed.iter().find(|t| t.variant == v);
            let off = match (median(against), median(id.variant)) {
                (Some(a), Some(b)) => duel.off_medians(a.median, b.median),
                _ => None,
            };
            let verdict = match (off, duel.verdict(self.facts.min_margin)) {
                (Some((a, b)), _) => format!(
                    "its sides ran {a:.2}x and {b:.2}x their medians: it timed other work than \
                     they did, and the incumbent keeps the key"
                ),
                (None, DuelVerdict::Challenger) => "the challenger's".into(),
                (None, DuelVerdict::Tie) => "a tie: the incumbent keeps it".into(),
                (None, DuelVerdict::Incumbent) => "the incumbent's".into(),
            };
            let again = if id.repeat {
                " again, in a fresh worker"
            } else {
                ""
            };
            let _ = writeln!(
                self.log,
                "  {gpu}{key:<12} {} against {}{again}: {}; {verdict}",
                names.0,
                names.1,
                duel.describe()
            );
        }
        let duels = if id.repeat {
            &mut self.confirmations
        } else {
            &mut self.duels
        };
        duels.insert((id.key, id.variant, against), duel);
    }

    /// Keys a challenger took in its duel that have not seen the same duel in a
    /// fresh worker yet: `(key, challenger, incumbent)`.
    pub fn unconfirmed(&self) -> Vec<(u64, usize, usize)> {
        self.decisions()
            .iter()
            .filter(|d| d.winner != d.incumbent && d.duel.is_some())
            .map(|d| (d.key, d.winner, d.incumbent))
            .filter(|duel| !self.confirmations.contains_key(duel))
            .collect()
    }

    /// Keys whose decision hands them to a challenger that has not met the
    /// incumbent in interleaved rounds yet: `(key, challenger, incumbent)`.
    pub fn undueled(&self) -> Vec<(u64, usize, usize)> {
        self.decisions()
            .iter()
            .filter(|d| d.winner != d.incumbent && d.duel.is_none())
            .filter(|d| !self.duels.contains_key(&(d.key, d.winner, d.incumbent)))
            .map(|d| (d.key, d.winner, d.incumbent))
            .collect()
    }

    /// What the checks off the timed grid found so far, by key and variant.
    pub fn off_grid(&self) -> &BTreeMap<(u64, usize), OffGridOutcome> {
        &self.off_grid
    }

    /// Appends one line (the record's lock orders lines).
    fn append_journal(&self, line: &JournalLine) -> Result<(), BuildError> {
        let path = &self.facts.journal;
        let fresh = !path.exists();
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(BuildError::io("cannot open", path))?;
        let mut text = String::new();
        if fresh {
            text.push_str(&self.facts.journal_header);
            text.push('\n');
        }
        text.push_str(
            &serde_json::to_string(line)
                .map_err(|e| BuildError::Worker(crate::error::WorkerFault::Encode(e)))?,
        );
        text.push('\n');
        file.write_all(text.as_bytes())
            .map_err(BuildError::io("cannot write", path))
    }

    /// The journal has served its purpose once the caller has the results.
    pub fn remove_journal(&self) {
        let _ = std::fs::remove_file(&self.facts.journal);
    }

    /// The incumbent's two medians at `key` per device that timed it (its anchors),
    /// and the factor that brings each device's times onto the reference's (the
    /// lowest-numbered device with an anchor). A device without an anchor keeps 1.
    fn anchors_at(&self, key: u64) -> Anchors {
        let incumbent = self.incumbent_at(key);
        let mut anchors: BTreeMap<usize, (f64, Option<f64>)> = BTreeMap::new();
        for (id, m) in self.measured.range(key_range(key)) {
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
    pub fn timings_at(&self, key: u64) -> SizeTimings {
        let anchors = self.anchors_at(key);
        let mut timed: Vec<Timed> = Vec::new();
        for (id, m) in self.measured.range(key_range(key)) {
            if id.repeat
                || self.rejected[id.variant].is_some()
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
            refinement: !self.facts.sizes.contains(&key),
        }
    }

    /// Whether `variant` was timed at `key`, or put out (then it is not timed
    /// again anywhere).
    pub fn has_timed(&self, key: u64, variant: usize) -> bool {
        self.rejected.get(variant).is_some_and(Option::is_some)
            || self
                .measured
                .range(key_range(key))
                .any(|(id, _)| id.variant == variant)
    }

    /// The decision at every key with valid timings, ascending.
    pub fn decisions(&self) -> Vec<Decision> {
        let keys: BTreeSet<u64> = self.measured.keys().map(|id| id.key).collect();
        keys.into_iter()
            .filter_map(|key| self.decision_at(key))
            .collect()
    }

    /// The decision at `key`: the fastest challenger by median meets the incumbent
    /// in a duel; where the duel hands the key back, the next fastest that the
    /// medians still put past the margin meets it too, up to
    /// [`CHALLENGERS_PER_KEY`] of them. Medians a few percent apart are noise at
    /// some sizes: on an H100, two sweeps ranked two of cuBLASLt's points at
    /// 6144 x 4096, m = 8192 in either order, 2.5% apart; the one ranked first in
    /// one sweep tied its duel (1.002x) and the other, never dueled there, won its
    /// duel in the other sweep (1.032x). Where every challenger hands the key back,
    /// the record is the first one's duel.
    fn decision_at(&self, key: u64) -> Option<Decision> {
        let mut timings = self.timings_at(key);
        let candidate = |v: usize| self.facts.candidate.get(v).copied().unwrap_or(false);
        let mut handed_back = None;
        for _ in 0..CHALLENGERS_PER_KEY {
            let Some(decision) = ranges::decide_with_candidates(
                &timings,
                self.incumbent_at(key),
                self.facts.min_margin,
                &candidate,
            ) else {
                return handed_back;
            };
            let challenger = decision.winner;
            if challenger == decision.incumbent {
                return Some(handed_back.unwrap_or(decision));
            }
            let dueled = self.with_duel(decision);
            if dueled.winner == challenger {
                // Won its duel, or not dueled yet.
                return Some(dueled);
            }
            handed_back.get_or_insert(dueled);
            timings.timed.retain(|t| t.variant != challenger);
        }
        handed_back
    }

    /// `decision` as its duels have it, where the challenger met the incumbent: the
    /// challenger keeps the key only where the rounds' interval clears the margin
    /// ([`Duel::verdict`]), and, once the same duel was run again in a fresh worker
    /// process, where that one does too; otherwise the incumbent takes it back and
    /// the challenger is the runner-up. A duel not run to the end gives the key to
    /// the incumbent.
    fn with_duel(&self, decision: Decision) -> Decision {
        if decision.winner == decision.incumbent {
            return decision;
        }
        let id = (decision.key, decision.winner, decision.incumbent);
        let Some(duel) = self.duels.get(&id).copied() else {
            return decision;
        };
        let confirmation = self.confirmations.get(&id).copied();
        // A duel far from its sides' medians timed other work: it decides nothing.
        let says_challenger = |duel: Option<Duel>| {
            duel.is_some_and(|d| {
                d.verdict(self.facts.min_margin) == DuelVerdict::Challenger
                    && d.off_medians(decision.incumbent_us, decision.winner_us)
                        .is_none()
            })
        };
        let kept = says_challenger(duel) && confirmation.is_none_or(says_challenger);
        let confirmation = confirmation.flatten();
        if kept {
            return Decision {
                duel,
                confirmation,
                ..decision
            };
        }
        Decision {
            winner: decision.incumbent,
            winner_us: decision.incumbent_us,
            runner_up: Some(decision.winner),
            duel,
            confirmation,
            ..decision
        }
    }

    /// Per variant: its measurements, ascending key, second timings left out; at a
    /// key timed on several devices, on the reference device's scale, as decided.
    pub fn measurements(&self) -> Vec<Vec<Measurement>> {
        let mut measurements = vec![Vec::new(); self.facts.names.len()];
        let mut seen = BTreeSet::new();
        let mut anchors: BTreeMap<u64, Anchors> = BTreeMap::new();
        // Ordered by key, variant, repeat, device: the first of a (key, variant) is
        // the reference device's.
        for (id, m) in &self.measured {
            if !id.repeat && seen.insert((id.key, id.variant)) {
                let s = anchors
                    .entry(id.key)
                    .or_insert_with(|| self.anchors_at(id.key))
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
        measurements
    }
}

/// Every task id at `key`.
fn key_range(key: u64) -> std::ops::RangeInclusive<TaskId> {
    let first = TaskId {
        key,
        variant: 0,
        repeat: false,
        device: 0,
        verify: false,
        against: None,
    };
    first..=TaskId {
        variant: usize::MAX,
        repeat: true,
        device: usize::MAX,
        verify: true,
        against: Some(usize::MAX),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(journal: PathBuf) -> Facts {
        Facts {
            key_name: "n".into(),
            names: vec!["v=0".into(), "v=1".into(), "v=2".into()],
            incumbents: vec![KeyRange::new(0, u64::MAX, 0)],
            candidate: vec![false; 3],
            sizes: vec![100],
            min_margin: 0.01,
            several_devices: true,
            journal,
            journal_header: "test 3".into(),
        }
    }

    fn measured(key: u64, median_us: f64, device: usize) -> Outcome {
        Outcome::Measured(Measurement {
            key,
            median_us,
            p25_us: median_us * 0.999,
            p75_us: median_us * 1.001,
            min_us: median_us,
            repeats: 20,
            error: 1e-3,
            bytes: 0,
            flops: 0,
            device: device as u32,
            checked_once: false,
            buffers: 0,
        })
    }

    fn id(key: u64, variant: usize, repeat: bool, device: usize) -> TaskId {
        TaskId {
            key,
            variant,
            repeat,
            device,
            verify: false,
            against: None,
        }
    }

    fn journal(name: &str) -> PathBuf {
        let path =
            std::env::temp_dir().join(format!("autotune-record-{}-{name}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        path
    }

    /// Device 1 runs 3% faster: its challenger's time is brought onto device 0's
    /// scale through the anchors, so being 3.5% under device 0's incumbent is
    /// only 0.5% on one scale: inside the margin, no win.
    #[test]
    fn challengers_are_judged_on_the_reference_scale() {
        let mut log = Vec::new();
        let mut record = Record::new(facts(journal("scale")), vec![None; 3], &mut log);
        for (task, outcome) in [
            (id(100, 0, false, 0), measured(100, 10.0, 0)),
            (id(100, 0, true, 0), measured(100, 10.0, 0)),
            (id(100, 0, false, 1), measured(100, 9.7, 1)),
            (id(100, 0, true, 1), measured(100, 9.7, 1)),
            (id(100, 1, false, 1), measured(100, 9.65, 1)),
        ] {
            record.apply(task, outcome, false, None).unwrap();
        }
        let decision = &record.decisions()[0];
        assert_eq!(decision.winner, 0);
        let scaled = record.median(100, 1).unwrap();
        assert!((scaled - 9.65 * 10.0 / 9.7).abs() < 1e-9, "{scaled}");
        assert_eq!(record.measurements()[1][0].median_us, scaled);
    }

    #[test]
    fn rejected_unfit_and_failed_keys_need_no_running() {
        let mut log = Vec::new();
        let mut record = Record::new(facts(journal("done")), vec![None; 3], &mut log);
        let task = |variant| Task {
            key: 100,
            variant,
            check: true,
            repeat: false,
            incumbent: false,
            verify: false,
            against: None,
            points: 0,
        };
        assert!(!record.is_done(&task(1), 0));
        record
            .apply(
                id(100, 1, false, 0),
                Outcome::Rejected {
                    stage: Stage::WrongResult,
                    reason: "relative error 0.5".into(),
                },
                false,
                None,
            )
            .unwrap();
        assert!(record.is_done(&task(1), 0));
        record
            .apply(
                id(100, 2, false, 0),
                Outcome::Unfit("n % 8".into()),
                false,
                None,
            )
            .unwrap();
        assert!(record.is_done(&task(2), 0));
        assert!(record.rejected()[2].is_none(), "unfit is not out");
        // The incumbent counts per device (its anchor there).
        record
            .apply(id(100, 0, false, 0), measured(100, 10.0, 0), false, None)
            .unwrap();
        assert!(record.is_done(&task(0), 0) && !record.is_done(&task(0), 1));
    }

    #[test]
    fn a_journal_replays_into_a_fresh_record_and_a_foreign_one_is_dropped() {
        let path = journal("replay");
        let mut log = Vec::new();
        {
            let mut record = Record::new(facts(path.clone()), vec![None; 3], &mut log);
            record
                .apply(
                    id(100, 0, false, 0),
                    measured(100, 10.0, 0),
                    true,
                    Some(0.1),
                )
                .unwrap();
            record
                .apply(
                    id(100, 1, false, 0),
                    Outcome::CaseFailed("oom".into()),
                    true,
                    None,
                )
                .unwrap();
        }
        let mut log = Vec::new();
        let mut again = Record::new(facts(path.clone()), vec![None; 3], &mut log);
        again.replay_journal().unwrap();
        assert_eq!(again.resumed(), 2);
        assert!(again.failed_keys().contains_key(&100));
        let mut other = facts(path.clone());
        other.journal_header = "another sweep".into();
        let mut log = Vec::new();
        let mut foreign = Record::new(other, vec![None; 3], &mut log);
        foreign.replay_journal().unwrap();
        assert_eq!(foreign.resumed(), 0);
        assert!(!path.exists(), "a stale journal is removed");
    }

    /// The incumbent (v=0) timed twice at key 100, 10 us, and the challenger (v=1)
    /// once, 9 us: on the medians, the key is the challenger's.
    fn challenger_faster_at_100(record: &mut Record<'_>) {
        for (task, outcome) in [
            (id(100, 0, false, 0), measured(100, 10.0, 0)),
            (id(100, 0, true, 0), measured(100, 10.0, 0)),
            (id(100, 1, false, 0), measured(100, 9.0, 0)),
        ] {
            record.apply(task, outcome, true, None).unwrap();
        }
    }

    /// A duel's verdict outlives a kill: journaled and replayed, it decides the key
    /// as before; a journal line naming an incumbent this sweep does not have is
    /// left out (it panicked on the name).
    #[test]
    fn a_duel_is_journaled_and_decides_again_after_a_resume() {
        let path = journal("duel");
        let duel = TaskId {
            against: Some(0),
            ..id(100, 1, false, 0)
        };
        // Equal in the rounds, jittering 5%: a tie, the incumbent keeps the key.
        let rounds: Vec<f64> = (0..30).map(|i| 10.0 + f64::from(i % 3) * 0.5).collect();
        let tie = Outcome::Dueled {
            incumbent_us: rounds.clone(),
            challenger_us: rounds.iter().rev().copied().collect(),
        };
        let decide = |replay: bool| {
            let mut log = Vec::new();
            let mut record = Record::new(facts(path.clone()), vec![None; 3], &mut log);
            if replay {
                record.replay_journal().unwrap();
            } else {
                challenger_faster_at_100(&mut record);
                assert_eq!(record.undueled(), [(100, 1, 0)]);
                record.apply(duel, tie.clone(), true, None).unwrap();
                let stray = TaskId {
                    against: Some(9),
                    ..duel
                };
                record
                    .append_journal(&JournalLine {
                        id: stray,
                        outcome: tie.clone(),
                    })
                    .unwrap();
            }
            let decision = record.decisions()[0].clone();
            (
                decision.winner,
                decision.runner_up,
                decision.duel.map(|d| d.rounds),
            )
        };
        let before = decide(false);
        assert_eq!(before, (0, Some(1), Some(30)), "a tie: the incumbent's");
        assert_eq!(decide(true), before, "the same after a resume");
        let _ = std::fs::remove_file(&path);
    }

    /// A duel whose rounds give the challenger 1.10x, each side three times its
    /// median (10 and 9 us by median, 30 and 27.3 in the rounds: what a duel on
    /// inputs never drawn looked like), decides nothing: the incumbent keeps the
    /// key, and the log says why. The same rounds at the medians' times take it.
    #[test]
    fn a_duel_that_timed_other_work_than_the_medians_decides_nothing() {
        let duel = TaskId {
            against: Some(0),
            ..id(100, 1, false, 0)
        };
        let rounds = |scale: f64| Outcome::Dueled {
            incumbent_us: vec![10.0 * scale; 30],
            challenger_us: vec![10.0 * scale / 1.10; 30],
        };
        for (scale, winner) in [(3.0, 0), (1.0, 1)] {
            let path = journal(&format!("off-medians-{scale}"));
            let mut log = Vec::new();
            let mut record = Record::new(facts(path.clone()), vec![None; 3], &mut log);
            challenger_faster_at_100(&mut record);
            record.apply(duel, rounds(scale), true, None).unwrap();
            assert_eq!(
                record.decisions()[0].winner,
                winner,
                "at {scale}x the medians"
            );
            drop(record);
            let log = String::from_utf8(log).unwrap();
            assert_eq!(log.contains("timed other work"), winner == 0, "{log}");
            let _ = std::fs::remove_file(&path);
        }
    }

    /// A challenger that won its duel keeps the key until the same duel in a fresh
    /// worker ([`TaskId::repeat`] on a duel) ties; then the incumbent takes it back,
    /// and a resume decides the same from the journal.
    #[test]
    fn a_confirmation_that_ties_hands_the_key_back_after_a_resume_too() {
        let path = journal("confirmation");
        let first = TaskId {
            against: Some(0),
            ..id(100, 1, false, 0)
        };
        let again = TaskId {
            repeat: true,
            ..first
        };
        let incumbent: Vec<f64> = (0..30).map(|i| 10.0 + f64::from(i % 3) * 0.1).collect();
        let rounds = |challenger_speedup: f64| Outcome::Dueled {
            incumbent_us: incumbent.clone(),
            challenger_us: incumbent.iter().map(|t| t / challenger_speedup).collect(),
        };
        let decide = |replay: bool| {
            let mut log = Vec::new();
            let mut record = Record::new(facts(path.clone()), vec![None; 3], &mut log);
            if replay {
                record.replay_journal().unwrap();
            } else {
                challenger_faster_at_100(&mut record);
                record.apply(first, rounds(1.10), true, None).unwrap();
                assert_eq!(record.decisions()[0].winner, 1, "the first duel's");
                assert_eq!(record.unconfirmed(), [(100, 1, 0)]);
                record.apply(again, rounds(1.0), true, None).unwrap();
                assert!(record.unconfirmed().is_empty());
            }
            let decision = record.decisions()[0].clone();
            let ratio = |duel: Option<Duel>| duel.map(|d| (d.ratio * 100.0).round());
            (
                decision.winner,
                decision.runner_up,
                ratio(decision.duel),
                ratio(decision.confirmation),
            )
        };
        let before = decide(false);
        assert_eq!(before, (0, Some(1), Some(110.0), Some(100.0)));
        assert_eq!(decide(true), before, "the same after a resume");
        let _ = std::fs::remove_file(&path);
    }
}
