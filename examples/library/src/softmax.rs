//! Row softmax over `rows` rows of `cols` floats, tuned across `rows` (the key) with
//! a plan per width (`shapes`).

use autotune_runtime::cudarc::driver::CudaFunction;
use autotune_runtime::prelude::*;

/// The library's launch: its heuristic picks the block size from the width.
#[autotune(
    source = "kernels/softmax.cu",
    entry = "softmax_rows",
    key = rows,
    sizes = [1k, 16k, 64k],
    shapes = [(cols = 768), (cols = 4096)],
    case = SoftmaxCase,
)]
pub fn softmax_library(
    stream: &CudaStream,
    variant: &Variant<()>,
    x: &CudaSlice<f32>,
    y: &mut CudaSlice<f32>,
    rows: usize,
    cols: usize,
) -> Result<(), KernelError> {
    let threads = if cols < 1024 { 32 } else { 1024 };
    launch(stream, variant.function(), x, y, rows, cols, threads, 1)
}

/// The same kernel, its block size (`threads`, launch-only) and rows per block
/// (`ROWS_PER_BLOCK`, compiled in) tuned; the library's launch owns every range
/// where no tuned point beats it, and every size on a GPU without a table.
#[autotune(
    source = "kernels/softmax.cu",
    entry = "softmax_rows",
    key = rows,
    sizes = [1k, 16k, 64k],
    shapes = [(cols = 768), (cols = 4096)],
    case = SoftmaxCase,
    fallback = softmax_library,
    threads = [32, 64, 128, 256, 512, 1024],
    rows_per_block = [1, 2, 4],
    launch = [threads],
    where = "threads * rows_per_block <= 1024",
    default = (threads = 128, rows_per_block = 1),
)]
pub fn softmax(
    stream: &CudaStream,
    variant: &Variant<SoftmaxParams>,
    x: &CudaSlice<f32>,
    y: &mut CudaSlice<f32>,
    rows: usize,
    cols: usize,
) -> Result<(), KernelError> {
    let p = variant.params();
    launch(
        stream,
        variant.function(),
        x,
        y,
        rows,
        cols,
        p.threads,
        p.rows_per_block,
    )
}

/// `softmax_rows<<<ceil(rows / rows_per_block), (threads, rows_per_block)>>>`, as
/// the library's launcher does it.
#[allow(clippy::too_many_arguments)]
fn launch(
    stream: &CudaStream,
    function: &CudaFunction,
    x: &CudaSlice<f32>,
    y: &mut CudaSlice<f32>,
    rows: usize,
    cols: usize,
    threads: u32,
    rows_per_block: u32,
) -> Result<(), KernelError> {
    KernelError::check(x.len() >= rows * cols && y.len() >= rows * cols, || {
        format!("x or y is smaller than {rows} x {cols}")
    })?;
    let (Ok(r), Ok(c)) = (i32::try_from(rows), i32::try_from(cols)) else {
        return Err(KernelError::Arguments(format!(
            "{rows} x {cols} does not fit i32"
        )));
    };
    if rows == 0 {
        return Ok(());
    }
    let block_size = threads as i32;
    let config = LaunchConfig {
        grid_dim: ((r as u32).div_ceil(rows_per_block), 1, 1),
        block_dim: (threads, rows_per_block, 1),
        shared_mem_bytes: 0,
    };
    let mut builder = stream.launch_builder(function);
    builder.arg(x).arg(y).arg(&r).arg(&c).arg(&block_size);
    // SAFETY: `(const float*, float*, int, int, int)`, sizes checked above.
    unsafe { builder.launch(config) }?;
    Ok(())
}

/// Random rows in [-2, 3) at `rows = key` and the shape's `cols`, the reference in
/// f64 computed once per draw.
#[derive(Debug)]
pub struct SoftmaxCase {
    x: Guarded<f32>,
    y: Guarded<f32>,
    rows: usize,
    cols: usize,
    host_x: Vec<f32>,
    seed: u64,
    expected: Option<(u64, Vec<f64>)>,
}

impl SoftmaxCase {
    fn at(stream: &Arc<CudaStream>, key: u64, cols: usize) -> Result<Self, CaseError> {
        let rows = usize::try_from(key).map_err(|_| format!("rows = {key}"))?;
        Ok(Self {
            x: Guarded::alloc(stream, rows * cols)?,
            y: Guarded::alloc(stream, rows * cols)?,
            rows,
            cols,
            host_x: vec![0.0; rows * cols],
            seed: 0,
            expected: None,
        })
    }
}

impl Case for SoftmaxCase {
    fn new(stream: &Arc<CudaStream>, key: u64) -> Result<Self, CaseError> {
        Self::at(stream, key, 768)
    }

    fn with_shape(
        stream: &Arc<CudaStream>,
        key: u64,
        shape: &Shape<'_>,
    ) -> Result<Self, CaseError> {
        let cols = shape.get("cols").unwrap_or(768);
        Self::at(
            stream,
            key,
            usize::try_from(cols).map_err(|_| format!("cols = {cols}"))?,
        )
    }

    /// A width that is no multiple of any block size.
    fn alternates(stream: &Arc<CudaStream>, key: u64) -> Result<Vec<Self>, CaseError> {
        Ok(vec![Self::at(stream, key.min(4096), 1000)?])
    }

    fn randomize(&mut self, stream: &Arc<CudaStream>, seed: u64) -> Result<(), CaseError> {
        self.seed = seed;
        fill_uniform(&mut self.host_x, seed, -2.0, 3.0);
        stream.memcpy_htod(&self.host_x, &mut *self.x)?;
        Ok(())
    }

    fn poison(&mut self, stream: &Arc<CudaStream>) -> Result<(), CaseError> {
        Ok(self.y.poison(stream)?)
    }

    fn inspect(&self, memory: &mut Inspection) -> Result<(), CaseError> {
        memory.output("y", &self.y)?;
        memory.guarded_input("x", &self.x, &self.host_x)
    }

    fn check(&mut self, stream: &Arc<CudaStream>) -> Result<Verdict, CaseError> {
        let out = stream.clone_dtoh(&*self.y)?;
        if self
            .expected
            .as_ref()
            .is_none_or(|(seed, _)| *seed != self.seed)
        {
            self.expected = Some((self.seed, reference(&self.host_x, self.cols)));
        }
        let expected = self
            .expected
            .as_ref()
            .map_or(&[][..], |(_, v)| v.as_slice());
        Ok(compare(&out, expected))
    }

    fn work(&self) -> Work {
        let n = (self.rows * self.cols) as u64;
        Work {
            bytes: 8 * n,
            flops: 5 * n,
        }
    }
}

/// Softmax of each row of `x`, in f64.
pub fn reference(x: &[f32], cols: usize) -> Vec<f64> {
    let rows = x.len() / cols.max(1);
    parallel::map_indices(rows, |row| {
        let input = &x[row * cols..(row + 1) * cols];
        let max = input
            .iter()
            .fold(f64::NEG_INFINITY, |m, v| m.max(f64::from(*v)));
        let sum: f64 = input.iter().map(|v| (f64::from(*v) - max).exp()).sum();
        input
            .iter()
            .map(|v| (f64::from(*v) - max).exp() / sum)
            .collect::<Vec<f64>>()
    })
    .concat()
}
