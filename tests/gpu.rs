//! GPU tests: reported ignored where no CUDA GPU is present (autotune-harness),
//! run on the H200 (see the issue notes for the runs). They take turns on the GPU: a
//! graph capture in global mode forbids synchronous calls from every other thread.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failure is the test's

use autotune_harness::{self as harness, trials};
#[path = "fixtures/device.rs"]
mod device;

use std::sync::{Arc, Mutex, MutexGuard};

use autotune_kernels::rmsnorm::{self, RmsNorm, TUNED_EPS, TUNED_HIDDEN};
use autotune_kernels::samples;
use autotune_runtime::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use autotune_runtime::cudarc::driver::{CudaContext, CudaGraph, CudaStream};
use autotune_runtime::gate::random::fill_uniform;
use autotune_runtime::half::bf16;

/// The GPU, held for the caller's test alone (or `None`: no GPU, test skipped).
pub(crate) fn gpu() -> Option<(MutexGuard<'static, ()>, Arc<CudaContext>)> {
    static TURN: Mutex<()> = Mutex::new(());
    let turn = TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    device::open_or_skip().map(|ctx| (turn, ctx))
}

/// Captures what `launches` queues on `stream` into a CUDA graph (global capture
/// mode: nothing may synchronise meanwhile) and returns it, not yet launched.
#[allow(clippy::unwrap_used, clippy::expect_used)] // a test helper: a failure is the test's
pub(crate) fn capture(stream: &Arc<CudaStream>, launches: impl FnOnce()) -> CudaGraph {
    stream.synchronize().unwrap();
    stream
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL)
        .unwrap();
    launches();
    stream
        .end_capture(CUgraphInstantiate_flags(0))
        .unwrap()
        .expect("a graph with the launches")
}

fn inputs(n_rows: usize, seed: u64) -> (Vec<bf16>, Vec<bf16>) {
    samples::rmsnorm(n_rows, TUNED_HIDDEN, seed)
}

fn dispatch_is_correct_in_every_range_and_on_odd_widths() {
    let Some((_turn, ctx)) = gpu() else { return };
    let norm = RmsNorm::load(&ctx).unwrap();
    let stream = ctx.default_stream();
    let mut keys: Vec<usize> = norm
        .ranges()
        .iter()
        .map(|r| r.first.max(1) as usize)
        .collect();
    keys.extend([1, 3, 65_537]);
    for n_rows in keys {
        let (x, w) = inputs(n_rows, n_rows as u64);
        let (dx, dw) = (
            stream.clone_htod(&x).unwrap(),
            stream.clone_htod(&w).unwrap(),
        );
        let mut out = stream.alloc_zeros::<bf16>(x.len()).unwrap();
        autotune_runtime::gate::poison(&stream, &mut out).unwrap();
        norm.launch(&stream, &dx, &dw, &mut out, n_rows, TUNED_HIDDEN, TUNED_EPS)
            .unwrap();
        let verdict = autotune_runtime::gate::compare(
            &stream.clone_dtoh(&out).unwrap(),
            &rmsnorm::reference(&x, &w, TUNED_HIDDEN, TUNED_EPS),
        );
        assert!(
            verdict.passed(),
            "{n_rows} rows via {}: {verdict:?}",
            norm.describe(n_rows)
        );
    }
    // A width that is not a multiple of 8 takes the scalar path of every variant.
    let hidden = 1000;
    let n_rows = 37;
    let mut x = vec![bf16::ZERO; n_rows * hidden];
    fill_uniform(&mut x, 9, -1.0, 1.0);
    let w = vec![bf16::ONE; hidden];
    let (dx, dw) = (
        stream.clone_htod(&x).unwrap(),
        stream.clone_htod(&w).unwrap(),
    );
    let mut out = stream.alloc_zeros::<bf16>(x.len()).unwrap();
    autotune_runtime::gate::poison(&stream, &mut out).unwrap();
    norm.launch(&stream, &dx, &dw, &mut out, n_rows, hidden, 1e-6)
        .unwrap();
    let verdict = autotune_runtime::gate::compare(
        &stream.clone_dtoh(&out).unwrap(),
        &rmsnorm::reference(&x, &w, hidden, 1e-6),
    );
    assert!(verdict.passed(), "hidden {hidden}: {verdict:?}");
}

