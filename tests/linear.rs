//! `linear` (`c = a · b^T`, B stored `n x k` as a model stores its weights): its
//! Hopper points (`algo = 2` with `LAYOUT 1`) compile for sm_90a without spills into
//! HGMMA from shared memory and TMA loads; on a Hopper GPU every point of its space,
//! and its cuBLAS fallback (with cuBLASLt's ranked algorithms, its own points),
//! match the float64 product on the CPU at decode rows and
//! ragged shapes (no dimension a multiple of any tile, K tails), twice in a row (the
//! split-K tickets' second use), leaving the workspace zero. The compile test is
//! reported ignored without nvcc, cuobjdump and nvdisasm, the GPU test without a
//! Hopper GPU (the harness); AUTOTUNE_REQUIRE_NVCC=1 (CI) and AUTOTUNE_REQUIRE_GPU=1
//! make them run and fail.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] functions
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment

use autotune_harness::{self as harness, trials};
#[path = "fixtures/hopper.rs"]
mod hopper;

use std::path::{Path, PathBuf};

use autotune_build::testing::{CompileJob, Nvcc, Target};
use autotune_kernels::gemm::{self, CublasLinear};
use autotune_kernels::{Linear, LinearParams};
use autotune_runtime::gate::compare;
use autotune_runtime::half::bf16;
use autotune_runtime::prelude::fill_uniform;
use autotune_runtime::{Kernel, Params, Variant, Vendor};

/// `(m, n, k)`: decode rows, a K tail past the last block of 32 and of 64, N not a
/// multiple of 64, rows past one tile of 16, 64 and 128.
const SHAPES: [(usize, usize, usize); 6] = [
    (1, 1096, 1048),
    (3, 200, 72),
    (16, 4104, 1032),
    (64, 136, 2056),
    (65, 1096, 1048),
    (300, 520, 264),
];

fn hopper_points_compile_for_sm90a_into_hgmma_and_tma_without_spills() {
    let compiled = hopper::compile_all_linear(Path::new(env!("CARGO_TARGET_TMPDIR")))
        .unwrap_or_else(|why| panic!("{why}"));
    assert!(!compiled.is_empty(), "linear's space has Hopper points");
    for (point, c) in &compiled {
        let resources = c.resources.expect("ptxas -v says what it used");
        assert!(!resources.spills(), "{}: {resources:?}", point.name());
        hopper::hopper_sass(point, c);
    }
}

/// Every point of `linear`'s space for sm_90a (the H200's code), with its values.
fn compile_every_point(work: &Path) -> Vec<(LinearParams, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let spec = &<Linear as Kernel>::SPEC;
    let nvcc = Nvcc::find(work).unwrap();
    let jobs: Vec<CompileJob> = spec
        .points
        .iter()
        .map(|point| CompileJob {
            kernel: "linear".into(),
            constant: None,
            label: spec.point_name(point).replace([',', '='], "_"),
            source: root.join("kernels/linear.cu"),
            entries: spec.entries.iter().map(|e| e.to_string()).collect(),
            defines: spec.defines(point),
            flags: vec![],
            target: Target::Cubin("sm_90a".into()),
            dependencies: vec![],
            dir: root.to_path_buf(),
        })
        .collect();
    let progress = autotune_table::progress::Progress::silent("linear");
    let (compiled, seconds) = nvcc.compile_all(&jobs, work, &progress);
    println!("{} points of linear compiled in {seconds:.1} s", jobs.len());
    spec.points
        .iter()
        .zip(compiled)
        .map(|(point, c)| {
            let c = c.unwrap_or_else(|e| panic!("{}: {e}", spec.point_name(point)));
            (LinearParams::from_values(point).unwrap(), c.binary)
        })
        .collect()
}

