//! The Hopper GEMM's points side by side with cuBLAS (through cudarc) on the same
//! buffers, in one run: the squares of issue 11 (4096³, 8192³) and the decode and
//! prefill rows of Llama-3-8B's projections. Each point is compiled here for sm_90a
//! (nvcc needed) and checked against cuBLAS before it is timed.
//!
//! `cargo bench --bench gemm_hopper -- [--out bench/results/h200-gemm-hopper.json]`

mod common;
#[path = "../tests/fixtures/hopper.rs"]
mod hopper;

use std::process::ExitCode;
use std::sync::Arc;

use autotune_build::timing::L2Flush;
use autotune_kernels::gemm;
use autotune_kernels::gemm_hopper;
use autotune_kernels::{references, samples};
use autotune_runtime::Vendor;
use autotune_runtime::cudarc::cublas::CudaBlas;
use autotune_runtime::cudarc::driver::CudaContext;
use autotune_runtime::cudarc::nvrtc::Ptx;
use autotune_runtime::gpu::GpuIdentity;
use autotune_runtime::half::bf16;
use common::time_ms;
use serde_json::json;

const COMMAND: &str =
    "cargo bench --bench gemm_hopper -- --out bench/results/h200-gemm-hopper.json";
/// (M, N, K): the squares of issue 11, the six decode shapes of Llama-3-8B's q/o and
/// gate/up projections (M = 1, 16, 64), and prefill rows.
const SHAPES: [(usize, usize, usize); 11] = [
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (1, 4096, 4096),
    (16, 4096, 4096),
    (64, 4096, 4096),
    (1, 14336, 4096),
    (16, 14336, 4096),
    (64, 14336, 4096),
    (256, 4096, 4096),
    (1024, 4096, 4096),
    (4096, 14336, 4096),
];

fn main() -> ExitCode {
    common::bench_main("gemm_hopper", run)
}

fn run(ctx: &Arc<CudaContext>, out: Option<&str>) -> Result<(), Box<dyn std::error::Error>> {
    let gpu = GpuIdentity::of(ctx)?;
    if gpu.compute_capability.0 != 9 {
        println!("gemm_hopper bench: {gpu} is not a Hopper GPU; nothing to time.");
        return Ok(());
    }
    let work = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    let compiled = hopper::compile_all(&work)?;
    let stream = ctx.default_stream();
    let blas = CudaBlas::new(stream.clone())?;
    // cuBLAS as dispatch calls it: its own handle with the 32 MiB workspace.
    let vendor = gemm::CublasGemm::load(ctx)?;
    let mut unused = stream.alloc_zeros::<f32>(1)?;
    let mut flush = L2Flush::new(&stream)?;
    let mut functions = Vec::new();
    for (point, c) in &compiled {
        let module = ctx.load_module(Ptx::from_binary(std::fs::read(&c.binary)?))?;
        functions.push((*point, module.load_function(gemm_hopper::ENTRY)?));
    }
    let mut rows = Vec::new();
    println!("bf16 GEMM, the Hopper kernel's points against cuBLAS on {gpu}");
    println!(
        "{:>6} {:>6} {:>6} {:>9} {:<32} {:>9} {:>9}",
        "M", "N", "K", "cuBLAS ms", "best point", "ms", "vs cuBLAS"
    );
    for (m, n, k) in SHAPES {
        let (a, b) = samples::gemm(m, n, k, 1);
        let (da, db) = (stream.clone_htod(&a)?, stream.clone_htod(&b)?);
        let mut c = stream.alloc_zeros::<bf16>(m * n)?;
        let mut cublas_out = stream.alloc_zeros::<bf16>(m * n)?;
        let expected = references::gemm_by_cublas(&stream, &blas, &da, &db, (m, n, k))?;
        let cublas = time_ms(&stream, &mut flush, &mut || {
            vendor
                .launch(&stream, &da, &db, &mut cublas_out, &mut unused, m, n, k)
                .map_err(|e| e.to_string())
        })?;
        let mut points = Vec::new();
        for (point, function) in &functions {
            let resident = gemm_hopper::resident_blocks(&stream, function, point)?;
            autotune_runtime::poison(&stream, &mut c)?;
            gemm_hopper::launch(
                &stream, function, point, resident, &da, &db, &mut c, m, n, k,
            )?;
            let verdict = autotune_runtime::compare(&stream.clone_dtoh(&c)?, &expected);
            if !verdict.passed() {
                points.push(json!({"point": point.name(), "wrong": format!("{verdict:?}")}));
                continue;
            }
            let ms = time_ms(&stream, &mut flush, &mut || {
                gemm_hopper::launch(
                    &stream, function, point, resident, &da, &db, &mut c, m, n, k,
                )
                .map_err(|e| e.to_string())
            })?;
            points.push(json!({"point": point.name(), "ms": ms, "vs_cublas": cublas / ms}));
        }
        let best = points
            .iter()
            .filter_map(|p| Some((p["ms"].as_f64()?, p["point"].as_str()?)))
            .min_by(|a, b| a.0.total_cmp(&b.0));
        let (best_ms, best_point) = best.unwrap_or((f64::NAN, "none right"));
        println!(
            "{m:>6} {n:>6} {k:>6} {cublas:>9.4} {best_point:<32} {best_ms:>9.4} {:>8.3}x",
            cublas / best_ms
        );
        rows.push(json!({
            "m": m, "n": n, "k": k,
            "cublas_ms": cublas,
            "best_ms": best_ms,
            "best_point": best_point,
            "best_vs_cublas": cublas / best_ms,
            "points": points,
        }));
    }
    let report = json!({
        "gpu": gpu.to_string(),
        "command": COMMAND,
        "method": "one run: CUDA events around each launch, L2 flushed before each, median; every point checked against cuBLAS on the same buffers before it is timed; cuBLAS timed as the GEMM's vendor fallback calls it (cublasGemmEx, f32 compute, 32 MiB workspace)",
        "rows": rows,
    });
    if let Some(path) = out {
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")?;
        println!("wrote {path}");
    }
    Ok(())
}
