//! The build-script library of `#[autotune]`: called from `build.rs` as
//!
//! ```ignore
//! fn main() -> Result<(), autotune_build::BuildError> {
//!     autotune_build::Builder::new().tune(autotune_build::tunables!())
//! }
//! ```
//!
//! With the crate's `autotune` feature on, nvcc and a GPU present, every kernel
//! whose table entry is missing or stale is compiled at every point of its space,
//! checked and timed on the GPU (in a worker process), and its table rewritten.
//! Then, always, each kernel's plans are baked from the tables that match, or the
//! declared defaults, with one cargo warning saying which. Lack of a GPU or nvcc
//! never fails the build.

mod bake;
mod board;
mod codegen;
mod error;
pub mod fingerprint;
pub mod nvcc;
pub mod ptxas;
mod record;
pub mod settings;
mod skip;
pub mod sweep;
pub mod timing;
mod tunables;
pub mod tune;
pub mod variants;
mod warning;
pub mod worker;
mod worker_process;
pub mod wrapper_files;

pub use autotune_runtime::tunables;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use autotune_runtime::KernelSpec;
use autotune_runtime::gpu::{self, GpuIdentity, NoGpu};
use autotune_spec::names::gpu_slug;
use autotune_table::artifacts;
use autotune_table::strategy::Strategy;
use autotune_table::summary::{
    BuildSummary, CHECK_ENV, SUMMARY_FORMAT, SUMMARY_PATH, TABLES_DIR_ENV,
};
use autotune_table::table::{self, GpuRecord, TuningTable};
use cudarc::driver::CudaContext;
use cudarc::driver::sys::CUdevice_attribute;

pub use error::BuildError;
pub use settings::{Devices, Settings, SettingsError};
pub use skip::skip;
pub use tunables::{Tunable, Tunables};

use fingerprint::KernelInputs;
use nvcc::{Nvcc, NvccError};

/// The build step, configured in `build.rs`; every option is overridden by its
/// `AUTOTUNE_*` environment variable where that is set (see [`Settings`]).
///
/// ```ignore
/// autotune_build::Builder::new()
///     .tables_dir("kernels/tuning")
///     .min_margin(0.02)
///     .tune(autotune_build::tunables!())
/// ```
#[derive(Debug, Clone, Default)]
pub struct Builder {
    tables_dir: Option<PathBuf>,
    settings: Settings,
}

impl Builder {
    /// Tables in `<crate>/tuning`, the default settings.
    pub fn new() -> Self {
        Self::default()
    }

