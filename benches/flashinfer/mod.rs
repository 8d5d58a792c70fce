//! The top-k bench's production anchor: FlashInfer's selection (CUB's
//! DeviceBatchedTopK as `flashinfer.top_k` calls it for one row on sm_90, and
//! FlashInfer's own radix kernels) and the scoring a user would run before it
//! (cuBLAS logits, then a weighted ReLU sum over heads), from the shared library
//! `bench/flashinfer/build.sh` builds out of `bench/flashinfer/anchor.cu`.

use std::ffi::c_void;
use std::path::PathBuf;
use std::sync::Arc;

use autotune_runtime::cudarc::driver::sys::CUstream;
use autotune_runtime::cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use autotune_runtime::half::bf16;

/// The library's version this bench speaks (`fi_anchor_version`).
const VERSION: i32 = 2;

type Version = unsafe extern "C" fn() -> i32;
type BlasCreate = unsafe extern "C" fn(*mut *mut c_void, *mut *mut c_void, CUstream) -> i32;
type BlasDestroy = unsafe extern "C" fn(*mut c_void, *mut c_void);
type Scores = unsafe extern "C" fn(
    *mut c_void,
    *const c_void,
    *const c_void,
    *const c_void,
    i32,
    i32,
    i32,
    i32,
    *mut c_void,
    *mut c_void,
    CUstream,
) -> i32;
type CubBytes = unsafe extern "C" fn(i32, i32, i32) -> usize;
type SelectCub = unsafe extern "C" fn(
    *const c_void,
    i32,
    i32,
    i32,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    usize,
    CUstream,
) -> i32;
type RowStatesBytes = unsafe extern "C" fn() -> usize;
type SelectRadix = unsafe extern "C" fn(
    *mut c_void,
    i32,
    i32,
    i32,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    CUstream,
) -> i32;

/// The loaded anchor, with its cuBLAS handle on the bench's stream.
pub struct FlashInfer {
    library: libloading::Library,
    blas: *mut c_void,
    blas_workspace: *mut c_void,
    stream: Arc<CudaStream>,
}

/// The scratch the anchor's calls use at one context length.
pub struct Buffers {
    pub logits: CudaSlice<f32>,
    pub scores: CudaSlice<f32>,
    pub values: CudaSlice<f32>,
    pub workspace: CudaSlice<u8>,
    pub row_states: CudaSlice<u8>,
}

fn int(value: usize) -> Result<i32, String> {
    i32::try_from(value).map_err(|_| format!("{value} does not fit the anchor's int"))
}

impl FlashInfer {
    /// Where the library is: `FLASHINFER_ANCHOR`, else `target/flashinfer/`.
    #[allow(clippy::disallowed_methods)] // the bench's own variable, not the tool's
    pub fn path() -> PathBuf {
        std::env::var_os("FLASHINFER_ANCHOR").map_or_else(
            || {
                PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                    .join("target/flashinfer/libflashinfer_anchor.so")
            },
            PathBuf::from,
        )
    }

    /// Loads the library and makes its cuBLAS handle on `stream`; `Err` says why
    /// not (not built: run bench/flashinfer/build.sh).
    pub fn load(stream: &Arc<CudaStream>) -> Result<Self, String> {
        let path = Self::path();
        if !path.is_file() {
            return Err(format!(
                "{} is not built (bash bench/flashinfer/build.sh)",
                path.display()
            ));
        }
        // SAFETY: the library is ours (anchor.cu); loading it runs no code of its own
        // besides the CUDA runtime's and cuBLAS's initialisers.
        let library = unsafe { libloading::Library::new(&path) }
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let mut anchor = Self {
            library,
            blas: std::ptr::null_mut(),
            blas_workspace: std::ptr::null_mut(),
            stream: stream.clone(),
        };
        // SAFETY: the symbols have these signatures in anchor.cu.
        let version = unsafe { anchor.symbol::<Version>(b"fi_anchor_version\0")?() };
        if version != VERSION {
            return Err(format!(
                "{} is version {version}, the bench needs {VERSION}: rebuild it",
                path.display()
            ));
        }
        let create = anchor.symbol::<BlasCreate>(b"fi_anchor_blas_create\0")?;
        let (mut blas, mut workspace) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: out-pointers to two locals; the stream is live.
        let status = unsafe { create(&mut blas, &mut workspace, stream.cu_stream()) };
        if status != 0 {
            return Err(format!("the anchor's cuBLAS handle: error {status}"));
        }
        (anchor.blas, anchor.blas_workspace) = (blas, workspace);
        Ok(anchor)
    }

    fn symbol<T: Copy>(&self, name: &[u8]) -> Result<T, String> {
        // SAFETY: each caller names a symbol of anchor.cu with the type `T` it has there.
        unsafe { self.library.get::<T>(name) }
            .map(|symbol| *symbol)
            .map_err(|e| format!("{}: {e}", String::from_utf8_lossy(name)))
    }

