//! On a GPU: every range of the tuned softmax and of its PTX-only twin, at both
//! widths and at one that was not tuned, is right against the CPU; the library's
//! launch (the incumbent) too. Skips (and says so) without a GPU.

use autotune_runtime::cudarc::driver::CudaStream;
use autotune_runtime::prelude::{CudaSlice, fill_uniform};
use library_softmax::softmax::{Softmax, SoftmaxLibrary, reference};
use library_softmax::softmax_constant::SoftmaxConstant;
use library_softmax::softmax_ptx::SoftmaxPtx;

/// Runs `launch` on random rows and compares with the CPU.
fn check(
    stream: &std::sync::Arc<CudaStream>,
    rows: usize,
    cols: usize,
    launch: impl FnOnce(&CudaSlice<f32>, &mut CudaSlice<f32>),
) -> autotune_runtime::Verdict {
    let mut host = vec![0.0f32; rows * cols];
    fill_uniform(&mut host, 7, -2.0, 3.0);
    let x = stream.clone_htod(&host).unwrap();
    let mut y = stream.alloc_zeros::<f32>(rows * cols).unwrap();
    launch(&x, &mut y);
    let out = stream.clone_dtoh(&y).unwrap();
    autotune_runtime::compare(&out, &reference(&host, cols))
}

#[test]
fn every_range_and_the_library_s_launch_are_right() {
    let ctx = match autotune_runtime::gpu::open(0) {
        Ok(ctx) => ctx,
        Err(why) => return autotune_build::skip_without_gpu(why),
    };
    let tuned = Softmax::load(&ctx).unwrap();
    let library = SoftmaxLibrary::load(&ctx).unwrap();
    let ptx = SoftmaxPtx::load(&ctx).unwrap();
    let constant = SoftmaxConstant::load(&ctx).unwrap();
    // No table has the constant form yet: the library's launch runs at every size.
    let untuned = SoftmaxConstant::baked().plans.is_empty();
    let stream = ctx.default_stream();
    // Each plan in use is its own shape's: 768 and 4096 where the table is baked.
    let shapes = tuned.tuned_shapes();
    assert!(
        shapes.is_empty() || shapes == [&[768][..], &[4096][..]],
        "{shapes:?}"
    );
    for cols in [768, 4096, 1000] {
        let mut rows_to_check: Vec<usize> = tuned
            .ranges_at(cols)
            .iter()
            .map(|range| {
                usize::try_from(range.first.max(1) + 5)
                    .unwrap_or(1 << 15)
                    .min(1 << 15)
            })
            .collect();
        rows_to_check.push(3);
        for rows in rows_to_check {
            let verdict = check(&stream, rows, cols, |x, y| {
                tuned.launch(&stream, x, y, rows, cols).unwrap()
            });
            assert!(
                verdict.passed(),
                "{rows} x {cols} via {}: {verdict:?}",
                tuned.describe(rows, cols)
            );
            let verdict = check(&stream, rows, cols, |x, y| {
                ptx.launch(&stream, x, y, rows, cols).unwrap()
            });
            assert!(
                verdict.passed(),
                "the PTX, {rows} x {cols} via {}: {verdict:?}",
                ptx.describe(rows, cols)
            );
            let verdict = check(&stream, rows, cols, |x, y| {
                constant.launch(&stream, x, y, rows, cols).unwrap()
            });
            let via = constant.describe(rows, cols);
            assert!(
                verdict.passed(),
                "the constant, {rows} x {cols} via {via}: {verdict:?}"
            );
            if untuned {
                assert_eq!(via, "softmax_constant_library", "{rows} x {cols}");
            }
            let verdict = check(&stream, rows, cols, |x, y| {
                library.launch(&stream, x, y, rows, cols).unwrap()
            });
            assert!(
                verdict.passed(),
                "the library's launch, {rows} x {cols}: {verdict:?}"
            );
        }
    }
}
