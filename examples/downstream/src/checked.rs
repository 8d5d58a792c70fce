//! One dispatched launch checked against the CPU, for the example and the GPU test.

use std::sync::Arc;

use autotune_runtime::Verdict;
use autotune_runtime::cudarc::driver::CudaStream;
use autotune_runtime::half::bf16;
use autotune_runtime::random::fill_uniform;

use crate::layernorm::{self, LayerNorm};

/// `kernel` on `rows x cols` random inputs drawn from `seed`, its output poisoned
/// first, compared with [`layernorm::reference`].
pub fn layer_norm(
    kernel: &LayerNorm,
    stream: &Arc<CudaStream>,
    rows: usize,
    cols: usize,
    seed: u64,
) -> Result<Verdict, Box<dyn std::error::Error>> {
    let mut x = vec![bf16::ZERO; rows * cols];
    let (mut gamma, mut beta) = (vec![bf16::ZERO; cols], vec![bf16::ZERO; cols]);
    fill_uniform(&mut x, seed, -2.0, 3.0);
    fill_uniform(&mut gamma, seed + 1, 0.5, 1.5);
    fill_uniform(&mut beta, seed + 2, -0.5, 0.5);
    let (dx, dg, db) = (
        stream.clone_htod(&x)?,
        stream.clone_htod(&gamma)?,
        stream.clone_htod(&beta)?,
    );
    let mut out = stream.alloc_zeros::<bf16>(rows * cols)?;
    autotune_runtime::poison(stream, &mut out)?;
    kernel.launch(stream, &dx, &dg, &db, &mut out, rows, cols)?;
    Ok(autotune_runtime::compare(
        &stream.clone_dtoh(&out)?,
        &layernorm::reference(&x, &gamma, &beta, cols),
    ))
}
