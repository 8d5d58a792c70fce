//! The Hopper GEMM's points side by side with cuBLAS (through cudarc) on the same
//! buffers, in one run: the squares of issue 11 (4096³, 8192³) and the decode and
//! prefill rows of Llama-3-8B's projections. Each point is compiled here for sm_90a
//! (nvcc needed) and checked against cuBLAS before it is timed.
//!
//! Decode rows (M <= 64) are timed two ways: with the L2 flushed by a memset before
//! each launch (the sweep's method, whose dirty lines share the read bandwidth as
//! they are written back), and with A and B rotated through copies that together
//! exceed twice the L2, nothing flushed (each launch finds its operands out of L2
//! and L2 full of clean lines, as a decode step finds a layer's weights after the
//! layers before it). Both sides are timed both ways in the same run.
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
use autotune_runtime::cudarc::driver::sys::CUdevice_attribute;
use autotune_runtime::cudarc::nvrtc::Ptx;
use autotune_runtime::gpu::GpuIdentity;
use autotune_runtime::half::bf16;
use common::{Floor, time_ms, time_rotated_ms};
use serde_json::json;

const COMMAND: &str =
    "cargo bench --bench gemm_hopper -- --out bench/results/h200-gemm-hopper.json";
/// (M, N, K): the six decode shapes of Llama-3-8B's q/o and gate/up projections
/// (M = 1, 16, 64) first (each row prints as it is done), the squares of issue 11,
/// and prefill rows.
const SHAPES: [(usize, usize, usize); 11] = [
    (1, 4096, 4096),
    (16, 4096, 4096),
    (64, 4096, 4096),
    (1, 14336, 4096),
    (16, 14336, 4096),
    (64, 14336, 4096),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (256, 4096, 4096),
    (1024, 4096, 4096),
    (4096, 14336, 4096),
];

/// The largest M timed with rotated operands too (the decode rows).
const ROTATED_UP_TO: usize = 64;

fn main() -> ExitCode {
    common::bench_main("gemm_hopper", run)
}

