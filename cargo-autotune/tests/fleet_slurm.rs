//! The Slurm recipe on a real Slurm (issue 51): `cargo autotune fleet slurm` is
//! rendered and submitted as it is to a controller and a node daemon started here
//! on localhost (Debian's `slurm-wlm` 22.05 and `munge`; `.ci/run` installs them).
//! A scripted worker stands in for the GPU, as in the sweep protocol tests: the
//! recipe's `cargo autotune tune --shard i/N` reaches this binary (a `cargo` on the
//! jobs' `PATH` sends it here), which plans its shard with the tool's own planner,
//! sweeps its entries with the tool's own supervisor and journal, and writes the
//! shard's table; `cargo autotune merge` is the real binary.
//!
//! - Three shards as an array, the merge as a dependent job: the merged table
//!   decides what one machine's run of the same plan decides, range for range.
//! - Shard 2 is requeued (`scontrol requeue`) mid-sweep: it resumes from its
//!   journal and finishes, and the merge waits for it.
//! - Shard 3 fails for good: the merge never runs, the committed table is left as
//!   it was, and the merge submitted alone refuses, naming the missing shard.
//! - Each task builds in its own target folder: tasks share only the shard folder.
//!
//! Reported ignored, with the reason, where Slurm cannot be started (no
//! `slurmctld`, `slurmd`, `munged`, or not root); `AUTOTUNE_REQUIRE_SLURM=1` (CI)
//! turns that into a failure. This test binary is also the shard tuner and its
//! sweep's worker (hence `harness = false`, its `main` first).
#![allow(clippy::expect_used, clippy::unwrap_used)] // a test binary: a failure is the test's
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use autotune_build::testing::{Event, Job, JobVariant, WORKER_ENV, emit_line};
use autotune_build::testing::{KeyRange, ShardEntry, ShardRun, SweepPlan, SweepResult};
use autotune_build::testing::{run_sweep, served};
use autotune_build::timing::TimingConfig;
use autotune_harness::{self as harness, trials};
use autotune_runtime::KernelSpec;
use autotune_table::phases::Phases;
use autotune_table::progress::Progress;
use autotune_table::shard::Shard;
use autotune_table::strategy::Strategy;
use autotune_table::table::{
    self, Fingerprint, KernelTable, Measurement, Seconds, TuningTable, VariantRecord,
};

/// The shards of the run.
const SHARDS: u32 = 3;

/// One kernel tuned at four shapes: four table entries, which the shards split.
const SPEC: KernelSpec = KernelSpec::new(
    "scripted",
    "tests/fleet_slurm.rs",
    "none.cu",
    &["none"],
    "n",
    &[100, 400, 1600, 6400],
)
.with_space(&["v"], &[&[0], &[1], &[2]], &[0]);

const SHAPES: [u64; 4] = [1, 2, 3, 4];

/// The median of scripted variant `name` at `key` and shape `s`: v=0, the
/// incumbent, 10 us; v=1 6 us from `key = 400 s` up (a boundary per shape), 14 us
/// below; v=2 0.5% faster than v=0 (inside the noise: never a winner).
fn script(name: &str, key: u64, s: u64) -> f64 {
    match name {
        "v=1" if key >= 400 * s => 6.0,
        "v=1" => 14.0,
        "v=2" => 9.95,
        _ => 10.0,
    }
}

fn entry_name(shape: u64) -> String {
    format!("scripted@s={shape}")
}

/// The cluster the two runs share, started once by `main` and stopped after them.
static CLUSTER: Mutex<Option<Cluster>> = Mutex::new(None);

/// The folder the runs write under.
fn work() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("fleet-slurm")
}

