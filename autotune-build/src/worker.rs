//! The sweep's measuring half. It runs in a child process (the build script started
//! again with `AUTOTUNE_WORKER=<kernel>`), so that a variant that crashes the CUDA
//! context or hangs costs only itself: the parent records it and starts a new
//! worker for what is left. Jobs come on stdin and events go to stdout, one JSON
//! object per line; one worker serves every round of a sweep (one CUDA context).

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaStream, DriverError};
use cudarc::nvrtc::Ptx;
use serde::{Deserialize, Serialize};

use crate::nvml::Nvml;
use crate::phase_clock::{Part, PhaseClock};
use autotune_gate::condition::Condition;
use autotune_gate::device_kernels::DeviceKernels;
use autotune_gate::random::Rng;
use autotune_gate::timing::{self, FlushError, L2Flush, TimingConfig, TimingError};
use autotune_gate::{Case, Inspection, Verdict};
use autotune_runtime::{Kernel, LaunchError, Params, Variant, VendorCase};
use autotune_table::clocks::ClockSample;
use autotune_table::phases::Phases;
use autotune_table::table::{Measurement, Stage};
use autotune_table::vars;

/// The environment variable that makes `tune()` serve jobs for the kernel it names.
pub const WORKER_ENV: &str = vars::WORKER.name;

/// What this process was started as, by `AUTOTUNE_WORKER`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invitation {
    /// A build script, as cargo runs it.
    Build,
    /// A sweep worker for `kernel`, started by its supervisor.
    Worker { kernel: String },
    /// `AUTOTUNE_WORKER` is set, but not by a sweep (its supervisor is not this
    /// process's parent): a stray variable in a user's environment, which made the
    /// build script exit at once and the crate fail to compile. Ignored, and said.
    Stray,
}

impl Invitation {
    /// What the build says of a stray `AUTOTUNE_WORKER`.
    pub fn stray_note() -> autotune_table::summary::Note {
        autotune_table::summary::Note::StrayWorker {
            variable: WORKER_ENV.to_string(),
        }
    }
}

/// What this process was started as: a worker only where `AUTOTUNE_WORKER` names
/// the kernel and `AUTOTUNE_WORKER_SUPERVISOR` the parent process, which the
/// worker must see as its parent.
pub fn invited() -> Invitation {
    let Some(kernel) = vars::WORKER.os() else {
        return Invitation::Build;
    };
    let parent = std::os::unix::process::parent_id().to_string();
    match vars::WORKER_SUPERVISOR.text() {
        Ok(Some(supervisor)) if supervisor == parent => Invitation::Worker {
            kernel: kernel.to_string_lossy().into_owned(),
        },
        _ => Invitation::Stray,
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    pub kernel: String,
    pub device: usize,
    pub seed: u64,
    /// Draws of random inputs each checked variant must be right on (at least 1).
    #[serde(default = "one")]
    pub check_seeds: u32,
    pub timing: TimingConfig,
    /// The values of the kernel's shape arguments (`shapes = [...]`) every task of
    /// this job runs at; empty for a kernel without shapes.
    #[serde(default)]
    pub shape: Vec<u64>,
    pub variants: Vec<JobVariant>,
    pub tasks: Vec<Task>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobVariant {
    pub name: String,
    pub values: Vec<u32>,
    pub binary: PathBuf,
    pub entries: Vec<String>,
    /// The declared fallback kernel rather than a point of this kernel's space.
    pub fallback: bool,
    /// The vendor library's kernel (`vendor = ...`): nothing to load from `binary`
    /// (which only names it). With `values`, the vendor at that point of its own
    /// (`vendor_points = N`), as its `points` gave it.
    #[serde(default)]
    pub vendor: bool,
}

fn one() -> u32 {
    1
}

/// Time `variant` at `key`, after checking it on the key's random inputs when `check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    pub key: u64,
    pub variant: usize,
    pub check: bool,
    /// The incumbent's second timing at this key, for the noise estimate.
    pub repeat: bool,
    /// The incumbent's timing at this key (first or not on this worker): always
    /// checked in full, since it keeps the key unless beaten by more than the noise.
    #[serde(default)]
    pub incumbent: bool,
    /// Check only, in full, without timing: a baked variant at a key off the timed
    /// grid, inside a range it serves ([`Event::Verified`] when right).
    #[serde(default)]
    pub verify: bool,
    /// Time `variant` (a challenger, checked before) against this variant (the
    /// incumbent at `key`) in interleaved rounds, without a check
    /// ([`Event::Dueled`]; see [`timing::interleaved`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub against: Option<usize>,
    /// Ask the vendor (the task's variant) for up to this many points of its own
    /// for the key's problem, best first ([`Event::Points`]); nothing is timed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub points: u32,
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Event {
    Started {
        task: usize,
    },
    /// Its output matched the reference; timing follows.
    Checked {
        task: usize,
        /// How it was checked ([`Verdict::describe_check`]).
        #[serde(default)]
        check: String,
    },
    Measured {
        task: usize,
        measurement: Measurement,
    },
    /// A check-only task (`Task::verify`) found the variant right at its key.
    Verified {
        task: usize,
    },
    /// The vendor's own points at the task's key (`Task::points`), best first.
    Points {
        task: usize,
        points: Vec<Vec<u32>>,
    },
    /// The interleaved rounds of a duel (`Task::against`): round `i` timed the
    /// incumbent in `incumbent_us[i]` and the challenger in `challenger_us[i]`.
    Dueled {
        task: usize,
        incumbent_us: Vec<f64>,
        challenger_us: Vec<f64>,
    },
    Rejected {
        task: usize,
        stage: Stage,
        reason: String,
    },
    /// The variant's wrapper refused this key's arguments (`KernelError::Arguments`):
    /// it is not timed at this key, and not out.
    Unfit {
        task: usize,
        reason: String,
    },
    /// The case could not be built at this key (e.g. out of memory): nothing there.
    CaseFailed {
        task: usize,
        reason: String,
    },
    /// The context is unusable after this task: its variant crashed it.
    Fatal {
        task: usize,
        reason: String,
    },
    /// The job's time by phase (sent once per job, before `Done`, or before the
    /// worker stops on a lost context), and the GPU's clocks read through NVML at
    /// the job's start and end (none where NVML cannot be read).
    Spent {
        phases: Phases,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        clocks: Vec<ClockSample>,
    },
    /// Every task of the job was handled.
    Done,
}

/// Why a worker stopped serving (a variant's own failures are events, not these).
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("reading a job: {0}")]
    Read(std::io::Error),
    #[error("a job line is not valid: {0}")]
    Job(serde_json::Error),
    #[error("cannot open CUDA device {device}: {source}")]
    Device { device: usize, source: DriverError },
    #[error("cannot make the L2 flush: {0}")]
    Flush(FlushError),
    #[error("task {task} names variant {variant} of {count}")]
    NoVariant {
        task: usize,
        variant: usize,
        count: usize,
    },
}

