//! What the benchmarks share: timing like the sweep, and running a Python anchor.
#![allow(dead_code)] // each benchmark uses part of this

use std::process::Command;
use std::sync::Arc;

use autotune_build::testing::Nvml;
use autotune_build::timing::{self, Flush, L2Flush, TimingConfig};
use autotune_runtime::cudarc::driver::{CudaContext, CudaStream, LaunchConfig};
use autotune_runtime::cudarc::nvrtc::Ptx;
use autotune_table::clocks::ClockRecord;
use serde_json::{Value, json};

/// Generous: many repeats, so that ratios between rows are stable.
pub const TIMING: TimingConfig = TimingConfig {
    warmup: 5,
    min_repeats: 50,
    max_repeats: 400,
    target_ms: 100.0,
    hopeless: f64::INFINITY,
    graph: false,
    flush: Flush::Memset,
    duel_rounds: 0,
};

/// Median milliseconds of `launch`: CUDA events around each launch, L2 flushed
/// before each, as the sweep times variants.
pub fn time_ms(
    stream: &Arc<CudaStream>,
    flush: &mut L2Flush,
    launch: &mut dyn FnMut() -> Result<(), String>,
) -> Result<f64, String> {
    Ok(timed(stream, flush, launch)?.median_ms)
}

/// A time as a file of record keeps it: the median, the quartiles and how many
/// launches were timed.
#[derive(Debug, Clone, Copy)]
pub struct Timed {
    pub median_ms: f64,
    pub p25_ms: f64,
    pub p75_ms: f64,
    pub repeats: usize,
}

impl Timed {
    /// The median, quartiles and count of `samples` (microseconds) in milliseconds.
    pub fn of(samples: &timing::Samples) -> Self {
        Self {
            median_ms: samples.median() / 1e3,
            p25_ms: samples.quantile(0.25) / 1e3,
            p75_ms: samples.quantile(0.75) / 1e3,
            repeats: samples.times_us.len(),
        }
    }

    /// One launch's share of these times, where each timed run made `launches`.
    pub fn per_launch(self, launches: usize) -> Self {
        let share = |ms: f64| ms / launches as f64;
        Self {
            median_ms: share(self.median_ms),
            p25_ms: share(self.p25_ms),
            p75_ms: share(self.p75_ms),
            repeats: self.repeats,
        }
    }

    pub fn to_json(self) -> Value {
        json!({
            "median_ms": self.median_ms,
            "p25_ms": self.p25_ms,
            "p75_ms": self.p75_ms,
            "repeats": self.repeats,
        })
    }
}

/// [`time_ms`] with the quartiles and the repeat count.
pub fn timed(
    stream: &Arc<CudaStream>,
    flush: &mut L2Flush,
    launch: &mut dyn FnMut() -> Result<(), String>,
) -> Result<Timed, String> {
    let samples =
        timing::measure(stream, Some(flush), &TIMING, None, launch).map_err(|e| e.to_string())?;
    Ok(Timed::of(&samples))
}

/// [`timed`] without an L2 flush: for a launch that evicts what it reads itself
/// (a CUDA graph of a model's step, whose weights exceed the L2 many times).
pub fn timed_as_is(
    stream: &Arc<CudaStream>,
    launch: &mut dyn FnMut() -> Result<(), String>,
) -> Result<Timed, String> {
    let samples =
        timing::measure(stream, None, &TIMING, None, launch).map_err(|e| e.to_string())?;
    Ok(Timed::of(&samples))
}

/// What a file of record keeps of the run beside its rows: the CUDA driver's
/// version, and the GPU's SM clock, temperature and NVML's throttling counters
/// read at the start and at the end (none where NVML cannot be loaded).
pub struct RunFacts {
    nvml: Option<Nvml>,
    clocks: Option<ClockRecord>,
}

impl RunFacts {
    /// Reads the clocks for the first time.
    pub fn start(ctx: &Arc<CudaContext>) -> Self {
        let nvml = Nvml::for_context(ctx);
        let clocks = nvml.as_ref().and_then(Nvml::sample).map(ClockRecord::new);
        Self { nvml, clocks }
    }

    /// Reads the clocks a last time; the facts as JSON.
    pub fn finish(mut self) -> Value {
        if let (Some(record), Some(sample)) = (
            self.clocks.as_mut(),
            self.nvml.as_ref().and_then(Nvml::sample),
        ) {
            record.add(sample);
        }
        let mut version = 0;
        // SAFETY: the driver is loaded (a context exists); writes one int.
        let read =
            unsafe { autotune_runtime::cudarc::driver::sys::cuDriverGetVersion(&mut version) };
        let driver = (read == autotune_runtime::cudarc::driver::sys::CUresult::CUDA_SUCCESS)
            .then(|| format!("{}.{}", version / 1000, (version % 1000) / 10));
        json!({
            "driver": driver,
            "clocks": self.clocks,
            "thermal_throttle_ms": self.clocks.map(|c| c.thermal_ms()),
            "power_cap_ms": self.clocks.map(|c| c.power_ms()),
        })
    }
}