fn run(ctx: &Arc<CudaContext>, out: Option<&str>) -> Result<(), Box<dyn std::error::Error>> {
    let facts = common::RunFacts::start(ctx);
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
    let floor = Floor::measure(ctx, &stream, &mut flush)?;
    let l2 = usize::try_from(ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?)
        .unwrap_or(0);
    let mut functions = Vec::new();
    for (point, c) in &compiled {
        let module = ctx.load_module(Ptx::from_binary(std::fs::read(&c.binary)?))?;
        let function = module.load_function(gemm_hopper::ENTRY)?;
        // Once per point: what a variant of the crate keeps after its first call.
        let resident = gemm_hopper::resident_blocks(&stream, &function, point)?;
        functions.push((*point, function, resident));
    }
    let mut rows = Vec::new();
    println!("bf16 GEMM, the Hopper kernel's points against cuBLAS on {gpu}");
    println!(
        "{:>6} {:>6} {:>6} {:>9} {:<32} {:>9} {:>9} {:>9} {:>10}",
        "M", "N", "K", "cuBLAS ms", "best point", "ms", "vs cuBLAS", "floor ms", "best/floor"
    );
    for (m, n, k) in SHAPES {
        let (a, b) = samples::gemm(m, n, k, 1);
        let (da, db) = (stream.clone_htod(&a)?, stream.clone_htod(&b)?);
        let mut c = stream.alloc_zeros::<bf16>(m * n)?;
        // The rotated copies are as large as da and db: one check for all.
        let dims = gemm::checked_dims(&da, &db, &c, m, n, k)?;
        let mut cublas_out = stream.alloc_zeros::<bf16>(m * n)?;
        let expected = references::gemm_by_cublas(&stream, &blas, &da, &db, (m, n, k))?;
        let cublas = time_ms(&stream, &mut flush, &mut || {
            vendor
                .launch(&stream, &da, &db, &mut cublas_out, &mut unused, m, n, k)
                .map_err(|e| e.to_string())
        })?;
        // Decode rows: copies of A and B for the rotated timing, at least two and
        // together more than twice the L2.
        let copies = if m <= ROTATED_UP_TO {
            let pair = (a.len() + b.len()) * std::mem::size_of::<bf16>();
            (2 * l2 / pair.max(1) + 1).max(2)
        } else {
            0
        };
        let mut rotated = Vec::with_capacity(copies);
        for _ in 0..copies {
            rotated.push((stream.clone_htod(&a)?, stream.clone_htod(&b)?));
        }
        let cublas_rotated = if copies > 0 {
            Some(time_rotated_ms(&stream, copies, &mut |i| {
                let (ra, rb) = &rotated[i];
                vendor
                    .launch(&stream, ra, rb, &mut cublas_out, &mut unused, m, n, k)
                    .map_err(|e| e.to_string())
            })?)
        } else {
            None
        };
        let mut points = Vec::new();
        for &(ref point, ref function, resident) in &functions {
            autotune_runtime::gate::poison(&stream, &mut c)?;
            gemm_hopper::launch(&stream, function, point, resident, &da, &db, &mut c, dims)?;
            let verdict = autotune_runtime::gate::compare(&stream.clone_dtoh(&c)?, &expected);
            if !verdict.passed() {
                points.push(json!({"point": point.name(), "wrong": format!("{verdict:?}")}));
                continue;
            }
            let ms = time_ms(&stream, &mut flush, &mut || {
                gemm_hopper::launch(&stream, function, point, resident, &da, &db, &mut c, dims)
                    .map_err(|e| e.to_string())
            })?;
            let rotated_ms = match cublas_rotated {
                Some(_) => Some(time_rotated_ms(&stream, copies, &mut |i| {
                    let (ra, rb) = &rotated[i];
                    gemm_hopper::launch(&stream, function, point, resident, ra, rb, &mut c, dims)
                        .map_err(|e| e.to_string())
                })?),
                None => None,
            };
            points.push(json!({
                "point": point.name(),
                "ms": ms,
                "vs_cublas": cublas / ms,
                "rotated_ms": rotated_ms,
            }));
        }
        // The fastest right point by `key` (`ms`, or `rotated_ms` for the rotated way).
        let fastest = |key: &str| {
            points
                .iter()
                .filter_map(|p| Some((p[key].as_f64()?, p["point"].as_str()?)))
                .min_by(|a, b| a.0.total_cmp(&b.0))
        };
        // The best point timed the rotated way, against cuBLAS timed the same way.
        let rotated = cublas_rotated.zip(fastest("rotated_ms"));
        let rotated_row = match rotated {
            Some((theirs, (ours, point))) => json!({
                "copies": copies,
                "cublas_ms": theirs,
                "best_ms": ours,
                "best_point": point,
                "best_vs_cublas": theirs / ours,
            }),
            None => serde_json::Value::Null,
        };
        let rotated_column = rotated.map_or_else(String::new, |(theirs, (ours, point))| {
            format!(
                "   rotated: cuBLAS {theirs:.4}, {point} {ours:.4}, {:.3}x",
                theirs / ours
            )
        });
        let (best_ms, best_point) = fastest("ms").unwrap_or((f64::NAN, "none right"));
        let floor_ms = floor.ms(2.0 * (m * k + k * n + m * n) as f64);
        println!(
            "{m:>6} {n:>6} {k:>6} {cublas:>9.4} {best_point:<32} {best_ms:>9.4} {:>8.3}x {floor_ms:>9.4} {:>9.2}x{rotated_column}",
            cublas / best_ms,
            best_ms / floor_ms
        );
        rows.push(json!({
            "m": m, "n": n, "k": k,
            "cublas_ms": cublas,
            "best_ms": best_ms,
            "best_point": best_point,
            "best_vs_cublas": cublas / best_ms,
            "floor_ms": floor_ms,
            "best_vs_floor": best_ms / floor_ms,
            "rotated": rotated_row,
            "points": points,
        }));
    }
    let report = json!({
        "gpu": gpu.to_string(),
        "command": COMMAND,
        "run": facts.finish(),
        "floor": floor.to_json(),
        "method": "one run: CUDA events around each launch, L2 flushed before each (memset of 2x L2), median; for M <= 64 also `rotated`: A and B rotated through copies together over 2x L2, nothing flushed, both sides; every point checked against cuBLAS on the same buffers before it is timed; cuBLAS timed as the GEMM's vendor fallback calls it (cublasGemmEx, f32 compute, 32 MiB workspace)",
        "rows": rows,
    });
    if let Some(path) = out {
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")?;
        println!("wrote {path}");
    }
    Ok(())
}
