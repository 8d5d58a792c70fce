// The launch and the case of the library's row softmax as PTX (one row per
// block), shared by the wrapper files that load it from a constant:
// `include!("softmax_rows_case.rs");` among their items. (A wrapper file is
// self-contained; see the guide's "A kernel you did not write".)

/// `softmax_rows<<<rows, threads>>>`: the PTX was made with the library's default
/// of one row per block.
fn launch<P: Params>(
    stream: &CudaStream,
    variant: &Variant<P>,
    x: &CudaSlice<f32>,
    y: &mut CudaSlice<f32>,
    rows: usize,
    cols: usize,
    threads: u32,
) -> Result<(), KernelError> {
    KernelError::check(x.len() >= rows * cols && y.len() >= rows * cols, || {
        format!("x or y is smaller than {rows} x {cols}")
    })?;
    let (Ok(r), Ok(c), Ok(block_size)) = (
        i32::try_from(rows),
        i32::try_from(cols),
        i32::try_from(threads),
    ) else {
        return Err(KernelError::Arguments(format!(
            "{rows} x {cols} does not fit i32"
        )));
    };
    if rows == 0 {
        return Ok(());
    }
    let config = LaunchConfig {
        grid_dim: (r as u32, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut builder = stream.launch_builder(variant.function());
    builder.arg(x).arg(y).arg(&r).arg(&c).arg(&block_size);
    // SAFETY: `(const float*, float*, int, int, int)`, sizes checked above.
    unsafe { builder.launch(config) }?;
    Ok(())
}

/// Random rows in [-2, 3) at `rows = key` and the shape's `cols`, the reference in
/// f64 computed once per draw.
#[derive(Debug)]
pub struct SoftmaxRowsCase {
    x: Guarded<f32>,
    y: Guarded<f32>,
    rows: usize,
    cols: usize,
    host_x: Vec<f32>,
    seed: u64,
    expected: Reference,
}

impl SoftmaxRowsCase {
    fn at(stream: &Arc<CudaStream>, rows: u64, cols: usize) -> Result<Self, CaseError> {
        let rows = usize::try_from(rows).map_err(|_| format!("rows = {rows}"))?;
        Ok(Self {
            x: Guarded::alloc(stream, rows * cols)?,
            y: Guarded::alloc(stream, rows * cols)?,
            rows,
            cols,
            host_x: vec![0.0; rows * cols],
            seed: 0,
            expected: Reference::default(),
        })
    }
}

/// The width a case is made at: the shape's `cols` (every shape declares it).
fn cols_of(shape: &Shape<'_>) -> Result<usize, CaseError> {
    let cols = shape
        .get("cols")
        .ok_or_else(|| format!("the shape {shape} has no `cols`"))?;
    Ok(usize::try_from(cols).map_err(|_| format!("cols = {cols}"))?)
}

impl Case for SoftmaxRowsCase {
    fn with_shape(
        stream: &Arc<CudaStream>,
        key: u64,
        shape: &Shape<'_>,
    ) -> Result<Self, CaseError> {
        Self::at(stream, key, cols_of(shape)?)
    }

    /// The shape's width less 8 (a multiple of 8 and of no block size) at an odd
    /// row count.
    fn alternates_with_shape(
        stream: &Arc<CudaStream>,
        key: u64,
        shape: &Shape<'_>,
    ) -> Result<Vec<Self>, CaseError> {
        let cols = cols_of(shape)?.saturating_sub(8).max(8);
        Ok(vec![Self::at(stream, key.min(4096) | 1, cols)?])
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
        let (x, cols) = (&self.host_x, self.cols);
        let expected = self.expected.for_draw(self.seed, || reference(x, cols));
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
fn reference(x: &[f32], cols: usize) -> Vec<f64> {
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
