//! cuBLASLt for the GEMM's vendor (issue 48, item 3: the vendor at its best):
//! `cublasLtMatmulAlgoGetHeuristic` ranks algorithms for a problem, and its first
//! choice (what `cublasGemmEx` runs) is not always its fastest. The ranked
//! algorithms are the vendor's own points (`vendor_points = N`): the sweep checks
//! and times each, and dispatch runs the one its table chose for the range.
//!
//! The layouts are those of `CublasGemm::product`: row-major `c (m x n) = a (m x
//! k) · op(b)` is column-major `cᵀ (n x m) = op(b)ᵀ (n x k) · aᵀ (k x m)`, bf16 in
//! and out, f32 accumulate and scale; `op(b)` is `b` (`k x n`) or `bᵀ` (`b` the
//! `n x k` weights of a linear layer).

use std::ffi::c_void;

use autotune_runtime::cudarc::cublas::sys::cublasOperation_t as Operation;
use autotune_runtime::cudarc::cublaslt::result::{self as lt, CublasError};
use autotune_runtime::cudarc::cublaslt::sys;
use autotune_runtime::cudarc::driver::CudaStream;

use super::{Dims, Layout};

/// A cuBLASLt handle and the GEMM's two descriptions (B as it is, B transposed).
#[derive(Debug)]
pub struct Lt {
    handle: sys::cublasLtHandle_t,
    /// Indexed by `Layout`: `KxN` takes B as it is, `NxK` transposed.
    descs: [sys::cublasLtMatmulDesc_t; 2],
}

// SAFETY: cuBLASLt's handle and descriptions may be used from any thread; they are
// only read after `new` (each call passes its own stream, layouts and workspace).
unsafe impl Send for Lt {}
// SAFETY: as above: nothing mutates them after `new`.
unsafe impl Sync for Lt {}

/// A point of the vendor's: a `cublasLtMatmulAlgo_t`'s eight words as sixteen
/// `u32`s (low half first), which is how a table records it.
pub fn words(algo: &sys::cublasLtMatmulAlgo_t) -> Vec<u32> {
    algo.data
        .iter()
        .flat_map(|word| [*word as u32, (*word >> 32) as u32])
        .collect()
}

/// The algorithm `words` recorded; `None` where they are not sixteen.
pub fn algo(words: &[u32]) -> Option<sys::cublasLtMatmulAlgo_t> {
    let words: &[u32; 16] = words.try_into().ok()?;
    let mut data = [0u64; 8];
    for (word, pair) in data.iter_mut().zip(words.chunks_exact(2)) {
        *word = u64::from(pair[0]) | (u64::from(pair[1]) << 32);
    }
    Some(sys::cublasLtMatmulAlgo_t { data })
}

/// The three layouts of a problem, destroyed with it.
struct Layouts([sys::cublasLtMatrixLayout_t; 3]);

impl Layouts {
    /// `op(b)`'s operand, `aᵀ`, `cᵀ` (see the module's doc).
    fn of(dims: &Dims) -> Result<Self, CublasError> {
        let layout = |rows: usize, cols: usize| {
            lt::create_matrix_layout(
                sys::cudaDataType::CUDA_R_16BF,
                rows as u64,
                cols as u64,
                rows as i64,
            )
        };
        let b = match dims.layout {
            Layout::KxN => layout(dims.n, dims.k)?,
            Layout::NxK => layout(dims.k, dims.n)?,
        };
        let made = (|| Ok([b, layout(dims.k, dims.m)?, layout(dims.n, dims.m)?]))();
        made.map(Self).inspect_err(|_| {
            // SAFETY: created above, not used after.
            let _ = unsafe { lt::destroy_matrix_layout(b) };
        })
    }
}

impl Drop for Layouts {
    fn drop(&mut self) {
        for layout in self.0 {
            // SAFETY: created in `of`, not used after.
            let _ = unsafe { lt::destroy_matrix_layout(layout) };
        }
    }
}

impl Lt {
    pub fn new() -> Result<Self, CublasError> {
        let handle = lt::create_handle()?;
        let mut descs = Vec::with_capacity(2);
        for op in [Operation::CUBLAS_OP_N, Operation::CUBLAS_OP_T] {
            let desc = lt::create_matmul_desc(
                sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                sys::cudaDataType::CUDA_R_32F,
            )
            .and_then(|desc| {
                // SAFETY: `desc` is live; TRANSA is a `cublasOperation_t`.
                unsafe {
                    lt::set_matmul_desc_attribute(
                        desc,
                        sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
                        (&op) as *const Operation as *const c_void,
                        std::mem::size_of::<Operation>(),
                    )
                }
                .map(|()| desc)
            });
            match desc {
                Ok(desc) => descs.push(desc),
                Err(error) => {
                    Self::free(handle, &descs);
                    return Err(error);
                }
            }
        }
        Ok(Self {
            handle,
            descs: [descs[0], descs[1]],
        })
    }