/// Median milliseconds of `launch(i)`, the i-th launch using copy `i % copies` of
/// its inputs (copies whose bytes together exceed twice the L2), nothing flushed:
/// each launch finds its inputs out of L2 and L2 holding clean lines, as a decode
/// step finds a layer's weights after the layers before it.
pub fn time_rotated_ms(
    stream: &Arc<CudaStream>,
    copies: usize,
    launch: &mut dyn FnMut(usize) -> Result<(), String>,
) -> Result<f64, String> {
    let mut i = 0;
    let samples = timing::measure(stream, None, &TIMING, None, &mut || {
        i += 1;
        launch(i % copies.max(1))
    })
    .map_err(|e| e.to_string())?;
    Ok(samples.median() / 1e3)
}

/// The floor of a memory-bound kernel, from two numbers measured in the same run as
/// the kernel: the device's copy rate (a 1 GiB device-to-device copy, bytes read
/// plus bytes written over its median time) and one launch (an empty kernel, timed
/// like every row: CUDA events around it, L2 flushed before it). A kernel that must
/// move `bytes` cannot take less than `bytes / copy rate + one launch`.
#[derive(Debug, Clone, Copy)]
pub struct Floor {
    pub copy_bytes_per_s: f64,
    pub launch_ms: f64,
}

/// An empty kernel, as PTX the driver compiles for any GPU.
const EMPTY_PTX: &str = ".version 7.0\n.target sm_70\n.address_size 64\n\
                         .visible .entry autotune_empty()\n{\n\tret;\n}\n";

impl Floor {
    /// Measures the copy rate and one launch on `stream`.
    pub fn measure(
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        flush: &mut L2Flush,
    ) -> Result<Self, Box<dyn std::error::Error>> {
        const BYTES: usize = 1 << 30;
        let src = stream.alloc_zeros::<u8>(BYTES)?;
        let mut dst = stream.alloc_zeros::<u8>(BYTES)?;
        let copy_ms = time_ms(stream, flush, &mut || {
            stream
                .memcpy_dtod(&src, &mut dst)
                .map_err(|e| e.to_string())
        })?;
        let empty = ctx
            .load_module(Ptx::from_src(EMPTY_PTX))?
            .load_function("autotune_empty")?;
        let config = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (32, 1, 1),
            shared_mem_bytes: 0,
        };
        let launch_ms = time_ms(stream, flush, &mut || {
            // SAFETY: the kernel takes no arguments and touches no memory.
            unsafe { stream.launch_builder(&empty).launch(config) }
                .map(|_| ())
                .map_err(|e| e.to_string())
        })?;
        Ok(Self {
            copy_bytes_per_s: 2.0 * BYTES as f64 / (copy_ms * 1e-3),
            launch_ms,
        })
    }

    /// The least time for a launch that must move `bytes`: at the copy rate, plus
    /// one launch.
    pub fn ms(&self, bytes: f64) -> f64 {
        bytes / self.copy_bytes_per_s * 1e3 + self.launch_ms
    }

    /// `floor: <what> at the copy rate of 4.25 TB/s measured in this run, plus one
    /// launch of 2.7 us`, for a bench's legend (`what`: the bytes it counts).
    pub fn legend(&self, what: &str) -> String {
        format!(
            "floor: {what} at the copy rate of {:.2} TB/s measured in this run, plus one \
             launch of {:.1} us",
            self.copy_bytes_per_s / 1e12,
            self.launch_ms * 1e3
        )
    }

    /// The fraction of the copy rate a launch moving `bytes` in `ms` reaches.
    pub fn copy_fraction(&self, bytes: f64, ms: f64) -> f64 {
        bytes / (ms * 1e-3) / self.copy_bytes_per_s
    }

    /// For the JSON report.
    pub fn to_json(self) -> Value {
        json!({
            "copy_TBps": self.copy_bytes_per_s / 1e12,
            "launch_ms": self.launch_ms,
            "method": "copy rate: cuMemcpyDtoDAsync of 1 GiB, bytes read + written over its median time; launch: an empty kernel; both timed like the rows (CUDA events, L2 flushed before each, median); floor_ms = compulsory bytes / copy rate + one launch",
        })
    }
}

/// Runs `bench/<script>` with `args` and parses the JSON it prints; `None` (with
/// the reason on stderr) when it cannot run, e.g. without torch.
pub fn python_anchor(script: &str, args: &[String]) -> Option<Value> {
    let path = format!("{}/bench/{script}", env!("CARGO_MANIFEST_DIR"));
    match Command::new("python3").arg(&path).args(args).output() {
        Ok(output) if output.status.success() => serde_json::from_slice(&output.stdout).ok(),
        Ok(output) => {
            eprintln!(
                "{script} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            None
        }
        Err(error) => {
            eprintln!("{script} not run (python3: {error})");
            None
        }
    }
}

/// A benchmark: times on the context, writes JSON to the `--out` path if given.
pub type Bench = fn(&Arc<CudaContext>, Option<&str>) -> Result<(), Box<dyn std::error::Error>>;

/// A benchmark's `main`: on GPU 0, `run(ctx, --out PATH)`; without a GPU, says so.
pub fn bench_main(name: &str, run: Bench) -> std::process::ExitCode {
    let ctx = match autotune_runtime::gpu::open(0) {
        Ok(ctx) => ctx,
        Err(why) => {
            println!("{name} bench: no GPU ({why}); nothing to time.");
            return std::process::ExitCode::SUCCESS;
        }
    };
    match run(&ctx, out_path().as_deref()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{name} bench: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// `--out PATH` from the command line.
pub fn out_path() -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--out")
        .and_then(|i| args.get(i + 1))
        .cloned()
}
