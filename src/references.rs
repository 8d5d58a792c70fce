//! Results computed by an implementation other than ours, for the examples,
//! benchmarks and tests to check our dispatch against where the CPU would be slow.
//! (The sweep's case computes its own, beside its wrapper.)

use autotune_runtime::cudarc::cublas::CudaBlas;
use autotune_runtime::cudarc::driver::{CudaSlice, CudaStream};
use autotune_runtime::gate::CaseError;
use autotune_runtime::half::bf16;
use std::sync::Arc;

use crate::gemm::cublas_gemm;

/// `a · b` (row-major bf16, `m x k` by `k x n`) by cuBLAS, as float64.
pub fn gemm_by_cublas(
    stream: &Arc<CudaStream>,
    blas: &CudaBlas,
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    (m, n, k): (usize, usize, usize),
) -> Result<Vec<f64>, CaseError> {
    let mut c = stream.alloc_zeros::<bf16>(m * n)?;
    cublas_gemm(blas, a, b, &mut c, (m, n, k))?;
    Ok(stream.clone_dtoh(&c)?.iter().map(|v| v.to_f64()).collect())
}
