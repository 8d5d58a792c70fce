//! The batched top-k indexer (`topk_indexer_batched`: one query per `blockIdx.y` of
//! the single-query kernels in `kernels/topk.cu`): every point of its space, both
//! launch paths, compiled for this GPU's architecture as a sweep compiles it, on
//! ragged batches (a query at the key, one shorter than the top-k from four queries
//! up, the rest spread below the key) of 1 to 64 queries, checked by the sweep's own
//! case (each query against the CPU's scores of its own context, every query's
//! histograms and counters left zero), each twice in a row. Reported ignored
//! without a GPU or nvcc (the harness).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] functions

use autotune_harness::{self as harness, trials};
#[path = "fixtures/device.rs"]
mod device;

#[path = "fixtures/points.rs"]
mod points;

use std::sync::Arc;

use autotune_kernels::topk::{BatchedTopkCase, TopkIndexerBatched, TopkIndexerBatchedParams};
use autotune_runtime::cudarc::driver::CudaContext;
use autotune_runtime::gate::Case;
use autotune_runtime::gpu::GpuIdentity;
use autotune_runtime::{Kernel, Shape, Variant};

/// Every point of the batched indexer, compiled for `arch` and loaded on `ctx`.
fn variants(ctx: &Arc<CudaContext>, arch: &str) -> Vec<Variant<TopkIndexerBatchedParams>> {
    points::compiled_variants::<TopkIndexerBatched>(ctx, arch, "topk-batched", |_| true)
}

fn every_point_selects_each_query_of_a_ragged_batch() {
    let Some(ctx) = device::open_or_skip() else {
        return;
    };
    let arch = GpuIdentity::of(&ctx).unwrap().arch();
    let variants = variants(&ctx, &arch);
    let stream = ctx.default_stream();
    let mut failures = Vec::new();
    for (batch, max_len) in [
        (1, 16_384),
        (4, 16_384),
        (16, 4096),
        (64, 16_384),
        (4, 131_072),
    ] {
        let shape = [batch as u64];
        let shape = Shape::new(&["batch"], &shape);
        let mut case = BatchedTopkCase::with_shape(&stream, max_len as u64, &shape).unwrap();
        case.randomize(&stream, 7).unwrap();
        for variant in &variants {
            for call in 0..2 {
                case.poison(&stream).unwrap();
                let at = format!(
                    "{} at batch {batch}, max_len {max_len}, call {call}",
                    variant.name()
                );
                match TopkIndexerBatched::launch_case(&mut case, &stream, variant) {
                    // A batch too large for the point's resident blocks: refused, fine.
                    Err(e) if e.refused_arguments().is_some() => break,
                    Err(e) => {
                        failures.push(format!("{at}: {e}"));
                        break;
                    }
                    Ok(()) => {}
                }
                stream.synchronize().unwrap();
                let verdict = case.check(&stream).unwrap();
                if !verdict.passed() {
                    failures.push(format!("{at}: {}", verdict.failure().unwrap_or_default()));
                    break;
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn main() -> std::process::ExitCode {
    harness::run_groups(&[(
        harness::Need::All(&[harness::Need::Gpu, harness::Need::Nvcc]),
        trials![every_point_selects_each_query_of_a_ragged_batch],
    )])
}
