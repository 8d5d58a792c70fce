//! The sweep's supervising half: hands tasks to worker processes, records what
//! they report (in a journal, so a killed build resumes where it stopped), replaces
//! a worker that crashes or hangs (rejecting the variant it was running), and
//! refines boundaries between sizes whose winners differ.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::error::BuildError;
use super::ranges::{self, Decision, SizeTimings, Timed};
use super::strategy::Strategy;
use super::table::{Measurement, Rejection, Stage};
use super::timing::TimingConfig;
use super::worker::{Event, Job, JobVariant, Task, WORKER_ENV};
use crate::KernelSpec;

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
    pub device: usize,
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
    /// Per variant: its measurements, ascending key (second timings excluded).
    pub measurements: Vec<Vec<Measurement>>,
    pub rejected: Vec<Option<Rejection>>,
    pub decisions: Vec<Decision>,
    /// Keys where the case itself could not be built, with the reason.
    pub failed_keys: BTreeMap<u64, String>,
    pub resumed: usize,
    pub seconds: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct TaskId {
    key: u64,
    variant: usize,
    repeat: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
enum Outcome {
    Measured(Measurement),
    Rejected { stage: Stage, reason: String },
    CaseFailed(String),
}

#[derive(Debug, Serialize, Deserialize)]
struct JournalLine {
    id: TaskId,
    outcome: Outcome,
}

struct State<'a> {
    plan: &'a SweepPlan,
    log: &'a mut dyn Write,
    measured: BTreeMap<TaskId, Measurement>,
    rejected: Vec<Option<Rejection>>,
    failed_keys: BTreeMap<u64, String>,
    journal: PathBuf,
    resumed: usize,
    worker: Option<Worker>,
}

/// Runs the whole sweep: every valid variant at every size, then up to
/// `refine_rounds` rounds of boundary refinement.
pub fn run(plan: &SweepPlan, log: &mut dyn Write) -> Result<SweepResult, BuildError> {
    let started = Instant::now();
    std::fs::create_dir_all(&plan.work_dir)
        .map_err(BuildError::io("cannot create", &plan.work_dir))?;
    let mut state = State {
        plan,
        log,
        measured: BTreeMap::new(),
        rejected: plan.rejected.clone(),
        failed_keys: BTreeMap::new(),
        journal: plan.work_dir.join(format!("{}.journal", plan.spec.name)),
        resumed: 0,
        worker: None,
    };
    state.replay_journal()?;
    if plan.strategy == Strategy::Grid {
        // Every point at every size, in one job.
        let mut tasks = Vec::new();
        for &key in plan.spec.sizes {
            tasks.extend(state.size_tasks(key, &(0..plan.variants.len()).collect::<Vec<_>>()));
        }
        state.run_tasks(&tasks)?;
    } else {
        state.search_sizes()?;
    }
    let mut decisions = state.decisions();
    for _ in 0..plan.refine_rounds {
        let points = ranges::refinement_points(&decisions);
        if points.is_empty() {
            break;
        }
        let mut tasks = Vec::new();
        for (key, a, b) in points {
            let _ = writeln!(
                state.log,
                "  refining between {} and {}: timing at {}={key}",
                plan.variants[a].name, plan.variants[b].name, plan.spec.key
            );
            tasks.extend(state.size_tasks(key, &[a, b]));
        }
        state.run_tasks(&tasks)?;
        decisions = state.decisions();
    }
    let mut measurements = vec![Vec::new(); plan.variants.len()];
    for (id, m) in &state.measured {
        if !id.repeat {
            measurements[id.variant].push(m.clone());
        }
    }
    if let Some(worker) = state.worker.take() {
        // Closing its stdin ends it; stop() then only reaps it.
        let _ = worker.stop();
    }
    // The journal has served its purpose once the caller has the results.
    let _ = std::fs::remove_file(&state.journal);
    Ok(SweepResult {
        measurements,
        rejected: state.rejected,
        decisions,
        failed_keys: state.failed_keys,
        resumed: state.resumed,
        seconds: started.elapsed().as_secs_f64(),
    })
}

