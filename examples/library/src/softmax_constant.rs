//! The library's softmax as candle ships its kernels: the PTX is a Rust constant of
//! a dependency (`softmax_kernels::SOFTMAX`, as `candle_kernels::REDUCE`), the
//! very text the library hands the driver. The build script reads the same
//! constant through its build-dependency and fingerprints it by its bytes, so the
//! tuned launches are timed on the code the library loads. Nothing is compiled;
//! the block size (`threads`, launch-only) is tuned against the library's launch.

use autotune_runtime::prelude::*;

include!("softmax_rows_case.rs");

/// The library's launch of its PTX constant: 32 threads a row below 1024 columns,
/// 1024 from there.
#[autotune(
    source = softmax_kernels::SOFTMAX,
    entry = "softmax_rows",
    key = rows,
    sizes = [1k, 16k, 64k],
    shapes = [(cols = 768), (cols = 4096)],
    case = SoftmaxRowsCase,
)]
pub fn softmax_constant_library(
    stream: &CudaStream,
    variant: &Variant<()>,
    x: &CudaSlice<f32>,
    y: &mut CudaSlice<f32>,
    rows: usize,
    cols: usize,
) -> Result<(), KernelError> {
    let threads = if cols < 1024 { 32 } else { 1024 };
    launch(stream, variant, x, y, rows, cols, threads)
}

/// The constant with its block size tuned; the library's launch owns every range
/// where no block size beats it, and every size where no table speaks. Its source,
/// entry, key, sizes, shapes and case are the library launch's (`like`).
#[autotune(
    like = softmax_constant_library,
    fallback = softmax_constant_library,
    threads = [32, 64, 128, 256, 512, 1024],
    launch = [threads],
    default = (threads = 128),
)]
pub fn softmax_constant(
    stream: &CudaStream,
    variant: &Variant<SoftmaxConstantParams>,
    x: &CudaSlice<f32>,
    y: &mut CudaSlice<f32>,
    rows: usize,
    cols: usize,
) -> Result<(), KernelError> {
    launch(stream, variant, x, y, rows, cols, variant.params().threads)
}
