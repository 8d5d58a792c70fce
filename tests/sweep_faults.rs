//! The sweep's guarantees on a real GPU, with planted variants of a test kernel
//! (`tests/kernels/planted.cu`): a fast but wrong variant is rejected and never
//! picked, a variant that cannot launch or that crashes the CUDA context or that
//! hangs is rejected with its reason while the sweep goes on, the gate catches the
//! subtle ones (one output in a million off by 0.1%, a write one element past the
//! end, a write into the input, a result right only on its first launch, a result
//! cached from an earlier launch, a result right only at the small size), a
//! launch that cannot be captured in a CUDA graph is out when the sweep times
//! graphs (as the judge does) and kept when it does not, and a sweep killed
//! half-way resumes from its journal. Reported ignored without a GPU or nvcc.
//!
//! This test binary is also the sweep's worker: the sweep starts it again with
//! `AUTOTUNE_WORKER` set (hence `harness = false`, its `main` first).
#![allow(clippy::expect_used, clippy::unwrap_used)] // a test binary: a failure is the test's
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use autotune_build::testing::{CompileJob, Nvcc, Target};
use autotune_build::testing::{JobVariant, WORKER_ENV, emit_line, serve};
use autotune_build::testing::{KeyRange, SweepPlan, run_sweep};
use autotune_build::timing::{Flush, TimingConfig};
use autotune_harness::{self as harness, trials};
use autotune_runtime::cudarc::driver::{CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use autotune_runtime::gate::rotation::{Rotate, Rotating};
use autotune_runtime::gate::{Case, CaseError, Guarded, Inspection, Verdict, Work};
use autotune_runtime::{Kernel, KernelSpec, LaunchError, Params, Variant};
use autotune_table::progress::Progress;
use autotune_table::table::Stage;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PlantedParams {
    mode: u32,
}

impl Params for PlantedParams {
    const NAMES: &'static [&'static str] = &["mode"];
    fn from_values(values: &[u32]) -> Option<Self> {
        match values {
            [mode] => Some(Self { mode: *mode }),
            _ => None,
        }
    }
    fn values(&self) -> Vec<u32> {
        vec![self.mode]
    }
}

struct PlantedCase {
    /// Read cold: rotated through copies while timed (`Case::rotating`).
    x: Rotating<f32>,
    y: Guarded<f32>,
    never: CudaSlice<i32>,
    host_x: Vec<f32>,
}

impl Case for PlantedCase {
    fn new(stream: &Arc<CudaStream>, key: u64) -> Result<Self, CaseError> {
        let n = key as usize;
        Ok(Self {
            x: Rotating::new(stream.alloc_zeros(n)?),
            y: Guarded::alloc(stream, n)?,
            never: stream.alloc_zeros(2)?,
            host_x: vec![0.0; n],
        })
    }
    fn randomize(&mut self, stream: &Arc<CudaStream>, seed: u64) -> Result<(), CaseError> {
        autotune_runtime::gate::random::fill_uniform(&mut self.host_x, seed, -1.0, 1.0);
        stream.memcpy_htod(&self.host_x, &mut *self.x)?;
        Ok(())
    }
    fn poison(&mut self, stream: &Arc<CudaStream>) -> Result<(), CaseError> {
        Ok(self.y.poison(stream)?)
    }
    fn inspect(&self, memory: &mut Inspection) -> Result<(), CaseError> {
        memory.output("y", &self.y)?;
        memory.input("x", &*self.x, &self.host_x)
    }
    fn check(&mut self, stream: &Arc<CudaStream>) -> Result<Verdict, CaseError> {
        let y = stream.clone_dtoh(&*self.y)?;
        let reference: Vec<f64> = self.host_x.iter().map(|&x| 2.0 * f64::from(x)).collect();
        Ok(autotune_runtime::gate::compare(&y, &reference))
    }
    fn work(&self) -> Work {
        Work {
            bytes: 8 * self.host_x.len() as u64,
            flops: self.host_x.len() as u64,
        }
    }
    fn rotating(&mut self) -> Vec<&mut dyn Rotate> {
        vec![&mut self.x]
    }
}

