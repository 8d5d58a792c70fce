//! The main job on the committed tables: prints, per kernel, which variant dispatch
//! launches for each range of its key; on a GPU, also launches through the dispatch
//! at a key in every range and checks the result against the CPU reference.
//!
//! `cargo run --release --example dispatch`

use std::process::ExitCode;

use autotune_kernels::rmsnorm::{self, RmsNorm, TUNED_EPS, TUNED_HIDDEN};
use autotune_runtime::Kernel;
use autotune_runtime::cudarc::driver::CudaContext;
use autotune_runtime::dispatch::Range;
use autotune_runtime::gpu::{self, GpuIdentity};
use autotune_runtime::half::bf16;
use autotune_runtime::random::fill_uniform;
use std::sync::Arc;

fn main() -> ExitCode {
    println!("What the build baked (per GPU model with a tuning table, and for any other GPU):\n");
    println!("{}", RmsNorm::baked().describe(RmsNorm::SPEC.key));
    let ctx = match gpu::open(0) {
        Ok(ctx) => ctx,
        Err(why) => {
            println!(
                "No GPU here ({why}), so nothing was launched: the plans above are what dispatch"
            );
            println!(
                "uses on each GPU model, chosen at load time from the device's name, arch and SM count."
            );
            return ExitCode::SUCCESS;
        }
    };
    match run(&ctx) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run(ctx: &Arc<CudaContext>) -> Result<(), Box<dyn std::error::Error>> {
    let gpu = GpuIdentity::of(ctx)?;
    let norm = RmsNorm::load(ctx)?;
    println!("Loaded on {gpu}: {}\n", norm.selection());
    println!("rms_norm, hidden = {TUNED_HIDDEN}: a launch through the dispatch in every range");
    println!(
        "  {:<28} {:>10}  {:<24} check vs CPU (rel. error)",
        "range of n_rows", "n_rows", "variant launched"
    );
    let stream = ctx.default_stream();
    for range in norm.ranges() {
        let n_rows = representative(range);
        let elements = n_rows * TUNED_HIDDEN;
        let mut x = vec![bf16::ZERO; elements];
        let mut weight = vec![bf16::ZERO; TUNED_HIDDEN];
        fill_uniform(&mut x, n_rows as u64, -2.0, 2.0);
        fill_uniform(&mut weight, 7, 0.5, 1.5);
        let dx = stream.clone_htod(&x)?;
        let dw = stream.clone_htod(&weight)?;
        let mut out = stream.alloc_zeros::<bf16>(elements)?;
        autotune_runtime::poison(&stream, &mut out)?;
        norm.launch(&stream, &dx, &dw, &mut out, n_rows, TUNED_HIDDEN, TUNED_EPS)?;
        let got = stream.clone_dtoh(&out)?;
        let verdict = autotune_runtime::compare(
            &got,
            &rmsnorm::reference(&x, &weight, TUNED_HIDDEN, TUNED_EPS),
        );
        let span = if range.last == u64::MAX {
            format!("{}..", range.first)
        } else {
            format!("{}..={}", range.first, range.last)
        };
        println!(
            "  {span:<28} {n_rows:>10}  {:<24} {:.2e} {}",
            norm.describe(n_rows),
            verdict.error,
            if verdict.passed() { "ok" } else { "WRONG" }
        );
        if !verdict.passed() {
            return Err(format!("rms_norm is wrong at n_rows = {n_rows}").into());
        }
    }
    Ok(())
}

/// A key inside `range` worth launching at: its upper end when bounded (capped),
/// else just above its start.
fn representative(range: &Range) -> usize {
    let key = if range.last == u64::MAX {
        range.first.max(1)
    } else {
        range.last.max(1)
    };
    usize::try_from(key.min(1 << 17)).unwrap_or(1 << 17)
}