fn main() -> std::process::ExitCode {
    if std::env::var_os(WORKER_ENV).is_some() {
        worker();
    }
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("shard-tuner") {
        std::process::exit(shard_tuner(&args[2..]));
    }
    let root = work();
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    // Started unless the harness is only listing the tests; its reason, if not.
    let listing = args.iter().any(|a| a == "--list");
    let why: Option<&'static str> = match listing {
        true => None,
        false => match Cluster::start(&root.join("slurm")) {
            Ok(cluster) => {
                println!("{}", cluster.version);
                *CLUSTER.lock().unwrap() = Some(cluster);
                None
            }
            Err(why) => Some(format!("Slurm cannot be started here: {why}").leak()),
        },
    };
    let code = harness::run_groups_in_turn(&[(
        harness::Need::Checked(why, Some("AUTOTUNE_REQUIRE_SLURM")),
        trials![
            the_array_and_the_merge_decide_what_one_machine_decides,
            a_shard_that_fails_for_good_leaves_the_table_and_the_merge_names_it,
        ],
    )]);
    // The daemons stop with the cluster.
    drop(CLUSTER.lock().unwrap().take());
    code
}

/// The cluster `main` started (the harness runs these tests only then).
fn cluster() -> std::sync::MutexGuard<'static, Option<Cluster>> {
    CLUSTER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

// ---- the test's two runs -------------------------------------------------------

