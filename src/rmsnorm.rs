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

/// `kernels/rmsnorm_reference.cu` as nvcc 13.0 compiles it for `compute_75`: the
/// case's reference on the GPU.
pub const REFERENCE_PTX: &str = include_str!("../kernels/rmsnorm_reference.ptx");

/// Rows of each draw on which the GPU's reference must agree with the CPU's before
/// it is used (the first, the last and evenly spaced between).
pub const SAMPLED_ROWS: usize = 16;

/// Inputs and reference for the sweep: `n_rows` rows of [`TUNED_HIDDEN`]. The
/// inputs are drawn once per seed (kept on the device and put back by a copy before
/// each check). The reference is computed once per draw, float64 throughout and
/// stored as f32 on the device: by `kernels/rmsnorm_reference.cu` from the draw's
/// pristine device copy, once it agreed with the CPU on [`SAMPLED_ROWS`] rows of
/// that draw; on the CPU where it cannot load or disagrees. Each output is compared
/// with it on the device, each element against its row's scale (the runtime's
/// kernels; on the host, from a pinned read-back, where they cannot run).
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
    /// `rmsnorm_reference`, while it has not disagreed with the CPU.
    gpu_reference: GpuReference,
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
            gpu_reference: GpuReference::load(ctx, REFERENCE_PTX, "rmsnorm_reference"),
        })
    }

    /// Whether the reference is computed on the GPU (until it disagrees with the
    /// CPU on a draw's sampled rows).
    pub fn reference_on_gpu(&self) -> bool {
        self.gpu_reference.in_use()
    }

    /// The reference of the current draw on the device, computed once per draw.
    fn expected(&mut self, stream: &Arc<CudaStream>) -> Result<(), CaseError> {
        let seed = self.x.seed();
        if seed.is_some() && self.expected_seed == seed {
            return Ok(());
        }
        reference_phase(|| {
            if !self.expected_on_gpu(stream)? {
                let values =
                    rows_reference(self.x.host(), self.weight.host(), self.hidden, self.eps);
                stream.memcpy_htod(&values, &mut self.expected)?;
            }
            Ok::<_, CaseError>(())
        })?;
        self.expected_seed = seed;
        Ok(())
    }

    /// The reference of the current draw computed on the GPU into `expected`, from
    /// the draw's pristine copies (which no launch is given); `false`, and the GPU's
    /// reference given up, where it cannot run or disagrees with the CPU on one of
    /// the sampled rows.
    fn expected_on_gpu(&mut self, stream: &Arc<CudaStream>) -> Result<bool, CaseError> {
        let (Some(function), Some(x), Some(weight)) = (
            self.gpu_reference.function().cloned(),
            self.x.pristine(),
            self.weight.pristine(),
        ) else {
            return Ok(false);
        };
        let (Ok(rows), Ok(hidden)) = (u32::try_from(self.n_rows), u32::try_from(self.hidden))
        else {
            return Ok(false);
        };
        if rows == 0 || hidden == 0 {
            return Ok(true);
        }
        let config = LaunchConfig {
            grid_dim: (rows, 1, 1),
            block_dim: (REFERENCE_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut launch = stream.launch_builder(&function);
        launch
            .arg(x)
            .arg(weight)
            .arg(&mut self.expected)
            .arg(&hidden)
            .arg(&self.eps);
        // SAFETY: the arguments match `rmsnorm_reference(const unsigned short*, const
        // unsigned short*, float*, unsigned, float)`; x and expected hold n_rows *
        // hidden elements, weight hidden.
        unsafe { launch.launch(config) }?;
        let h = self.hidden;
        for row in sample_indices(self.n_rows, SAMPLED_ROWS) {
            let on_gpu = stream.clone_dtoh(&self.expected.slice(row * h..(row + 1) * h))?;
            let xs = &self.x.host()[row * h..(row + 1) * h];
            let on_cpu = row_reference(xs, self.weight.host(), self.eps);
            if !on_gpu.iter().zip(on_cpu).all(|(&g, c)| agrees(g, c)) {
                self.gpu_reference.distrust();
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Threads per block of `rmsnorm_reference` (`THREADS` there).
const REFERENCE_THREADS: u32 = 256;

/// Whether the GPU's f32 value `gpu` is the CPU's float64 `cpu` narrowed: the two
/// sums of squares differ in their order only, so in the last bits of a float64,
/// and narrowing gives the same f32 or its neighbour (2^-23 apart, relative).
fn agrees(gpu: f32, cpu: f64) -> bool {
    (f64::from(gpu) - cpu).abs() <= 2.5e-7 * cpu.abs()
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
    fn the_gpu_reference_agrees_when_it_is_the_cpu_value_narrowed() {
        let cpu = 1.234_567_890_123_f64;
        let narrowed = cpu as f32;
        assert!(agrees(narrowed, cpu));
        // Its neighbour (a different rounding of nearly the same float64) too.
        assert!(agrees(f32::from_bits(narrowed.to_bits() + 1), cpu));
        // Four steps off, or a sign, no.
        assert!(!agrees(f32::from_bits(narrowed.to_bits() + 4), cpu));
        assert!(!agrees(-narrowed, cpu));
        assert!(agrees(0.0, 0.0));
    }

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