fn dispatch_works_inside_cuda_graph_capture() {
    let Some((_turn, ctx)) = gpu() else { return };
    let norm = RmsNorm::load(&ctx).unwrap();
    // Buffers without cudarc's cross-stream events: capture must see only the launches.
    // SAFETY: everything below runs on one stream.
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream().unwrap();
    let keys: Vec<usize> = norm
        .ranges()
        .iter()
        .map(|r| r.first.max(1) as usize)
        .take(4)
        .collect();
    let mut cases = Vec::new();
    for &n_rows in &keys {
        let (x, w) = inputs(n_rows, 100 + n_rows as u64);
        let dx = stream.clone_htod(&x).unwrap();
        let dw = stream.clone_htod(&w).unwrap();
        let mut out = stream.alloc_zeros::<bf16>(x.len()).unwrap();
        autotune_runtime::gate::poison(&stream, &mut out).unwrap();
        cases.push((n_rows, x, w, dx, dw, out));
    }
    let graph = capture(&stream, || {
        for (n_rows, _, _, dx, dw, out) in &mut cases {
            norm.launch(&stream, dx, dw, out, *n_rows, TUNED_HIDDEN, TUNED_EPS)
                .unwrap();
        }
    });
    // Nothing ran during capture: the outputs are still poisoned.
    let (n_rows, ..) = &cases[0];
    let before = stream.clone_dtoh(&cases[0].5).unwrap();
    assert!(
        before.iter().take(*n_rows).all(|v| v.is_nan()),
        "capture must not execute"
    );
    graph.launch().unwrap();
    graph.launch().unwrap();
    stream.synchronize().unwrap();
    for (n_rows, x, w, _, _, out) in &cases {
        let verdict = autotune_runtime::gate::compare(
            &stream.clone_dtoh(out).unwrap(),
            &rmsnorm::reference(x, w, TUNED_HIDDEN, TUNED_EPS),
        );
        assert!(
            verdict.passed(),
            "graph replay at {n_rows} rows: {verdict:?}"
        );
    }
}

mod topk {
    use super::gpu;
    use autotune_kernels::samples::{self, TopkInputs};
    use autotune_kernels::topk::{self, DIM, TOP_K, TopkIndexer, TopkKeepAll};
    use autotune_runtime::cudarc::driver::{CudaSlice, CudaStream, DriverError};
    use autotune_runtime::half::bf16;
    use std::sync::Arc;

    fn inputs(n_ctx: usize, seed: u64) -> TopkInputs {
        samples::topk(n_ctx, seed)
    }

    /// Query, head weights and keys on the device.
    type Device = (CudaSlice<bf16>, CudaSlice<f32>, CudaSlice<bf16>);

    fn upload(stream: &Arc<CudaStream>, input: &TopkInputs) -> Result<Device, DriverError> {
        Ok((
            stream.clone_htod(&input.q)?,
            stream.clone_htod(&input.weights)?,
            stream.clone_htod(&input.keys)?,
        ))
    }

    pub(super) fn both_implementations_select_the_top_k_in_every_range() {
        let Some((_turn, ctx)) = gpu() else { return };
        let indexer = TopkIndexer::load(&ctx).unwrap();
        let keep_all = TopkKeepAll::load(&ctx).unwrap();
        let stream = ctx.default_stream();
        let mut sizes: Vec<usize> = indexer
            .ranges()
            .iter()
            .map(|r| (r.first as usize).max(TOP_K))
            .collect();
        sizes.extend([TOP_K, TOP_K + 1, 5000, 131_072]);
        for n_ctx in sizes {
            let input = inputs(n_ctx, n_ctx as u64);
            let scores = topk::scores(&input.q, &input.weights, &input.keys);
            let (dq, dw, dk) = upload(&stream, &input).unwrap();
            let mut scratch = stream.alloc_zeros::<u32>(topk::scratch_len(n_ctx)).unwrap();
            for name in ["dispatch", "keep_all"] {
                let mut out = stream.alloc_zeros::<i32>(TOP_K).unwrap();
                autotune_runtime::gate::poison(&stream, &mut out).unwrap();
                match name {
                    "dispatch" => indexer
                        .launch(&stream, &dq, &dw, &dk, &mut out, &mut scratch, n_ctx)
                        .unwrap(),
                    _ => keep_all
                        .launch(&stream, &dq, &dw, &dk, &mut out, &mut scratch, n_ctx)
                        .unwrap(),
                }
                let verdict = topk::check_top_k(&scores, &stream.clone_dtoh(&out).unwrap());
                assert!(
                    verdict.passed(),
                    "{name} at n_ctx = {n_ctx} ({}): {verdict:?}",
                    indexer.describe(n_ctx)
                );
            }
        }
    }