struct Planted;

const SPEC: KernelSpec = KernelSpec::new(
    "planted_scale",
    "tests/sweep_faults.rs",
    "tests/kernels/planted.cu",
    &["planted_scale"],
    "n",
    &[1 << 20, 1 << 24],
)
.with_space(
    &["mode"],
    &[
        &[0],
        &[1],
        &[2],
        &[3],
        &[4],
        &[5],
        &[6],
        &[7],
        &[8],
        &[9],
        &[10],
        &[11],
        &[12],
        &[13],
        &[14],
    ],
    &[0],
);

impl Kernel for Planted {
    type Params = PlantedParams;
    type Case = PlantedCase;
    const SPEC: KernelSpec = SPEC;

    fn launch_case(
        case: &mut PlantedCase,
        stream: &Arc<CudaStream>,
        variant: &Variant<PlantedParams>,
    ) -> Result<(), LaunchError> {
        let n = case.host_x.len() as u64;
        if variant.params().mode == 11 {
            // A host synchronisation inside the launch: not capturable.
            stream.synchronize().map_err(LaunchError::from_error)?;
        }
        let shared = if variant.params().mode == 2 {
            1 << 20
        } else {
            0
        };
        let config = LaunchConfig {
            grid_dim: (n.div_ceil(256) as u32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: shared,
        };
        let mut launch = stream.launch_builder(variant.function());
        launch
            .arg(&*case.x)
            .arg(&mut *case.y)
            .arg(&n)
            .arg(&case.never);
        // SAFETY: matches planted_scale's parameters (mode 3 misbehaves on purpose).
        unsafe { launch.launch(config) }
            .map(drop)
            .map_err(LaunchError::from_error)
    }
}

fn main() -> std::process::ExitCode {
    if std::env::var_os(WORKER_ENV).is_some() {
        let mut input = std::io::stdin().lock();
        let result = serve::<Planted>(&mut input, &mut |event| emit_line(&event));
        std::process::exit(if result.is_ok() { 0 } else { 1 });
    }
    if std::env::var_os("SWEEP_FAULTS_CHILD").is_some() {
        // The sweep that the resume test kills.
        let _ = run_sweep(
            &plan(&RESUME, &variants()[..1], &work(), "resume"),
            &Progress::silent("test"),
            &mut std::io::sink(),
        );
        std::process::exit(0);
    }
    // One at a time: the tests share the GPU, the variants and the work folder.
    harness::run_groups_in_turn(&[(
        harness::Need::All(&[harness::Need::Gpu, harness::Need::Nvcc]),
        trials![
            planted_variants_are_rejected_with_their_reasons,
            a_variant_that_skips_the_tail_is_out_off_the_grid,
            a_launch_that_cannot_be_captured_is_out_when_graphs_are_timed,
            a_duel_times_the_keys_own_draw,
            a_killed_sweep_resumes_from_its_journal,
        ],
    )])
}

fn work() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("sweep-faults")
}

/// The planted variants, compiled once for the tests (the harness runs them only
/// where nvcc and a GPU are).
fn variants() -> &'static [JobVariant] {
    static VARIANTS: OnceLock<Vec<JobVariant>> = OnceLock::new();
    VARIANTS.get_or_init(|| {
        let nvcc = Nvcc::find(&work()).expect("the harness runs these only where nvcc is");
        compile(&nvcc, Path::new(env!("CARGO_MANIFEST_DIR")), &work())
    })
}