    /// Where the tuning tables live, relative to the crate root (default `tuning`).
    pub fn tables_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.tables_dir = Some(dir.into());
        self
    }

    /// The devices to tune on (`AUTOTUNE_DEVICES`).
    pub fn devices(mut self, devices: Devices) -> Self {
        self.settings.devices = devices;
        self
    }

    /// The architectures to compile for, the first one the sweep's (`AUTOTUNE_ARCH`).
    pub fn archs<S: Into<String>>(mut self, archs: impl IntoIterator<Item = S>) -> Self {
        self.settings.archs = archs.into_iter().map(Into::into).collect();
        self
    }

    /// Keep variants whose registers spill (`AUTOTUNE_ALLOW_SPILLS`).
    pub fn allow_spills(mut self, allow: bool) -> Self {
        self.settings.allow_spills = allow;
        self
    }

    /// The least relative win that replaces the incumbent (`AUTOTUNE_MIN_MARGIN`).
    pub fn min_margin(mut self, margin: f64) -> Self {
        self.settings.min_margin = margin;
        self
    }

    /// Rounds of boundary refinement (`AUTOTUNE_REFINE`).
    pub fn refine_rounds(mut self, rounds: u32) -> Self {
        self.settings.refine_rounds = rounds;
        self
    }

    /// How long a variant may go without a result (`AUTOTUNE_TASK_TIMEOUT_S`).
    pub fn task_timeout(mut self, timeout: Duration) -> Self {
        self.settings.task_timeout = timeout;
        self
    }

    /// The seed of the random inputs (`AUTOTUNE_SEED`).
    pub fn seed(mut self, seed: u64) -> Self {
        self.settings.seed = seed;
        self
    }

    /// Draws of random inputs each variant is checked on at each size
    /// (`AUTOTUNE_CHECK_SEEDS`, default 1).
    pub fn check_seeds(mut self, draws: u32) -> Self {
        self.settings.check_seeds = draws;
        self
    }

    /// The time budget per variant and key, in ms (`AUTOTUNE_TARGET_MS`).
    pub fn target_ms(mut self, target_ms: f64) -> Self {
        self.settings.timing.target_ms = target_ms;
        self
    }

    /// Time each launch as a replay of the CUDA graph it was captured into, and put
    /// out a variant whose launch cannot be captured (`AUTOTUNE_GRAPH=1`, default off;
    /// `cargo autotune judge` turns it on).
    pub fn graph(mut self, graph: bool) -> Self {
        self.settings.timing.graph = graph;
        self
    }

    /// Which points the sweep times (`AUTOTUNE_STRATEGY`, `AUTOTUNE_BUDGET`).
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.settings.strategy = strategy;
        self
    }

    /// Runs the build step over `tunables`. See the crate documentation.
    pub fn tune(self, tunables: Tunables) -> Result<(), BuildError> {
        let stray_worker = match worker::invited() {
            Ok(Some(kernel)) => std::process::exit(worker_main(&tunables, &kernel)),
            Ok(None) => None,
            Err(why) => Some(why),
        };
        run(self, tunables, stray_worker)
    }
}

/// `Builder::new().tune(tunables)`.
pub fn tune(tunables: Tunables) -> Result<(), BuildError> {
    Builder::new().tune(tunables)
}

fn env_var(name: &'static str) -> Result<String, BuildError> {
    std::env::var(name).map_err(|_| BuildError::MissingEnv { name })
}