    /// `Variant::with_dynamic_shared`, which the dispatch paths call on every launch:
    /// the driver is asked to raise an entry's limit the first time and for a launch
    /// that needs more, and not again for one that needs no more.
    pub(super) fn an_entrys_shared_memory_limit_is_raised_once_and_then_kept() {
        use autotune_runtime::cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES as LIMIT;
        let Some((_turn, ctx)) = gpu() else { return };
        let indexer = TopkIndexer::load(&ctx).unwrap();
        let variant = indexer.default_variant();
        let function = variant.functions()[0].clone();
        let limit = || function.get_attribute(LIMIT).unwrap();
        variant.with_dynamic_shared(0, 100_000).unwrap();
        assert_eq!(limit(), 100_000);
        variant.with_dynamic_shared(0, 60_000).unwrap();
        assert_eq!(limit(), 100_000, "a smaller need leaves the raised limit");
        // Lowered behind the variant's back: a launch that needs no more than the
        // variant already asked for does not call the driver again.
        function.set_attribute(LIMIT, 48 * 1024).unwrap();
        variant.with_dynamic_shared(0, 100_000).unwrap();
        assert_eq!(limit(), 48 * 1024, "the driver was asked again");
        variant.with_dynamic_shared(0, 120_000).unwrap();
        assert_eq!(limit(), 120_000, "a larger need raises it again");
        // A clone launches the same function, so it keeps the same record.
        function.set_attribute(LIMIT, 48 * 1024).unwrap();
        variant.clone().with_dynamic_shared(0, 120_000).unwrap();
        assert_eq!(limit(), 48 * 1024, "the clone asked the driver again");
        assert!(variant.with_dynamic_shared(99, 1).is_err(), "no entry 99");
    }

    pub(super) fn all_equal_scores_take_the_overflow_path_and_stay_correct() {
        let Some((_turn, ctx)) = gpu() else { return };
        let indexer = TopkIndexer::load(&ctx).unwrap();
        let stream = ctx.default_stream();
        let n_ctx = 40_000;
        // One key repeated: every score is equal, every index is a valid answer.
        let mut input = inputs(n_ctx, 5);
        let first: Vec<bf16> = input.keys[..DIM].to_vec();
        for row in input.keys.chunks_mut(DIM) {
            row.copy_from_slice(&first);
        }
        let scores = topk::scores(&input.q, &input.weights, &input.keys);
        let (dq, dw, dk) = upload(&stream, &input).unwrap();
        let mut scratch = stream.alloc_zeros::<u32>(topk::scratch_len(n_ctx)).unwrap();
        let mut out = stream.alloc_zeros::<i32>(TOP_K).unwrap();
        autotune_runtime::gate::poison(&stream, &mut out).unwrap();
        indexer
            .launch(&stream, &dq, &dw, &dk, &mut out, &mut scratch, n_ctx)
            .unwrap();
        let verdict = topk::check_top_k(&scores, &stream.clone_dtoh(&out).unwrap());
        assert!(verdict.passed(), "{verdict:?}");
    }

    pub(super) fn the_multi_kernel_dispatch_replays_in_a_cuda_graph() {
        let Some((_turn, ctx)) = gpu() else { return };
        let indexer = TopkIndexer::load(&ctx).unwrap();
        // SAFETY: one stream only.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().unwrap();
        let n_ctx = 100_000;
        let input = inputs(n_ctx, 11);
        let (dq, dw, dk) = upload(&stream, &input).unwrap();
        let mut scratch = stream.alloc_zeros::<u32>(topk::scratch_len(n_ctx)).unwrap();
        let mut out = stream.alloc_zeros::<i32>(TOP_K).unwrap();
        autotune_runtime::gate::poison(&stream, &mut out).unwrap();
        let graph = super::capture(&stream, || {
            indexer
                .launch(&stream, &dq, &dw, &dk, &mut out, &mut scratch, n_ctx)
                .unwrap();
        });
        graph.launch().unwrap();
        graph.launch().unwrap();
        stream.synchronize().unwrap();
        let verdict = topk::check_top_k(
            &topk::scores(&input.q, &input.weights, &input.keys),
            &stream.clone_dtoh(&out).unwrap(),
        );
        assert!(
            verdict.passed(),
            "graph replay ({}): {verdict:?}",
            indexer.describe(n_ctx)
        );
    }
}

