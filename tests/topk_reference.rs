//! The top-k cases' scores on the GPU (`kernels/topk_reference.cu`): the committed
//! PTX is what nvcc makes of the source (nvcc, CI has it), and on a GPU the kernel
//! gives the CPU's scores to the bit for every key of a ragged batch, and both cases
//! use it. The GPU test is reported ignored without a GPU.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failure is the test's
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment

use autotune_harness::{self as harness, trials};
#[path = "fixtures/device.rs"]
mod device;
#[path = "fixtures/toolkit.rs"]
mod toolkit;

use autotune_kernels::topk::reference::{PTX, ScoresKernel};
use autotune_kernels::topk::{self, BatchedTopkCase, DIM, HEADS, TopkCase};
use autotune_runtime::Shape;
use autotune_runtime::cudarc::driver::CudaStream;
use autotune_runtime::gate::Case;
use autotune_runtime::gate::random::fill_uniform;
use autotune_runtime::half::bf16;
use std::sync::Arc;

const SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/kernels/topk_reference.cu");

fn committed_ptx_is_what_nvcc_makes_of_the_source() {
    toolkit::assert_committed_ptx_is_current(SOURCE, PTX, "kernels/topk_reference.ptx");
}

fn the_gpu_scores_are_the_cpu_scores_to_the_bit_and_the_cases_use_them() {
    let Some(ctx) = device::open_or_skip() else {
        return;
    };
    let stream = ctx.default_stream();
    let kernel = ScoresKernel::load(&ctx).expect("the PTX loads (a CUDA 13 driver)");
    // A ragged batch: a context that is not a whole number of blocks, a short one,
    // an empty one. Keys of very different scales, weights of both signs (as the
    // cases draw them), so that many dot products are negative and the relu counts.
    let lengths = [5000usize, 17, 0, 2500];
    let total: usize = lengths.iter().sum();
    let mut q = vec![bf16::ZERO; lengths.len() * HEADS * DIM];
    fill_uniform(&mut q, 1, -1.0, 1.0);
    let mut weights = vec![0.0f32; lengths.len() * HEADS];
    fill_uniform(&mut weights, 2, -0.25, 1.0);
    let mut keys = vec![bf16::ZERO; total * DIM];
    fill_uniform(&mut keys, 3, -1.0, 1.0);
    for (t, key) in keys.chunks_mut(DIM).enumerate() {
        let scale = [1e-3, 1.0, 30.0][t % 3];
        key.iter_mut()
            .for_each(|v| *v = bf16::from_f64(v.to_f64() * scale));
    }
    let mut offsets = vec![0u32];
    for len in lengths {
        offsets.push(offsets.last().unwrap() + len as u32);
    }
    let on_gpu = kernel
        .scores(
            &stream,
            (
                &stream.clone_htod(&q).unwrap(),
                &stream.clone_htod(&weights).unwrap(),
                &stream.clone_htod(&keys).unwrap(),
            ),
            &stream.clone_htod(&offsets).unwrap(),
            &lengths,
        )
        .unwrap();
    assert_eq!(on_gpu.len(), total);
    for (b, &len) in lengths.iter().enumerate() {
        let first = offsets[b] as usize;
        let on_cpu = topk::scores(
            &q[b * HEADS * DIM..(b + 1) * HEADS * DIM],
            &weights[b * HEADS..(b + 1) * HEADS],
            &keys[first * DIM..(first + len) * DIM],
        );
        for (t, (&g, &c)) in on_gpu[first..first + len].iter().zip(&on_cpu).enumerate() {
            assert!(
                g.to_bits() == c.to_bits(),
                "query {b}, key {t}: GPU {g:e}, CPU {c:e}"
            );
        }
    }

    // The cases: the GPU computes their scores, which are the CPU's on the sampled
    // tokens of the draw, so it keeps doing so; poisoned outputs fail the check.
    uses_the_gpu(
        &stream,
        TopkCase::new(&stream, 16_384).unwrap(),
        TopkCase::reference_on_gpu,
    );
    uses_the_gpu(
        &stream,
        BatchedTopkCase::with_shape(&stream, 16_384, &Shape::new(&["batch"], &[4])).unwrap(),
        BatchedTopkCase::reference_on_gpu,
    );
}

/// `case` computes its scores on the GPU before and after checking a draw (so
/// they were the CPU's on its sampled tokens), and its poisoned output fails.
fn uses_the_gpu<C: Case>(stream: &Arc<CudaStream>, mut case: C, on_gpu: fn(&C) -> bool) {
    assert!(on_gpu(&case));
    case.randomize(stream, 5).unwrap();
    case.poison(stream).unwrap();
    let verdict = case.check(stream).unwrap();
    assert!(!verdict.passed(), "{verdict:?}");
    assert!(on_gpu(&case), "the GPU's scores differed from the CPU's");
}

fn main() -> std::process::ExitCode {
    harness::run_groups(&[
        (
            harness::Need::Nvcc,
            trials![committed_ptx_is_what_nvcc_makes_of_the_source],
        ),
        (
            harness::Need::Gpu,
            trials![the_gpu_scores_are_the_cpu_scores_to_the_bit_and_the_cases_use_them],
        ),
    ])
}