fn run(
    builder: Builder,
    tunables: Tunables,
    stray_worker: Option<String>,
) -> Result<(), BuildError> {
    let out_dir = PathBuf::from(env_var("OUT_DIR")?);
    let package = format!(
        "{} {}",
        env_var("CARGO_PKG_NAME")?,
        env_var("CARGO_PKG_VERSION")?
    );
    // docs.rs builds the documentation with neither nvcc nor a GPU: bake the plans
    // (the crate must compile), probe nothing, say nothing.
    let docs_rs = std::env::var_os("DOCS_RS").is_some();
    let feature = std::env::var_os("CARGO_FEATURE_AUTOTUNE").is_some() && !docs_rs;
    let check = std::env::var_os(CHECK_ENV).is_some_and(|v| v == "1");
    let mut report: Vec<String> = stray_worker.into_iter().collect();
    // A bad tuning knob fails a tuning build; any other build warns and goes on.
    let settings = match builder.settings.clone().with_env() {
        Ok(settings) => settings,
        Err(error) if feature => return Err(error.into()),
        Err(error) => {
            report.push(format!("{error} (ignored: not tuning)"));
            builder.settings.clone()
        }
    };
    let root = tunables.root.clone();
    // `AUTOTUNE_TABLES_DIR` (what `cargo autotune judge` tunes candidates into, so
    // that the committed tables stay as they are) overrides build.rs's folder.
    let from_env = std::env::var_os(TABLES_DIR_ENV).filter(|dir| !dir.is_empty());
    let usable = from_env
        .as_ref()
        .filter(|dir| dir.to_str().is_some_and(|text| !text.trim().is_empty()));
    let tables_dir = root.join(
        usable
            .map(PathBuf::from)
            .or(builder.tables_dir)
            .unwrap_or_else(|| PathBuf::from("tuning")),
    );
    // A tuning build makes a missing folder; any other build says it is missing.
    if let Some(value) = &from_env
        && let Some(problem) = tables_dir_problem(value, &tables_dir)
        && !(feature && usable.is_some() && !tables_dir.exists())
    {
        report.push(problem);
    }
    let build = Build {
        root,
        tables_dir,
        out_dir: out_dir.clone(),
        cache_dir: out_dir.join("autotune").join("bin"),
        crate_version: package.clone(),
        settings,
    };
    let mut seen = BTreeSet::new();
    for spec in tunables.specs() {
        if !seen.insert(spec.name) {
            return Err(BuildError::DuplicateKernel(spec.name.to_string()));
        }
    }
    let unknown: Vec<&str> = build
        .settings
        .force
        .iter()
        .map(String::as_str)
        .filter(|name| *name != "all" && tunables.find(name).is_none())
        .collect();
    if feature && !unknown.is_empty() {
        let known: Vec<&str> = tunables.specs().map(|spec| spec.name).collect();
        report.push(format!(
            "AUTOTUNE_FORCE names no kernel of this crate: {} (its kernels: {})",
            unknown.join(", "),
            known.join(", ")
        ));
    }
    let nvcc = if docs_rs {
        Err(NvccError::NotAsked("a docs.rs build"))
    } else {
        Nvcc::find(&build.cache_dir)
    };
    // Every kernel's inputs, gathered once (nvcc asked once per kernel).
    let mut inputs = Vec::new();
    for spec in tunables.specs() {
        inputs.push((
            spec,
            KernelInputs::gather(spec, &build.root, nvcc.as_ref().ok(), &build.crate_version)?,
        ));
    }
    build.watch(&inputs);
    // The driver is only touched when tuning or checking was asked for.
    let gpu = (feature || check).then(|| probe(&build.settings.devices));
    if feature {
        match (&nvcc, &gpu) {
            (Ok(nvcc), Some(Ok((gpu, devices)))) => {
                report.push(build.tune_stale(&tunables, &inputs, nvcc, gpu, devices)?)
            }
            (_, Some(Err(why))) => report.push(format!("nothing tuned: {why}")),
            // Without nvcc (and with a GPU): its own line below says so, once.
            _ => {}
        }
    }
    let tuning = feature.then(|| match (&nvcc, &gpu) {
        (Err(reason), _) => format!("nothing tuned: {reason}"),
        _ => report.last().cloned().unwrap_or_default(),
    });
    // Said where tuning can run (nvcc here); without nvcc, that comes first.
    if feature && nvcc.is_ok() && build_script_unoptimised() {
        report.push(
            "build script unoptimised: set [profile.release.build-override] opt-level = 3"
                .to_string(),
        );
    }
    if let Err(reason) = &nvcc {
        let gpu_here = matches!(&gpu, Some(Ok(_)));
        let outcome = if feature && gpu_here {
            "nothing tuned, no binaries"
        } else {
            "no binaries"
        };
        report.push(format!("{reason}: {outcome}, load() will fail"));
    }
    let tables = table::one_per_model(table::read_all(&build.tables_dir));
    report.extend(unknown_entries(&tables, &tunables, &build.root));
    // AUTOTUNE_ARCH, else every default architecture this nvcc has; the local GPU's
    // too when tuning, and (in bake) each baked table's.
    let mut archs = if build.settings.archs.is_empty() {
        nvcc.as_ref().map(Nvcc::default_archs).unwrap_or_default()
    } else {
        build.settings.archs.clone()
    };
    if let Some(Ok((gpu, _))) = &gpu {
        archs.push(gpu.arch_specific());
    }
    let (baked, kernels) = bake_all(&build, &inputs, &tables, nvcc.as_ref(), &archs)?;
    report.push(warning::baked(&kernels, &baked));
    // Table text may reach the notes: printable, as the warning is.
    let notes: Vec<String> = report
        .iter()
        .chain(&baked)
        .map(|note| warning::printable(note))
        .collect();
    let summary = BuildSummary {
        format: SUMMARY_FORMAT,
        package,
        nvcc: nvcc.as_ref().ok().map(|n| n.version.clone()),
        nvcc_missing: nvcc.as_ref().err().map(ToString::to_string),
        gpu: gpu
            .as_ref()
            .and_then(|g| g.as_ref().ok())
            .map(|(g, _)| g.clone()),
        gpu_missing: match &gpu {
            None => Some(format!(
                "not looked at (neither feature `autotune` nor {CHECK_ENV}=1)"
            )),
            Some(Err(reason)) => Some(reason.to_string()),
            Some(Ok(_)) => None,
        },
        tuning,
        kernels,
        notes,
    };
    write_summary(&build.out_dir, &summary)?;
    if docs_rs {
        return Ok(());
    }
    // One warning, one short line: cargo shows each `cargo::warning` line apart.
    println!("cargo::warning=autotune: {}", warning::line(&report));
    Ok(())
}