fn compile(nvcc: &Nvcc, root: &Path, work: &Path) -> Vec<JobVariant> {
    let jobs: Vec<CompileJob> = SPEC
        .points
        .iter()
        .map(|p| CompileJob {
            kernel: SPEC.name.into(),
            constant: None,
            label: format!("mode{}", p[0]),
            source: root.join(SPEC.source),
            entries: vec!["planted_scale".into()],
            defines: SPEC.defines(p),
            flags: vec![],
            target: Target::Cubin("sm_90".into()),
            dependencies: vec![],
            dir: root.to_path_buf(),
        })
        .collect();
    let (compiled, _) = nvcc.compile_all(&jobs, work, &Progress::silent("test"));
    SPEC.points
        .iter()
        .zip(compiled)
        .map(|(p, c)| JobVariant {
            name: SPEC.point_name(p),
            values: p.to_vec(),
            binary: c.expect("planted variants compile").binary,
            entries: vec!["planted_scale".into()],
            fallback: false,
            vendor: false,
        })
        .collect()
}

/// More sizes and longer timings, so that the sweep is still running when killed.
const RESUME: KernelSpec = KernelSpec {
    sizes: &[1 << 20, 1 << 21, 1 << 22, 1 << 23, 1 << 24, 1 << 25],
    ..SPEC
};

fn plan(
    spec: &'static KernelSpec,
    variants: &[JobVariant],
    work: &Path,
    header: &str,
) -> SweepPlan {
    let target_ms = if spec.sizes.len() > SPEC.sizes.len() {
        250.0
    } else {
        5.0
    };
    SweepPlan {
        spec,
        shape: Vec::new(),
        entry: spec.name.to_string(),
        exe: std::env::current_exe().expect("the test binary"),
        work_dir: work.to_path_buf(),
        variants: variants.to_vec(),
        rejected: vec![None; variants.len()],
        incumbents: vec![KeyRange::new(0, u64::MAX, 0)],
        devices: vec![0],
        seed: 7,
        check_seeds: 2,
        timing: TimingConfig {
            warmup: 2,
            min_repeats: 10,
            max_repeats: 5000,
            target_ms,
            hopeless: 4.0,
            graph: false,
            flush: Flush::Memset,
            duel_rounds: 20,
        },
        min_margin: 0.01,
        refine_rounds: 1,
        task_timeout: Duration::from_secs(10),
        journal_header: header.to_string(),
        strategy: autotune_table::strategy::Strategy::Grid,
        default: 0,
        seeds: Vec::new(),
    }
}

fn planted_variants_are_rejected_with_their_reasons() {
    let (variants, work) = (&variants()[..12], &work());
    let mut log = Vec::new();
    let result = run_sweep(
        &plan(&SPEC, variants, work, "faults"),
        &Progress::silent("test"),
        &mut log,
    )
    .expect("the sweep finishes");
    let log = String::from_utf8_lossy(&log);
    println!("{log}");
    let stage = |mode: usize| result.rejected[mode].as_ref().map(|r| r.stage);
    assert_eq!(stage(0), None, "the correct variant is kept");
    // Its input is read cold: each timed launch on the next of the copies that
    // cover the L2 three times (4 MiB at n = 2^20, 64 MiB at n = 2^24).
    let buffers: Vec<(u64, u32)> = result.measurements[0]
        .iter()
        .map(|m| (m.key, m.buffers))
        .collect();
    assert!(
        !buffers.is_empty() && buffers.iter().all(|&(_, b)| b >= 2),
        "timed on rotated copies: {buffers:?}"
    );
    println!("planted_scale mode 0: buffers rotated per key {buffers:?}");
    assert_eq!(
        stage(1),
        Some(Stage::WrongResult),
        "fast and wrong is rejected: {:?}",
        result.rejected[1]
    );
    assert!(
        result.rejected[1]
            .as_ref()
            .is_some_and(|r| r.reason.contains("never written"))
    );
    assert_eq!(
        stage(2),
        Some(Stage::Launch),
        "unlaunchable is rejected: {:?}",
        result.rejected[2]
    );
    assert_eq!(
        stage(3),
        Some(Stage::Crash),
        "crashing is rejected: {:?}",
        result.rejected[3]
    );
    assert_eq!(
        stage(4),
        Some(Stage::Timeout),
        "hanging is rejected: {:?}",
        result.rejected[4]
    );
    let subtle = [
        (5, "element error"),
        (
            6,
            "wrote outside `y`: 4 bytes after the end, the nearest at +0",
        ),
        (7, "changed its input `x`: 1 elements changed"),
        (8, "after the last of"),
        (9, "(input draw 1, after timing)"),
        (10, "at n=16777216"),
    ];
    for (mode, expected) in subtle {
        let rejected = result.rejected[mode].as_ref();
        assert!(
            rejected.is_some_and(|r| r.stage == Stage::WrongResult && r.reason.contains(expected)),
            "mode {mode} must be rejected for `{expected}`: {rejected:?}"
        );
        assert!(
            result.measurements[mode].len() < SPEC.sizes.len(),
            "mode {mode} was kept at some size"
        );
    }
    assert_eq!(
        result.measurements[0].len(),
        SPEC.sizes.len(),
        "the sweep went on at every size"
    );
    assert_eq!(
        stage(11),
        None,
        "eagerly, a launch that synchronises is right: {:?}",
        result.rejected[11]
    );
    assert!(
        result.decisions.iter().all(|d| d.winner == 0),
        "only the correct variant can win"
    );
    assert!(
        result.measurements[1].is_empty(),
        "a wrong variant is never timed"
    );
    println!("planted variants: ok");
}

