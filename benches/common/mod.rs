//! What the benchmarks share: timing like the sweep, and running a Python anchor.
#![allow(dead_code)] // each benchmark uses part of this

use std::process::Command;
use std::sync::Arc;

use autotune_build::timing::{self, L2Flush, TimingConfig};
use autotune_runtime::cudarc::driver::{CudaContext, CudaStream};
use serde_json::Value;

/// Generous: many repeats, so that ratios between rows are stable.
pub const TIMING: TimingConfig = TimingConfig {
    warmup: 5,
    min_repeats: 50,
    max_repeats: 400,
    target_ms: 100.0,
    hopeless: f64::INFINITY,
    graph: false,
};

/// Median milliseconds of `launch`: CUDA events around each launch, L2 flushed
/// before each, as the sweep times variants.
pub fn time_ms(
    stream: &Arc<CudaStream>,
    flush: &mut L2Flush,
    launch: &mut dyn FnMut() -> Result<(), String>,
) -> Result<f64, String> {
    Ok(timing::measure(stream, Some(flush), &TIMING, None, launch)?.median() / 1e3)
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
    })?;
    Ok(samples.median() / 1e3)
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
