//! RMSNorm over the rows of a bf16 matrix: `y = x / sqrt(mean(x²) + eps) * w`.
//!
//! Memory-bound: one read of `x`, one write of `y`. The sweep tunes threads per
//! block and 16-byte loads in flight per thread over row counts from 4 MiB to
//! 512 MiB of input, at the hidden size of 7B–70B models (4096).

use autotune_runtime::cudarc::driver::PinnedHostSlice;
use autotune_runtime::prelude::*;

/// The row width the sweep tunes at.
pub const TUNED_HIDDEN: usize = 4096;

/// The epsilon the sweep tunes with (Llama's).
pub const TUNED_EPS: f32 = 1e-5;

/// The row width every variant is also checked at: not a multiple of any
/// variant's chunk (`block * 8 * stages` elements), so the tail path runs.
pub const ALTERNATE_HIDDEN: usize = 4096 + 24;

/// Normalizes `n_rows` rows of `hidden` elements of `x` into `out`, scaled by `weight`.
#[autotune(
    source = "kernels/rmsnorm.cu",
    entry = "rmsnorm_bf16",
    key = n_rows,
    sizes = [512, 2k, 8k, 32k, 64k],
    case = RmsNormCase,
    block = [64, 128, 256],
    stages = 1..4,
    default = (block = 256, stages = 2),
)]
#[allow(clippy::too_many_arguments)]
pub fn rms_norm(
    stream: &CudaStream,
    variant: &Variant<RmsNormParams>,
    x: &CudaSlice<bf16>,
    weight: &CudaSlice<bf16>,
    out: &mut CudaSlice<bf16>,
    n_rows: usize,
    hidden: usize,
    eps: f32,
) -> Result<(), KernelError> {
    let elements = n_rows.checked_mul(hidden);
    KernelError::check(
        elements.is_some_and(|e| x.len() >= e && out.len() >= e),
        || {
            format!(
                "x ({}) and out ({}) must hold n_rows * hidden = {n_rows} * {hidden}",
                x.len(),
                out.len()
            )
        },
    )?;
    KernelError::check(weight.len() >= hidden, || {
        format!("weight holds {} of {hidden}", weight.len())
    })?;
    let rows = u32::try_from(n_rows).ok().filter(|&r| r < i32::MAX as u32);
    let width = u32::try_from(hidden).ok();
    let (Some(rows), Some(width)) = (rows, width) else {
        return Err(KernelError::Arguments(format!(
            "{n_rows} rows of {hidden} do not fit a launch"
        )));
    };
    if rows == 0 || width == 0 {
        return Ok(());
    }
    let config = LaunchConfig {
        grid_dim: (rows, 1, 1),
        block_dim: (variant.params().block, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = stream.launch_builder(variant.function());
    launch.arg(x).arg(weight).arg(out).arg(&width).arg(&eps);
    // SAFETY: the arguments match `rmsnorm_bf16(const bf16*, const bf16*, bf16*,
    // unsigned, float)`, and the lengths were checked above.
    unsafe { launch.launch(config) }?;
    Ok(())
}

/// Inputs and reference for the sweep: `n_rows` rows of [`TUNED_HIDDEN`]. The
/// inputs are drawn once per seed (kept on the device and put back by a copy before
/// each check), the reference computed once per draw on the CPU (float64, stored as
/// f32 on the device), and each output compared with it on the device, each
/// element against its row's scale (the runtime's kernels; on the host, from a
/// pinned read-back, where they cannot run).
#[derive(Debug)]
pub struct RmsNormCase {
    x: Input<bf16>,
    weight: Input<bf16>,
    out: Guarded<bf16>,
    n_rows: usize,
    hidden: usize,
    eps: f32,
    /// The reference of the draw `expected_seed`, on the device.
    expected: CudaSlice<f32>,
    expected_seed: Option<u64>,
    host_out: PinnedHostSlice<bf16>,
}

impl RmsNormCase {
    fn with_hidden(stream: &Arc<CudaStream>, key: u64, hidden: usize) -> Result<Self, CaseError> {
        let n_rows = usize::try_from(key).map_err(|_| format!("{key} rows"))?;
        let elements = n_rows * hidden;
        let ctx = stream.context();
        Ok(Self {
            x: Input::alloc(stream, elements)?,
            weight: Input::alloc(stream, hidden)?,
            out: Guarded::alloc(stream, elements)?,
            n_rows,
            hidden,
            eps: TUNED_EPS,
            expected: stream.alloc_zeros(elements)?,
            expected_seed: None,
            // SAFETY: written (memcpy_dtoh) before it is read.
            host_out: unsafe { ctx.alloc_pinned(elements) }?,
        })
    }

    /// The reference of the current draw on the device, computed once per draw.
    fn expected(&mut self, stream: &Arc<CudaStream>) -> Result<(), CaseError> {
        let seed = self.x.seed();
        if seed.is_some() && self.expected_seed == seed {
            return Ok(());
        }
        let values = reference_phase(|| {
            rows_reference(self.x.host(), self.weight.host(), self.hidden, self.eps)
        });
        stream.memcpy_htod(&values, &mut self.expected)?;
        self.expected_seed = seed;
        Ok(())
    }
}

/// [`reference`] on all cores, narrowed to f32 as each row is computed (the float64
/// rows are never all held: at 131072 rows of 4096 they would take 4.3 GB).
fn rows_reference(x: &[bf16], weight: &[bf16], hidden: usize, eps: f32) -> Vec<f32> {
    const ROWS: usize = 64;
    let mut out = vec![0.0f32; x.len()];
    parallel::for_pieces_mut(&mut out, ROWS * hidden, |index, piece| {
        let first = index * ROWS * hidden;
        let rows = x[first..first + piece.len()].chunks(hidden);
        for (xs, ys) in rows.zip(piece.chunks_mut(hidden)) {
            for (y, v) in ys.iter_mut().zip(row_reference(xs, weight, eps)) {
                *y = v as f32;
            }
        }
    });
    out
}

impl Case for RmsNormCase {
    fn new(stream: &Arc<CudaStream>, key: u64) -> Result<Self, CaseError> {
        Self::with_hidden(stream, key, TUNED_HIDDEN)
    }

    fn alternates(stream: &Arc<CudaStream>, key: u64) -> Result<Vec<Self>, CaseError> {
        Ok(vec![Self::with_hidden(stream, key, ALTERNATE_HIDDEN)?])
    }

    fn randomize(&mut self, stream: &Arc<CudaStream>, seed: u64) -> Result<(), CaseError> {
        // Rows of different scales, so that a kernel mixing up rows cannot pass.
        let hidden = self.hidden;
        self.x.draw(stream, seed, |x| {
            parallel::for_chunks_mut(x, |chunk, values| {
                let mut rng = Rng::new(Rng::derive(seed, chunk as u64));
                let first = chunk * parallel::CHUNK;
                for (offset, value) in values.iter_mut().enumerate() {
                    let scale = 0.25 + ((first + offset) / hidden % 7) as f32;
                    let unit = (rng.next_u64() >> 40) as f32 * (1.0 / (1u32 << 24) as f32);
                    *value = bf16::from_f32((4.0 * unit - 2.0) * scale);
                }
            })
        })?;
        self.weight
            .draw(stream, seed, |w| fill_uniform(w, seed ^ 0xABCD, 0.5, 1.5))
    }

    fn poison(&mut self, stream: &Arc<CudaStream>) -> Result<(), CaseError> {
        Ok(self.out.poison(stream)?)
    }

    fn inspect(&self, memory: &mut Inspection) -> Result<(), CaseError> {
        memory.output("out", &self.out)?;
        self.x.inspect("x", memory)?;
        self.weight.inspect("weight", memory)
    }

    fn check(&mut self, stream: &Arc<CudaStream>) -> Result<Verdict, CaseError> {
        self.expected(stream)?;
        if let Some(kernels) = DeviceKernels::get(stream) {
            return kernels.compare_blocks(stream, &*self.out, &self.expected, self.hidden);
        }
        stream.memcpy_dtoh(&*self.out, &mut self.host_out)?;
        let expected: Vec<f64> = stream
            .clone_dtoh(&self.expected)?
            .iter()
            .map(|&v| f64::from(v))
            .collect();
        Ok(compare_blocks(
            self.host_out.as_slice()?,
            &expected,
            self.hidden,
        ))
    }

    fn work(&self) -> Work {
        let bytes = 2 * (2 * self.n_rows * self.hidden + self.hidden);
        Work {
            bytes: bytes as u64,
            flops: 4 * (self.n_rows * self.hidden) as u64,
        }
    }
}

/// The reference on the CPU, in float64: what tests compare a launch against.
pub fn reference(x: &[bf16], weight: &[bf16], hidden: usize, eps: f32) -> Vec<f64> {
    x.chunks(hidden)
        .flat_map(|xs| row_reference(xs, weight, eps))
        .collect()
}

/// One row normalized and scaled, in float64.
fn row_reference<'a>(
    xs: &'a [bf16],
    weight: &'a [bf16],
    eps: f32,
) -> impl Iterator<Item = f64> + 'a {
    let mean = xs.iter().map(|v| v.to_f64() * v.to_f64()).sum::<f64>() / xs.len() as f64;
    let inv = 1.0 / (mean + f64::from(eps)).sqrt();
    xs.iter()
        .zip(weight)
        .map(move |(v, w)| v.to_f64() * inv * w.to_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_case_reference_is_the_float64_reference_narrowed_row_by_row() {
        // 130 rows: two pieces of 64 rows and a short one.
        let (rows, hidden) = (130, 24);
        let mut x = vec![bf16::ZERO; rows * hidden];
        fill_uniform(&mut x, 5, -3.0, 3.0);
        let mut weight = vec![bf16::ZERO; hidden];
        fill_uniform(&mut weight, 6, 0.5, 1.5);
        let narrowed: Vec<f32> = reference(&x, &weight, hidden, TUNED_EPS)
            .iter()
            .map(|&v| v as f32)
            .collect();
        assert_eq!(rows_reference(&x, &weight, hidden, TUNED_EPS), narrowed);
    }
}