    fn free(handle: sys::cublasLtHandle_t, descs: &[sys::cublasLtMatmulDesc_t]) {
        for desc in descs {
            // SAFETY: created in `new`, not used after.
            let _ = unsafe { lt::destroy_matmul_desc(*desc) };
        }
        // SAFETY: as the descriptions.
        let _ = unsafe { lt::destroy_handle(handle) };
    }

    fn desc(&self, dims: &Dims) -> sys::cublasLtMatmulDesc_t {
        match dims.layout {
            Layout::KxN => self.descs[0],
            Layout::NxK => self.descs[1],
        }
    }

    /// The heuristic's first `count` algorithms for `dims` that need at most
    /// `workspace_bytes`, best first, as [`words`].
    pub fn ranked(
        &self,
        dims: &Dims,
        count: u32,
        workspace_bytes: usize,
    ) -> Result<Vec<Vec<u32>>, CublasError> {
        let layouts = Layouts::of(dims)?;
        let pref = lt::create_matmul_pref()?;
        let bytes = workspace_bytes as u64;
        // SAFETY: `pref` is live; the attribute is a u64 read from `bytes`.
        let set = unsafe {
            lt::set_matmul_pref_attribute(
                pref,
                sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&bytes) as *const u64 as *const c_void,
                std::mem::size_of::<u64>(),
            )
        };
        // SAFETY: a plain C struct of integers and arrays of them: all zeros is a
        // valid value, which the heuristic overwrites.
        let empty = unsafe { std::mem::zeroed::<sys::cublasLtMatmulHeuristicResult_t>() };
        let mut results = vec![empty; count as usize];
        let mut returned = 0;
        let [b, a, c] = layouts.0;
        let asked = set.and_then(|()| {
            // SAFETY: every descriptor is live; `results` holds `count` entries.
            unsafe {
                sys::cublasLtMatmulAlgoGetHeuristic(
                    self.handle,
                    self.desc(dims),
                    b,
                    a,
                    c,
                    c,
                    pref,
                    i32::try_from(count).unwrap_or(i32::MAX),
                    results.as_mut_ptr(),
                    &mut returned,
                )
            }
            .result()
        });
        // SAFETY: created above, not used after.
        unsafe { lt::destroy_matmul_pref(pref) }?;
        asked?;
        results.truncate(usize::try_from(returned).unwrap_or(0));
        Ok(results
            .iter()
            .filter(|r| {
                r.state == sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS
                    && r.workspaceSize <= workspace_bytes
            })
            .map(|r| words(&r.algo))
            .collect())
    }

    /// `c = a · op(b)` with `algo` on `stream` (pointers and sizes checked by the
    /// caller: `dims` holds for them). An algorithm that cannot run this problem
    /// is refused by cuBLASLt before anything is enqueued
    /// (`CUBLAS_STATUS_NOT_SUPPORTED` or `_INVALID_VALUE`).
    ///
    /// # Safety
    ///
    /// `a`, `b` and `c` point to device buffers of `dims`' sizes, and `workspace`
    /// to `workspace_bytes`, all usable on `stream` until the call's work ends.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn matmul(
        &self,
        algo: &sys::cublasLtMatmulAlgo_t,
        stream: &CudaStream,
        dims: &Dims,
        a: *const c_void,
        b: *const c_void,
        c: *mut c_void,
        workspace: *mut c_void,
        workspace_bytes: usize,
    ) -> Result<(), CublasError> {
        let layouts = Layouts::of(dims)?;
        let [bl, al, cl] = layouts.0;
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: the layouts describe the buffers (the caller's promise), the
        // descriptions and handle are live.
        unsafe {
            lt::matmul(
                self.handle,
                self.desc(dims),
                (&alpha) as *const f32 as *const c_void,
                (&beta) as *const f32 as *const c_void,
                b,
                bl,
                a,
                al,
                c as *const c_void,
                cl,
                c,
                cl,
                algo,
                workspace,
                workspace_bytes,
                stream.cu_stream() as _,
            )
        }
    }
}

impl Drop for Lt {
    fn drop(&mut self) {
        Self::free(self.handle, &self.descs);
    }
}

/// Whether cuBLASLt refused an algorithm for a problem (before enqueueing
/// anything), rather than failed.
pub fn refused(error: &CublasError) -> bool {
    matches!(
        error.0,
        sys::cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED
            | sys::cublasStatus_t::CUBLAS_STATUS_INVALID_VALUE
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_algorithm_goes_through_its_words_unchanged() {
        let planted = sys::cublasLtMatmulAlgo_t {
            data: [
                1,
                u64::MAX,
                0x1234_5678_9abc_def0,
                0,
                7 << 40,
                3,
                0,
                u64::MAX - 1,
            ],
        };
        let recorded = words(&planted);
        assert_eq!(recorded.len(), 16);
        assert_eq!(&recorded[4..6], &[0x9abc_def0, 0x1234_5678]);
        assert_eq!(algo(&recorded).map(|a| a.data), Some(planted.data));
        assert!(super::algo(&recorded[..15]).is_none());
    }
}