/// Serves jobs for kernel `K`, one JSON line each from `input`, until it ends.
pub fn serve<K: Kernel>(
    input: &mut dyn BufRead,
    emit: &mut dyn FnMut(Event),
) -> Result<(), WorkerError> {
    let mut session: Option<Session<K>> = None;
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line).map_err(WorkerError::Read)? == 0 {
            return Ok(());
        }
        let job: Job = serde_json::from_str(&line).map_err(WorkerError::Job)?;
        let session = match &mut session {
            Some(session) => session,
            None => session.insert(Session::open(job.device, job.timing.graph)?),
        };
        let mut clock = PhaseClock::default();
        let before = session.nvml.as_ref().and_then(Nvml::sample);
        let served = session.run(&job, &mut clock, emit);
        let after = session.nvml.as_ref().and_then(Nvml::sample);
        emit(Event::Spent {
            phases: clock.phases,
            clocks: before.into_iter().chain(after).collect(),
        });
        if served? {
            emit(Event::Done);
        } else {
            // The context is lost: the parent starts a new worker.
            return Ok(());
        }
    }
}

/// A loaded binary by its path; `Err` holds why it could not be loaded, `None`
/// once that was reported.
type LoadedBinary<P, C> = (PathBuf, Result<Runnable<P, C>, Option<LoadFailure>>);

/// Why a variant's binary (or the vendor's library) could not be loaded.
#[derive(Debug, thiserror::Error)]
enum LoadFailure {
    #[error("cannot read {}: {reason}", .path.display())]
    Unreadable { path: PathBuf, reason: String },
    #[error("cannot load {entries:?} from {}: {error}", .path.display())]
    Module {
        entries: Vec<String>,
        path: PathBuf,
        error: DriverError,
    },
    #[error("{name} has no entry")]
    NoEntry { name: String },
    #[error("{name} does not fit the params type")]
    Params { name: String },
    #[error("`{kernel}` declares no vendor")]
    NoVendor { kernel: &'static str },
    #[error("cannot load the vendor library: {0}")]
    Vendor(LaunchError),
}

/// The case at one shape and key, and its alternates.
struct CaseAt<C> {
    shape: Vec<u64>,
    key: u64,
    case: C,
    alternates: Vec<C>,
}

/// A worker's CUDA state, kept across the jobs of one sweep.
struct Session<K: Kernel> {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    flush: L2Flush,
    /// NVML for this GPU, where it can be read: its clocks around each job.
    nvml: Option<Nvml>,
    /// The runtime's kernels on this context (`None` where they cannot be
    /// trusted: the cases then check on the host).
    _kernels: Option<Arc<DeviceKernels>>,
    loaded: Vec<LoadedBinary<K::Params, K::Case>>,
    /// The case at the current shape and key, and its alternates (checked, never
    /// timed).
    case: Option<CaseAt<K::Case>>,
    failed_keys: Vec<(Vec<u64>, u64)>,
    /// The best median so far at each shape and key, to stop timing hopeless
    /// variants early.
    best_us: std::collections::BTreeMap<(Vec<u64>, u64), f64>,
    /// The binaries launched so far (their modules loaded on the GPU).
    launched: std::collections::HashSet<PathBuf>,
}

impl<K: Kernel> Session<K> {
    /// With `graph`, on a stream of its own (the legacy default stream cannot be
    /// captured) and without cudarc's cross-stream events (one stream does all the
    /// work, and a capture must see only the launch).
    fn open(device: usize, graph: bool) -> Result<Self, WorkerError> {
        let ctx =
            CudaContext::new(device).map_err(|source| WorkerError::Device { device, source })?;
        let stream = if graph {
            // SAFETY: every buffer of this worker is used on `stream` alone.
            unsafe { ctx.disable_event_tracking() };
            ctx.new_stream()
                .map_err(|source| WorkerError::Device { device, source })?
        } else {
            ctx.default_stream()
        };
        let flush = L2Flush::new(&stream).map_err(|e| WorkerError::Flush(e.into()))?;
        // Held for the session, so that every case finds them loaded (and checked
        // against the CPU) once, not on each of its checks.
        let kernels = DeviceKernels::get(&stream);
        Ok(Self {
            nvml: Nvml::for_context(&ctx),
            ctx,
            stream,
            flush,
            _kernels: kernels,
            loaded: Vec::new(),
            case: None,
            failed_keys: Vec::new(),
            best_us: std::collections::BTreeMap::new(),
            launched: std::collections::HashSet::new(),
        })
    }

