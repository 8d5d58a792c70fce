//! The bf16 GEMM, side by side in one run with cuBLAS (through cudarc) on the same
//! buffers: our tuned dispatch, our untuned default (what tuning bought), cuBLAS.
//!
//! `cargo bench --bench gemm -- [--out bench/results/h200-gemm.json]`
//!
//! Times: CUDA events around each launch, L2 flushed before each, median.

mod common;

use std::process::ExitCode;
use std::sync::Arc;

use autotune_build::timing::L2Flush;
use autotune_kernels::gemm::{self, Gemm};
use autotune_kernels::samples;
use autotune_runtime::cudarc::cublas::CudaBlas;
use autotune_runtime::cudarc::driver::CudaContext;
use autotune_runtime::gpu::GpuIdentity;
use autotune_runtime::half::bf16;
use common::time_ms;
use serde_json::json;

const COMMAND: &str = "cargo bench --bench gemm -- --out bench/results/h200-gemm.json";
/// (M, N, K): two square products, then decode/prefill rows of a Llama-3-8B-like
/// layer (attention 4096x4096, MLP 14336x4096).
const SHAPES: [(usize, usize, usize); 8] = [
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (1, 4096, 4096),
    (16, 4096, 4096),
    (64, 4096, 4096),
    (1, 14336, 4096),
    (16, 14336, 4096),
    (64, 14336, 4096),
];

fn main() -> ExitCode {
    common::bench_main("gemm", run)
}

fn run(ctx: &Arc<CudaContext>, out: Option<&str>) -> Result<(), Box<dyn std::error::Error>> {
    let gpu = GpuIdentity::of(ctx)?;
    let kernel = Gemm::load(ctx)?;
    let stream = ctx.default_stream();
    let blas = CudaBlas::new(stream.clone())?;
    let mut flush = L2Flush::new(&stream)?;
    let mut rows = Vec::new();
    for (m, n, k) in SHAPES {
        let (a, b) = samples::gemm(m, n, k, 1);
        let (da, db) = (stream.clone_htod(&a)?, stream.clone_htod(&b)?);
        let mut c = stream.alloc_zeros::<bf16>(m * n)?;
        let mut reference = stream.alloc_zeros::<bf16>(m * n)?;
        let mut workspace = stream.alloc_zeros::<f32>(gemm::workspace_len(m, n))?;
        autotune_runtime::poison(&stream, &mut c)?;
        kernel.launch(&stream, &da, &db, &mut c, &mut workspace, m, n, k)?;
        gemm::cublas_gemm(&blas, &da, &db, &mut reference, (m, n, k))?;
        let expected: Vec<f64> = stream
            .clone_dtoh(&reference)?
            .iter()
            .map(|v| v.to_f64())
            .collect();
        let verdict = autotune_runtime::compare(&stream.clone_dtoh(&c)?, &expected);
        if !verdict.passed() {
            return Err(format!("ours differs from cuBLAS at {m}x{n}x{k}: {verdict:?}").into());
        }
        let ours = time_ms(&stream, &mut flush, &mut || {
            kernel
                .launch(&stream, &da, &db, &mut c, &mut workspace, m, n, k)
                .map_err(|e| e.to_string())
        })?;
        let default = time_ms(&stream, &mut flush, &mut || {
            gemm::gemm(
                &stream,
                kernel.default_variant(),
                &da,
                &db,
                &mut c,
                &mut workspace,
                m,
                n,
                k,
            )
            .map_err(|e| e.to_string())
        })?;
        let cublas = time_ms(&stream, &mut flush, &mut || {
            gemm::cublas_gemm(&blas, &da, &db, &mut reference, (m, n, k)).map_err(|e| e.to_string())
        })?;
        let flops = 2.0 * (m * n * k) as f64;
        let bytes = 2.0 * (m * k + k * n + m * n) as f64;
        rows.push(json!({
            "m": m, "n": n, "k": k,
            "variant": kernel.describe(m),
            "ours_ms": ours,
            "default_ms": default,
            "cublas_ms": cublas,
            "ours_TFLOPs": flops / ours / 1e9,
            "cublas_TFLOPs": flops / cublas / 1e9,
            "ours_TBps": bytes / ours / 1e9,
            "vs_cublas": cublas / ours,
            "tuning_bought": default / ours,
            "rel_error_vs_cublas": verdict.error,
            "command": COMMAND,
        }));
    }
    let report = json!({
        "gpu": gpu.to_string(),
        "selection": kernel.selection().to_string(),
        "method": "CUDA events around each launch, L2 flushed before each (memset of 2x L2), median; cuBLAS: cublasGemmEx bf16 in/out, f32 compute, default algorithm, same buffers",
        "rows": rows,
    });
    println!("bf16 GEMM on {gpu} ({})", kernel.selection());
    println!(
        "{:>6} {:>6} {:>6} {:<46} {:>9} {:>9} {:>9} {:>8} {:>8} {:>9} {:>9}",
        "M",
        "N",
        "K",
        "variant",
        "ours ms",
        "cuBLAS",
        "default",
        "ours TF",
        "cuBLAS TF",
        "vs cuBLAS",
        "tuning"
    );
    for row in &rows {
        let f = |key: &str| row[key].as_f64().unwrap_or(f64::NAN);
        println!(
            "{:>6} {:>6} {:>6} {:<46} {:>9.4} {:>9.4} {:>9.4} {:>8.1} {:>8.1} {:>8.2}x {:>8.2}x",
            row["m"],
            row["n"],
            row["k"],
            row["variant"].as_str().unwrap_or(""),
            f("ours_ms"),
            f("cublas_ms"),
            f("default_ms"),
            f("ours_TFLOPs"),
            f("cublas_TFLOPs"),
            f("vs_cublas"),
            f("tuning_bought")
        );
    }
    println!("(vs cuBLAS: cuBLAS time / ours; tuning: untuned default time / tuned)");
    if let Some(path) = out {
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")?;
        println!("wrote {path}");
    }
    Ok(())
}
