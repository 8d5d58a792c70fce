//! cuBLASLt's ranked algorithms for the bf16 GEMM (issue 48, item 3): the vendor
//! given its best, not only its default. `cublasLtMatmulAlgoGetHeuristic` returns
//! the algorithms it ranks first for a problem (with the workspace NVIDIA advises
//! for Hopper); the GEMM bench checks and times each, so that our kernel is set
//! against the fastest of them as well as against `cublasGemmEx`'s choice.
//!
//! The layouts are those of `CublasGemm::launch`: row-major `c (m x n) = a (m x k)
//! b (k x n)` is column-major `cᵀ (n x m) = bᵀ (n x k) aᵀ (k x m)`, bf16 in and out,
//! f32 accumulate and scale.

use std::error::Error;
use std::ffi::c_void;
use std::sync::Arc;

use autotune_runtime::cudarc::cublaslt::result as lt;
use autotune_runtime::cudarc::cublaslt::sys;
use autotune_runtime::cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use autotune_runtime::half::bf16;

/// The workspace every algorithm may use: what `CublasGemm` gives cuBLAS.
const WORKSPACE_BYTES: usize = 32 << 20;

/// A cuBLASLt handle, the GEMM's description and the workspace.
pub struct LtGemm {
    handle: sys::cublasLtHandle_t,
    desc: sys::cublasLtMatmulDesc_t,
    workspace: CudaSlice<u8>,
}

/// One problem's layouts and the algorithms the heuristic ranked for it, best
/// first.
pub struct Ranked {
    pub dims: (usize, usize, usize),
    layouts: [sys::cublasLtMatrixLayout_t; 3],
    pub algos: Vec<sys::cublasLtMatmulHeuristicResult_t>,
}

impl LtGemm {
    pub fn new(stream: &Arc<CudaStream>) -> Result<Self, Box<dyn Error>> {
        // SAFETY: only tries to open the library (cudarc panics at the first call
        // into a library it cannot load).
        if !unsafe { sys::is_culib_present() } {
            return Err("libcublasLt cannot be loaded on this machine".into());
        }
        let handle = lt::create_handle()?;
        let desc = lt::create_matmul_desc(
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            sys::cudaDataType::CUDA_R_32F,
        )?;
        let workspace = stream.alloc_zeros::<u8>(WORKSPACE_BYTES)?;
        Ok(Self {
            handle,
            desc,
            workspace,
        })
    }

    /// The heuristic's first `count` algorithms for `(m, n, k)` (fewer where it
    /// has fewer).
    pub fn ranked(
        &self,
        (m, n, k): (usize, usize, usize),
        count: usize,
    ) -> Result<Ranked, Box<dyn Error>> {
        let layout = |rows: usize, cols: usize| {
            lt::create_matrix_layout(
                sys::cudaDataType::CUDA_R_16BF,
                rows as u64,
                cols as u64,
                rows as i64,
            )
        };
        let layouts = [layout(n, k)?, layout(k, m)?, layout(n, m)?];
        let mut ranked = Ranked {
            dims: (m, n, k),
            layouts,
            algos: Vec::new(),
        };
        let pref = lt::create_matmul_pref()?;
        let bytes = WORKSPACE_BYTES as u64;
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
        let mut results = vec![empty; count];
        let mut returned = 0;
        let asked = set.and_then(|()| {
            // SAFETY: every descriptor is live; `results` holds `count` entries.
            unsafe {
                sys::cublasLtMatmulAlgoGetHeuristic(
                    self.handle,
                    self.desc,
                    layouts[0],
                    layouts[1],
                    layouts[2],
                    layouts[2],
                    pref,
                    count as i32,
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
        results.retain(|r| r.state == sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS);
        ranked.algos = results;
        Ok(ranked)
    }

    /// `c = a · b` with algorithm `index` of `ranked`, on `stream`.
    pub fn launch(
        &mut self,
        stream: &Arc<CudaStream>,
        ranked: &Ranked,
        index: usize,
        a: &CudaSlice<bf16>,
        b: &CudaSlice<bf16>,
        c: &mut CudaSlice<bf16>,
    ) -> Result<(), Box<dyn Error>> {
        let (m, n, k) = ranked.dims;
        if a.len() < m * k || b.len() < k * n || c.len() < m * n {
            return Err(format!("buffers too small for {m} x {n} x {k}").into());
        }
        let algo = &ranked.algos.get(index).ok_or("no such algorithm")?.algo;
        let (alpha, beta) = (1.0f32, 0.0f32);
        let (a, _read_a) = a.device_ptr(stream);
        let (b, _read_b) = b.device_ptr(stream);
        let (c, _write_c) = c.device_ptr_mut(stream);
        let (workspace, _ws) = self.workspace.device_ptr_mut(stream);
        let [bl, al, cl] = ranked.layouts;
        // SAFETY: the layouts describe the buffers (sizes checked above); the
        // workspace holds WORKSPACE_BYTES, the most the heuristic was allowed.
        unsafe {
            lt::matmul(
                self.handle,
                self.desc,
                (&alpha) as *const f32 as *const c_void,
                (&beta) as *const f32 as *const c_void,
                b as *const c_void,
                bl,
                a as *const c_void,
                al,
                c as *const c_void,
                cl,
                c as *mut c_void,
                cl,
                algo,
                workspace as *mut c_void,
                WORKSPACE_BYTES,
                stream.cu_stream() as _,
            )
        }?;
        Ok(())
    }
}

impl Drop for Ranked {
    fn drop(&mut self) {
        for layout in self.layouts {
            // SAFETY: created in `ranked`, not used after.
            let _ = unsafe { lt::destroy_matrix_layout(layout) };
        }
    }
}

impl Drop for LtGemm {
    fn drop(&mut self) {
        // SAFETY: created in `new`, not used after.
        let _ = unsafe { lt::destroy_matmul_desc(self.desc) };
        // SAFETY: as the description.
        let _ = unsafe { lt::destroy_handle(self.handle) };
    }
}

/// What identifies an algorithm in a file of record: cuBLASLt's algorithm id,
/// tile, stages, split-K and the heuristic's workspace and wave count.
pub fn describe(result: &sys::cublasLtMatmulHeuristicResult_t) -> serde_json::Value {
    let attr = |attr: sys::cublasLtMatmulAlgoConfigAttributes_t| -> Option<u32> {
        let mut value = 0u32;
        let mut written = 0usize;
        // SAFETY: reads one attribute of a live algorithm into `value`; every
        // attribute read here is a 32-bit integer.
        unsafe {
            sys::cublasLtMatmulAlgoConfigGetAttribute(
                &result.algo,
                attr,
                (&mut value) as *mut u32 as *mut c_void,
                std::mem::size_of::<u32>(),
                &mut written,
            )
        }
        .result()
        .ok()
        .map(|()| value)
    };
    use sys::cublasLtMatmulAlgoConfigAttributes_t as A;
    serde_json::json!({
        "id": attr(A::CUBLASLT_ALGO_CONFIG_ID),
        "tile": attr(A::CUBLASLT_ALGO_CONFIG_TILE_ID),
        "stages": attr(A::CUBLASLT_ALGO_CONFIG_STAGES_ID),
        "split_k": attr(A::CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
        "workspace_bytes": result.workspaceSize,
        "waves": result.wavesCount,
    })
}