mod gemm {
    use std::sync::Arc;

    use super::gpu;
    use autotune_kernels::gemm::{self, Gemm};
    use autotune_kernels::{references, samples};
    use autotune_runtime::cudarc::cublas::CudaBlas;
    use autotune_runtime::cudarc::driver::{CudaSlice, CudaStream};
    use autotune_runtime::half::bf16;
    use autotune_runtime::{Choice, Kernel, Selection};

    /// `a · b` by cuBLAS, as float64 (the reference where the CPU would be slow).
    #[allow(clippy::unwrap_used)] // a test helper: a failure is the test's
    fn by_cublas(
        stream: &Arc<CudaStream>,
        a: &CudaSlice<bf16>,
        b: &CudaSlice<bf16>,
        dims: (usize, usize, usize),
    ) -> Vec<f64> {
        let blas = CudaBlas::new(stream.clone()).unwrap();
        references::gemm_by_cublas(stream, &blas, a, b, dims).unwrap()
    }

    pub(super) fn dispatch_is_correct_in_every_range_of_every_shape_and_on_tails() {
        let Some((_turn, ctx)) = gpu() else { return };
        let kernel = Gemm::load(&ctx).unwrap();
        let stream = ctx.default_stream();
        // Each tuned shape's plan, at a key in each of its ranges (cuBLAS the
        // reference); then small and odd shapes against the CPU.
        let mut calls: Vec<(usize, usize, usize)> = Vec::new();
        for shape in <Gemm as Kernel>::SPEC.shapes {
            let (n, k) = (shape[0] as usize, shape[1] as usize);
            for range in kernel.ranges_at(n, k) {
                calls.push(((range.first as usize).clamp(1, 9000), n, k));
            }
        }
        calls.extend([
            (1, 8, 8),
            (37, 136, 264),
            (100, 4104, 1000),
            (129, 4096, 4096),
            (3, 14336, 4096),
            (700, 6144, 2048),
        ]);
        for (m, n, k) in calls {
            let (a, b) = samples::gemm(m, n, k, (m * n) as u64);
            let (da, db) = (
                stream.clone_htod(&a).unwrap(),
                stream.clone_htod(&b).unwrap(),
            );
            let expected = if m * n * k <= 1 << 28 {
                gemm::reference(&a, &b, m, n, k)
            } else {
                by_cublas(&stream, &da, &db, (m, n, k))
            };
            let mut workspace = stream
                .alloc_zeros::<f32>(gemm::workspace_len(m, n))
                .unwrap();
            for round in 0..2 {
                // Twice: the workspace must come back zeroed for the second call.
                let mut c = stream.alloc_zeros::<bf16>(m * n).unwrap();
                autotune_runtime::gate::poison(&stream, &mut c).unwrap();
                kernel
                    .launch(&stream, &da, &db, &mut c, &mut workspace, m, n, k)
                    .unwrap();
                let verdict =
                    autotune_runtime::gate::compare(&stream.clone_dtoh(&c).unwrap(), &expected);
                assert!(
                    verdict.passed(),
                    "{m}x{n}x{k} round {round} via {} ({}): {verdict:?}",
                    kernel.describe(m, n, k),
                    kernel.shape_rule(n, k)
                );
            }
        }
    }