/// Session 39: a duel timed the case as its worker held it, and a worker new to
/// the key (every confirmation's is fresh) held zeros, never drawn, with one
/// check seed. Mode 14 is fast on drawn values and slower than mode 13 on zeros:
/// its medians win every key, and the duels (and their confirmations) must say so
/// too, each side's time in them near its median.
fn a_duel_times_the_keys_own_draw() {
    let (variants, work) = (variants(), &work());
    let chosen: Vec<JobVariant> = [13, 14].iter().map(|&m| variants[m].clone()).collect();
    let mut plan = plan(&SPEC, &chosen, work, "own-draw");
    plan.check_seeds = 1;
    let mut log = Vec::new();
    let result = run_sweep(&plan, &Progress::silent("test"), &mut log).expect("the sweep finishes");
    println!("{}", String::from_utf8_lossy(&log));
    let median = |variant: usize, key: u64| {
        result.measurements[variant]
            .iter()
            .find(|m| m.key == key)
            .map(|m| m.median_us)
    };
    let duels: Vec<_> = result
        .decisions
        .iter()
        .flat_map(|d| {
            [d.duel, d.confirmation]
                .into_iter()
                .flatten()
                .map(|duel| (d.key, duel))
        })
        .collect();
    assert!(!duels.is_empty(), "mode 14 is dueled at some key");
    for (key, duel) in &duels {
        let sides = [(0, duel.incumbent_us), (1, duel.challenger_us)];
        for (variant, in_duel) in sides {
            let median = median(variant, *key).expect("both sides were timed at the key");
            let off = in_duel / median;
            assert!(
                (0.5..2.0).contains(&off),
                "at n={key}, mode {} took {in_duel:.1} us in the duel and {median:.1} us in its median",
                [13, 14][variant]
            );
        }
    }
    assert!(
        result.decisions.iter().all(|d| d.winner == 1),
        "mode 14 takes every key: {:?}",
        result
            .decisions
            .iter()
            .map(|d| (d.key, d.winner, d.duel.map(|x| x.ratio)))
            .collect::<Vec<_>>()
    );
    println!("a duel times the key's own draw: {} duels, ok", duels.len());
}

