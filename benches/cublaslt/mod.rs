//! What identifies one of cuBLASLt's ranked algorithms (the GEMM vendor's own
//! points, `CublasGemm::points`) in a file of record: its algorithm id, tile,
//! stages and split-K, read from the point's words.

use std::ffi::c_void;

use autotune_kernels::gemm::cublaslt;
use autotune_runtime::cudarc::cublaslt::sys;

/// The point's configuration (`null` fields where a point is not an algorithm).
pub fn describe(point: &[u32]) -> serde_json::Value {
    let Some(algo) = cublaslt::algo(point) else {
        return serde_json::json!({ "words": point });
    };
    let attr = |attr: sys::cublasLtMatmulAlgoConfigAttributes_t| -> Option<u32> {
        let mut value = 0u32;
        let mut written = 0usize;
        // SAFETY: reads one attribute of an algorithm into `value`; every attribute
        // read here is a 32-bit integer.
        unsafe {
            sys::cublasLtMatmulAlgoConfigGetAttribute(
                &algo,
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
    })
}