    /// Why this machine's GPU (if any) has no plan of the committed table: `None`
    /// where it has one, or where no GPU opens (the GPU need says that).
    pub(super) fn without_a_plan() -> Option<&'static str> {
        let ctx = autotune_runtime::gpu::open(0).ok()?;
        let gpu = autotune_runtime::gpu::GpuIdentity::of(&ctx).ok()?;
        // What `load` would select, without loading the modules.
        let (_, selection) = Gemm::baked().plans_for(&gpu);
        (!matches!(selection, Selection::Tuned { .. }))
            .then(|| format!("no tuned plan for this GPU ({selection})").leak() as &str)
    }

    pub(super) fn an_unseen_shape_uses_the_nearest_plan() {
        let Some((_turn, ctx)) = gpu() else { return };
        let kernel = Gemm::load(&ctx).unwrap();
        assert!(kernel.shape_rule(14336, 4096).contains("its own plan"));
        // (12288, 4096): 0.22 from (14336, 4096), 1.58 from (4096, 4096).
        let rule = kernel.shape_rule(12288, 4096);
        assert!(
            rule.contains("nearest") && rule.contains("n=14336,k=4096"),
            "{rule}"
        );
        // What it borrows: ranges of 14336 x 4096's plan, each with the choice that
        // plan makes there, or cuBLAS (a range of ours that did not lead it by
        // enough where it was tuned, `tests/baked.rs`).
        let own = kernel.ranges_at(14336, 4096);
        for lent in kernel.ranges_at(12288, 4096) {
            assert!(
                lent.choice == Choice::Fallback
                    || own.iter().any(|r| r.first <= lent.first
                        && lent.last <= r.last
                        && r.choice == lent.choice),
                "{lent:?} is not a range of {own:?}"
            );
        }
    }

    pub(super) fn dispatch_with_the_cublas_fallback_replays_in_a_cuda_graph() {
        let Some((_turn, ctx)) = gpu() else { return };
        let kernel = Gemm::load(&ctx).unwrap();
        // SAFETY: one stream only.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().unwrap();
        // One key in each range of the first shape: cuBLAS's ranges and ours.
        let (n, k) = (4096, 4096);
        let mut calls = Vec::new();
        for range in kernel.ranges_at(n, k) {
            let m = (range.first as usize).clamp(1, 4096);
            let (a, b) = samples::gemm(m, n, k, m as u64);
            let (da, db) = (
                stream.clone_htod(&a).unwrap(),
                stream.clone_htod(&b).unwrap(),
            );
            let mut c = stream.alloc_zeros::<bf16>(m * n).unwrap();
            autotune_runtime::gate::poison(&stream, &mut c).unwrap();
            let workspace = stream
                .alloc_zeros::<f32>(gemm::workspace_len(m, n))
                .unwrap();
            let expected = by_cublas(&stream, &da, &db, (m, n, k));
            calls.push((m, da, db, c, workspace, expected));
        }
        let graph = super::capture(&stream, || {
            for (m, da, db, c, workspace, _) in &mut calls {
                kernel
                    .launch(&stream, da, db, c, workspace, *m, n, k)
                    .unwrap();
            }
        });
        graph.launch().unwrap();
        graph.launch().unwrap();
        stream.synchronize().unwrap();
        for (m, _, _, c, _, expected) in &calls {
            let verdict = autotune_runtime::gate::compare(&stream.clone_dtoh(c).unwrap(), expected);
            assert!(
                verdict.passed(),
                "graph replay at m = {m} ({}): {verdict:?}",
                kernel.describe(*m, n, k)
            );
        }
    }
}

fn main() -> std::process::ExitCode {
    harness::run_groups(&[
        (
            harness::Need::Gpu,
            trials![
                dispatch_is_correct_in_every_range_and_on_odd_widths,
                dispatch_works_inside_cuda_graph_capture,
                topk::both_implementations_select_the_top_k_in_every_range,
                topk::an_entrys_shared_memory_limit_is_raised_once_and_then_kept,
                topk::all_equal_scores_take_the_overflow_path_and_stay_correct,
                topk::the_multi_kernel_dispatch_replays_in_a_cuda_graph,
                gemm::dispatch_is_correct_in_every_range_of_every_shape_and_on_tails,
                gemm::dispatch_with_the_cublas_fallback_replays_in_a_cuda_graph
            ],
        ),
        (
            // A GPU the committed table has plans for (another GPU runs the
            // defaults: there is no nearest plan to take).
            harness::Need::all(vec![
                harness::Need::Gpu,
                harness::Need::Checked(gemm::without_a_plan(), None),
            ]),
            trials![gemm::an_unseen_shape_uses_the_nearest_plan],
        ),
    ])
}
