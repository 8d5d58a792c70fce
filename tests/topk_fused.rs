//! The one-launch top-k indexer (`topk_indexer` with `launches = 1`: `topk_fused` in
//! `kernels/topk.cu`, a cooperative launch with one grid barrier), whatever the
//! committed table dispatches: every such point of the indexer's space, compiled for
//! this GPU's architecture as a sweep compiles it, selects the top-k at the smallest
//! context it takes, one above it, a length no 16-token tile divides, the declared
//! sizes' ends and 128k; each twice in a row (a call must leave its histograms and
//! counters zero for the next); with every score equal (the overflow paths); and
//! replayed in a CUDA graph. Reported ignored without a GPU or nvcc (the harness).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] functions

use autotune_harness::{self as harness, trials};
#[path = "fixtures/device.rs"]
mod device;

#[path = "fixtures/points.rs"]
mod points;

use std::sync::Arc;

use autotune_kernels::samples::{self, TopkInputs};
use autotune_kernels::topk::{self, DIM, TOP_K, TopkIndexer, TopkParams};
use autotune_runtime::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use autotune_runtime::cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use autotune_runtime::gpu::GpuIdentity;
use autotune_runtime::half::bf16;
use autotune_runtime::{Kernel, Variant};

const SIZES: [usize; 6] = [TOP_K, TOP_K + 1, 4099, 16_384, 100_000, 131_072];

/// Every `launches = 1` point, compiled for `arch` as a sweep compiles it and
/// loaded on `ctx`.
fn fused_variants(ctx: &Arc<CudaContext>, arch: &str) -> Vec<Variant<TopkParams>> {
    let launches = TopkIndexer::SPEC
        .params
        .iter()
        .position(|p| *p == "launches")
        .expect("the indexer has a launches parameter");
    points::compiled_variants::<TopkIndexer>(ctx, arch, "topk-fused", |p| {
        !p.fallback && p.values[launches] == 1
    })
}

/// A GPU and its variants, or `None` (said).
fn setup() -> Option<(Arc<CudaContext>, Vec<Variant<TopkParams>>)> {
    let ctx = device::open_or_skip()?;
    let arch = GpuIdentity::of(&ctx).unwrap().arch();
    let variants = fused_variants(&ctx, &arch);
    Some((ctx, variants))
}

/// Query, head weights and keys on the device.
struct Device {
    q: CudaSlice<bf16>,
    weights: CudaSlice<f32>,
    keys: CudaSlice<bf16>,
    scratch: CudaSlice<u32>,
    out: CudaSlice<i32>,
}

impl Device {
    fn new(stream: &Arc<CudaStream>, input: &TopkInputs, n_ctx: usize) -> Self {
        Self {
            q: stream.clone_htod(&input.q).unwrap(),
            weights: stream.clone_htod(&input.weights).unwrap(),
            keys: stream.clone_htod(&input.keys).unwrap(),
            scratch: stream.alloc_zeros(topk::scratch_len(n_ctx)).unwrap(),
            out: stream.alloc_zeros(TOP_K).unwrap(),
        }
    }

    fn launch(&mut self, stream: &Arc<CudaStream>, variant: &Variant<TopkParams>, n_ctx: usize) {
        topk::topk_indexer(
            stream,
            variant,
            &self.q,
            &self.weights,
            &self.keys,
            &mut self.out,
            &mut self.scratch,
            n_ctx,
        )
        .unwrap_or_else(|e| panic!("{} at n_ctx = {n_ctx}: {e}", variant.name()));
    }

    /// One call on a poisoned output, checked (`check`).
    fn launch_and_check(
        &mut self,
        stream: &Arc<CudaStream>,
        variant: &Variant<TopkParams>,
        scores: &[f64],
        what: &str,
    ) {
        autotune_runtime::gate::poison(stream, &mut self.out).unwrap();
        self.launch(stream, variant, scores.len());
        self.check(stream, scores, &format!("{}, {what}", variant.name()));
    }

    /// The selection against the CPU's scores, and the counts left zero.
    fn check(&self, stream: &Arc<CudaStream>, scores: &[f64], what: &str) {
        let verdict = topk::check_top_k(scores, &stream.clone_dtoh(&self.out).unwrap());
        assert!(verdict.passed(), "{what}: {verdict:?}");
        let n_ctx = scores.len();
        let counts = stream
            .clone_dtoh(&self.scratch.slice(topk::counts(n_ctx)))
            .unwrap();
        assert!(
            counts.iter().all(|&c| c == 0),
            "{what}: the call left scratch count {:?} non-zero",
            counts.iter().position(|&c| c != 0)
        );
    }
}

fn every_one_launch_point_selects_the_top_k_twice_in_a_row_at_every_length() {
    let Some((ctx, variants)) = setup() else {
        return;
    };
    let stream = ctx.default_stream();
    for n_ctx in SIZES {
        let input = samples::topk(n_ctx, n_ctx as u64 ^ 0x5eed);
        let scores = topk::scores(&input.q, &input.weights, &input.keys);
        let mut device = Device::new(&stream, &input, n_ctx);
        for variant in &variants {
            for call in 0..2 {
                let what = format!("n_ctx = {n_ctx}, call {call}");
                device.launch_and_check(&stream, variant, &scores, &what);
            }
        }
    }
}

fn every_one_launch_point_is_right_when_every_score_is_equal() {
    let Some((ctx, variants)) = setup() else {
        return;
    };
    let stream = ctx.default_stream();
    let n_ctx = 40_000;
    // One key repeated: every score is equal, every index is a valid answer, and
    // the threshold bin holds every key (more than the shared-memory buffers).
    let mut input = samples::topk(n_ctx, 5);
    let first: Vec<bf16> = input.keys[..DIM].to_vec();
    for row in input.keys.chunks_mut(DIM) {
        row.copy_from_slice(&first);
    }
    let scores = topk::scores(&input.q, &input.weights, &input.keys);
    let mut device = Device::new(&stream, &input, n_ctx);
    for variant in &variants {
        device.launch_and_check(&stream, variant, &scores, "equal scores");
    }
}

fn every_one_launch_point_replays_in_a_cuda_graph() {
    let Some((ctx, variants)) = setup() else {
        return;
    };
    // SAFETY: one stream only.
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream().unwrap();
    let n_ctx = 100_000;
    let input = samples::topk(n_ctx, 11);
    let scores = topk::scores(&input.q, &input.weights, &input.keys);
    let mut device = Device::new(&stream, &input, n_ctx);
    for variant in &variants {
        autotune_runtime::gate::poison(&stream, &mut device.out).unwrap();
        stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL)
            .unwrap();
        device.launch(&stream, variant, n_ctx);
        let graph = stream
            .end_capture(CUgraphInstantiate_flags(0))
            .unwrap_or_else(|e| panic!("{}: capture: {e}", variant.name()))
            .expect("a graph with the launch");
        graph.launch().unwrap();
        graph.launch().unwrap();
        stream.synchronize().unwrap();
        device.check(
            &stream,
            &scores,
            &format!("{}, graph replay", variant.name()),
        );
    }
}

fn main() -> std::process::ExitCode {
    harness::run_groups(&[(
        harness::Need::All(&[harness::Need::Gpu, harness::Need::Nvcc]),
        trials![
            every_one_launch_point_selects_the_top_k_twice_in_a_row_at_every_length,
            every_one_launch_point_is_right_when_every_score_is_equal,
            every_one_launch_point_replays_in_a_cuda_graph
        ],
    )])
}
