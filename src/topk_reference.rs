//! The top-k cases' scores on the GPU (`kernels/topk_reference.cu`): the CPU's
//! [`scores`](super::scores) in the same order and roundings, so the same bits,
//! for every query of a case at once. A case trusts it for a draw only once it gave
//! the CPU's bits on [`SAMPLED_TOKENS`] tokens of each query of that draw, and gives
//! it up (back to the CPU) at the first that differs.

use autotune_runtime::cudarc::driver::{CudaFunction, CudaSlice};
use autotune_runtime::prelude::*;

use super::{DIM, HEADS, token_score};

/// `kernels/topk_reference.cu` as nvcc 13.0 compiles it for `compute_75`.
pub const PTX: &str = include_str!("../kernels/topk_reference.ptx");

/// Tokens of each query whose GPU score must be the CPU's, bit for bit, before the
/// GPU's scores of a draw are used (the first, the last and evenly spaced between).
pub const SAMPLED_TOKENS: usize = 256;

/// The kernel's name in [`PTX`].
const ENTRY: &str = "topk_scores_reference";

/// Threads per block of `topk_scores_reference` (`THREADS` there).
const THREADS: u32 = 128;

/// `topk_scores_reference`, loaded on one context.
#[derive(Debug, Clone)]
pub struct ScoresKernel(CudaFunction);

impl ScoresKernel {
    /// Loads [`PTX`] on `ctx` (a driver that cannot load it gives the error).
    pub fn load(ctx: &Arc<CudaContext>) -> Result<Self, DriverError> {
        Ok(Self(GpuReference::try_load(ctx, PTX, ENTRY)?))
    }

    /// Every query's scores, concatenated: query `b` has `lengths[b]` keys, from key
    /// `offsets[b]` of `keys` (`offsets` holds the running sums of `lengths`,
    /// starting at 0), its heads at `q[b * HEADS * DIM..]` and its head weights at
    /// `weights[b * HEADS..]`.
    pub fn scores(
        &self,
        stream: &Arc<CudaStream>,
        (q, weights, keys): (&CudaSlice<bf16>, &CudaSlice<f32>, &CudaSlice<bf16>),
        offsets: &CudaSlice<u32>,
        lengths: &[usize],
    ) -> Result<Vec<f64>, CaseError> {
        let batch = lengths.len();
        let total: usize = lengths.iter().sum();
        let longest = lengths.iter().copied().max().unwrap_or(0);
        if q.len() < batch * HEADS * DIM
            || weights.len() < batch * HEADS
            || keys.len() < total * DIM
            || offsets.len() < batch + 1
        {
            return Err(format!(
                "{batch} queries of {total} keys in all: q {}, weights {}, keys {}, offsets {}",
                q.len(),
                weights.len(),
                keys.len(),
                offsets.len()
            )
            .into());
        }
        if total == 0 {
            return Ok(Vec::new());
        }
        let mut out = stream.alloc_zeros::<f64>(total)?;
        let blocks = u32::try_from(longest.div_ceil(THREADS as usize))
            .map_err(|_| format!("a context of {longest} keys"))?;
        let queries = u32::try_from(batch).map_err(|_| format!("{batch} queries"))?;
        let config = LaunchConfig {
            grid_dim: (blocks, queries, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut launch = stream.launch_builder(&self.0);
        launch
            .arg(q)
            .arg(weights)
            .arg(keys)
            .arg(offsets)
            .arg(&mut out);
        // SAFETY: the arguments match `topk_scores_reference(const unsigned short*,
        // const float*, const unsigned short*, const unsigned*, double*)`, each as
        // long as the batch needs (checked above; `offsets` the caller's sums of
        // `lengths`), `out` one score per key.
        unsafe { launch.launch(config) }?;
        Ok(stream.clone_dtoh(&out)?)
    }
}

/// A case's scores on the GPU, while they have not differed from the CPU's.
#[derive(Debug)]
pub(super) struct GpuScores(GpuReference);

impl GpuScores {
    /// The kernel on `stream`'s context; none (the CPU computes) where it cannot
    /// load.
    pub(super) fn load(stream: &Arc<CudaStream>) -> Self {
        Self(GpuReference::load(stream.context(), PTX, ENTRY))
    }

    pub(super) fn in_use(&self) -> bool {
        self.0.in_use()
    }

    /// Every query's scores of the draw the inputs hold, concatenated (as
    /// [`ScoresKernel::scores`]), computed from the draw's pristine device copies
    /// (which no launch is given); `None`, and the GPU given up, where it cannot run
    /// or a sampled token's score is not the CPU's.
    pub(super) fn scores(
        &mut self,
        stream: &Arc<CudaStream>,
        (q, weights, keys): (&Input<bf16>, &Input<f32>, &Input<bf16>),
        offsets: &CudaSlice<u32>,
        lengths: &[usize],
    ) -> Result<Option<Vec<f64>>, CaseError> {
        let (Some(function), Some(dq), Some(dw), Some(dk)) = (
            self.0.function(),
            q.pristine(),
            weights.pristine(),
            keys.pristine(),
        ) else {
            return Ok(None);
        };
        let all = ScoresKernel(function.clone()).scores(stream, (dq, dw, dk), offsets, lengths)?;
        let (q, weights, keys) = (q.host(), weights.host(), keys.host());
        let starts = super::starts(lengths);
        let differs = parallel::map_indices(lengths.len(), |b| {
            let q: Vec<f32> = q[b * HEADS * DIM..(b + 1) * HEADS * DIM]
                .iter()
                .map(|v| v.to_f32())
                .collect();
            let weights = &weights[b * HEADS..(b + 1) * HEADS];
            sample_indices(lengths[b], SAMPLED_TOKENS)
                .into_iter()
                .map(|t| starts[b] + t)
                .any(|i| {
                    token_score(&q, weights, &keys[i * DIM..(i + 1) * DIM]).to_bits()
                        != all[i].to_bits()
                })
        });
        if differs.contains(&true) {
            self.0.distrust();
            return Ok(None);
        }
        Ok(Some(all))
    }
}