/// Whether this library, and so the build script that links it (cargo compiles
/// build scripts and their dependencies with one profile, `build-override`), was
/// compiled without optimisation: its own build script recorded `OPT_LEVEL`.
fn build_script_unoptimised() -> bool {
    env!("AUTOTUNE_BUILD_OPT_LEVEL") == "0"
}

/// A line for each table that holds entries no kernel of this crate has (renamed or
/// removed wrappers, or shapes no longer declared).
fn unknown_entries(
    tables: &[(PathBuf, Result<TuningTable, table::Unreadable>)],
    tunables: &Tunables,
    root: &Path,
) -> Vec<String> {
    let known: BTreeSet<String> = tunables
        .specs()
        .flat_map(|spec| spec.tuned_shapes().into_iter().map(|(entry, _)| entry))
        .collect();
    let mut lines = Vec::new();
    for (path, table) in tables {
        let Ok(table) = table else { continue };
        let unknown: Vec<&str> = table
            .kernels
            .keys()
            .filter(|name| !known.contains(*name))
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            lines.push(format!(
                "{} holds kernels this crate does not have: {}",
                bake::relative(path, root),
                unknown.join(", ")
            ));
        }
    }
    lines
}

/// Bakes every kernel: the warning's line for each, and the summary's record.
fn bake_all(
    build: &Build,
    inputs: &[(&'static KernelSpec, KernelInputs)],
    tables: &[(PathBuf, Result<TuningTable, table::Unreadable>)],
    nvcc: Result<&Nvcc, &NvccError>,
    archs: &[String],
) -> Result<(Vec<String>, Vec<autotune_table::summary::KernelSummary>), BuildError> {
    let mut baked = Vec::new();
    let mut kernels = Vec::new();
    for (spec, inputs) in inputs {
        let result = bake::bake(&bake::BakeInput {
            spec,
            root: &build.root,
            tables,
            inputs,
            nvcc,
            archs,
            out_dir: &build.out_dir,
            cache_dir: &build.cache_dir,
        })?;
        baked.push(result.line);
        kernels.push(result.summary);
    }
    Ok((baked, kernels))
}

fn write_summary(out_dir: &Path, summary: &BuildSummary) -> Result<(), BuildError> {
    let text =
        serde_json::to_string_pretty(summary).map_err(|e| BuildError::Summary(e.to_string()))?;
    let path = out_dir.join(SUMMARY_PATH);
    if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
        table::write_text_atomic(&path, &text)?;
    }
    Ok(())
}

#[derive(Debug)]
struct Build {
    root: PathBuf,
    tables_dir: PathBuf,
    out_dir: PathBuf,
    cache_dir: PathBuf,
    crate_version: String,
    settings: Settings,
}

/// `cargo::rerun-if-changed` for `path`, unless its name holds a character that
/// could end the instruction and start another (a newline) or hide what it is:
/// such a path is not watched.
fn rerun_if_changed(path: &Path) {
    match path.to_str() {
        Some(text) if !autotune_table::shown::has_hidden(text) => {
            println!("cargo::rerun-if-changed={text}");
        }
        _ => {}
    }
}

/// Whether `path` lies inside the folder `root` (both as they resolve).
fn inside(path: &Path, root: &Path) -> bool {
    match (path.canonicalize(), root.canonicalize()) {
        (Ok(path), Ok(root)) => path.starts_with(root),
        _ => false,
    }
}

/// What is wrong with the tables folder `AUTOTUNE_TABLES_DIR` names, if anything.
fn tables_dir_problem(value: &std::ffi::OsStr, dir: &Path) -> Option<String> {
    let shown = autotune_table::shown::line(&value.to_string_lossy());
    if value.to_str().is_none_or(|text| text.trim().is_empty()) {
        return Some(format!(
            "{TABLES_DIR_ENV}={shown:?} names no folder: ignored"
        ));
    }
    if dir.is_file() {
        return Some(format!(
            "{TABLES_DIR_ENV}={shown} is a file, not a folder: no table read"
        ));
    }
    if !dir.exists() {
        return Some(format!(
            "{TABLES_DIR_ENV}={shown} does not exist: no table read"
        ));
    }
    None
}

/// Whether `a` and `b` name one folder (`crate/./tuning/..` is `crate`).
fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

impl Build {
    fn watch(&self, inputs: &[(&'static KernelSpec, KernelInputs)]) {
        // Cargo reruns the script for a missing path every time, and scans a watched
        // folder whole: a missing tables folder is watched through its parent,
        // unless that is the crate's root (its target/ changes with every build).
        // There, the folder's creation is not seen until another input changes; a
        // tuning build creates it and bakes what it wrote in the same run.
        let tables = if self.tables_dir.exists() {
            Some(self.tables_dir.clone())
        } else {
            self.tables_dir
                .parent()
                .filter(|parent| parent.exists() && !same_dir(parent, &self.root))
                .map(Path::to_path_buf)
        };
        // A folder is scanned whole at every later build: only one inside the crate
        // (`AUTOTUNE_TABLES_DIR=/` watched the whole file system).
        if let Some(tables) = tables.filter(|dir| inside(dir, &self.root)) {
            rerun_if_changed(&tables);
        }
        let mut files: Vec<PathBuf> = inputs.iter().flat_map(|(_, i)| i.watched()).collect();
        files.sort();
        files.dedup();
        for file in files {
            rerun_if_changed(&file);
        }
        for var in settings::ENV.iter().chain(nvcc::ENV.iter()).chain([
            &CHECK_ENV,
            &TABLES_DIR_ENV,
            &worker::WORKER_ENV,
            &"PATH",
            &"DOCS_RS",
        ]) {
            println!("cargo::rerun-if-env-changed={var}");
        }
    }

    /// Tunes every kernel whose entry in this GPU's table is missing or stale,
    /// under the tables lock, writing the table after each kernel.
    fn tune_stale(
        &self,
        tunables: &Tunables,
        inputs: &[(&'static KernelSpec, KernelInputs)],
        nvcc: &Nvcc,
        gpu: &GpuRecord,
        devices: &[usize],
    ) -> Result<String, BuildError> {
        let path = self
            .tables_dir
            .join(format!("{}.json", gpu_slug(&gpu.name)));
        let shown = bake::relative(&path, &self.root);
        let mut fingerprints = Vec::new();
        for (spec, inputs) in inputs {
            let fingerprint = inputs
                .fingerprint(None)
                .map_err(|message| BuildError::Kernel {
                    kernel: spec.name.to_string(),
                    message,
                })?;
            fingerprints.push((*spec, inputs, fingerprint));
        }
        // One entry per kernel, or per declared shape of a kernel with shapes.
        let stale = |table: &Option<TuningTable>| -> Vec<Stale> {
            let mut out = Vec::new();
            for (spec, _, fp) in &fingerprints {
                for (entry, shape) in spec.tuned_shapes() {
                    let reason = match table.as_ref() {
                        _ if self.settings.forced(spec.name) => "AUTOTUNE_FORCE".to_string(),
                        None => "no table for this GPU".to_string(),
                        Some(t) if !t.gpu.same_conditions(gpu) => {
                            format!("the table was measured under driver {} ", t.gpu.driver)
                        }
                        Some(t) => match t.kernels.get(&entry) {
                            None => "not in the table".to_string(),
                            Some(recorded) => {
                                let d = recorded.fingerprint.differences(fp);
                                if d.is_empty() {
                                    continue;
                                }
                                d.join("; ")
                            }
                        },
                    };
                    out.push(Stale {
                        spec,
                        entry,
                        shape: shape.values().to_vec(),
                        fingerprint: fp.clone(),
                        reason,
                    });
                }
            }
            out
        };
        let readable = |path: &Path| table::read(path).ok();
        if stale(&readable(&path)).is_empty() {
            return Ok(format!("{shown} is up to date for {}", gpu.name));
        }
        let _lock = table::TablesLock::acquire(&self.tables_dir)?;
        // Another build may have tuned while this one waited for the lock.
        let mut table = match table::read(&path) {
            Ok(table) => table,
            Err(unreadable) if path.exists() => {
                let keep = table::unused_path(&path.with_extension("json.unreadable"));
                std::fs::rename(&path, &keep)
                    .map_err(BuildError::io("cannot move aside", &path))?;
                println!(
                    "cargo::warning=autotune: {}",
                    warning::printable(&format!(
                        "{shown} was unreadable ({}); moved to {} and tuning afresh",
                        unreadable.reason,
                        keep.display()
                    ))
                );
                fresh_table(gpu)
            }
            Err(_) => fresh_table(gpu),
        };
        let (rebased, aside) = rebase(table, gpu);
        table = rebased;
        if let Some(old) = aside {
            // Measured under another driver, L2 or memory: kept whole beside it,
            // entries of kernels this crate lacks included, never dropped.
            let keep = table::unused_path(&path.with_extension(format!(
                "json.driver-{}",
                autotune_spec::names::file_fragment(&old.gpu.driver)
            )));
            table::write_atomic(&keep, &old)?;
            println!(
                "cargo::warning=autotune: {}",
                warning::printable(&format!(
                    "{shown} was measured under driver {}; kept as {} and tuned afresh",
                    old.gpu.driver,
                    bake::relative(&keep, &self.root)
                ))
            );
        }
        // Fallbacks first: a kernel's sweep times its fallback through the fallback's plan.
        let mut todo = stale(&Some(table.clone()));
        let is_a_fallback = |name: &str| {
            tunables
                .specs()
                .any(|other| other.fallback.is_some_and(|f| f.name == name))
        };
        todo.sort_by_key(|stale| !is_a_fallback(stale.spec.name));
        let exe = std::env::current_exe().map_err(|e| {
            BuildError::Worker(format!("cannot find this build script's path: {e}"))
        })?;
        let tuner = tune::Tuner {
            root: &self.root,
            work_dir: self.out_dir.join("autotune").join("sweep"),
            cache_dir: self.cache_dir.clone(),
            nvcc,
            gpu,
            devices: devices.to_vec(),
            settings: &self.settings,
            exe,
        };
        let mut done = Vec::new();
        let mut failed = None;
        for Stale {
            spec,
            entry,
            shape,
            fingerprint: fp,
            reason,
        } in &todo
        {
            let log_path = self.tables_dir.join("logs").join(format!(
                "{}-{}.log",
                gpu_slug(&gpu.name),
                autotune_spec::names::file_fragment(entry)
            ));
            let mut log: Vec<u8> = Vec::new();
            let _ = writeln!(
                log,
                "autotune-build {}: tuning `{entry}` on {}{} (driver {}, {}), {}, nvcc {}, seed {}: {reason}",
                env!("CARGO_PKG_VERSION"),
                gpu.name,
                on_devices(devices),
                gpu.driver,
                gpu.arch(),
                tune::today(),
                nvcc.version,
                self.settings.seed
            );
            let fallback_table = spec.fallback.and_then(|f| {
                let entry = table.kernels.get(f.name)?;
                let fresh = fingerprints.iter().find(|(s, _, _)| s.name == f.name)?;
                entry
                    .fingerprint
                    .differences(&fresh.2)
                    .is_empty()
                    .then_some(entry)
            });
            let kernel_inputs = fingerprints
                .iter()
                .find(|(s, _, _)| s.name == spec.name)
                .map(|(_, inputs, _)| *inputs)
                .ok_or_else(|| BuildError::Worker(format!("no inputs for `{}`", spec.name)))?;
            let result = tuner.tune(
                spec,
                entry,
                shape,
                kernel_inputs,
                fp,
                fallback_table,
                table.kernels.get(entry.as_str()),
                &mut log,
            );
            table::write_text_atomic(&log_path, &String::from_utf8_lossy(&log))?;
            let tuned = match result {
                Ok(tuned) => tuned,
                Err(error) => {
                    failed = Some(error);
                    break;
                }
            };
            done.push(format!("{entry} in {:.1} s", tuned.seconds.total));
            table.kernels.insert(entry.clone(), tuned);
            // A kernel that gained shapes: its entry from before them is superseded.
            if !spec.shapes.is_empty() {
                table.kernels.remove(spec.name);
            }
        }
        // Once, with every entry: the ones kept and the ones tuned before any failure.
        if !done.is_empty() {
            table::write_atomic(&path, &table)?;
            // The committed report and plots follow the table they show.
            artifacts::write_beside(&self.tables_dir, &shown, &table)?;
        }
        if let Some(error) = failed {
            return Err(error);
        }
        Ok(format!(
            "tuned {} on {} -> {shown}",
            done.join(", "),
            gpu.name
        ))
    }
}

/// A table entry to tune, and why.
struct Stale<'a> {
    spec: &'a &'static KernelSpec,
    entry: String,
    shape: Vec<u64>,
    fingerprint: table::Fingerprint,
    reason: String,
}

/// The table to tune into on `gpu`: `table` itself with the facts it predates
/// filled in from this GPU, or, when it was measured under other conditions
/// (driver, L2, memory), a fresh one and the old one whole, to keep beside it.
fn rebase(table: TuningTable, gpu: &GpuRecord) -> (TuningTable, Option<TuningTable>) {
    if table.gpu.same_conditions(gpu) {
        let mut table = table;
        table.gpu = gpu.clone();
        (table, None)
    } else {
        let aside = (!table.kernels.is_empty()).then_some(table);
        (fresh_table(gpu), aside)
    }
}

fn fresh_table(gpu: &GpuRecord) -> TuningTable {
    TuningTable {
        format: table::FORMAT,
        gpu: gpu.clone(),
        kernels: Default::default(),
    }
}

/// Why no GPU can be tuned on.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error(transparent)]
    NoGpu(#[from] NoGpu),
    #[error("cannot query device {device}: {source}")]
    Query {
        device: usize,
        source: cudarc::driver::DriverError,
    },
    #[error(
        "devices {reference} ({reference_name}, {reference_sms} SMs) and {device} ({name}, {sms} SMs) \
         differ; a table is per GPU model, so tune them one at a time (AUTOTUNE_DEVICES)"
    )]
    Mixed {
        reference: usize,
        reference_name: String,
        reference_sms: u32,
        device: usize,
        name: String,
        sms: u32,
    },
    #[error("AUTOTUNE_DEVICES names no device")]
    NoDevices,
}

/// The GPU model to tune on and the devices of it to use, or why there is none.
/// Several devices must be one model: a table is measured on one.
fn probe(devices: &Devices) -> Result<(GpuRecord, Vec<usize>), ProbeError> {
    let count = if gpu::driver_present() {
        CudaContext::device_count().map_or(0, |c| c.max(0).unsigned_abs() as usize)
    } else {
        0
    };
    let devices = devices.resolve(count);
    let mut first: Option<(usize, GpuRecord)> = None;
    for &device in &devices {
        let record = probe_one(device)?;
        match &first {
            None => first = Some((device, record)),
            Some((reference, model)) if *model != record => {
                return Err(ProbeError::Mixed {
                    reference: *reference,
                    reference_name: model.name.clone(),
                    reference_sms: model.sm_count,
                    device,
                    name: record.name,
                    sms: record.sm_count,
                });
            }
            Some(_) => {}
        }
    }
    let (_, record) = first.ok_or(ProbeError::NoDevices)?;
    Ok((record, devices))
}

/// ` x2 (devices 0, 1)` when tuning on several devices.
fn on_devices(devices: &[usize]) -> String {
    if devices.len() < 2 {
        return String::new();
    }
    let list: Vec<String> = devices.iter().map(usize::to_string).collect();
    format!(" x{} (devices {})", devices.len(), list.join(", "))
}

/// One device's model, or why it cannot be used.
fn probe_one(device: usize) -> Result<GpuRecord, ProbeError> {
    let ctx = gpu::open(device)?;
    let query = |source| ProbeError::Query { device, source };
    let identity = GpuIdentity::of(&ctx).map_err(query)?;
    let l2 = ctx
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
        .map_err(query)?;
    let mut version: std::ffi::c_int = 0;
    // SAFETY: the driver is loaded (gpu::open succeeded); writes one int.
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) }
        .result()
        .map_err(query)?;
    let driver = format!("{}.{}", version / 1000, (version % 1000) / 10);
    let shared = ctx
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        .map_err(query)?;
    let memory = ctx.total_mem().map_err(query)?;
    Ok(GpuRecord {
        name: identity.name,
        compute_capability: [identity.compute_capability.0, identity.compute_capability.1],
        sm_count: identity.sm_count,
        driver,
        l2_bytes: u64::from(l2.max(0).unsigned_abs()),
        memory_bytes: memory as u64,
        shared_per_block: shared.max(0).unsigned_abs(),
    })
}