fn every_point_and_cublas_match_the_cpu_on_a_hopper_gpu() {
    let ctx = autotune_runtime::gpu::open(0).expect("the harness runs this on a GPU");
    let stream = ctx.default_stream();
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("linear-points");
    let spec = &<Linear as Kernel>::SPEC;
    let variants: Vec<Variant<LinearParams>> = compile_every_point(&work)
        .into_iter()
        .map(|(params, binary)| {
            let image = std::fs::read(&binary).unwrap();
            let entries: Vec<&str> = spec.entries.to_vec();
            let name = spec.point_name(&params.values());
            Variant::load(&ctx, &image, &entries, name, params).unwrap()
        })
        .collect();
    let cublas = CublasLinear::load(&ctx).unwrap();
    for (m, n, k) in SHAPES {
        let seed = (m * 31 + n * 7 + k) as u64;
        let (mut a, mut w) = (vec![bf16::ZERO; m * k], vec![bf16::ZERO; n * k]);
        fill_uniform(&mut a, seed, -1.0, 1.0);
        fill_uniform(&mut w, seed ^ 1, -1.0, 1.0);
        let expected = gemm::reference_linear(&a, &w, m, n, k);
        let (da, dw) = (
            stream.clone_htod(&a).unwrap(),
            stream.clone_htod(&w).unwrap(),
        );
        let mut out = stream.alloc_zeros::<bf16>(m * n).unwrap();
        let mut workspace = stream
            .alloc_zeros::<f32>(gemm::workspace_len(m, n))
            .unwrap();
        let mut run = |what: &str, launch: &mut dyn FnMut(&mut _, &mut _)| {
            for call in 0..2 {
                autotune_runtime::gate::poison(&stream, &mut out).unwrap();
                launch(&mut out, &mut workspace);
                let verdict = compare(&stream.clone_dtoh(&out).unwrap(), &expected);
                assert!(
                    verdict.passed(),
                    "{what} at {m}x{n}x{k}, call {call}: {verdict:?}"
                );
                let left = stream.clone_dtoh(&workspace).unwrap();
                assert!(
                    left.iter().all(|v| *v == 0.0),
                    "{what} at {m}x{n}x{k} left its workspace non-zero"
                );
            }
        };
        run("cuBLAS", &mut |out, workspace| {
            cublas
                .launch(&stream, &da, &dw, out, workspace, m, n, k)
                .unwrap();
        });
        // The vendor's own points (`vendor_points = 8`): each of cuBLASLt's ranked
        // algorithms for this problem is right too.
        let points = {
            let mut out = stream.alloc_zeros::<bf16>(m * n).unwrap();
            let mut unused = stream.alloc_zeros::<f32>(1).unwrap();
            cublas
                .points(8, &stream, &da, &dw, &mut out, &mut unused, m, n, k)
                .unwrap()
        };
        assert!(
            !points.is_empty(),
            "cuBLASLt ranks no algorithm for {m}x{n}x{k}"
        );
        for (rank, point) in points.iter().enumerate() {
            run(&format!("cuBLASLt #{rank}"), &mut |out, workspace| {
                cublas
                    .launch_point(point, &stream, &da, &dw, out, workspace, m, n, k)
                    .unwrap();
            });
        }
        let mut ran = 0;
        for variant in &variants {
            // The decode kernel takes at most 64 rows (the wrapper refuses more).
            if variant.params().algo == 3 && m > 64 {
                continue;
            }
            run(variant.name(), &mut |out, workspace| {
                autotune_kernels::linear(&stream, variant, &da, &dw, out, workspace, m, n, k)
                    .unwrap();
            });
            ran += 1;
        }
        println!(
            "{m}x{n}x{k}: cuBLAS, {} of cuBLASLt's algorithms and {ran} points match the CPU",
            points.len()
        );
    }
}

fn main() -> std::process::ExitCode {
    harness::run_groups(&[
        (
            harness::Need::Tools(&["nvcc", "cuobjdump", "nvdisasm"], "AUTOTUNE_REQUIRE_NVCC"),
            trials![hopper_points_compile_for_sm90a_into_hgmma_and_tma_without_spills],
        ),
        (
            harness::Need::All(&[
                harness::Need::Gpu,
                harness::Need::Nvcc,
                harness::Need::Major(9),
            ]),
            trials![every_point_and_cublas_match_the_cpu_on_a_hopper_gpu],
        ),
    ])
}