/// Issue 52: mode 12 skips the last `n % 1024` elements, and every key the sweep
/// times (the sizes 2^20 and 2^24, their refinements, twice the top) is a multiple
/// of 1024: it is right and the fastest there, against the slow mode 13. Checked
/// off the grid where it would be served, it is out, and mode 13 keeps every range.
fn a_variant_that_skips_the_tail_is_out_off_the_grid() {
    let (variants, work) = (variants(), &work());
    let chosen: Vec<JobVariant> = [13, 12].iter().map(|&m| variants[m].clone()).collect();
    let mut log = Vec::new();
    let result = run_sweep(
        &plan(&SPEC, &chosen, work, "tail"),
        &Progress::silent("test"),
        &mut log,
    )
    .expect("the sweep finishes");
    let log = String::from_utf8_lossy(&log);
    println!("{log}");
    let faster = SPEC.sizes.iter().all(|&key| {
        let at = |v: usize| result.measurements[v].iter().find(|m| m.key == key);
        matches!((at(0), at(1)), (Some(slow), Some(tail)) if tail.median_us < slow.median_us)
    });
    assert!(
        faster,
        "mode 12 was timed, right, at every size and faster: {log}"
    );
    let out = result.rejected[1].as_ref();
    assert!(
        out.is_some_and(
            |r| r.stage == Stage::WrongResult && r.reason.contains("checked off the timed grid")
        ),
        "mode 12 is out off the grid: {out:?}"
    );
    assert!(result.decisions.iter().all(|d| d.winner == 0), "{log}");
    println!("{}", result.off_grid.describe("n"));
    println!("a variant that skips the tail is out off the grid: ok");
}

/// Issue 15: a candidate that works only with CUDA graphs off. Timed eagerly (above)
/// mode 11 is right and kept; timed as graph replays, as graph-using code runs it,
/// its launch cannot be captured and it is out, with the reason.
fn a_launch_that_cannot_be_captured_is_out_when_graphs_are_timed() {
    let (variants, work) = (variants(), &work());
    let chosen: Vec<JobVariant> = [0, 11].iter().map(|&m| variants[m].clone()).collect();
    let mut plan = plan(&SPEC, &chosen, work, "graph");
    plan.timing.graph = true;
    let mut log = Vec::new();
    let result = run_sweep(&plan, &Progress::silent("test"), &mut log).expect("the sweep finishes");
    let log = String::from_utf8_lossy(&log);
    println!("{log}");
    assert_eq!(
        result.rejected[0], None,
        "mode 0 is captured and timed: {log}"
    );
    let rejected = result.rejected[1].as_ref();
    assert!(
        rejected
            .is_some_and(|r| r.stage == Stage::Launch
                && r.reason.contains("cannot be captured in a CUDA graph")),
        "mode 11 under graph timing: {rejected:?}"
    );
    println!("a launch that cannot be captured is out when graphs are timed: ok");
}

fn a_killed_sweep_resumes_from_its_journal() {
    let (variants, work) = (variants(), &work());
    let journal: PathBuf = work.join(format!("{}.journal", RESUME.name));
    let _ = std::fs::remove_file(&journal);
    let mut child = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .env("SWEEP_FAULTS_CHILD", "1")
        .spawn()
        .expect("spawn the sweep to kill");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&journal).map_or(0, |t| t.lines().count()) < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the child sweep journaled nothing"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().expect("kill the sweep");
    let _ = child.wait();
    let journaled = std::fs::read_to_string(&journal)
        .expect("the journal survives the kill")
        .lines()
        .count()
        - 1;
    let mut log = Vec::new();
    let result = run_sweep(
        &plan(&RESUME, &variants[..1], work, "resume"),
        &Progress::silent("test"),
        &mut log,
    )
    .expect("the resumed sweep finishes");
    let _ = std::io::stdout().write_all(&log);
    assert!(
        result.resumed >= 2 && result.resumed <= journaled,
        "resumed {} of {journaled}",
        result.resumed
    );
    assert_eq!(result.measurements[0].len(), RESUME.sizes.len());
    assert!(!journal.exists(), "a finished sweep removes its journal");
    println!("killed sweep resumed {} results: ok", result.resumed);
}
