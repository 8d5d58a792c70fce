//! The build-time side (feature `build`): called from `build.rs` as
//!
//! ```ignore
//! fn main() -> Result<(), autotune_runtime::build::BuildError> {
//!     autotune_runtime::build::tune(autotune_runtime::tunables!())
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
pub mod progress;
pub mod ptxas;
pub mod ranges;
pub mod settings;
pub mod strategy;
pub mod sweep;
pub mod table;
pub mod timing;
mod tunables;
pub mod tune;
pub mod worker;
mod worker_process;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use autotune_spec::names::gpu_slug;
use cudarc::driver::CudaContext;
use cudarc::driver::sys::CUdevice_attribute;

pub use error::BuildError;
pub use settings::{Devices, Settings};
pub use tunables::{Tunable, Tunables};

use crate::gpu::{self, GpuIdentity};
use nvcc::Nvcc;
use table::{GpuRecord, TuningTable};

/// The build step. See the module documentation.
pub fn tune(tunables: Tunables) -> Result<(), BuildError> {
    if let Ok(kernel) = std::env::var(worker::WORKER_ENV) {
        std::process::exit(worker_main(&tunables, &kernel));
    }
    let out_dir = PathBuf::from(
        std::env::var_os("OUT_DIR").ok_or(BuildError::MissingEnv { name: "OUT_DIR" })?,
    );
    let name = std::env::var("CARGO_PKG_NAME").map_err(|_| BuildError::MissingEnv {
        name: "CARGO_PKG_NAME",
    })?;
    let version = std::env::var("CARGO_PKG_VERSION").map_err(|_| BuildError::MissingEnv {
        name: "CARGO_PKG_VERSION",
    })?;
    let feature = std::env::var_os("CARGO_FEATURE_AUTOTUNE").is_some();
    let build = Build {
        root: tunables.root.clone(),
        tables_dir: tunables.tables_path(),
        out_dir: out_dir.clone(),
        cache_dir: out_dir.join("autotune").join("bin"),
        crate_version: format!("{name} {version}"),
        settings: Settings::from_env().map_err(|message| BuildError::Kernel {
            kernel: "*".into(),
            message,
        })?,
    };
    let mut seen = BTreeSet::new();
    for spec in tunables.specs() {
        if !seen.insert(spec.name) {
            return Err(BuildError::DuplicateKernel(spec.name.to_string()));
        }
    }
    build.watch(&tunables)?;
    let nvcc = Nvcc::find(&build.cache_dir);
    let mut report = Vec::new();
    // The driver is only touched when tuning was asked for.
    let gpu = feature.then(|| probe(&build.settings.devices));
    if let Some(gpu) = &gpu {
        match (&nvcc, gpu) {
            (Err(reason), _) => report.push(format!(
                "feature `autotune` is on, but {reason}: nothing tuned"
            )),
            (_, Err(reason)) => report.push(format!(
                "feature `autotune` is on, but {reason}: nothing tuned"
            )),
            (Ok(nvcc), Ok((gpu, devices))) => {
                report.push(build.tune_stale(&tunables, nvcc, gpu, devices)?)
            }
        }
    }
    let tables = table::read_all(&build.tables_dir);
    let mut archs = build.settings.archs.clone();
    // Bake machine code for the local GPU too.
    if let Some(Ok((gpu, _))) = &gpu {
        archs.push(gpu.arch());
    }
    let nvcc_ref = nvcc.as_ref().map_err(String::as_str);
    let mut baked = Vec::new();
    for spec in tunables.specs() {
        let fingerprint = fingerprint::current(
            spec,
            &build.root,
            nvcc_ref.ok().map(|n| n.version.as_str()),
            &build.crate_version,
        )?;
        let summary = bake::bake(&bake::BakeInput {
            spec,
            root: &build.root,
            tables: &tables,
            fingerprint: &fingerprint,
            nvcc: nvcc_ref,
            archs: &archs,
            out_dir: &build.out_dir,
            cache_dir: &build.cache_dir,
        })?;
        baked.push(summary.line);
    }
    if let Err(reason) = &nvcc {
        report.push(format!(
            "{reason}: no kernel binaries baked, load() will fail"
        ));
    }
    report.push(format!("baked {}", baked.join(" | ")));
    // One warning, one line: cargo shows each `cargo::warning` line separately.
    println!(
        "cargo::warning=autotune: {}",
        report.join("; ").replace('\n', " ")
    );
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

impl Build {
    fn watch(&self, tunables: &Tunables) -> Result<(), BuildError> {
        println!("cargo::rerun-if-changed={}", self.tables_dir.display());
        for spec in tunables.specs() {
            for file in fingerprint::watched_files(spec, &self.root)? {
                println!("cargo::rerun-if-changed={}", file.display());
            }
        }
        for var in settings::ENV.iter().chain(nvcc::ENV.iter()) {
            println!("cargo::rerun-if-env-changed={var}");
        }
        Ok(())
    }

    /// Tunes every kernel whose entry in this GPU's table is missing or stale,
    /// under the tables lock, writing the table after each kernel.
    fn tune_stale(
        &self,
        tunables: &Tunables,
        nvcc: &Nvcc,
        gpu: &GpuRecord,
        devices: &[usize],
    ) -> Result<String, BuildError> {
        let path = self
            .tables_dir
            .join(format!("{}.json", gpu_slug(&gpu.name)));
        let shown = bake::relative(&path, &self.root);
        let mut fingerprints = Vec::new();
        for spec in tunables.specs() {
            fingerprints.push((
                spec,
                fingerprint::current(spec, &self.root, Some(&nvcc.version), &self.crate_version)?,
            ));
        }
        let stale = |table: &Option<TuningTable>| -> Vec<(&'static crate::KernelSpec, table::Fingerprint, String)> {
            fingerprints
                .iter()
                .filter_map(|(spec, fp)| {
                    let reason = match table.as_ref() {
                        _ if self.settings.forced(spec.name) => "AUTOTUNE_FORCE".to_string(),
                        None => "no table for this GPU".to_string(),
                        Some(t) if t.gpu != *gpu => format!("the table was measured under driver {} ", t.gpu.driver),
                        Some(t) => match t.kernels.get(spec.name) {
                            None => "not in the table".to_string(),
                            Some(entry) => {
                                let d = fingerprint::differences(&entry.fingerprint, fp);
                                if d.is_empty() {
                                    return None;
                                }
                                d.join("; ")
                            }
                        },
                    };
                    Some((*spec, fp.clone(), reason))
                })
                .collect()
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
                let keep = path.with_extension("json.unreadable");
                std::fs::rename(&path, &keep)
                    .map_err(BuildError::io("cannot move aside", &path))?;
                println!(
                    "cargo::warning=autotune: {shown} was unreadable ({}); moved to {} and tuning afresh",
                    unreadable.reason,
                    keep.display()
                );
                fresh_table(gpu)
            }
            Err(_) => fresh_table(gpu),
        };
        if table.gpu != *gpu {
            table = fresh_table(gpu);
        }
        // Fallbacks first: a kernel's sweep times its fallback through the fallback's plan.
        let mut todo = stale(&Some(table.clone()));
        let is_a_fallback = |name: &str| {
            tunables
                .specs()
                .any(|other| other.fallback.is_some_and(|f| f.name == name))
        };
        todo.sort_by_key(|(spec, _, _)| !is_a_fallback(spec.name));
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
        for (spec, fp, reason) in &todo {
            let log_path = self.tables_dir.join("logs").join(format!(
                "{}-{}.log",
                gpu_slug(&gpu.name),
                spec.name
            ));
            let mut log: Vec<u8> = Vec::new();
            let _ = writeln!(
                log,
                "autotune-runtime {}: tuning `{}` on {}{} (driver {}, {}), {}, nvcc {}, seed {}: {reason}",
                env!("CARGO_PKG_VERSION"),
                spec.name,
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
                let fresh = fingerprints.iter().find(|(s, _)| s.name == f.name)?;
                fingerprint::differences(&entry.fingerprint, &fresh.1)
                    .is_empty()
                    .then_some(entry)
            });
            let result = tuner.tune(spec, fp, fallback_table, &mut log);
            table::write_text_atomic(&log_path, &String::from_utf8_lossy(&log))?;
            let entry = result?;
            done.push(format!("{} in {:.1} s", spec.name, entry.seconds.total));
            table.kernels.insert(spec.name.to_string(), entry);
            table::write_atomic(&path, &table)?;
        }
        Ok(format!(
            "tuned {} on {} -> {shown}",
            done.join(", "),
            gpu.name
        ))
    }
}