    /// Scratch for a context of `n_ctx` keys, `heads` heads and the top `k`.
    pub fn buffers(&self, heads: usize, n_ctx: usize, k: usize) -> Result<Buffers, String> {
        let bytes = self.symbol::<CubBytes>(b"fi_anchor_cub_workspace_bytes\0")?;
        // SAFETY: a size query; nothing is launched.
        let workspace = unsafe { bytes(1, int(n_ctx)?, int(k)?) };
        if workspace == 0 {
            return Err(format!("CUB refuses top-{k} of {n_ctx}"));
        }
        let states = self.symbol::<RowStatesBytes>(b"fi_anchor_row_states_bytes\0")?;
        let driver = |e: autotune_runtime::cudarc::driver::DriverError| e.to_string();
        let stream = &self.stream;
        Ok(Buffers {
            logits: stream.alloc_zeros(heads * n_ctx).map_err(driver)?,
            scores: stream.alloc_zeros(n_ctx).map_err(driver)?,
            values: stream.alloc_zeros(k).map_err(driver)?,
            workspace: stream.alloc_zeros(workspace).map_err(driver)?,
            // SAFETY: a size; zeroed once, as FlashInfer's radix kernels need.
            row_states: stream.alloc_zeros(unsafe { states() }).map_err(driver)?,
        })
    }

    /// The indexer's scores of one query (`q` heads x dim, `w` heads) against
    /// `n_ctx` keys into `buffers.scores`: cuBLAS, then the weighted ReLU sum.
    pub fn scores(
        &self,
        q: &CudaSlice<bf16>,
        w: &CudaSlice<f32>,
        keys: &CudaSlice<bf16>,
        (heads, dim, n_ctx): (usize, usize, usize),
        buffers: &mut Buffers,
    ) -> Result<(), String> {
        let scores = self.symbol::<Scores>(b"fi_anchor_scores\0")?;
        let stream = &self.stream;
        let (q, _q) = q.device_ptr(stream);
        let (w, _w) = w.device_ptr(stream);
        let (keys, _k) = keys.device_ptr(stream);
        let (logits, _l) = buffers.logits.device_ptr_mut(stream);
        let (out, _o) = buffers.scores.device_ptr_mut(stream);
        // SAFETY: the buffers hold heads x dim, heads, n_ctx x dim, heads x n_ctx and
        // n_ctx elements, as anchor.cu reads and writes them; all on `stream`.
        let status = unsafe {
            scores(
                self.blas,
                q as *const c_void,
                w as *const c_void,
                keys as *const c_void,
                1,
                int(heads)?,
                int(dim)?,
                int(n_ctx)?,
                logits as *mut c_void,
                out as *mut c_void,
                stream.cu_stream(),
            )
        };
        (status == 0)
            .then_some(())
            .ok_or_else(|| format!("the anchor's scoring failed ({status})"))
    }

    /// `flashinfer.top_k`'s selection on sm_90 (CUB DeviceBatchedTopK) of the top
    /// `k` of `buffers.scores` into `out` (int32 indices, unsorted).
    pub fn select_cub(
        &self,
        k: usize,
        buffers: &mut Buffers,
        out: &mut CudaSlice<i32>,
    ) -> Result<(), String> {
        let select = self.symbol::<SelectCub>(b"fi_anchor_select_cub\0")?;
        let stream = &self.stream;
        let n_ctx = buffers.scores.len();
        let bytes = buffers.workspace.len();
        let (scores, _s) = buffers.scores.device_ptr(stream);
        let (values, _v) = buffers.values.device_ptr_mut(stream);
        let (indices, _i) = out.device_ptr_mut(stream);
        let (workspace, _w) = buffers.workspace.device_ptr_mut(stream);
        // SAFETY: n_ctx scores in, k values and indices out, `bytes` of workspace
        // (what the size query asked for), all on `stream`.
        let status = unsafe {
            select(
                scores as *const c_void,
                1,
                int(n_ctx)?,
                int(k)?,
                values as *mut c_void,
                indices as *mut c_void,
                workspace as *mut c_void,
                bytes,
                stream.cu_stream(),
            )
        };
        (status == 0)
            .then_some(())
            .ok_or_else(|| format!("FlashInfer's CUB top-k failed (CUDA error {status})"))
    }

    /// FlashInfer's own selection (`sampling::TopKDispatch`, its radix or filtered
    /// kernels by its heuristic) of the top `k` of `buffers.scores` into `out`.
    pub fn select_radix(
        &self,
        k: usize,
        buffers: &mut Buffers,
        out: &mut CudaSlice<i32>,
    ) -> Result<(), String> {
        let select = self.symbol::<SelectRadix>(b"fi_anchor_select_radix\0")?;
        let stream = &self.stream;
        let n_ctx = buffers.scores.len();
        let (scores, _s) = buffers.scores.device_ptr_mut(stream);
        let (values, _v) = buffers.values.device_ptr_mut(stream);
        let (indices, _i) = out.device_ptr_mut(stream);
        let (states, _r) = buffers.row_states.device_ptr_mut(stream);
        // SAFETY: as select_cub; the row states are the zeroed 1 MiB FlashInfer
        // asks for, used by one launch at a time.
        let status = unsafe {
            select(
                scores as *mut c_void,
                1,
                int(n_ctx)?,
                int(k)?,
                values as *mut c_void,
                indices as *mut c_void,
                states as *mut c_void,
                stream.cu_stream(),
            )
        };
        (status == 0)
            .then_some(())
            .ok_or_else(|| format!("FlashInfer's radix top-k failed (CUDA error {status})"))
    }
}

impl Drop for FlashInfer {
    fn drop(&mut self) {
        if let Ok(destroy) = self.symbol::<BlasDestroy>(b"fi_anchor_blas_destroy\0") {
            // SAFETY: the handle and workspace fi_anchor_blas_create made, freed once.
            unsafe { destroy(self.blas, self.blas_workspace) };
        }
    }
}
