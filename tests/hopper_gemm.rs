//! The GEMM's Hopper kernel (`algo = 2`, `kernels/gemm_hopper.cu` through
//! `kernels/gemm.cu`): every point of the GEMM's space with `algo = 2` compiles for
//! sm_90a without spills, in a few seconds each (printed), and its SASS is the
//! Hopper path (HGMMA from shared memory, TMA loads: `UTMALDG`), not HMMA; on a
//! Hopper GPU every point matches cuBLAS on a square, decode rows, ragged shapes (no
//! dimension a multiple of any tile) and Llama-3-8B's gate/up projection, twice in a
//! row (the split-K barriers' second phase). The compile test is reported ignored
//! without nvcc, cuobjdump and nvdisasm, the GPU test without a GPU (the harness);
//! AUTOTUNE_REQUIRE_NVCC=1 (CI) and AUTOTUNE_REQUIRE_GPU=1 make them run and fail.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] functions
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment

use autotune_harness::{self as harness, trials};
#[path = "fixtures/hopper.rs"]
mod hopper;

use autotune_build::testing::Compiled;
use autotune_kernels::gemm;
use autotune_kernels::gemm_hopper::{self, HopperParams};
use autotune_kernels::references;
use autotune_kernels::samples;
use autotune_runtime::Vendor;
use autotune_runtime::cudarc::cublas::CudaBlas;
use autotune_runtime::cudarc::driver::CudaContext;
use autotune_runtime::cudarc::nvrtc::Ptx;
use autotune_runtime::half::bf16;

/// Every point compiled (both tests need nvcc: the harness runs them only where
/// it is found).
fn compiled() -> Vec<(HopperParams, Compiled)> {
    hopper::compile_all(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")))
        .unwrap_or_else(|why| panic!("{why}"))
}

fn every_point_compiles_for_sm90a_without_spills_into_hgmma_and_tma() {
    let compiled = compiled();
    for (point, c) in &compiled {
        let resources = c.resources.expect("ptxas -v says what it used");
        assert!(!resources.spills(), "{}: {resources:?}", point.name());
        println!(
            "{:<32} {:>3} registers, nvcc {:.2} s",
            point.name(),
            resources.registers,
            c.seconds
        );
        let sass = hopper::hopper_sass(point, c);
        assert!(
            !sass.contains("LDL") && !sass.contains("STL"),
            "{}: local memory",
            point.name()
        );
    }
}

fn every_point_matches_cublas_on_a_hopper_gpu() {
    let ctx = autotune_runtime::gpu::open(0).expect("the harness runs this on a GPU");
    let compiled = compiled();
    run_against_cublas(&ctx, &compiled);
}

fn run_against_cublas(ctx: &std::sync::Arc<CudaContext>, compiled: &[(HopperParams, Compiled)]) {
    let stream = ctx.default_stream();
    let blas = CudaBlas::new(stream.clone()).unwrap();
    let shapes = [
        (4096, 4096, 4096),
        (1, 4096, 4096),
        (65, 4104, 1032),
        (1000, 1096, 1048),
        (3, 200, 72),
        (777, 14336, 4096),
    ];
    for (m, n, k) in shapes {
        let (a, b) = samples::gemm(m, n, k, (m + n + k) as u64);
        let (da, db) = (
            stream.clone_htod(&a).unwrap(),
            stream.clone_htod(&b).unwrap(),
        );
        let expected = references::gemm_by_cublas(&stream, &blas, &da, &db, (m, n, k)).unwrap();
        for (point, c) in compiled {
            let image = std::fs::read(&c.binary).unwrap();
            let module = ctx.load_module(Ptx::from_binary(image)).unwrap();
            let function = module.load_function(gemm_hopper::ENTRY).unwrap();
            let resident = gemm_hopper::resident_blocks(&stream, &function, point).unwrap();
            let mut out = stream.alloc_zeros::<bf16>(m * n).unwrap();
            for round in 0..2 {
                autotune_runtime::gate::poison(&stream, &mut out).unwrap();
                let dims = gemm::checked_dims(&da, &db, &out, m, n, k).unwrap();
                gemm_hopper::launch(
                    &stream, &function, point, resident, &da, &db, &mut out, dims,
                )
                .unwrap();
                let verdict =
                    autotune_runtime::gate::compare(&stream.clone_dtoh(&out).unwrap(), &expected);
                assert!(
                    verdict.passed(),
                    "{} at {m}x{n}x{k}, call {round}: {verdict:?}",
                    point.name()
                );
            }
        }
        // The vendor's own points (`vendor_points = 8`, B as it is): each of
        // cuBLASLt's ranked algorithms matches cuBLAS's product too.
        let vendor = gemm::CublasGemm::load(ctx).unwrap();
        let mut out = stream.alloc_zeros::<bf16>(m * n).unwrap();
        let mut workspace = stream.alloc_zeros::<f32>(1).unwrap();
        let points = vendor
            .points(8, &stream, &da, &db, &mut out, &mut workspace, m, n, k)
            .unwrap();
        assert!(
            !points.is_empty(),
            "cuBLASLt ranks no algorithm for {m}x{n}x{k}"
        );
        for (rank, point) in points.iter().enumerate() {
            autotune_runtime::gate::poison(&stream, &mut out).unwrap();
            vendor
                .launch_point(point, &stream, &da, &db, &mut out, &mut workspace, m, n, k)
                .unwrap();
            let verdict =
                autotune_runtime::gate::compare(&stream.clone_dtoh(&out).unwrap(), &expected);
            assert!(
                verdict.passed(),
                "cuBLASLt #{rank} at {m}x{n}x{k}: {verdict:?}"
            );
        }
        println!(
            "{m}x{n}x{k}: every point and {} of cuBLASLt's algorithms match cuBLAS",
            points.len()
        );
    }
}

fn main() -> std::process::ExitCode {
    harness::run_groups(&[
        (
            harness::Need::Tools(&["nvcc", "cuobjdump", "nvdisasm"], "AUTOTUNE_REQUIRE_NVCC"),
            trials![every_point_compiles_for_sm90a_without_spills_into_hgmma_and_tma],
        ),
        (
            harness::Need::All(&[
                harness::Need::Gpu,
                harness::Need::Nvcc,
                harness::Need::Major(9),
            ]),
            trials![every_point_matches_cublas_on_a_hopper_gpu],
        ),
    ])
}