/// The worker side of the sweep: serve jobs from stdin, report on stdout.
fn worker_main(tunables: &Tunables, kernel: &str) -> i32 {
    let Some(kernel) = tunables.find(kernel) else {
        eprintln!("autotune worker: no kernel `{kernel}` in this build script");
        return 2;
    };
    let mut input = std::io::stdin().lock();
    match kernel.serve(&mut input, &mut |event| worker::emit_line(&event)) {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("autotune worker: {error}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed() -> TuningTable {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels/tuning/nvidia-h200.json");
        table::read(&path).unwrap_or_else(|e| panic!("{}", e.reason))
    }

    /// A tuning build on a GPU whose driver differs from the table's replaced the
    /// table, dropping the entries of kernels the crate does not have.
    #[test]
    fn a_table_of_other_conditions_is_kept_whole_not_dropped() {
        let table = committed();
        let mut gpu = table.gpu.clone();
        gpu.driver = "13.1".into();
        let (fresh, aside) = rebase(table.clone(), &gpu);
        assert!(fresh.kernels.is_empty());
        assert_eq!(fresh.gpu, gpu);
        let aside = aside.unwrap_or_else(|| panic!("the old table is kept"));
        assert_eq!(aside.kernels.len(), table.kernels.len());

        let same = table.gpu.clone();
        let (kept, aside) = rebase(table.clone(), &same);
        assert!(aside.is_none());
        assert_eq!(kept.kernels.len(), table.kernels.len());
    }
}