/// Three shards (shard 2 requeued mid-sweep), the merge after them.
fn the_array_and_the_merge_decide_what_one_machine_decides() {
    let guard = cluster();
    let cluster = guard.as_ref().expect("the cluster main started");
    let dir = &work().join("run");
    let krate = Crate::new(dir);
    let before = std::fs::read(krate.table()).unwrap();
    let mut submit = krate.submit(cluster);
    submit.env("FLEET_SLOW_SHARD", "2");
    assert_success(&submit.output().unwrap(), "bash tune-fleet.sh");

    // Shard 2 is slow on its first run: requeue it once its journal holds results.
    let journal = krate.target(2).join("autotune-work");
    wait_for(Duration::from_secs(90), "shard 2's journal", || {
        journal_lines(&journal) >= 3
    });
    let array = cluster.array_job().expect("the array is queued");
    cluster.run(&["scontrol", "requeue", &format!("{array}_2")]);
    // A requeued task waits for a begin time; it may start at once here.
    cluster.run_quietly(&[
        "scontrol",
        "update",
        &format!("jobid={array}_2"),
        "StartTime=now",
    ]);
    wait_for(Duration::from_secs(180), "the array and the merge", || {
        cluster.queue().is_empty()
    });

    let log2 = std::fs::read_to_string(krate.log(2)).unwrap_or_default();
    assert!(
        log2.contains("run 1 of shard 2/3"),
        "requeued once:\n{log2}"
    );
    assert!(log2.contains("resumed"), "from its journal:\n{log2}");
    let merged = table::read(&krate.table()).expect("the merge wrote the table");
    assert_ne!(std::fs::read(krate.table()).unwrap(), before);
    assert!(merged.shard.is_none() && merged.kernels.contains_key("untouched"));

    // One machine's run of the same plan, in this process.
    let alone = one_machine(&dir.join("alone"));
    for shape in SHAPES {
        let name = entry_name(shape);
        let (joined, single) = (&merged.kernels[&name], &alone.kernels[&name]);
        assert_eq!(decisions(joined), decisions(single), "{name}");
        assert!(
            joined.tuned_by.is_some(),
            "{name} says which shard tuned it"
        );
    }
    // Each task built in its own target folder; they share only the shard folder.
    let targets: Vec<PathBuf> = (1..=SHARDS).map(|i| krate.target(i)).collect();
    for (i, target) in targets.iter().enumerate() {
        let log = std::fs::read_to_string(krate.log(i as u32 + 1)).unwrap();
        assert!(
            log.contains(&format!("target {}", target.display())),
            "{log}"
        );
    }
    let shards: Vec<String> = std::fs::read_dir(dir.join("tuning/shards"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(shards.len(), SHARDS as usize, "{shards:?}");
    println!("the array and the merge decide what one machine decides: ok");
}

/// Shard 3 exits with an error every time: `afterok` never holds, so the merge
/// never runs and the table stays as committed; the merge alone names shard 3.
fn a_shard_that_fails_for_good_leaves_the_table_and_the_merge_names_it() {
    let guard = cluster();
    let cluster = guard.as_ref().expect("the cluster main started");
    let dir = &work().join("failed");
    let krate = Crate::new(dir);
    let before = std::fs::read(krate.table()).unwrap();
    let mut submit = krate.submit(cluster);
    submit.env("FLEET_FAIL_SHARD", "3");
    assert_success(&submit.output().unwrap(), "bash tune-fleet.sh");
    wait_for(Duration::from_secs(120), "the array to end", || {
        let queue = cluster.queue();
        queue.len() == 1 && queue[0].contains("DependencyNeverSatisfied")
    });
    let merge = cluster.queue()[0]
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    cluster.run(&["scancel", &merge]);
    assert_eq!(
        std::fs::read(krate.table()).unwrap(),
        before,
        "the table is untouched"
    );

    // The merge on its own, as a job, refuses and says which shard is missing.
    let out = dir.join("merge-alone.out");
    let mut alone = krate.command(cluster, "sbatch");
    alone.args(["--wait", "--export=ALL", "--output"]).arg(&out);
    alone.args(["tune-fleet.sh", "merge"]);
    let status = alone.output().unwrap();
    assert!(!status.status.success(), "the merge job failed");
    let said = std::fs::read_to_string(&out).unwrap();
    assert!(said.contains("shard 3 of 3 is missing"), "{said}");
    assert_eq!(
        std::fs::read(krate.table()).unwrap(),
        before,
        "the table is untouched"
    );
    println!("a shard that fails for good leaves the table, and the merge names it: ok");
}

/// What a table entry decides: its ranges and, per timed key, the winner.
fn decisions(k: &KernelTable) -> String {
    let sizes: Vec<(u64, &str)> = k.sizes.iter().map(|s| (s.key, s.winner.as_str())).collect();
    serde_json::to_string(&(&k.ranges, sizes)).unwrap()
}

// ---- the crate the recipe runs in ----------------------------------------------

/// A checkout: the committed table, the rendered recipe, and a `cargo` that sends
/// `cargo autotune tune` to this binary and anything else to `cargo-autotune`.
struct Crate {
    dir: PathBuf,
}

impl Crate {
    fn new(dir: &Path) -> Self {
        std::fs::create_dir_all(dir.join("tuning")).unwrap();
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        // The committed table: an entry the run does not touch.
        let mut committed = autotune_table::testing::table([]);
        let (_, untouched) = sweep_entry(1, &dir.join("seed"), None);
        committed.kernels.insert("untouched".into(), untouched);
        table::write_atomic(&dir.join("tuning/nvidia-h200.json"), &committed).unwrap();
        let recipe = Command::new(env!("CARGO_BIN_EXE_cargo-autotune"))
            .args([
                "autotune", "fleet", "slurm", "--shards", "3", "--gpu", "h200",
            ])
            .args(["--table", "tuning/nvidia-h200.json"])
            .output()
            .unwrap();
        assert_success(&recipe, "cargo autotune fleet slurm");
        std::fs::write(dir.join("tune-fleet.sh"), &recipe.stdout).unwrap();
        let cargo = dir.join("bin/cargo");
        std::fs::write(
            &cargo,
            "#!/bin/sh\n# `cargo autotune tune ...`: the scripted shard tuner; the rest: cargo-autotune.\n\
             if [ \"$1\" = autotune ] && [ \"$2\" = tune ]; then shift 2; exec \"$FLEET_TEST_EXE\" shard-tuner \"$@\"; fi\n\
             exec \"$FLEET_CARGO_AUTOTUNE\" \"$@\"\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self {
            dir: dir.to_path_buf(),
        }
    }

    fn table(&self) -> PathBuf {
        self.dir.join("tuning/nvidia-h200.json")
    }

    /// Shard `i`'s target folder, as the recipe names it.
    fn target(&self, i: u32) -> PathBuf {
        self.dir.join(format!("target/fleet/shard-{i}"))
    }

    fn log(&self, i: u32) -> PathBuf {
        self.dir.join(format!("logs/shard-{i}.log"))
    }

    /// `program` run in the checkout with the jobs' environment.
    fn command(&self, cluster: &Cluster, program: &str) -> Command {
        let mut command = Command::new(program);
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut paths = vec![self.dir.join("bin")];
        paths.extend(std::env::split_paths(&path));
        command
            .current_dir(&self.dir)
            .env("PATH", std::env::join_paths(paths).unwrap())
            .env("SLURM_CONF", &cluster.conf)
            .env("FLEET_TEST_EXE", std::env::current_exe().unwrap())
            .env("FLEET_CARGO_AUTOTUNE", env!("CARGO_BIN_EXE_cargo-autotune"))
            .env("FLEET_LOG_DIR", self.dir.join("logs"))
            .env_remove("SLURM_JOB_ID")
            .env_remove("CARGO_TARGET_DIR")
            .env_remove(WORKER_ENV)
            .stdin(Stdio::null());
        command
    }

    /// `bash tune-fleet.sh`: the recipe submits its array and its merge.
    fn submit(&self, cluster: &Cluster) -> Command {
        let mut command = self.command(cluster, "bash");
        command.arg("tune-fleet.sh");
        command
    }
}

// ---- the shard tuner (what `cargo autotune tune --shard i/N` stands for here) --

/// `--manifest-path M --shard i/N`: plans the run with the tool's planner, sweeps
/// this shard's entries (journal in `$CARGO_TARGET_DIR`) and writes its table.
fn shard_tuner(args: &[String]) -> i32 {
    let shard: Shard = args
        .iter()
        .position(|a| a == "--shard")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .expect("--shard i/N");
    let target = PathBuf::from(std::env::var_os("CARGO_TARGET_DIR").expect("the recipe sets it"));
    let logs = PathBuf::from(std::env::var_os("FLEET_LOG_DIR").unwrap());
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(logs.join(format!("shard-{}.log", shard.index)))
        .unwrap();
    let restarts = std::env::var("SLURM_RESTART_COUNT").unwrap_or_else(|_| "0".into());
    let _ = writeln!(
        log,
        "run {restarts} of shard {shard}, target {}",
        target.display()
    );
    if std::env::var("FLEET_FAIL_SHARD").ok() == Some(shard.index.to_string()) {
        eprintln!("shard {shard}: the scripted GPU is lost");
        return 1;
    }
    // Slow on its first run only, so that it can be requeued mid-sweep.
    let slow =
        std::env::var("FLEET_SLOW_SHARD").ok() == Some(shard.index.to_string()) && restarts == "0";
    let fingerprint = fingerprint();
    let names: Vec<String> = SHAPES.iter().map(|&s| entry_name(s)).collect();
    let stale: Vec<ShardEntry<'_>> = SHAPES
        .iter()
        .zip(&names)
        .map(|(shape, name)| ShardEntry {
            spec: &SPEC,
            entry: name,
            shape: std::slice::from_ref(shape),
            fingerprint: &fingerprint,
            last_sweep_s: None,
        })
        .collect();
    let run = ShardRun::plan(shard, &stale);
    let mut partial = autotune_table::testing::table([]);
    for shape in SHAPES {
        let name = entry_name(shape);
        if !run.owns(&name) {
            continue;
        }
        let (sweep_log, entry) = sweep_entry(shape, &target.join("autotune-work"), Some(slow));
        let _ = log.write_all(sweep_log.as_bytes());
        partial.kernels.insert(name, entry);
    }
    let path = run.path(Path::new("tuning"), &partial.gpu);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    table::write_atomic(&path, &run.table(&partial)).unwrap();
    let _ = writeln!(log, "wrote {}", path.display());
    0
}

/// The fingerprint every entry of the run shares (one checkout, one kernel).
fn fingerprint() -> Fingerprint {
    Fingerprint {
        spec_sha256: "a".repeat(64),
        wrapper_sha256: "b".repeat(64),
        sources: vec!["none.cu".into()],
        sources_sha256: "c".repeat(64),
        nvcc: "13.0.88".into(),
        flags: vec!["-O3".into()],
        crate_version: "scripted 0.1.0".into(),
        tuner_version: "0.1.0".into(),
        vendor: None,
    }
}

/// Sweeps the entry at `shape` in `work` (its journal there) with the scripted
/// worker (`slow`: 150 ms a task; `None`: in this process's own folder): the log
/// and the table entry.
fn sweep_entry(shape: u64, work: &Path, slow: Option<bool>) -> (String, KernelTable) {
    let variants: Vec<JobVariant> = (0..3)
        .map(|v| JobVariant {
            name: format!("v={v}"),
            values: vec![v],
            binary: PathBuf::from("unused"),
            entries: vec!["none".into()],
            fallback: false,
            vendor: false,
        })
        .collect();
    let plan = SweepPlan {
        spec: &SPEC,
        shape: vec![shape],
        entry: entry_name(shape),
        exe: std::env::current_exe().unwrap(),
        work_dir: work.to_path_buf(),
        variants: variants.clone(),
        rejected: vec![None; variants.len()],
        incumbents: vec![KeyRange::new(0, u64::MAX, 0)],
        devices: vec![0],
        seed: 11,
        check_seeds: 1,
        timing: TimingConfig::default(),
        min_margin: 0.01,
        refine_rounds: 2,
        task_timeout: Duration::from_secs(20),
        journal_header: format!("fleet {}", entry_name(shape)),
        strategy: Strategy::Grid,
        default: 0,
        seeds: Vec::new(),
    };
    // The worker is this binary again: it reads whether to be slow from here.
    if slow == Some(true) {
        // SAFETY: no other thread of this process runs yet (the sweep starts them).
        unsafe { std::env::set_var("FLEET_SCRIPTED_SLOW", "1") };
    }
    let mut log = Vec::new();
    let result = run_sweep(&plan, &Progress::silent("fleet"), &mut log).expect("the sweep ends");
    (
        String::from_utf8_lossy(&log).into_owned(),
        entry_table(&plan, &result),
    )
}

/// The table entry of a finished sweep, its ranges as the tool bakes them.
fn entry_table(plan: &SweepPlan, result: &SweepResult) -> KernelTable {
    let name = |v: usize| plan.variants[v].name.clone();
    let baked = served(
        plan.spec,
        &result.decisions,
        &result.rejected,
        &result.beyond,
        0,
        0,
    );
    KernelTable {
        fingerprint: fingerprint(),
        tuned_on: "2026-12-05".into(),
        seed: plan.seed,
        key: "n".into(),
        default: name(0),
        fallback: None,
        check: None,
        tuned_by: None,
        timing: "scripted".into(),
        min_margin: plan.min_margin,
        variants: plan
            .variants
            .iter()
            .enumerate()
            .map(|(v, variant)| VariantRecord {
                name: variant.name.clone(),
                values: variant.values.clone(),
                role: table::Role::Tuned,
                resources: None,
                compile_s: None,
                rejected: result.rejected[v].clone(),
                measurements: result.measurements[v].clone(),
            })
            .collect(),
        sizes: result.decisions.iter().map(|d| d.record(name)).collect(),
        ranges: baked.ranges.into_iter().map(|r| r.map(name)).collect(),
        above: Some(baked.above),
        off_grid: Some(result.off_grid.clone()),
        clocks: result.clocks,
        vendor_plan: Vec::new(),
        vendor_sizes: Vec::new(),
        seconds: Seconds {
            compile: 0.0,
            sweep: result.seconds,
            total: result.seconds,
            gpus: 1,
            phases: None,
        },
    }
}

/// Every entry of the run on one machine, one after the other.
fn one_machine(dir: &Path) -> TuningTable {
    let mut whole = autotune_table::testing::table([]);
    for shape in SHAPES {
        let (_, entry) = sweep_entry(shape, &dir.join(format!("s{shape}")), None);
        whole.kernels.insert(entry_name(shape), entry);
    }
    whole
}

/// The scripted worker: each task measured by [`script`] at the job's shape, every
/// check passed (and every check off the grid), every duel's rounds the two
/// scripted medians.
fn worker() -> ! {
    let slow = std::env::var_os("FLEET_SCRIPTED_SLOW").is_some();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let job: Job = serde_json::from_str(&line).expect("a job line");
        let shape = job.shape.first().copied().unwrap_or(1);
        for (index, task) in job.tasks.iter().enumerate() {
            emit_line(&Event::Started { task: index });
            if slow {
                std::thread::sleep(Duration::from_millis(150));
            }
            if task.verify {
                emit_line(&Event::Verified { task: index });
                continue;
            }
            let median = script(&job.variants[task.variant].name, task.key, shape);
            if let Some(against) = task.against {
                // A duel: both sides at their scripted medians, round after round.
                let incumbent = script(&job.variants[against].name, task.key, shape);
                let rounds = job.timing.duel_rounds as usize;
                emit_line(&Event::Dueled {
                    task: index,
                    incumbent_us: vec![incumbent; rounds],
                    challenger_us: vec![median; rounds],
                });
                continue;
            }
            if task.check {
                emit_line(&Event::Checked {
                    task: index,
                    check: "scripted".into(),
                });
            }
            emit_line(&Event::Measured {
                task: index,
                measurement: Measurement {
                    key: task.key,
                    median_us: median,
                    p25_us: median * 0.999,
                    p75_us: median * 1.001,
                    min_us: median * 0.99,
                    repeats: 50,
                    error: if task.check { 1e-3 } else { -1.0 },
                    bytes: 0,
                    flops: 0,
                    device: job.device as u32,
                    checked_once: false,
                    buffers: 0,
                },
            });
        }
        emit_line(&Event::Spent {
            phases: Phases::default(),
            clocks: Vec::new(),
        });
        emit_line(&Event::Done);
    }
    std::process::exit(0)
}

// ---- Slurm on localhost ----------------------------------------------------------

/// munged, slurmctld and slurmd of this test, in a folder of their own; stopped
/// when dropped.
struct Cluster {
    conf: PathBuf,
    version: String,
    daemons: Vec<Child>,
}

impl Cluster {
    /// Writes a key and a configuration (one node, this host, 2 CPUs, three GPUs
    /// of type h200 as GRES) under `dir`, and starts the daemons in the foreground.
    fn start(dir: &Path) -> Result<Self, String> {
        for program in [
            "munged",
            "slurmctld",
            "slurmd",
            "sbatch",
            "scontrol",
            "squeue",
        ] {
            if !found(program) {
                return Err(format!(
                    "`{program}` is not installed (Debian: apt-get install slurm-wlm munge)"
                ));
            }
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = unsafe { libc_geteuid() };
        if euid != 0 {
            return Err("the daemons need root here (munged and slurmd as root)".into());
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map_err(|e| e.to_string())?
            .trim()
            .split('.')
            .next()
            .unwrap_or_default()
            .to_string();
        for sub in ["state", "spool", "log", "munge"] {
            std::fs::create_dir_all(dir.join(sub)).map_err(|e| e.to_string())?;
        }
        use std::os::unix::fs::PermissionsExt;
        let munge = dir.join("munge");
        std::fs::set_permissions(&munge, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| e.to_string())?;
        let key: Vec<u8> = (0..1024u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        std::fs::write(munge.join("munge.key"), key).map_err(|e| e.to_string())?;
        std::fs::set_permissions(
            munge.join("munge.key"),
            std::fs::Permissions::from_mode(0o400),
        )
        .map_err(|e| e.to_string())?;
        for gpu in 0..3 {
            std::fs::write(dir.join(format!("nvidia{gpu}")), "").map_err(|e| e.to_string())?;
        }
        let port = 20_000 + std::process::id() % 20_000;
        let d = dir.display();
        let conf = dir.join("slurm.conf");
        std::fs::write(
            &conf,
            format!(
                "ClusterName=autotune\nSlurmctldHost={host}\nAuthType=auth/munge\n\
                 AuthInfo=socket={d}/munge/munge.socket\nCredType=cred/munge\n\
                 SlurmUser=root\nSlurmdUser=root\nSlurmctldPort={port}\nSlurmdPort={}\n\
                 StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\n\
                 SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd.pid\n\
                 SlurmctldLogFile={d}/log/slurmctld.log\nSlurmdLogFile={d}/log/slurmd.log\n\
                 ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nMpiDefault=none\n\
                 SchedulerType=sched/backfill\nSelectType=select/cons_tres\n\
                 SelectTypeParameters=CR_Core\nReturnToService=2\nJobRequeue=1\n\
                 GresTypes=gpu\nNodeName={host} CPUs=2 RealMemory=1000 Gres=gpu:h200:3 \
                 State=UNKNOWN\nPartitionName=debug Nodes={host} Default=YES \
                 MaxTime=INFINITE State=UP OverSubscribe=FORCE:4\n",
                port + 1
            ),
        )
        .map_err(|e| e.to_string())?;
        std::fs::write(
            dir.join("gres.conf"),
            format!("AutoDetect=off\nNodeName={host} Name=gpu Type=h200 File={d}/nvidia[0-2]\n"),
        )
        .map_err(|e| e.to_string())?;
        let mut cluster = Self {
            conf: conf.clone(),
            version: String::new(),
            daemons: Vec::new(),
        };
        let spawn = |program: &str, args: &[&str]| {
            Command::new(program)
                .args(args)
                .env("SLURM_CONF", &conf)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot start {program}: {e}"))
        };
        let m = munge.display();
        cluster.daemons.push(spawn(
            "munged",
            &[
                "--foreground",
                "--force",
                &format!("--key-file={m}/munge.key"),
                &format!("--socket={m}/munge.socket"),
                &format!("--pid-file={m}/munged.pid"),
                &format!("--log-file={m}/munged.log"),
                &format!("--seed-file={m}/munged.seed"),
            ],
        )?);
        wait_until(Duration::from_secs(10), || {
            munge.join("munge.socket").exists()
        })
        .map_err(|()| "munged did not open its socket".to_string())?;
        cluster.daemons.push(spawn("slurmctld", &["-D", "-c"])?);
        cluster.daemons.push(spawn("slurmd", &["-D"])?);
        let ready = wait_until(Duration::from_secs(30), || {
            cluster.output(&["sinfo", "-h", "-o", "%T"]).trim() == "idle"
        });
        if ready.is_err() {
            let log = std::fs::read_to_string(dir.join("log/slurmctld.log")).unwrap_or_default();
            return Err(format!("the node did not come up idle:\n{log}"));
        }
        cluster.version = cluster.output(&["sinfo", "--version"]).trim().to_string();
        Ok(cluster)
    }

    /// A Slurm command's standard output (empty where it failed).
    fn output(&self, args: &[&str]) -> String {
        Command::new(args[0])
            .args(&args[1..])
            .env("SLURM_CONF", &self.conf)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    /// Runs a Slurm command that must succeed.
    fn run(&self, args: &[&str]) {
        let output = Command::new(args[0])
            .args(&args[1..])
            .env("SLURM_CONF", &self.conf)
            .output()
            .unwrap();
        assert_success(&output, &args.join(" "));
    }

    /// Runs a Slurm command whose failure does not matter.
    fn run_quietly(&self, args: &[&str]) {
        let _ = self.output(args);
    }

    /// The jobs queued or running: `id state reason` a line.
    fn queue(&self) -> Vec<String> {
        self.output(&["squeue", "-h", "-r", "-o", "%i %T %r"])
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The array's job id (the job of its tasks), while queued.
    fn array_job(&self) -> Option<String> {
        self.output(&["squeue", "-h", "-r", "-o", "%F %K"])
            .lines()
            .find(|l| l.split_whitespace().nth(1).is_some_and(|t| t != "N/A"))
            .and_then(|l| l.split_whitespace().next().map(str::to_string))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for daemon in self.daemons.iter_mut().rev() {
            let _ = daemon.kill();
            let _ = daemon.wait();
        }
    }
}

unsafe extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

fn found(program: &str) -> bool {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .any(|dir| dir.join(program).is_file())
}

fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> Result<(), ()> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(())
}

fn wait_for(limit: Duration, what: &str, done: impl FnMut() -> bool) {
    assert!(
        wait_until(limit, done).is_ok(),
        "{what}: not within {limit:?}"
    );
}

/// Lines in the journals under `work` (a killed sweep resumes from them).
fn journal_lines(work: &Path) -> usize {
    std::fs::read_dir(work)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "journal"))
        .map(|e| std::fs::read_to_string(e.path()).map_or(0, |t| t.lines().count()))
        .sum()
}

fn assert_success(output: &std::process::Output, what: &str) {
    assert!(
        output.status.success(),
        "{what}: {}\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