impl State<'_> {
    /// At `key`: the incumbent, the `others`, then the incumbent again (unchecked),
    /// skipping what is out or already measured.
    fn size_tasks(&self, key: u64, others: &[usize]) -> Vec<Task> {
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
        tasks.retain(|t| !self.is_done(t));
        tasks
    }

    /// The median of `variant` at `key`, if timed and not out.
    fn median(&self, key: u64, variant: usize) -> Option<f64> {
        if self.rejected[variant].is_some() {
            return None;
        }
        self.measured
            .get(&TaskId {
                key,
                variant,
                repeat: false,
            })
            .map(|m| m.median_us)
    }

    /// A budgeted search at each size over the space's points (the fallback is
    /// timed as the incumbent, not searched).
    fn search_sizes(&mut self) -> Result<(), BuildError> {
        let plan = self.plan;
        let tuned: Vec<usize> = (0..plan.variants.len())
            .filter(|&v| !plan.variants[v].fallback)
            .collect();
        let points: Vec<Vec<u32>> = tuned
            .iter()
            .map(|&v| plan.variants[v].values.clone())
            .collect();
        let start = tuned.iter().position(|&v| v == plan.default).unwrap_or(0);
        for &key in plan.spec.sizes {
            let mut failure = None;
            let mut measure = |batch: &[usize]| -> Vec<Option<f64>> {
                let variants: Vec<usize> = batch.iter().map(|&i| tuned[i]).collect();
                if failure.is_none() {
                    let tasks = self.size_tasks(key, &variants);
                    if let Err(error) = self.run_tasks(&tasks) {
                        failure = Some(error);
                    }
                }
                variants.iter().map(|&v| self.median(key, v)).collect()
            };
            let timed = plan.strategy.search(&points, start, &mut measure);
            if let Some(error) = failure {
                return Err(error);
            }
            let _ = writeln!(
                self.log,
                "  {}={key}: {} timed {} of {} points",
                plan.spec.key,
                plan.strategy,
                timed.len(),
                points.len()
            );
        }
        Ok(())
    }

    fn is_done(&self, task: &Task) -> bool {
        self.rejected[task.variant].is_some()
            || self.failed_keys.contains_key(&task.key)
            || self.measured.contains_key(&TaskId {
                key: task.key,
                variant: task.variant,
                repeat: task.repeat,
            })
    }

    fn replay_journal(&mut self) -> Result<(), BuildError> {
        let Ok(text) = std::fs::read_to_string(&self.journal) else {
            return Ok(());
        };
        let mut lines = text.lines();
        if lines.next() != Some(self.plan.journal_header.as_str()) {
            let _ = std::fs::remove_file(&self.journal);
            return Ok(());
        }
        for line in lines {
            // A line cut short by a kill is simply not replayed.
            let Ok(entry) = serde_json::from_str::<JournalLine>(line) else {
                continue;
            };
            if entry.id.variant >= self.plan.variants.len() {
                continue;
            }
            self.resumed += 1;
            self.apply(entry.id, entry.outcome, false, None)?;
        }
        if self.resumed > 0 {
            let _ = writeln!(
                self.log,
                "  resumed {} results from {}",
                self.resumed,
                self.journal.display()
            );
        }
        Ok(())
    }

    fn apply(
        &mut self,
        id: TaskId,
        outcome: Outcome,
        record: bool,
        seconds: Option<f64>,
    ) -> Result<(), BuildError> {
        if record {
            self.append_journal(&JournalLine {
                id,
                outcome: outcome.clone(),
            })?;
        }
        let name = self.plan.variants[id.variant].name.clone();
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
                    self.log,
                    "  {}={:<10} {:<32} {:>10.2} us  IQR ±{:.1}%  n={}{check}{tb_s}{took}",
                    self.plan.spec.key,
                    id.key,
                    name,
                    m.median_us,
                    m.spread() * 100.0,
                    m.repeats
                );
                self.measured.insert(id, m);
            }
            Outcome::Rejected { stage, reason } => {
                let _ = writeln!(
                    self.log,
                    "  {}={:<10} {:<32} REJECTED ({stage:?}): {reason}",
                    self.plan.spec.key, id.key, name
                );
                if self.rejected[id.variant].is_none() {
                    self.rejected[id.variant] = Some(Rejection { stage, reason });
                }
            }
            Outcome::CaseFailed(reason) => {
                let _ = writeln!(
                    self.log,
                    "  {}={:<10} no case: {reason}",
                    self.plan.spec.key, id.key
                );
                self.failed_keys.insert(id.key, reason);
            }
        }
        Ok(())
    }

    fn append_journal(&mut self, line: &JournalLine) -> Result<(), BuildError> {
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

    /// Runs `tasks`, in the running worker or new ones: a worker that dies or
    /// hangs takes its current variant with it, and a new one resumes after it.
    fn run_tasks(&mut self, tasks: &[Task]) -> Result<(), BuildError> {
        loop {
            let pending: Vec<Task> = tasks.iter().copied().filter(|t| !self.is_done(t)).collect();
            if pending.is_empty() {
                return Ok(());
            }
            let progressed = self.run_job(&pending)?;
            if !progressed {
                return Err(BuildError::Worker(format!(
                    "a worker for `{}` stopped before finishing any task; see the log above",
                    self.plan.spec.name
                )));
            }
        }
    }

    /// Hands `tasks` to the worker (started if needed) and records what it reports
    /// until it is done, dies or hangs. Returns whether anything was learned.
    fn run_job(&mut self, tasks: &[Task]) -> Result<bool, BuildError> {
        let plan = self.plan;
        let job = Job {
            kernel: plan.spec.name.to_string(),
            device: plan.device,
            seed: plan.seed,
            timing: plan.timing,
            variants: plan.variants.clone(),
            tasks: tasks.to_vec(),
        };
        let line =
            serde_json::to_string(&job).map_err(|e| BuildError::Worker(e.to_string()))? + "\n";
        let mut worker = match self.worker.take() {
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
        let mut progressed = false;
        let ending = loop {
            match worker.events.recv_timeout(plan.task_timeout) {
                Ok(line) => {
                    let Ok(event) = serde_json::from_str::<Event>(&line) else {
                        let _ = writeln!(self.log, "  worker: {line}");
                        continue;
                    };
                    let (task_index, outcome) = match event {
                        Event::Done => break Ending::Done,
                        Event::Started { task } => {
                            current = Some((task, Instant::now()));
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
                        Event::CaseFailed { task, reason } => (task, Outcome::CaseFailed(reason)),
                        Event::Fatal { task, reason } => {
                            let _ = writeln!(
                                self.log,
                                "  worker: the context is lost after task {task}: {reason}"
                            );
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
                    self.apply(
                        TaskId {
                            key: task.key,
                            variant: task.variant,
                            repeat: task.repeat,
                        },
                        outcome,
                        true,
                        seconds,
                    )?;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => break Ending::Hung,
                Err(mpsc::RecvTimeoutError::Disconnected) => break Ending::Died,
            }
        };
        if let Ending::Done = ending {
            self.worker = Some(worker);
            return Ok(progressed);
        }
        let (status, stderr) = worker.stop();
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
            let id = TaskId {
                key: task.key,
                variant: task.variant,
                repeat: task.repeat,
            };
            self.apply(id, Outcome::Rejected { stage, reason }, true, None)?;
            progressed = true;
        } else {
            let _ = writeln!(self.log, "  worker exited with {status}:\n{stderr}");
        }
        Ok(progressed)
    }

    /// The decision at every key with valid timings, ascending.
    fn decisions(&self) -> Vec<Decision> {
        let mut keys: BTreeSet<u64> = BTreeSet::new();
        keys.extend(self.measured.keys().map(|id| id.key));
        let refinements: BTreeSet<u64> = keys
            .iter()
            .copied()
            .filter(|k| !self.plan.spec.sizes.contains(k))
            .collect();
        keys.into_iter()
            .filter_map(|key| {
                let timed: Vec<Timed> = self
                    .measured
                    .iter()
                    .filter(|(id, _)| {
                        id.key == key && !id.repeat && self.rejected[id.variant].is_none()
                    })
                    .map(|(id, m)| Timed {
                        variant: id.variant,
                        median: m.median_us,
                        p25: m.p25_us,
                        p75: m.p75_us,
                    })
                    .collect();
                let again = self
                    .measured
                    .get(&TaskId {
                        key,
                        variant: self.plan.incumbent_at(key),
                        repeat: true,
                    })
                    .map(|m| m.median_us);
                let timings = SizeTimings {
                    key,
                    timed,
                    incumbent_again: again,
                    refinement: refinements.contains(&key),
                };
                ranges::decide(&timings, self.plan.incumbent_at(key), self.plan.min_margin)
            })
            .collect()
    }
}

/// How a job ended.
enum Ending {
    Done,
    Died,
    Hung,
}

/// A running worker process: its stdin for jobs, its stdout lines as events, its
/// stderr collected for the log.
struct Worker {
    child: Child,
    stdin: ChildStdin,
    events: mpsc::Receiver<String>,
    stderr: Arc<Mutex<String>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Worker {
    fn spawn(plan: &SweepPlan) -> Result<Self, BuildError> {
        let mut child = Command::new(&plan.exe)
            .env(WORKER_ENV, plan.spec.name)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| BuildError::Worker(format!("cannot start {}: {e}", plan.exe.display())))?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| BuildError::Worker("no stdin for the worker".into()))?;
        let (sender, events) = mpsc::channel::<String>();
        let stdout = child.stdout.take();
        let mut readers = vec![std::thread::spawn(move || {
            if let Some(stdout) = stdout {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if sender.send(line).is_err() {
                        break;
                    }
                }
            }
        })];
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&stderr);
        let pipe = child.stderr.take();
        readers.push(std::thread::spawn(move || {
            if let Some(mut pipe) = pipe {
                let mut text = String::new();
                let _ = pipe.read_to_string(&mut text);
                if let Ok(mut sink) = sink.lock() {
                    *sink = text;
                }
            }
        }));
        Ok(Self {
            child,
            stdin,
            events,
            stderr,
            readers,
        })
    }

    /// Ends the worker (killing it if it still runs); its exit status and stderr.
    fn stop(mut self) -> (String, String) {
        let _ = self.child.kill();
        let status = self
            .child
            .wait()
            .map_or_else(|e| e.to_string(), |s| s.to_string());
        drop(self.stdin);
        for reader in self.readers {
            let _ = reader.join();
        }
        let stderr = self.stderr.lock().map(|s| s.clone()).unwrap_or_default();
        (status, stderr)
    }
}

fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no output")
}