    fn variant(&mut self, variant: &JobVariant) -> usize {
        if let Some(index) = self
            .loaded
            .iter()
            .position(|(path, _)| *path == variant.binary)
        {
            return index;
        }
        let loaded = if variant.vendor {
            // The vendor's points share one handle (and workspace) with its default.
            let shared = self.loaded.iter().find_map(|(_, loaded)| match loaded {
                Ok(Runnable::Vendor { vendor, .. }) => Some(Rc::clone(vendor)),
                _ => None,
            });
            let vendor = match shared {
                Some(vendor) => Ok(Some(vendor)),
                None => K::load_vendor(&self.stream).map(|v| v.map(Rc::from)),
            };
            match vendor {
                Ok(Some(vendor)) => Ok(Runnable::Vendor {
                    vendor,
                    point: variant.values.clone(),
                }),
                Ok(None) => Err(Some(LoadFailure::NoVendor {
                    kernel: K::SPEC.name,
                })),
                Err(error) => Err(Some(LoadFailure::Vendor(error))),
            }
        } else {
            Runnable::load(&self.ctx, variant).map_err(Some)
        };
        self.loaded.push((variant.binary.clone(), loaded));
        self.loaded.len() - 1
    }

    /// Makes the case at `shape` and `key` (and its alternates) the current one,
    /// unless it is already, freeing the previous one first.
    fn case_at(
        &mut self,
        shape: &[u64],
        key: u64,
        clock: &mut PhaseClock,
    ) -> Result<(), autotune_gate::CaseError> {
        if self
            .case
            .as_ref()
            .is_some_and(|c| c.shape == shape && c.key == key)
        {
            return Ok(());
        }
        self.case = None;
        let dims = autotune_runtime::Shape::new(K::SPEC.shape_args, shape);
        let (case, alternates) = clock.during(Part::Inputs, || {
            let case = K::Case::with_shape(&self.stream, key, &dims)?;
            let alternates = K::Case::alternates_with_shape(&self.stream, key, &dims)?;
            Ok::<_, autotune_gate::CaseError>((case, alternates))
        })?;
        self.case = Some(CaseAt {
            shape: shape.to_vec(),
            key,
            case,
            alternates,
        });
        Ok(())
    }