fn fresh_table(gpu: &GpuRecord) -> TuningTable {
    TuningTable {
        format: table::FORMAT,
        gpu: gpu.clone(),
        kernels: Default::default(),
    }
}

/// The GPU model to tune on and the devices of it to use, or why there is none.
/// Several devices must be one model: a table is measured on one.
fn probe(devices: &Devices) -> Result<(GpuRecord, Vec<usize>), String> {
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
                return Err(format!(
                    "devices {reference} ({}, {} SMs) and {device} ({}, {} SMs) differ; a table is \
                     per GPU model, so tune them one at a time (AUTOTUNE_DEVICES)",
                    model.name, model.sm_count, record.name, record.sm_count
                ));
            }
            Some(_) => {}
        }
    }
    let (_, record) = first.ok_or_else(|| "AUTOTUNE_DEVICES names no device".to_string())?;
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
fn probe_one(device: usize) -> Result<GpuRecord, String> {
    let ctx = gpu::open(device).map_err(|e| e.to_string())?;
    let identity =
        GpuIdentity::of(&ctx).map_err(|e| format!("cannot query device {device}: {e}"))?;
    let l2 = ctx
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
        .map_err(|e| format!("cannot query device {device}: {e}"))?;
    let mut version: std::ffi::c_int = 0;
    // SAFETY: the driver is loaded (gpu::open succeeded); writes one int.
    let driver = match unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) }.result() {
        Ok(()) => format!("{}.{}", version / 1000, (version % 1000) / 10),
        Err(e) => return Err(format!("cannot read the driver version: {e}")),
    };
    Ok(GpuRecord {
        name: identity.name,
        compute_capability: [identity.compute_capability.0, identity.compute_capability.1],
        sm_count: identity.sm_count,
        driver,
        l2_bytes: u64::from(l2.max(0).unsigned_abs()),
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
