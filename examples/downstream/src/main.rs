//! Loads the tuned `silu_mul`, prints which variant each range of `n` dispatches
//! to, and launches it once per range, checked against the CPU.

use std::process::ExitCode;

use autotune_runtime::Kernel;
use autotune_runtime::gpu::{self, GpuIdentity};
use autotune_runtime::half::bf16;
use autotune_runtime::random::fill_uniform;
use downstream_swiglu::checked;
use downstream_swiglu::layernorm::LayerNorm;
use downstream_swiglu::swiglu::{self, SiluMul};

fn main() -> ExitCode {
    println!("{}", SiluMul::baked().describe(SiluMul::SPEC.key));
    println!("{}", LayerNorm::baked().describe(LayerNorm::SPEC.key));
    let ctx = match gpu::open(0) {
        Ok(ctx) => ctx,
        Err(why) => {
            println!("No GPU here ({why}): nothing launched.");
            return ExitCode::SUCCESS;
        }
    };
    let run = || -> Result<(), Box<dyn std::error::Error>> {
        let kernel = SiluMul::load(&ctx)?;
        println!(
            "Loaded on {}: {}",
            GpuIdentity::of(&ctx)?,
            kernel.selection()
        );
        let stream = ctx.default_stream();
        for range in kernel.ranges() {
            let n = usize::try_from(range.first.max(1) + 12)
                .unwrap_or(1 << 20)
                .min(1 << 27);
            let (mut gate, mut up) = (vec![bf16::ZERO; n], vec![bf16::ZERO; n]);
            fill_uniform(&mut gate, 1, -6.0, 6.0);
            fill_uniform(&mut up, 2, -2.0, 2.0);
            let (dg, du) = (stream.clone_htod(&gate)?, stream.clone_htod(&up)?);
            let mut out = stream.alloc_zeros::<bf16>(n)?;
            autotune_runtime::poison(&stream, &mut out)?;
            kernel.launch(&stream, &dg, &du, &mut out, n)?;
            let verdict = autotune_runtime::compare(
                &stream.clone_dtoh(&out)?,
                &swiglu::reference(&gate, &up),
            );
            println!(
                "  n = {n:>10}: {:<20} rel. error {:.1e} {}",
                kernel.describe(n),
                verdict.error,
                if verdict.passed() { "ok" } else { "WRONG" }
            );
            if !verdict.passed() {
                return Err("wrong result".into());
            }
        }
        layer_norm(&ctx)
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// LayerNorm at each tuned hidden size and one that is not (1536: the nearest plan),
/// a launch in every range of rows, checked against the CPU.
fn layer_norm(
    ctx: &std::sync::Arc<autotune_runtime::cudarc::driver::CudaContext>,
) -> Result<(), Box<dyn std::error::Error>> {
    let kernel = LayerNorm::load(ctx)?;
    println!("layer_norm: {}", kernel.selection());
    let stream = ctx.default_stream();
    for cols in [768, 4096, 1536] {
        println!("  {}", kernel.shape_rule(cols));
        for range in kernel.ranges_at(cols) {
            let rows = usize::try_from(range.first.max(1) + 3)
                .unwrap_or(1 << 16)
                .min(1 << 16);
            let verdict = checked::layer_norm(&kernel, &stream, rows, cols, 3)?;
            println!(
                "    rows = {rows:>6}: {:<20} rel. error {:.1e} {}",
                kernel.describe(rows, cols),
                verdict.error,
                if verdict.passed() { "ok" } else { "WRONG" }
            );
            if !verdict.passed() {
                return Err("wrong result".into());
            }
        }
    }
    Ok(())
}