    /// Runs the tasks of `job`, timing their phases on `clock`. `false` when the
    /// context was lost on the way.
    fn run(
        &mut self,
        job: &Job,
        clock: &mut PhaseClock,
        emit: &mut dyn FnMut(Event),
    ) -> Result<bool, WorkerError> {
        if self.flush.method() != job.timing.flush {
            self.flush
                .set_method(&self.stream, job.timing.flush)
                .map_err(WorkerError::Flush)?;
        }
        for (index, task) in job.tasks.iter().enumerate() {
            let Some((variant, slot, opponent, at)) = self.ready(job, index, clock, emit)? else {
                continue;
            };
            let (
                Some(CaseAt {
                    case, alternates, ..
                }),
                (_, Ok(loaded)),
            ) = (self.case.as_mut(), &self.loaded[slot])
            else {
                continue;
            };
            // The incumbent's second timing is the noise estimate: never cut short.
            let best = if task.repeat {
                None
            } else {
                self.best_us.get(&at).copied()
            };
            let (stream, flush) = (&self.stream, &mut self.flush);
            let outcome = match opponent.map(|slot| &self.loaded[slot].1) {
                Some(Ok(incumbent)) => clock.during(Part::Time, || {
                    duel_task::<K>(job, index, task, case, stream, flush, [incumbent, loaded])
                }),
                Some(Err(_)) => Err(Failure::Out(
                    Stage::Load,
                    "the incumbent it was to be timed against cannot be loaded".into(),
                )),
                None if task.points > 0 => clock.during(Part::Time, || {
                    vendor_points(task, index, case, stream, loaded)
                }),
                None if task.verify => clock
                    .during(Part::Check, || {
                        verify_task::<K>(job, task.key, case, alternates, stream, loaded)
                    })
                    .map(|()| Event::Verified { task: index }),
                None => {
                    let warm = self.launched.contains(&variant.binary);
                    run_task::<K>(
                        job, index, task, case, alternates, stream, flush, loaded, best, warm,
                        clock, emit,
                    )
                }
            };
            if !matches!(outcome, Err(Failure::Unfit(_))) {
                self.launched.insert(variant.binary.clone());
            }
            if !self.report(index, at, outcome, emit) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Task `index` of `job` made ready to run: its variant loaded (a load failure
    /// said once, at the variant's first task), the incumbent a duel times it
    /// against, and the case at its key built. `None` where it cannot run (said).
    #[allow(clippy::type_complexity)]
    fn ready<'j>(
        &mut self,
        job: &'j Job,
        index: usize,
        clock: &mut PhaseClock,
        emit: &mut dyn FnMut(Event),
    ) -> Result<Option<(&'j JobVariant, usize, Option<usize>, (Vec<u64>, u64))>, WorkerError> {
        let task = &job.tasks[index];
        let Some(variant) = job.variants.get(task.variant) else {
            return Err(WorkerError::NoVariant {
                task: index,
                variant: task.variant,
                count: job.variants.len(),
            });
        };
        let slot = self.variant(variant);
        let opponent = self.opponent(job, index, task)?;
        if let Err(why) = &mut self.loaded[slot].1 {
            // Said once, at the variant's first task.
            if let Some(why) = why.take() {
                emit(Event::Rejected {
                    task: index,
                    stage: Stage::Load,
                    reason: why.to_string(),
                });
            }
            return Ok(None);
        }
        let at = (job.shape.clone(), task.key);
        if self.failed_keys.contains(&at) {
            return Ok(None);
        }
        emit(Event::Started { task: index });
        if let Err(error) = self.case_at(&job.shape, task.key, clock) {
            self.failed_keys.push(at);
            emit(Event::CaseFailed {
                task: index,
                reason: error.to_string(),
            });
            return Ok(None);
        }
        Ok(Some((variant, slot, opponent, at)))
    }

    /// The slot of the incumbent a duel times the task's variant against, loaded.
    fn opponent(
        &mut self,
        job: &Job,
        index: usize,
        task: &Task,
    ) -> Result<Option<usize>, WorkerError> {
        let Some(against) = task.against else {
            return Ok(None);
        };
        match job.variants.get(against) {
            Some(opponent) => Ok(Some(self.variant(opponent))),
            None => Err(WorkerError::NoVariant {
                task: index,
                variant: against,
                count: job.variants.len(),
            }),
        }
    }

    /// Emits what task `index` (at shape and key `at`) came to; `false` when it
    /// lost the context, after which this worker can do nothing more.
    fn report(
        &mut self,
        index: usize,
        at: (Vec<u64>, u64),
        outcome: Result<Event, Failure>,
        emit: &mut dyn FnMut(Event),
    ) -> bool {
        match outcome {
            Ok(event) => {
                if let Event::Measured { measurement, .. } = &event {
                    let best = self.best_us.entry(at).or_insert(f64::INFINITY);
                    *best = best.min(measurement.median_us);
                }
                emit(event)
            }
            Err(Failure::Unfit(reason)) => emit(Event::Unfit {
                task: index,
                reason,
            }),
            Err(Failure::Out(_, reason)) if !context_alive(&self.stream) => {
                // A sticky error: the variant crashed the context.
                emit(Event::Fatal {
                    task: index,
                    reason,
                });
                return false;
            }
            Err(Failure::Out(stage, reason)) => emit(Event::Rejected {
                task: index,
                stage,
                reason,
            }),
        }
        true
    }
}

#[allow(clippy::too_many_arguments)]
fn run_task<K: Kernel>(
    job: &Job,
    index: usize,
    task: &Task,
    case: &mut K::Case,
    alternates: &mut [K::Case],
    stream: &Arc<CudaStream>,
    flush: &mut L2Flush,
    variant: &Runnable<K::Params, K::Case>,
    best_us: Option<f64>,
    warm: bool,
    clock: &mut PhaseClock,
    emit: &mut dyn FnMut(Event),
) -> Result<Event, Failure> {
    let mut error = -1.0;
    let mut first = None;
    let own_seed = draw_seed(job.seed, task.key, 0);
    if task.check {
        // Random inputs drawn for this build and key, uploaded again before every
        // check (a variant may have written over them), outputs poisoned first.
        // Every variant at a key is checked and timed on the same values, on every
        // GPU: a kernel whose speed depends on its data is compared on equal terms.
        // The memory is inspected after timing: what a launch writes outside its
        // outputs stays there until then. The checked launch is the first timed one
        // where it can be: a variant of ours already launched in this worker (a
        // first launch may load its module), timed without graphs (the graph's
        // replays are timed) and not the vendor's (a library's first call at a new
        // size may choose its kernel on the host, between the events).
        let timed = warm && !job.timing.graph && !matches!(variant, Runnable::Vendor { .. });
        let verdict = if timed {
            let (verdict, sample) = timed_gate::<K>(case, stream, variant, own_seed, flush, clock)?;
            first = Some(sample);
            verdict
        } else {
            clock.during(Part::Check, || {
                gate::<K>(case, stream, variant, own_seed, false)
            })?
        }
        .or_wrong(|f| wrong_result::<K>(task.key, f, ""))?;
        error = verdict.error;
        emit(Event::Checked {
            task: index,
            check: verdict.describe_check(),
        });
    } else {
        clock.during(Part::Inputs, || own_draw::<K>(case, stream, own_seed))?;
        clock.during(Part::Time, || first_launch::<K>(case, stream, variant))?;
    }
    let (samples, condition) =
        timed_in_condition::<K>(job, case, stream, flush, variant, best_us, first, clock)?;
    // With several draws per check (`AUTOTUNE_CHECK_SEEDS`, the judge's 2), every
    // variant is checked in full: a stricter gate, reporting every fault it finds.
    let in_full = task.check
        && (job.check_seeds > 1 || task.incumbent || can_still_win(samples.median(), best_us));
    if in_full {
        clock.during(Part::Check, || {
            check_in_full::<K>(job, task.key, case, alternates, stream, variant, &samples)
        })?;
    }
    let mut measurement = measurement(job, task.key, &samples, case.work());
    measurement.error = error;
    measurement.checked_once = task.check && !in_full;
    measurement.buffers = u32::try_from(condition.buffers()).unwrap_or(u32::MAX);
    Ok(Event::Measured {
        task: index,
        measurement,
    })
}

/// What `samples` at `key` measured of `work`, unchecked, on the job's device.
fn measurement(
    job: &Job,
    key: u64,
    samples: &timing::Samples,
    work: autotune_gate::Work,
) -> Measurement {
    Measurement {
        key,
        median_us: samples.median(),
        p25_us: samples.quantile(0.25),
        p75_us: samples.quantile(0.75),
        min_us: samples.min(),
        repeats: samples.times_us.len() as u32,
        error: -1.0,
        bytes: work.bytes,
        flops: work.flops,
        device: u32::try_from(job.device).unwrap_or(u32::MAX),
        checked_once: false,
        buffers: 0,
    }
}

/// Times `variant` at the case's key with its inputs as the kernel finds them when
/// called (`inputs = ...`: rotated through copies, after the flush, or as they
/// are), as graph replays where the job times graphs; `first`, the checked launch
/// timed after the flush, counts only where the inputs are flushed.
#[allow(clippy::too_many_arguments)]
fn timed_in_condition<K: Kernel>(
    job: &Job,
    case: &mut K::Case,
    stream: &Arc<CudaStream>,
    flush: &mut L2Flush,
    variant: &Runnable<K::Params, K::Case>,
    best_us: Option<f64>,
    first: Option<timing::Samples>,
    clock: &mut PhaseClock,
) -> Result<(timing::Samples, Condition), Failure> {
    let launch_error = |e: String| (Stage::Launch, e);
    let condition = clock
        .during(Part::Inputs, || {
            Condition::prepare(K::SPEC.inputs, case, stream, flush.l2_bytes())
        })
        .map_err(preparing)?;
    let first = first.filter(|_| condition == Condition::Flushed);
    let timed = clock.during(Part::Time, || {
        if job.timing.graph {
            // As graph-using code runs it: captured once, the graph replayed; where
            // the inputs rotate, 32 or more launches back to back in the graph,
            // cycling through the rotated buffers, as a model's step runs its layers
            // (each launch's fixed cost hidden behind the one before, the graph's
            // own shared by all), each replay's time over its launches.
            let graph = capture::<K>(case, stream, variant, condition)?;
            let launches = condition.graph_launches() as f64;
            timing::measure(
                stream,
                condition.flush(flush),
                &job.timing,
                best_us.map(|best| best * launches),
                &mut || graph.launch().map_err(|e| e.to_string()),
            )
            .map(|samples| per_launch(samples, launches))
        } else {
            let mut next = 0;
            timing::measure_after(
                stream,
                condition.flush(flush),
                &job.timing,
                best_us,
                first,
                &mut || {
                    next += 1;
                    condition.select(case, next);
                    launch::<K>(case, stream, variant).map_err(|e| e.to_string())
                },
            )
        }
        .map_err(|e| Failure::from(launch_error(e.to_string())))
    });
    condition.release(case);
    Ok((timed?, condition))
}

/// Puts the key's own draw (`seed`) into `case` before a launch timed unchecked (a
/// duel's, the incumbent's second timing): what the medians of the checked tasks
/// were timed on. The case may hold anything else: zeros where it is new to this
/// worker (a fresh worker's, as every confirmation is, or one made for this key
/// after another), a later draw of `AUTOTUNE_CHECK_SEEDS`, or what a variant
/// timed before wrote into its inputs. A kernel whose time depends on its data
/// (a top-k's selection over equal scores; a GEMM's power draw at compute-bound
/// sizes) would be timed on other work than the one it is chosen for. After the
/// first draw at a key, a device-to-device copy ([`autotune_gate::Input`]).
fn own_draw<K: Kernel>(
    case: &mut K::Case,
    stream: &Arc<CudaStream>,
    seed: u64,
) -> Result<(), Failure> {
    case.randomize(stream, seed).map_err(preparing)
}

/// A challenger (`sides[1]`) timed against the incumbent (`sides[0]`) in the
/// job's interleaved rounds, on the key's own inputs, each side launched once
/// untimed first (a first launch may load its module), as graph replays where the
/// job times graphs. Both passed their checks at this key before.
fn duel_task<K: Kernel>(
    job: &Job,
    index: usize,
    task: &Task,
    case: &mut K::Case,
    stream: &Arc<CudaStream>,
    flush: &mut L2Flush,
    sides: [&Runnable<K::Params, K::Case>; 2],
) -> Result<Event, Failure> {
    own_draw::<K>(case, stream, draw_seed(job.seed, task.key, 0))?;
    for side in sides {
        first_launch::<K>(case, stream, side)?;
    }
    let condition =
        Condition::prepare(K::SPEC.inputs, case, stream, flush.l2_bytes()).map_err(preparing)?;
    let timed = duel_rounds::<K>(job, task, case, stream, flush, sides, condition);
    condition.release(case);
    let [incumbent, challenger] = timed?;
    Ok(Event::Dueled {
        task: index,
        incumbent_us: incumbent.times_us,
        challenger_us: challenger.times_us,
    })
}

/// The rounds of [`duel_task`] in `condition`, each side on the same rotated
/// buffer as the other in its round where the inputs rotate.
fn duel_rounds<K: Kernel>(
    job: &Job,
    task: &Task,
    case: &mut K::Case,
    stream: &Arc<CudaStream>,
    flush: &mut L2Flush,
    sides: [&Runnable<K::Params, K::Case>; 2],
    condition: Condition,
) -> Result<[timing::Samples; 2], Failure> {
    let order_seed = draw_seed(job.seed, task.key, u32::MAX - 1) ^ task.variant as u64;
    let rounds = job.timing.duel_rounds.max(1);
    let warmup = job.timing.warmup;
    // Each side's launches count separately: in round i both read buffer i.
    let (count_a, count_b) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
    let advance = |count: &std::cell::Cell<usize>| {
        count.set(count.get() + 1);
        count.get()
    };
    // As graph replays where the job times graphs: each side captured once, its
    // launches back to back through the rotated buffers (as `timed_in_condition`).
    let graphs = if job.timing.graph {
        [
            Some(capture::<K>(case, stream, sides[0], condition)?),
            Some(capture::<K>(case, stream, sides[1], condition)?),
        ]
    } else {
        [None, None]
    };
    // Both launches need the case, one at a time.
    let case = std::cell::RefCell::new(case);
    let side = |which: usize, count: &std::cell::Cell<usize>| {
        let launch_number = advance(count);
        match &graphs[which] {
            Some(graph) => graph.launch().map_err(|e| e.to_string()),
            None => {
                let mut case = case.borrow_mut();
                condition.select(&mut **case, launch_number);
                launch::<K>(&mut case, stream, sides[which]).map_err(|e| e.to_string())
            }
        }
    };
    let launches = if job.timing.graph {
        condition.graph_launches() as f64
    } else {
        1.0
    };
    timing::interleaved(
        stream,
        condition.flush(flush),
        warmup,
        rounds,
        order_seed,
        [&mut || side(0, &count_a), &mut || side(1, &count_b)],
    )
    .map(|sides| sides.map(|samples| per_launch(samples, launches)))
    .map_err(|e| Failure::Out(Stage::Launch, e.to_string()))
}

/// A replay's times over the launches it holds: the time of one launch.
fn per_launch(samples: timing::Samples, launches: f64) -> timing::Samples {
    timing::Samples {
        times_us: samples.times_us.iter().map(|t| t / launches).collect(),
    }
}

/// The launches of `variant` in `condition` captured into one CUDA graph on
/// `stream`: one, or [`Condition::graph_launches`] of them back to back, each
/// reading the next rotated buffer. A launch that cannot be
/// captured (it synchronises with the host, allocates, or uses another stream)
/// puts the variant out: dispatch inside a graph could not run it.
fn capture<K: Kernel>(
    case: &mut K::Case,
    stream: &Arc<CudaStream>,
    variant: &Runnable<K::Params, K::Case>,
    condition: Condition,
) -> Result<cudarc::driver::CudaGraph, Failure> {
    use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
    let out = |e: String| {
        Failure::Out(
            Stage::Launch,
            format!("cannot be captured in a CUDA graph: {e}"),
        )
    };
    stream
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .map_err(|e| out(e.to_string()))?;
    let launched = (0..condition.graph_launches()).try_for_each(|number| {
        condition.select(case, number);
        launch::<K>(case, stream, variant)
    });
    // End the capture whatever happened, so that the stream is usable again.
    let ended = stream.end_capture(CUgraphInstantiate_flags(0));
    launched.map_err(|e| out(e.to_string()))?;
    let graph = ended
        .map_err(|e| out(e.to_string()))?
        .ok_or_else(|| out("the capture recorded nothing".into()))?;
    graph.upload().map_err(|e| out(e.to_string()))?;
    Ok(graph)
}

/// A wrong result at `key`, and where in the task it showed (`when`).
fn wrong_result<K: Kernel>(key: u64, failure: String, when: &str) -> Failure {
    Failure::Out(
        Stage::WrongResult,
        format!("{failure} at {}={key}{when}", K::SPEC.key),
    )
}

/// Whether a checked task whose timing gave `median_us` goes on to the checks after
/// timing (the memory, the alternate cases, the further draws), `best_us` the
/// fastest median this worker measured at the key so far.
///
/// Every checked task is checked once before it is timed, on the key's own draw.
/// The rest of the gate protects the choice, and only the fastest median or the
/// incumbent can be chosen at a key (`autotune_table::ranges::decide`; the
/// incumbent's tasks always go on). A median above `best_us` can never be the
/// fastest: the best only falls as more variants are timed, and on several GPUs
/// each GPU's times are scaled by one factor, which keeps their order. So a
/// variant that cannot win is not checked further, and a variant that is chosen
/// was checked in full, on the GPU that timed it.
fn can_still_win(median_us: f64, best_us: Option<f64>) -> bool {
    best_us.is_none_or(|best| median_us <= best)
}

/// The seed of input draw `draw` at `key`: draw 0 is the build's own.
fn draw_seed(seed: u64, key: u64, draw: u32) -> u64 {
    let seed = Rng::derive(seed, key);
    if draw == 0 {
        seed
    } else {
        Rng::derive(seed, u64::from(draw))
    }
}

/// The first launch of a task tells an argument the wrapper refuses at this key
/// (the variant is unfit here) from a launch that fails (the variant is out).
fn first_launch<K: Kernel>(
    case: &mut K::Case,
    stream: &Arc<CudaStream>,
    variant: &Runnable<K::Params, K::Case>,
) -> Result<(), Failure> {
    launch::<K>(case, stream, variant).map_err(|e| match e.refused_arguments() {
        Some(reason) => Failure::Unfit(reason.to_string()),
        None => Failure::Out(Stage::Launch, e.to_string()),
    })
}

/// Fresh inputs from `seed`, poisoned outputs, one launch, then [`verify`]: the
/// relative error, or why the output (or, with `inspect`, the memory around it)
/// is wrong.
fn gate<K: Kernel>(
    case: &mut K::Case,
    stream: &Arc<CudaStream>,
    variant: &Runnable<K::Params, K::Case>,
    seed: u64,
    inspect: bool,
) -> Result<Checked, Failure> {
    prepare::<K>(case, stream, seed)?;
    first_launch::<K>(case, stream, variant)?;
    stream
        .synchronize()
        .map_err(|e| Failure::Out(Stage::Launch, format!("after launch: {e}")))?;
    verify::<K>(case, stream, inspect)
}

/// The checks after timing of a variant that can still win at `key`: what dispatch
/// will see (the output of the last of many launches on the same inputs, and the
/// memory: a kernel right only on its first launch, or that writes into its inputs
/// or past its outputs while it is timed, is out), the case's alternates, and the
/// further draws of `AUTOTUNE_CHECK_SEEDS` in the same buffers (a kernel that
/// returns what it computed before, instead of computing, is out).
fn check_in_full<K: Kernel>(
    job: &Job,
    key: u64,
    case: &mut K::Case,
    alternates: &mut [K::Case],
    stream: &Arc<CudaStream>,
    variant: &Runnable<K::Params, K::Case>,
    samples: &timing::Samples,
) -> Result<(), Failure> {
    let wrong = |failure: String, when: &str| wrong_result::<K>(key, failure, when);
    stream
        .synchronize()
        .map_err(|e| Failure::Out(Stage::Launch, format!("after timing: {e}")))?;
    let timed = format!(
        " (after the last of {} timed launches)",
        samples.times_us.len()
    );
    verify::<K>(case, stream, true)?.or_wrong(|f| wrong(f, &timed))?;
    alternates_and_draws::<K>(job, key, case, alternates, stream, variant)
}

/// The case's alternates at `key`, then the further draws of
/// `AUTOTUNE_CHECK_SEEDS` in the case's own buffers.
fn alternates_and_draws<K: Kernel>(
    job: &Job,
    key: u64,
    case: &mut K::Case,
    alternates: &mut [K::Case],
    stream: &Arc<CudaStream>,
    variant: &Runnable<K::Params, K::Case>,
) -> Result<(), Failure> {
    let wrong = |failure: String, when: &str| wrong_result::<K>(key, failure, when);
    // A wrapper that refuses an alternate's arguments is not checked there
    // (dispatch would refuse too).
    let own_seed = draw_seed(job.seed, key, 0);
    for (number, alternate) in alternates.iter_mut().enumerate() {
        match gate::<K>(alternate, stream, variant, own_seed, true) {
            Ok(Checked::Right(_)) | Err(Failure::Unfit(_)) => {}
            Ok(Checked::Wrong(failure)) => {
                return Err(wrong(failure, &format!(" (alternate case {})", number + 1)));
            }
            Err(failure) => return Err(failure),
        }
    }
    for draw in 1..job.check_seeds {
        let seed = draw_seed(job.seed, key, draw);
        let when = format!(" (input draw {draw}, after timing)");
        gate::<K>(case, stream, variant, seed, true)?.or_wrong(|f| wrong(f, &when))?;
    }
    Ok(())
}

/// A check-only task off the timed grid: the gate in full, as a winner gets it,
/// without timing: the key's own draw with the memory inspected, the output again
/// after a second launch on the same inputs (what dispatch sees after the first
/// call), the case's alternates and the further draws.
fn verify_task<K: Kernel>(
    job: &Job,
    key: u64,
    case: &mut K::Case,
    alternates: &mut [K::Case],
    stream: &Arc<CudaStream>,
    variant: &Runnable<K::Params, K::Case>,
) -> Result<(), Failure> {
    let wrong = |failure: String, when: &str| wrong_result::<K>(key, failure, when);
    let off_grid = " (checked off the timed grid)";
    let own_seed = draw_seed(job.seed, key, 0);
    gate::<K>(case, stream, variant, own_seed, true)?.or_wrong(|f| wrong(f, off_grid))?;
    launch::<K>(case, stream, variant).map_err(|e| Failure::Out(Stage::Launch, e.to_string()))?;
    stream
        .synchronize()
        .map_err(|e| Failure::Out(Stage::Launch, format!("after launch: {e}")))?;
    verify::<K>(case, stream, true)?
        .or_wrong(|f| wrong(f, " (second launch, checked off the timed grid)"))?;
    alternates_and_draws::<K>(job, key, case, alternates, stream, variant)
}

/// [`gate`] (without the memory) with its launch timed as timing's first
/// ([`timing::time_once`]): the verdict and the sample.
fn timed_gate<K: Kernel>(
    case: &mut K::Case,
    stream: &Arc<CudaStream>,
    variant: &Runnable<K::Params, K::Case>,
    seed: u64,
    flush: &mut L2Flush,
    clock: &mut PhaseClock,
) -> Result<(Checked, timing::Samples), Failure> {
    clock.during(Part::Check, || prepare::<K>(case, stream, seed))?;
    let sample = clock.during(Part::Time, || {
        // The launch's own failure (refused arguments: unfit here) is kept as it is;
        // the driver's (the events, the flush, the synchronization) puts it out.
        timing::time_once(stream, Some(flush), &mut || {
            first_launch::<K>(case, stream, variant)
        })
        .map_err(|e| match e {
            TimingError::Launch(failure) => failure,
            TimingError::Driver(e) => Failure::Out(Stage::Launch, format!("CUDA: {e}")),
        })
    })?;
    let verdict = clock.during(Part::Check, || verify::<K>(case, stream, false))?;
    Ok((verdict, sample))
}

/// Fresh inputs from `seed` (put back where the case holds that draw) and poisoned
/// outputs, before a checked launch.
fn prepare<K: Kernel>(
    case: &mut K::Case,
    stream: &Arc<CudaStream>,
    seed: u64,
) -> Result<(), Failure> {
    case.randomize(stream, seed).map_err(preparing)?;
    case.poison(stream).map_err(preparing)
}

/// The case could not be given its inputs or poisoned outputs.
fn preparing(error: autotune_gate::CaseError) -> Failure {
    Failure::Out(Stage::Launch, format!("preparing the case: {error}"))
}

/// With `inspect`, the case's memory first (guards around the outputs, inputs as
/// uploaded: what went wrong there explains a wrong output), then its check
/// against the reference.
fn verify<K: Kernel>(
    case: &mut K::Case,
    stream: &Arc<CudaStream>,
    inspect: bool,
) -> Result<Checked, Failure> {
    let failed = |e: autotune_gate::CaseError| {
        Failure::Out(Stage::WrongResult, format!("check failed: {e}"))
    };
    if inspect {
        let mut memory = Inspection::new(stream);
        case.inspect(&mut memory).map_err(failed)?;
        if let Some(failure) = memory.into_failure() {
            return Ok(Checked::Wrong(failure));
        }
    }
    let verdict = case.check(stream).map_err(failed)?;
    Ok(match verdict.failure() {
        Some(failure) => Checked::Wrong(failure),
        None => Checked::Right(verdict),
    })
}

fn launch<K: Kernel>(
    case: &mut K::Case,
    stream: &Arc<CudaStream>,
    variant: &Runnable<K::Params, K::Case>,
) -> Result<(), LaunchError> {
    match variant {
        Runnable::Tuned(v) => K::launch_case(case, stream, v),
        Runnable::Fallback { functions, values } => {
            K::launch_fallback(case, stream, functions, values)
        }
        Runnable::Vendor { vendor, point } if point.is_empty() => vendor.launch_case(case, stream),
        Runnable::Vendor { vendor, point } => vendor.launch_case_at(case, stream, point),
    }
}

/// The vendor's own points at the task's key (`Task::points`).
fn vendor_points<P, C: 'static>(
    task: &Task,
    index: usize,
    case: &mut C,
    stream: &Arc<CudaStream>,
    variant: &Runnable<P, C>,
) -> Result<Event, Failure> {
    let Runnable::Vendor { vendor, .. } = variant else {
        return Err(Failure::Out(
            Stage::Load,
            "only the vendor has points of its own".into(),
        ));
    };
    match vendor.points(case, stream, task.points) {
        Ok(points) => Ok(Event::Points {
            task: index,
            points,
        }),
        Err(error) => Err(Failure::Out(Stage::Launch, format!("its points: {error}"))),
    }
}

/// What a check of a launch found: right (the verdict, with its numbers), or wrong
/// (what the gate saw, as the report says it).
enum Checked {
    Right(Verdict),
    Wrong(String),
}

impl Checked {
    /// The verdict, or the failure `wrong` makes of what was seen.
    fn or_wrong(self, wrong: impl FnOnce(String) -> Failure) -> Result<Verdict, Failure> {
        match self {
            Self::Right(verdict) => Ok(verdict),
            Self::Wrong(seen) => Err(wrong(seen)),
        }
    }
}

/// Why a task produced no timing.
enum Failure {
    /// The variant is out, at this stage.
    Out(Stage, String),
    /// Its wrapper refused this key's arguments: skipped here only.
    Unfit(String),
}

impl From<(Stage, String)> for Failure {
    fn from((stage, reason): (Stage, String)) -> Self {
        Self::Out(stage, reason)
    }
}

/// Whether the context still works after an error (a crashed kernel poisons it).
fn context_alive(stream: &Arc<CudaStream>) -> bool {
    stream.synchronize().is_ok() && stream.context().synchronize().is_ok()
}

/// A variant's binary loaded in the worker's context (or the vendor's handle).
enum Runnable<P, C> {
    Tuned(Variant<P>),
    Fallback {
        functions: Vec<CudaFunction>,
        values: Vec<u32>,
    },
    /// The vendor's handle (shared by its points) and the point (none: its
    /// default launch).
    Vendor {
        vendor: Rc<dyn VendorCase<C>>,
        point: Vec<u32>,
    },
}

impl<P: Params, C> Runnable<P, C> {
    fn load(ctx: &Arc<CudaContext>, variant: &JobVariant) -> Result<Self, LoadFailure> {
        let image = autotune_spec::guarded::read::read(
            &variant.binary,
            autotune_spec::guarded::read::MAX_SOURCE_BYTES,
        )
        .map_err(|e| LoadFailure::Unreadable {
            path: variant.binary.clone(),
            reason: e.to_string(),
        })?;
        let load = || -> Result<Vec<CudaFunction>, DriverError> {
            let module = ctx.load_module(Ptx::from_binary(image))?;
            variant
                .entries
                .iter()
                .map(|entry| module.load_function(entry))
                .collect()
        };
        let functions = load().map_err(|error| LoadFailure::Module {
            entries: variant.entries.clone(),
            path: variant.binary.clone(),
            error,
        })?;
        if functions.is_empty() {
            return Err(LoadFailure::NoEntry {
                name: variant.name.clone(),
            });
        }
        if variant.fallback {
            return Ok(Self::Fallback {
                functions,
                values: variant.values.clone(),
            });
        }
        let params = P::from_values(&variant.values).ok_or_else(|| LoadFailure::Params {
            name: variant.name.clone(),
        })?;
        Ok(Self::Tuned(Variant::with_entries(
            variant.name.clone(),
            params,
            functions,
        )))
    }
}

/// Writes one event as a line on stdout, flushed (the parent reads it as it comes).
pub fn emit_line(event: &Event) {
    if let Ok(line) = serde_json::to_string(event) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::can_still_win;

    #[test]
    fn only_a_variant_that_can_still_be_the_fastest_is_checked_further() {
        // The first at a key (nothing measured there yet) goes on.
        assert!(can_still_win(50.0, None));
        // As fast as the best, or faster, it may still win.
        assert!(can_still_win(40.0, Some(40.0)));
        assert!(can_still_win(39.0, Some(40.0)));
        // Slower than the best by any amount, it never can.
        assert!(!can_still_win(40.1, Some(40.0)));
        assert!(!can_still_win(400.0, Some(40.0)));
    }
}
