//! `y = a * x` over `n` floats, tuned over the block size and the elements each
//! thread handles, per range of `n`.

use autotune_runtime::prelude::*;

#[autotune(
    source = "kernels/scale.cu",
    key = n,
    sizes = [4k, 256k, 16m],
    case = ScaleCase,
    block = [128, 256, 512],
    items = [1, 2, 4],
    default = (block = 256, items = 1),
)]
pub fn scale(
    stream: &CudaStream,
    variant: &Variant<ScaleParams>,
    x: &CudaSlice<f32>,
    y: &mut CudaSlice<f32>,
    a: f32,
    n: usize,
) -> Result<(), KernelError> {
    KernelError::check(x.len() >= n && y.len() >= n, || {
        format!("x ({}) and y ({}) must hold n = {n}", x.len(), y.len())
    })?;
    if n == 0 {
        return Ok(());
    }
    let p = variant.params();
    let blocks = u32::try_from(n.div_ceil((p.block * p.items) as usize))
        .map_err(|_| KernelError::Arguments(format!("n = {n} needs too many blocks")))?;
    let config = LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (p.block, 1, 1),
        shared_mem_bytes: 0,
    };
    let count = n as u64;
    let mut launch = stream.launch_builder(variant.function());
    launch.arg(x).arg(y).arg(&a).arg(&count);
    // SAFETY: the arguments match `scale(const float*, float*, float, u64)` and
    // both buffers hold `n` elements (checked above).
    unsafe { launch.launch(config) }?;
    Ok(())
}

/// The sweep's inputs for one `n`: every data argument of `scale` is the case's
/// field of the same name (`x`, `y`, `a`, `n`).
#[derive(Debug)]
pub struct ScaleCase {
    x: CudaSlice<f32>,
    y: Guarded<f32>,
    a: f32,
    n: usize,
    host_x: Vec<f32>,
}

impl Case for ScaleCase {
    fn new(stream: &Arc<CudaStream>, key: u64) -> Result<Self, CaseError> {
        let n = usize::try_from(key).map_err(|_| format!("n = {key}"))?;
        Ok(Self {
            x: stream.alloc_zeros(n)?,
            y: Guarded::alloc(stream, n)?,
            a: 0.0,
            n,
            host_x: vec![0.0; n],
        })
    }

    /// Fresh random inputs for every check.
    fn randomize(&mut self, stream: &Arc<CudaStream>, seed: u64) -> Result<(), CaseError> {
        fill_uniform(&mut self.host_x, seed, -4.0, 4.0);
        self.a = 0.5 + (seed % 7) as f32;
        stream.memcpy_htod(&self.host_x, &mut self.x)?;
        Ok(())
    }

    /// NaN in the output before each launch: a variant that skips elements fails.
    fn poison(&mut self, stream: &Arc<CudaStream>) -> Result<(), CaseError> {
        Ok(self.y.poison(stream)?)
    }

    /// What the kernel may write (`y`, guarded on both sides) and must not change (`x`).
    fn inspect(&self, memory: &mut Inspection) -> Result<(), CaseError> {
        memory.output("y", &self.y)?;
        memory.input("x", &self.x, &self.host_x)
    }

    /// The output against a float64 reference, with f32's tolerance.
    fn check(&mut self, stream: &Arc<CudaStream>) -> Result<Verdict, CaseError> {
        let y = stream.clone_dtoh(&*self.y)?;
        let reference: Vec<f64> = self
            .host_x
            .iter()
            .map(|&x| f64::from(self.a) * f64::from(x))
            .collect();
        Ok(compare(&y, &reference))
    }

    /// Bytes moved and operations done, for the report's rates.
    fn work(&self) -> Work {
        Work {
            bytes: 8 * self.n as u64,
            flops: self.n as u64,
        }
    }
}
