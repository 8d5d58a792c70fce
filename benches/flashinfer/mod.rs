//! The top-k bench's production anchor: FlashInfer's selection (CUB's
//! DeviceBatchedTopK as `flashinfer.top_k` calls it for one row on sm_90, and
//! FlashInfer's own radix kernels) and the scoring a user would run before it
//! (cuBLAS logits, then a weighted ReLU sum over heads; or fused, each key read
//! once, as a production indexer scores), from the shared library
//! `bench/flashinfer/build.sh` builds out of `bench/flashinfer/anchor.cu`.

use std::ffi::c_void;
use std::path::PathBuf;
use std::sync::Arc;

use autotune_runtime::cudarc::driver::sys::CUstream;
use autotune_runtime::cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use autotune_runtime::half::bf16;

/// The library's version this bench speaks (`fi_anchor_version`).
const VERSION: i32 = 4;

type Version = unsafe extern "C" fn() -> i32;
type BlasCreate = unsafe extern "C" fn(*mut *mut c_void, *mut *mut c_void, CUstream) -> i32;
type BlasDestroy = unsafe extern "C" fn(*mut c_void, *mut c_void);
type Scores = unsafe extern "C" fn(
    *mut c_void,
    *const c_void,
    *const c_void,
    *const c_void,
    *const i32,
    *const c_void,
    i32,
    i32,
    i32,
    i32,
    *mut c_void,
    *mut c_void,
    CUstream,
) -> i32;
type FusedScores = unsafe extern "C" fn(
    *const c_void,
    *const c_void,
    *const c_void,
    *const c_void,
    i32,
    i32,
    i32,
    i32,
    *mut c_void,
    CUstream,
) -> i32;
type CubBytes = unsafe extern "C" fn(i32, i32, i32, i32) -> usize;
type SelectCub = unsafe extern "C" fn(
    *const c_void,
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

/// The scratch of the anchor's calls for some queries, each with its own context
/// of at most `max_len` keys.
pub struct Buffers {
    pub logits: CudaSlice<f32>,
    pub scores: CudaSlice<f32>,
    pub values: CudaSlice<f32>,
    pub workspace: CudaSlice<u8>,
    pub row_states: CudaSlice<u8>,
    /// Each query's length on the device, for the ragged selection; `None`: every
    /// query has `max_len` keys and the selection is the plain one.
    pub lengths: Option<CudaSlice<i32>>,
    /// The running sums of the lengths, on the host (the cuBLAS calls' offsets).
    pub offsets: Vec<i32>,
    /// The same on the device (the fused scorer's).
    pub device_offsets: CudaSlice<i32>,
    pub max_len: usize,
}

impl Buffers {
    fn rows(&self) -> usize {
        self.offsets.len() - 1
    }
}

fn int(value: usize) -> Result<i32, String> {
    i32::try_from(value).map_err(|_| format!("{value} does not fit the anchor's int"))
}

/// `Ok` for the anchor's status 0, else what failed and its status.
fn status(code: i32, what: &str) -> Result<(), String> {
    (code == 0)
        .then_some(())
        .ok_or_else(|| format!("{what} failed ({code})"))
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

    /// Scratch for queries of `lengths` keys (at most `max_len`), `heads` heads and
    /// the top `k`; `ragged`: the selection reads each query's length (else every
    /// one is `max_len` long).
    pub fn buffers(
        &self,
        heads: usize,
        (lengths, max_len): (&[usize], usize),
        k: usize,
        ragged: bool,
    ) -> Result<Buffers, String> {
        let rows = lengths.len();
        let bytes = self.symbol::<CubBytes>(b"fi_anchor_cub_workspace_bytes\0")?;
        // SAFETY: a size query; nothing is launched.
        let workspace = unsafe { bytes(int(rows)?, int(max_len)?, int(k)?, i32::from(ragged)) };
        if workspace == 0 {
            return Err(format!("CUB refuses top-{k} of {rows} rows of {max_len}"));
        }
        let mut offsets = vec![0i32; rows + 1];
        for (r, &len) in lengths.iter().enumerate() {
            offsets[r + 1] = offsets[r] + int(len)?;
        }
        let states = self.symbol::<RowStatesBytes>(b"fi_anchor_row_states_bytes\0")?;
        let driver = |e: autotune_runtime::cudarc::driver::DriverError| e.to_string();
        let stream = &self.stream;
        let lengths = if ragged {
            let lengths: Vec<i32> = lengths.iter().map(|&l| int(l)).collect::<Result<_, _>>()?;
            Some(stream.clone_htod(&lengths).map_err(driver)?)
        } else {
            None
        };
        Ok(Buffers {
            logits: stream.alloc_zeros(rows * heads * max_len).map_err(driver)?,
            scores: stream.alloc_zeros(rows * max_len).map_err(driver)?,
            values: stream.alloc_zeros(rows * k).map_err(driver)?,
            workspace: stream.alloc_zeros(workspace).map_err(driver)?,
            // SAFETY: a size; zeroed once, as FlashInfer's radix kernels need.
            row_states: stream.alloc_zeros(unsafe { states() }).map_err(driver)?,
            lengths,
            device_offsets: stream.clone_htod(&offsets).map_err(driver)?,
            offsets,
            max_len,
        })
    }

    /// The indexer's scores of the queries (`q` rows x heads x dim, `w` rows x heads,
    /// `keys` their contexts one after the other) into `buffers.scores`: one cuBLAS
    /// call per query, then the weighted ReLU sum.
    pub fn scores(
        &self,
        q: &CudaSlice<bf16>,
        w: &CudaSlice<f32>,
        keys: &CudaSlice<bf16>,
        (heads, dim): (usize, usize),
        buffers: &mut Buffers,
    ) -> Result<(), String> {
        let scores = self.symbol::<Scores>(b"fi_anchor_scores\0")?;
        let stream = &self.stream;
        let rows = buffers.rows();
        let (q, _q) = q.device_ptr(stream);
        let (w, _w) = w.device_ptr(stream);
        let (keys, _k) = keys.device_ptr(stream);
        let lengths = buffers.lengths.as_ref().map(|l| l.device_ptr(stream));
        let (logits, _l) = buffers.logits.device_ptr_mut(stream);
        let (out, _o) = buffers.scores.device_ptr_mut(stream);
        // SAFETY: the buffers are sized for `rows` queries of at most max_len keys
        // (`buffers`), the offsets are the host's running sums of the lengths, and
        // `keys` holds offsets[rows] keys; all on `stream`.
        let code = unsafe {
            scores(
                self.blas,
                q as *const c_void,
                w as *const c_void,
                keys as *const c_void,
                buffers.offsets.as_ptr(),
                lengths.as_ref().map_or(0, |(l, _)| *l) as *const c_void,
                int(rows)?,
                int(heads)?,
                int(dim)?,
                int(buffers.max_len)?,
                logits as *mut c_void,
                out as *mut c_void,
                stream.cu_stream(),
            )
        };
        status(code, "the anchor's scoring")
    }

    /// The indexer's scores of the queries into `buffers.scores` as a production
    /// indexer computes them: one launch for every query, each key read once, the
    /// weighted ReLU sum fused (`fused_scores.cuh`; 64 heads of 128 dims only).
    pub fn fused_scores(
        &self,
        q: &CudaSlice<bf16>,
        w: &CudaSlice<f32>,
        keys: &CudaSlice<bf16>,
        (heads, dim): (usize, usize),
        buffers: &mut Buffers,
    ) -> Result<(), String> {
        let scores = self.symbol::<FusedScores>(b"fi_anchor_fused_scores\0")?;
        let stream = &self.stream;
        let rows = buffers.rows();
        let (q, _q) = q.device_ptr(stream);
        let (w, _w) = w.device_ptr(stream);
        let (keys, _k) = keys.device_ptr(stream);
        let (offsets, _d) = buffers.device_offsets.device_ptr(stream);
        let (out, _o) = buffers.scores.device_ptr_mut(stream);
        // SAFETY: the scores are sized for `rows` queries of at most max_len keys
        // (`buffers`), the device offsets are the running sums of the lengths, and
        // `keys` holds offsets[rows] keys; all on `stream`.
        let code = unsafe {
            scores(
                q as *const c_void,
                w as *const c_void,
                keys as *const c_void,
                offsets as *const c_void,
                int(rows)?,
                int(heads)?,
                int(dim)?,
                int(buffers.max_len)?,
                out as *mut c_void,
                stream.cu_stream(),
            )
        };
        status(code, "the fused anchor's scoring")
    }

    /// `flashinfer.top_k`'s selection on sm_90 (CUB DeviceBatchedTopK; with
    /// `buffers.lengths`, its ragged form, then -1 after short rows) of the top `k`
    /// of each query's scores into `out` (rows x `k` int32 indices, unsorted).
    pub fn select_cub(
        &self,
        k: usize,
        buffers: &mut Buffers,
        out: &mut CudaSlice<i32>,
    ) -> Result<(), String> {
        let select = self.symbol::<SelectCub>(b"fi_anchor_select_cub\0")?;
        let stream = &self.stream;
        let (rows, bytes) = (buffers.rows(), buffers.workspace.len());
        let (scores, _s) = buffers.scores.device_ptr(stream);
        let lengths = buffers.lengths.as_ref().map(|l| l.device_ptr(stream));
        let (values, _v) = buffers.values.device_ptr_mut(stream);
        let (indices, _i) = out.device_ptr_mut(stream);
        let (workspace, _w) = buffers.workspace.device_ptr_mut(stream);
        // SAFETY: rows x max_len scores (and rows lengths) in, rows x k values and
        // indices out, the workspace the size query asked for; all on `stream`.
        let code = unsafe {
            select(
                scores as *const c_void,
                lengths.as_ref().map_or(0, |(l, _)| *l) as *const c_void,
                int(rows)?,
                int(buffers.max_len)?,
                int(k)?,
                values as *mut c_void,
                indices as *mut c_void,
                workspace as *mut c_void,
                bytes,
                stream.cu_stream(),
            )
        };
        status(code, "FlashInfer's CUB top-k")
    }

    /// FlashInfer's own selection (`sampling::TopKDispatch`, its radix or filtered
    /// kernels by its heuristic) of the top `k` of each query's `max_len` scores
    /// into `out`.
    pub fn select_radix(
        &self,
        k: usize,
        buffers: &mut Buffers,
        out: &mut CudaSlice<i32>,
    ) -> Result<(), String> {
        let select = self.symbol::<SelectRadix>(b"fi_anchor_select_radix\0")?;
        let stream = &self.stream;
        let rows = buffers.rows();
        let (scores, _s) = buffers.scores.device_ptr_mut(stream);
        let (values, _v) = buffers.values.device_ptr_mut(stream);
        let (indices, _i) = out.device_ptr_mut(stream);
        let (states, _r) = buffers.row_states.device_ptr_mut(stream);
        // SAFETY: as select_cub; the row states are the zeroed 1 MiB FlashInfer
        // asks for, used by one launch at a time.
        let code = unsafe {
            select(
                scores as *mut c_void,
                int(rows)?,
                int(buffers.max_len)?,
                int(k)?,
                values as *mut c_void,
                indices as *mut c_void,
                states as *mut c_void,
                stream.cu_stream(),
            )
        };
        status(code, "FlashInfer's radix top-k")
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
