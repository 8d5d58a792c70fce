//! `C = A · B` in bf16 (f32 accumulate), row-major, tuned across M (the key) from
//! decode (M = 1) to prefill (M = 8k), with a plan per `(N, K)` of real models'
//! projections: Llama-3-8B's q/o (4096 x 4096), gate/up (14336 x 4096) and down
//! (4096 x 14336), and Llama-3-70B's q/o (8192 x 8192). `algo = 0` is the
//! `mma.sync` tensor-core kernel (tile shape, pipeline depth, warps, split-K),
//! `algo = 1` the CUDA-core kernel for a few rows of A, `algo = 2` the Hopper kernel
//! (TMA, `wgmma`, warp-specialised and persistent, split-K over thread-block
//! clusters: [`hopper`]; compute capability 9.0 only, where the build compiles the
//! sweep and bakes the plan's images for sm_90a). For `algo = 2`, `warps` counts the
//! MMA warps (4 per consumer warpgroup of 64 rows, so `bm = 16 * warps`) and `bk`
//! is unused (a stage is 64 deep in K), which makes the Hopper point with the
//! default's tile a neighbour of the default for the local search. `algo = 3` is the
//! decode kernel (`kernels/gemm_decode.cuh`: B streamed once into the registers of
//! tensor-core MMAs, 16 x 64 tiles, `stages` blocks of 16 rows of K in flight per
//! warp, split-K over `split` blocks); it takes at most 64 rows of A (more would read
//! B once per 16 of them). cuBLAS is the fallback: it owns every range
//! where no variant of ours beats it by the margin, so dispatch never loses to what
//! a user would call instead. Another `(N, K)` uses the plan of the nearest tuned
//! one (`Gemm::shape_rule` says which).
//!
//! [`linear`] is the same product with B stored as a model stores its weights,
//! `N x K` row-major (`nn.Linear`'s `weight`): `C = A · B^T`. It compiles the same
//! kernels with `LAYOUT 1` (`kernels/linear.cu`: B's tiles loaded along K, the
//! Hopper kernel reading B K-major), all but the CUDA-core one, and is tuned for
//! Llama-3.1-8B's projections: fused QKV (6144 x 4096), O (4096 x 4096), fused
//! gate+up (28672 x 4096) and down (4096 x 14336); cuBLAS (`CublasLinear`, B taken
//! transposed) is its fallback.

use std::ffi::c_void;

use autotune_runtime::LaunchError;
use autotune_runtime::cudarc::cublas::{
    self, CudaBlas, Gemm as _, GemmConfig, sys::cublasOperation_t,
};
use autotune_runtime::cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, PinnedHostSlice};
use autotune_runtime::prelude::*;

// A child module, so that the build script (which includes this file alone) has it.
#[path = "gemm_cublaslt.rs"]
pub mod cublaslt;
#[path = "gemm_hopper.rs"]
pub mod hopper;
use hopper as gemm_hopper;

/// The `f32`s of workspace a call of shape `m x n` needs with any variant: the
/// split-K accumulator and one counter per output tile (tiles are at least 1 x 64).
/// Allocate it zeroed; every call leaves it zero.
pub fn workspace_len(m: usize, n: usize) -> usize {
    m * n + m * n.div_ceil(64)
}

/// `(N, K)` of a case made without a shape (`Case::new`): Llama-3-8B's q/o projection.
pub const PLAIN_SHAPE: (usize, usize) = (4096, 4096);

/// `(N, K)` every variant is also checked at: multiples of 8 (what the wrapper
/// takes) but of no tile width (64, 128, 256) nor of `bk` (32), so that the
/// edge tiles and the K tail run.
pub const ALTERNATE_SHAPE: (usize, usize) = (1096, 1048);

/// `c[m x n] = a[m x k] · b[k x n]`, all row-major bf16. `k` and `n` must be
/// multiples of 8.
#[autotune(
    source = "kernels/gemm.cu",
    entry = ["gemm_bf16", "gemv_bf16", "gemm_bf16_wgmma", "gemm_bf16_decode"],
    key = m,
    sizes = [1, 16, 64, 256, 1k, 4k, 8k],
    shapes = [(n = 4096, k = 4096), (n = 14336, k = 4096), (n = 4096, k = 14336), (n = 8192, k = 8192)],
    vendor = CublasGemm,
    vendor_points = 8,
    case = GemmCase,
    algo = [0, 1, 2, 3],
    bm = [1, 4, 16, 64, 128],
    bn = [64, 128, 256],
    bk = 32,
    stages = [3, 4, 5, 6],
    warps = [4, 8],
    split = [1, 2, 4, 8, 16, 32],
    where = "(algo == 0 && bm >= 16 && stages <= 4 && split != 2 && split != 8 && split != 32
              && ((bm < 64 && bn % (16 * warps) == 0 && (bm / 16) * (bn / warps / 8) <= 32)
                  || (bm >= 64 && bn % (8 * warps) == 0 && (bm / 32) * (bn * 2 / warps / 8) <= 32))
              && stages * (bm * (bk + 8) + bk * (bn + 8)) * 2 <= 200000
              && (split == 1 || bm <= 64))
             || (algo == 1 && bm <= 16 && bn >= 128 && bk == 32 && stages == 3 && split != 2
                 && split != 8 && split != 32)
             || (algo == 2 && (bm == 64 || bm == 128) && warps * 16 == bm && bn >= 128
                 && ((split == 1 && stages * (bm * 64 + 64 * bn) * 2 + 1024 <= 232448)
                     || (bm == 64 && split <= 4
                         && stages * (bm * 64 + 64 * bn) * 2 + bm * (bn + 8) * 4 + 1024 <= 232448)))
             || (algo == 3 && bm == 16 && bn == 64 && bk == 32 && stages % 2 == 0)",
    default = (algo = 0, bm = 128, bn = 128, bk = 32, stages = 3, warps = 8, split = 1),
)]
#[allow(clippy::too_many_arguments)]
pub fn gemm(
    stream: &CudaStream,
    variant: &Variant<GemmParams>,
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    c: &mut CudaSlice<bf16>,
    workspace: &mut CudaSlice<f32>,
    m: usize,
    n: usize,
    k: usize,
) -> Result<(), KernelError> {
    let dims = checked_dims(a, b, c, m, n, k)?;
    let point = point_of!(variant.params());
    launch_point(stream, variant, point, a, b, c, workspace, dims)
}

/// `c[m x n] = a[m x k] · b^T`, all row-major bf16, with `b` the `n x k` weights of
/// a linear layer as a model stores them (`nn.Linear`: `y = x W^T`). `k` and `n`
/// must be multiples of 8.
#[autotune(
    source = "kernels/linear.cu",
    entry = ["gemm_bf16", "gemv_bf16", "gemm_bf16_wgmma", "gemm_bf16_decode"],
    key = m,
    sizes = [1, 16, 64, 256, 1k, 4k, 8k],
    shapes = [(n = 6144, k = 4096), (n = 4096, k = 4096), (n = 28672, k = 4096), (n = 4096, k = 14336)],
    vendor = CublasLinear,
    vendor_points = 8,
    case = LinearCase,
    algo = [0, 2, 3],
    bm = [16, 64, 128],
    bn = [64, 128, 256],
    bk = 32,
    stages = [3, 4, 5, 6],
    warps = [4, 8],
    split = [1, 2, 4, 8, 16],
    where = "(algo == 0 && bm >= 16 && stages <= 4 && split != 2 && split != 8
              && ((bm < 64 && bn % (16 * warps) == 0 && (bm / 16) * (bn / warps / 8) <= 32)
                  || (bm >= 64 && bn % (8 * warps) == 0 && (bm / 32) * (bn * 2 / warps / 8) <= 32))
              && stages * (bm + bn) * (bk + 8) * 2 <= 200000
              && (split == 1 || bm <= 64))
             || (algo == 2 && (bm == 64 || bm == 128) && warps * 16 == bm && bn >= 128
                 && ((split == 1 && stages * (bm * 64 + 64 * bn) * 2 + 1024 <= 232448)
                     || (bm == 64 && split <= 4
                         && stages * (bm * 64 + 64 * bn) * 2 + bm * (bn + 8) * 4 + 1024 <= 232448)))
             || (algo == 3 && bm == 16 && bn == 64 && bk == 32 && stages % 2 == 0)",
    default = (algo = 0, bm = 128, bn = 128, bk = 32, stages = 3, warps = 8, split = 1),
)]
#[allow(clippy::too_many_arguments)]
pub fn linear(
    stream: &CudaStream,
    variant: &Variant<LinearParams>,
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    c: &mut CudaSlice<bf16>,
    workspace: &mut CudaSlice<f32>,
    m: usize,
    n: usize,
    k: usize,
) -> Result<(), KernelError> {
    let dims = checked_linear_dims(a, b, c, m, n, k)?;
    let point = point_of!(variant.params());
    launch_point(stream, variant, point, a, b, c, workspace, dims)
}

/// The [`Point`] of a params value of [`gemm`] or [`linear`] (two types, one set
/// of fields), field by field.
macro_rules! point_of {
    ($params:expr) => {{
        let p = $params;
        Point {
            algo: p.algo,
            bm: p.bm,
            bn: p.bn,
            bk: p.bk,
            stages: p.stages,
            warps: p.warps,
            split: p.split,
        }
    }};
}
use point_of;

/// A point of [`gemm`]'s or [`linear`]'s space (the two have the same parameters).
#[derive(Debug, Clone, Copy)]
struct Point {
    algo: u32,
    bm: u32,
    bn: u32,
    bk: u32,
    stages: u32,
    warps: u32,
    split: u32,
}

/// Launches `p`, an `algo = 2` point, through [`hopper`].
fn launch_hopper<P: Params>(
    stream: &CudaStream,
    variant: &Variant<P>,
    p: Point,
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    c: &mut CudaSlice<bf16>,
    dims: Dims,
) -> Result<(), KernelError> {
    let point = gemm_hopper::HopperParams {
        bm: p.bm,
        bn: p.bn,
        stages: p.stages,
        split: p.split,
    };
    let shared = point.shared_bytes();
    let function = variant.with_dynamic_shared(2, shared)?;
    let resident = variant.resident_blocks(stream, 2, point.threads(), shared)?;
    gemm_hopper::launch(stream, function, &point, resident, a, b, c, dims)
}

/// Launches `p`, a point compiled for `dims.layout()`, with the checked `dims`.
#[allow(clippy::too_many_arguments)]
fn launch_point<P: Params>(
    stream: &CudaStream,
    variant: &Variant<P>,
    p: Point,
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    c: &mut CudaSlice<bf16>,
    workspace: &mut CudaSlice<f32>,
    dims: Dims,
) -> Result<(), KernelError> {
    let Dims { m, n, k, .. } = dims;
    let (mi, ni, ki) = dims.launch_args();
    if p.algo == 2 {
        return launch_hopper(stream, variant, p, a, b, c, dims);
    }
    KernelError::check(p.algo != 1 || dims.layout == Layout::KxN, || {
        "the CUDA-core kernel (algo = 1) reads B as K x N only".to_string()
    })?;
    KernelError::check(p.algo != 3 || m <= 64, || {
        format!("the decode kernel (algo = 3) reads B once per 16 rows of A: m = {m} > 64")
    })?;
    let (bm, bn) = (p.bm as usize, p.bn as usize);
    let tiles = m.div_ceil(bm) * n.div_ceil(bn);
    KernelError::check(p.split == 1 || workspace.len() >= m * n + tiles, || {
        format!(
            "workspace holds {} of workspace_len({m}, {n}) = {}",
            workspace.len(),
            workspace_len(m, n)
        )
    })?;
    let Ok(grid) = u32::try_from(tiles) else {
        return Err(KernelError::Arguments(format!(
            "{m}x{n}x{k} has more tiles than a launch"
        )));
    };
    if m == 0 || n == 0 {
        return Ok(());
    }
    // The stages of A's tile and B's (bk + 8 bf16 per row of an N x K tile).
    let shared = match (p.algo, dims.layout) {
        (0, Layout::KxN) => p.stages * (p.bm * (p.bk + 8) + p.bk * (p.bn + 8)) * 2,
        (0, Layout::NxK) => p.stages * (p.bm + p.bn) * (p.bk + 8) * 2,
        _ => 0,
    };
    let function = variant.with_dynamic_shared(p.algo as usize, shared)?;
    let config = if p.algo == 0 {
        LaunchConfig {
            grid_dim: (grid, 1, p.split),
            block_dim: (p.warps * 32, 1, 1),
            shared_mem_bytes: shared,
        }
    } else {
        let (columns, rows) = (n.div_ceil(bn) as u32, m.div_ceil(bm) as u32);
        LaunchConfig {
            grid_dim: (columns, rows, p.split),
            block_dim: (p.warps * 32, 1, 1),
            shared_mem_bytes: 0,
        }
    };
    let mut launch = stream.launch_builder(function);
    launch
        .arg(a)
        .arg(b)
        .arg(c)
        .arg(workspace)
        .arg(&mi)
        .arg(&ni)
        .arg(&ki);
    // SAFETY: the entries other than the Hopper one are `(const bf16*, const bf16*,
    // bf16*, float*, int, int, int)`; sizes and alignment checked above.
    unsafe { launch.launch(config) }?;
    Ok(())
}

/// How B is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `k x n` row-major ([`gemm`]).
    KxN,
    /// `n x k` row-major, a model's weights as `nn.Linear` stores them ([`linear`]).
    NxK,
}

/// The sizes of a GEMM call that passed [`checked_dims`] (or
/// [`checked_linear_dims`]): what the launch paths take, so that none checks them
/// again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dims {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// The same as launch arguments (they fit an `i32`).
    launch: (i32, i32, i32),
    layout: Layout,
}

impl Dims {
    /// `(m, n, k)` as the kernels' `int` arguments.
    pub fn launch_args(&self) -> (i32, i32, i32) {
        self.launch
    }

    /// How the call's B is stored.
    pub fn layout(&self) -> Layout {
        self.layout
    }
}

/// What every launch path of the GEMM (ours, the Hopper kernel, cuBLAS) requires of
/// its arguments, checked in one place so that dispatch refuses the same calls
/// whichever path a range takes: `k` and `n` multiples of 8 (16-byte rows), buffers
/// that hold `m x k`, `k x n` and `m x n`, and sizes that fit an `i32`.
pub fn checked_dims(
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    c: &CudaSlice<bf16>,
    m: usize,
    n: usize,
    k: usize,
) -> Result<Dims, KernelError> {
    checked(Layout::KxN, a, b, c, (m, n, k))
}

/// [`checked_dims`] for [`linear`]: `b` holds `n x k`.
pub fn checked_linear_dims(
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    c: &CudaSlice<bf16>,
    m: usize,
    n: usize,
    k: usize,
) -> Result<Dims, KernelError> {
    checked(Layout::NxK, a, b, c, (m, n, k))
}

fn checked(
    layout: Layout,
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    c: &CudaSlice<bf16>,
    (m, n, k): (usize, usize, usize),
) -> Result<Dims, KernelError> {
    KernelError::check(k.is_multiple_of(8) && n.is_multiple_of(8), || {
        format!("k = {k} and n = {n} must be multiples of 8")
    })?;
    KernelError::check(
        a.len() >= m * k && b.len() >= k * n && c.len() >= m * n,
        || {
            let b_shape = match layout {
                Layout::KxN => format!("{k}x{n}"),
                Layout::NxK => format!("{n}x{k}"),
            };
            format!(
                "a ({}), b ({}) or c ({}) is smaller than {m}x{k}, {b_shape}, {m}x{n}",
                a.len(),
                b.len(),
                c.len()
            )
        },
    )?;
    let (Ok(mi), Ok(ni), Ok(ki)) = (i32::try_from(m), i32::try_from(n), i32::try_from(k)) else {
        return Err(KernelError::Arguments(format!(
            "{m}x{n}x{k} does not fit a launch"
        )));
    };
    Ok(Dims {
        m,
        n,
        k,
        launch: (mi, ni, ki),
        layout,
    })
}

/// `c = a · b` by cuBLAS (row-major, through the column-major transpose identity).
pub fn cublas_gemm(
    blas: &CudaBlas,
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    c: &mut CudaSlice<bf16>,
    (m, n, k): (usize, usize, usize),
) -> Result<(), CaseError> {
    cublas_product(blas, Layout::KxN, a, b, c, (m, n, k))
}

/// `c = a · b` (`Layout::KxN`) or `a · b^T` (`Layout::NxK`) by cuBLAS.
fn cublas_product(
    blas: &CudaBlas,
    layout: Layout,
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    c: &mut CudaSlice<bf16>,
    (m, n, k): (usize, usize, usize),
) -> Result<(), CaseError> {
    let dims = |v: usize| {
        i32::try_from(v).map_err(|_| CaseError::Other(format!("{v} does not fit cuBLAS")))
    };
    let (transa, lda) = column_major_b(layout, n, k);
    let config = GemmConfig {
        transa,
        transb: cublasOperation_t::CUBLAS_OP_N,
        m: dims(n)?,
        n: dims(m)?,
        k: dims(k)?,
        alpha: bf16::ONE,
        lda: dims(lda)?,
        ldb: dims(k)?,
        beta: bf16::ZERO,
        ldc: dims(n)?,
    };
    // SAFETY: a is m x k row-major, i.e. column-major k x m; b as `column_major_b`
    // says; c is n x m column-major = m x n row-major. Sizes are the callers'.
    unsafe { blas.gemm(config, b, a, c) }.map_err(|e| CaseError::Other(format!("cuBLAS: {e:?}")))
}

/// How cuBLAS (column-major) takes B as the operand of `c^T (n x m) = op(B) (n x k)
/// a^T (k x m)`, and its leading dimension: `k x n` row-major is column-major `n x
/// k` (no transpose, `ld = n`); `n x k` row-major is column-major `k x n`,
/// transposed (`ld = k`).
fn column_major_b<T>(layout: Layout, n: T, k: T) -> (cublasOperation_t, T) {
    match layout {
        Layout::KxN => (cublasOperation_t::CUBLAS_OP_N, n),
        Layout::NxK => (cublasOperation_t::CUBLAS_OP_T, k),
    }
}

/// The bytes of workspace cuBLAS gets once, at load (what NVIDIA advises for
/// Hopper): with it set, cuBLAS allocates nothing during a call, so a call can be
/// captured in a CUDA graph.
const CUBLAS_WORKSPACE_BYTES: usize = 32 << 20;

/// cuBLAS's bf16 GEMM (`cublasGemmEx`, f32 accumulate, its own heuristic's
/// algorithm): the GEMM's fallback, called by dispatch wherever it measured faster
/// than every variant of ours, and timed by the sweep exactly so. Its points of
/// its own (`vendor_points = 8`) are cuBLASLt's ranked algorithms for the call's
/// problem ([`cublaslt`]): the sweep times each against `cublasGemmEx`, and where
/// one wins a range by more than the noise, it is the incumbent there and what
/// dispatch runs (an algorithm cuBLASLt refuses for a call's sizes falls back to
/// `cublasGemmEx`).
///
/// One handle per loaded `Gemm`; each call sets the handle's stream to the call's
/// stream (a host-side setting: no synchronisation). Calls from several threads
/// through one `Gemm` on different streams would share the handle's workspace:
/// load one `Gemm` per thread for that.
#[derive(Debug)]
pub struct CublasGemm {
    blas: CudaBlas,
    lt: cublaslt::Lt,
    /// The handle's (it was given its address) and cuBLASLt's calls'.
    workspace: CudaSlice<u8>,
}

fn cublas_error(error: impl std::fmt::Debug) -> KernelError {
    KernelError::Library {
        library: CublasGemm::NAME,
        message: format!("{error:?}"),
    }
}

impl Vendor for CublasGemm {
    const NAME: &'static str = "cuBLAS";

    fn library() -> Option<String> {
        // SAFETY: only tries to open the library.
        if !unsafe { cublas::sys::is_culib_present() } {
            return None;
        }
        let property = |kind| {
            let mut value = 0;
            // SAFETY: a plain query of the library's version into `value`.
            unsafe { cublas::sys::cublasGetProperty(kind, &mut value) }
                .result()
                .ok()
                .map(|()| value)
        };
        use cublas::sys::libraryPropertyType::{MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL};
        Some(format!(
            "cuBLAS {}.{}.{}",
            property(MAJOR_VERSION)?,
            property(MINOR_VERSION)?,
            property(PATCH_LEVEL)?
        ))
    }

    fn load(ctx: &Arc<CudaContext>) -> Result<Self, LaunchError> {
        // SAFETY: as in `library`.
        if !unsafe { cublas::sys::is_culib_present() } {
            return Err(LaunchError::message(
                "libcublas cannot be loaded on this machine",
            ));
        }
        let stream = ctx.default_stream();
        let blas =
            CudaBlas::new(stream.clone()).map_err(|e| LaunchError::from_error(cublas_error(e)))?;
        let workspace = stream
            .alloc_zeros::<u8>(CUBLAS_WORKSPACE_BYTES)
            .map_err(LaunchError::from_error)?;
        {
            let (pointer, _record) = workspace.device_ptr(&stream);
            // SAFETY: the handle is live, and the workspace outlives it (both are
            // fields of `Self`; the handle is dropped first).
            unsafe {
                cublas::sys::cublasSetWorkspace_v2(
                    *blas.handle(),
                    pointer as *mut c_void,
                    CUBLAS_WORKSPACE_BYTES,
                )
            }
            .result()
            .map_err(|e| LaunchError::from_error(cublas_error(e)))?;
        }
        let lt = cublaslt::Lt::new().map_err(|e| LaunchError::from_error(cublas_error(e)))?;
        Ok(Self {
            blas,
            lt,
            workspace,
        })
    }
}

impl CublasGemm {
    /// `c = a · b`, the arguments of [`gemm`] without the variant (`workspace` is
    /// not used: cuBLAS has its own).
    #[allow(clippy::too_many_arguments)]
    pub fn launch(
        &self,
        stream: &CudaStream,
        a: &CudaSlice<bf16>,
        b: &CudaSlice<bf16>,
        c: &mut CudaSlice<bf16>,
        workspace: &mut CudaSlice<f32>,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(), KernelError> {
        let _ = workspace;
        self.product(stream, a, b, c, checked_dims(a, b, c, m, n, k)?)
    }

    /// Up to `count` of cuBLASLt's ranked algorithms for the call's problem, best
    /// first (the arguments of [`gemm`] without the variant; nothing is launched).
    #[allow(clippy::too_many_arguments)]
    pub fn points(
        &self,
        count: u32,
        stream: &CudaStream,
        a: &CudaSlice<bf16>,
        b: &CudaSlice<bf16>,
        c: &mut CudaSlice<bf16>,
        workspace: &mut CudaSlice<f32>,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<Vec<Vec<u32>>, KernelError> {
        let _ = (stream, workspace);
        self.ranked(count, &checked_dims(a, b, c, m, n, k)?)
    }

    /// `c = a · b` with the cuBLASLt algorithm `point` (as [`CublasGemm::points`]
    /// gave it), or `cublasGemmEx` where cuBLASLt refuses it for these sizes.
    #[allow(clippy::too_many_arguments)]
    pub fn launch_point(
        &self,
        point: &[u32],
        stream: &CudaStream,
        a: &CudaSlice<bf16>,
        b: &CudaSlice<bf16>,
        c: &mut CudaSlice<bf16>,
        workspace: &mut CudaSlice<f32>,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(), KernelError> {
        let _ = workspace;
        self.product_at(point, stream, a, b, c, checked_dims(a, b, c, m, n, k)?)
    }

    fn ranked(&self, count: u32, dims: &Dims) -> Result<Vec<Vec<u32>>, KernelError> {
        if dims.m == 0 || dims.n == 0 {
            return Ok(Vec::new());
        }
        self.lt
            .ranked(dims, count, CUBLAS_WORKSPACE_BYTES)
            .map_err(cublas_error)
    }

    /// `c = a · op(b)` with the cuBLASLt algorithm `point`; `cublasGemmEx` where
    /// cuBLASLt refuses it for these sizes (nothing was enqueued then).
    fn product_at(
        &self,
        point: &[u32],
        stream: &CudaStream,
        a: &CudaSlice<bf16>,
        b: &CudaSlice<bf16>,
        c: &mut CudaSlice<bf16>,
        dims: Dims,
    ) -> Result<(), KernelError> {
        let Some(algo) = cublaslt::algo(point) else {
            return Err(KernelError::Arguments(format!(
                "a cuBLASLt algorithm is 16 words, not {}",
                point.len()
            )));
        };
        if dims.m == 0 || dims.n == 0 {
            return Ok(());
        }
        let done = {
            let (a, _read_a) = a.device_ptr(stream);
            let (b, _read_b) = b.device_ptr(stream);
            let (c, _write_c) = c.device_ptr_mut(stream);
            let (workspace, _scratch) = self.workspace.device_ptr(stream);
            // SAFETY: `dims` was checked against the buffers; the workspace holds
            // CUBLAS_WORKSPACE_BYTES, the most the heuristic was allowed; all live
            // until the stream's work ends (the records above).
            unsafe {
                self.lt.matmul(
                    &algo,
                    stream,
                    &dims,
                    a as *const c_void,
                    b as *const c_void,
                    c as *mut c_void,
                    workspace as *mut c_void,
                    CUBLAS_WORKSPACE_BYTES,
                )
            }
        };
        match done {
            Ok(()) => Ok(()),
            Err(error) if cublaslt::refused(&error) => self.product(stream, a, b, c, dims),
            Err(error) => Err(cublas_error(error)),
        }
    }

    /// `c = a · b` or `a · b^T`, as `dims.layout()` says.
    fn product(
        &self,
        stream: &CudaStream,
        a: &CudaSlice<bf16>,
        b: &CudaSlice<bf16>,
        c: &mut CudaSlice<bf16>,
        dims: Dims,
    ) -> Result<(), KernelError> {
        let (mi, ni, ki) = dims.launch_args();
        let (transa, lda) = column_major_b(dims.layout, ni, ki);
        if dims.m == 0 || dims.n == 0 {
            return Ok(());
        }
        let handle = *self.blas.handle();
        // SAFETY: the handle is live; the stream outlives the call.
        unsafe { cublas::sys::cublasSetStream_v2(handle, stream.cu_stream() as _) }
            .result()
            .map_err(cublas_error)?;
        let (alpha, beta) = (1.0f32, 0.0f32);
        let (a, _read_a) = a.device_ptr(stream);
        let (b, _read_b) = b.device_ptr(stream);
        let (c, _write_c) = c.device_ptr_mut(stream);
        use cublas::sys::{cublasComputeType_t, cublasGemmAlgo_t, cudaDataType_t};
        // SAFETY: row-major c (m x n) = a (m x k) op(b) is column-major
        // c^T (n x m) = op(b)^T (n x k) a^T (k x m), b taken as `column_major_b`
        // says; sizes checked above.
        unsafe {
            cublas::result::gemm_ex(
                handle,
                transa,
                cublasOperation_t::CUBLAS_OP_N,
                ni,
                mi,
                ki,
                (&alpha) as *const f32 as *const c_void,
                b as *const c_void,
                cudaDataType_t::CUDA_R_16BF,
                lda,
                a as *const c_void,
                cudaDataType_t::CUDA_R_16BF,
                ki,
                (&beta) as *const f32 as *const c_void,
                c as *mut c_void,
                cudaDataType_t::CUDA_R_16BF,
                ni,
                cublasComputeType_t::CUBLAS_COMPUTE_32F,
                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(cublas_error)
    }
}

/// cuBLAS's bf16 GEMM with B taken transposed: [`linear`]'s fallback, as
/// [`CublasGemm`] is [`gemm`]'s (the same handle, workspace and algorithm choice).
#[derive(Debug)]
pub struct CublasLinear(CublasGemm);

impl Vendor for CublasLinear {
    const NAME: &'static str = CublasGemm::NAME;

    fn library() -> Option<String> {
        CublasGemm::library()
    }

    fn load(ctx: &Arc<CudaContext>) -> Result<Self, LaunchError> {
        CublasGemm::load(ctx).map(Self)
    }
}

impl CublasLinear {
    /// `c = a · b^T`, the arguments of [`linear`] without the variant (`workspace`
    /// is not used: cuBLAS has its own).
    #[allow(clippy::too_many_arguments)]
    pub fn launch(
        &self,
        stream: &CudaStream,
        a: &CudaSlice<bf16>,
        b: &CudaSlice<bf16>,
        c: &mut CudaSlice<bf16>,
        workspace: &mut CudaSlice<f32>,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(), KernelError> {
        let _ = workspace;
        let dims = checked_linear_dims(a, b, c, m, n, k)?;
        self.0.product(stream, a, b, c, dims)
    }

    /// Up to `count` of cuBLASLt's ranked algorithms for the call's problem (B
    /// taken transposed), best first, as [`CublasGemm::points`].
    #[allow(clippy::too_many_arguments)]
    pub fn points(
        &self,
        count: u32,
        stream: &CudaStream,
        a: &CudaSlice<bf16>,
        b: &CudaSlice<bf16>,
        c: &mut CudaSlice<bf16>,
        workspace: &mut CudaSlice<f32>,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<Vec<Vec<u32>>, KernelError> {
        let _ = (stream, workspace);
        self.0
            .ranked(count, &checked_linear_dims(a, b, c, m, n, k)?)
    }

    /// `c = a · b^T` with the cuBLASLt algorithm `point`, as
    /// [`CublasGemm::launch_point`].
    #[allow(clippy::too_many_arguments)]
    pub fn launch_point(
        &self,
        point: &[u32],
        stream: &CudaStream,
        a: &CudaSlice<bf16>,
        b: &CudaSlice<bf16>,
        c: &mut CudaSlice<bf16>,
        workspace: &mut CudaSlice<f32>,
        m: usize,
        n: usize,
        k: usize,
    ) -> Result<(), KernelError> {
        let _ = workspace;
        let dims = checked_linear_dims(a, b, c, m, n, k)?;
        self.0.product_at(point, stream, a, b, c, dims)
    }
}

/// The case the sweep checks and times the GEMM with: A and B drawn once per seed
/// (kept on the device and put back by a copy before each check), C guarded and
/// poisoned, the reference computed once per draw (float64 on the CPU for small
/// products, cuBLAS above) and compared where it is: on the host for the small
/// products, on the device for the others (the runtime's kernels, checked against
/// the CPU; on the host where they cannot run). `NXK`: B is `n x k` ([`linear`]'s
/// case, [`LinearCase`]), else `k x n` ([`gemm`]'s).
#[derive(Debug)]
pub struct GemmCase<const NXK: bool = false> {
    a: Input<bf16>,
    b: Input<bf16>,
    c: Guarded<bf16>,
    workspace: Guarded<f32>,
    /// cuBLAS's product of the draw `reference_seed`, on the device.
    reference: CudaSlice<bf16>,
    reference_seed: Option<u64>,
    m: usize,
    n: usize,
    k: usize,
    host_c: PinnedHostSlice<bf16>,
    blas: CudaBlas,
    /// The float64 product of the current draw, for the small products.
    expected: Reference,
}

/// [`linear`]'s case: B holds the `n x k` weights.
pub type LinearCase = GemmCase<true>;

/// Products up to this many multiply-adds are checked against the CPU.
const CPU_REFERENCE_MACS: usize = 1 << 28;

impl<const NXK: bool> GemmCase<NXK> {
    /// How the case's B is stored.
    const LAYOUT: Layout = if NXK { Layout::NxK } else { Layout::KxN };

    fn at(stream: &Arc<CudaStream>, key: u64, (n, k): (usize, usize)) -> Result<Self, CaseError> {
        let m = usize::try_from(key).map_err(|_| format!("m = {key}"))?;
        let ctx = stream.context();
        Ok(Self {
            a: Input::alloc(stream, m * k)?,
            b: Input::alloc(stream, k * n)?,
            c: Guarded::alloc(stream, m * n)?,
            workspace: Guarded::alloc(stream, workspace_len(m, n))?,
            reference: stream.alloc_zeros(m * n)?,
            reference_seed: None,
            m,
            n,
            k,
            // SAFETY: written before being read (memcpy_dtoh).
            host_c: unsafe { ctx.alloc_pinned(m * n) }?,
            blas: CudaBlas::new(stream.clone())
                .map_err(|e| CaseError::Other(format!("cuBLAS: {e:?}")))?,
            expected: Reference::default(),
        })
    }

    /// Whether the CPU computes the reference (and the host compares).
    fn on_cpu(&self) -> bool {
        self.m * self.n * self.k <= CPU_REFERENCE_MACS
    }

    /// cuBLAS's product of the current draw in `self.reference`, computed once per
    /// draw.
    fn device_reference(&mut self) -> Result<(), CaseError> {
        let seed = self.a.seed();
        if seed.is_some() && self.reference_seed == seed {
            return Ok(());
        }
        let (m, n, k) = (self.m, self.n, self.k);
        let (a, b, blas, on_gpu) = (&self.a, &self.b, &self.blas, &mut self.reference);
        reference_phase(|| cublas_product(blas, Self::LAYOUT, a, b, on_gpu, (m, n, k)))?;
        self.reference_seed = seed;
        Ok(())
    }

    /// The check on the host: C read back, against float64 references.
    fn check_on_host(&mut self, stream: &Arc<CudaStream>) -> Result<Verdict, CaseError> {
        stream.memcpy_dtoh(&*self.c, &mut self.host_c)?;
        let (m, n, k) = (self.m, self.n, self.k);
        let seed = self.a.seed().unwrap_or_default();
        let expected = if self.on_cpu() {
            let (a, b) = (self.a.host(), self.b.host());
            let product = match Self::LAYOUT {
                Layout::KxN => reference,
                Layout::NxK => reference_linear,
            };
            self.expected
                .for_draw(seed, || product(a, b, m, n, k))
                .to_vec()
        } else {
            self.device_reference()?;
            stream
                .clone_dtoh(&self.reference)?
                .iter()
                .map(|v| v.to_f64())
                .collect()
        };
        Ok(compare(self.host_c.as_slice()?, &expected))
    }
}

impl<const NXK: bool> Case for GemmCase<NXK> {
    fn new(stream: &Arc<CudaStream>, key: u64) -> Result<Self, CaseError> {
        Self::at(stream, key, PLAIN_SHAPE)
    }

    fn with_shape(
        stream: &Arc<CudaStream>,
        key: u64,
        shape: &Shape<'_>,
    ) -> Result<Self, CaseError> {
        let dimension = |name: &str, plain: usize| match shape.get(name) {
            None => Ok(plain),
            Some(value) => usize::try_from(value).map_err(|_| format!("{name} = {value}")),
        };
        let (n, k) = (
            dimension("n", PLAIN_SHAPE.0)?,
            dimension("k", PLAIN_SHAPE.1)?,
        );
        Self::at(stream, key, (n, k))
    }

    fn alternates(stream: &Arc<CudaStream>, key: u64) -> Result<Vec<Self>, CaseError> {
        Ok(vec![Self::at(stream, key, ALTERNATE_SHAPE)?])
    }

    fn randomize(&mut self, stream: &Arc<CudaStream>, seed: u64) -> Result<(), CaseError> {
        self.a
            .draw(stream, seed, |a| fill_uniform(a, seed, -1.0, 1.0))?;
        self.b
            .draw(stream, seed, |b| fill_uniform(b, seed ^ 1, -1.0, 1.0))?;
        Ok(())
    }

    fn poison(&mut self, stream: &Arc<CudaStream>) -> Result<(), CaseError> {
        // Not the workspace: it must be zero when a call starts.
        Ok(self.c.poison(stream)?)
    }

    fn inspect(&self, memory: &mut Inspection) -> Result<(), CaseError> {
        memory.output("c", &self.c)?;
        memory.output("workspace", &self.workspace)?;
        self.a.inspect("a", memory)?;
        self.b.inspect("b", memory)
    }

    fn check(&mut self, stream: &Arc<CudaStream>) -> Result<Verdict, CaseError> {
        let kernels = DeviceKernels::get(stream);
        let dirty = match &kernels {
            Some(kernels) => kernels.changes(stream, &*self.workspace, None)?,
            None => {
                let workspace = stream.clone_dtoh(&*self.workspace)?;
                let mut nonzero = (0..workspace.len()).filter(|&i| workspace[i] != 0.0);
                nonzero.next().map(|first| {
                    let count = 1 + nonzero.count();
                    format!("{count} elements changed, the first at {first}")
                })
            }
        };
        if let Some(dirty) = dirty {
            return Ok(Verdict::failed(format!(
                "the call left its workspace non-zero: {dirty}"
            )));
        }
        match kernels {
            Some(kernels) if !self.on_cpu() => {
                self.device_reference()?;
                kernels.compare(stream, &*self.c, &self.reference)
            }
            _ => self.check_on_host(stream),
        }
    }

    fn work(&self) -> Work {
        let (m, n, k) = (self.m as u64, self.n as u64, self.k as u64);
        Work {
            bytes: 2 * (m * k + k * n + m * n),
            flops: 2 * m * n * k,
        }
    }

    /// The weights a model reads from HBM at each call: read cold, rotated through
    /// copies while timed (`inputs = cold`).
    fn rotating(&mut self) -> Vec<&mut dyn autotune_runtime::rotation::Rotate> {
        vec![&mut self.b]
    }
}

/// `a · b` in float64 on the CPU (row-major). The work is split into pieces of one
/// row of A by 512 columns of B (`REFERENCE_COLUMNS`), so that every core has some at
/// m = 1 (a decode product, the one the sweep computes here), and B is read as
/// bf16 (a float64 copy of the 14336 x 4096 weights would be 470 MB per draw).
/// Each element sums over k in order, as a plain triple loop does.
pub fn reference(a: &[bf16], b: &[bf16], m: usize, n: usize, k: usize) -> Vec<f64> {
    let blocks = n.div_ceil(REFERENCE_COLUMNS);
    parallel::map_indices(m * blocks, |piece| {
        let (row, block) = (piece / blocks, piece % blocks);
        let columns = block * REFERENCE_COLUMNS..((block + 1) * REFERENCE_COLUMNS).min(n);
        let mut out = vec![0.0f64; columns.len()];
        for (kk, av) in a[row * k..(row + 1) * k].iter().enumerate() {
            let av = av.to_f64();
            let bs = &b[kk * n + columns.start..kk * n + columns.end];
            for (d, bv) in out.iter_mut().zip(bs) {
                *d += av * bv.to_f64();
            }
        }
        out
    })
    .concat()
}

/// `a · w^T` in float64 on the CPU, `w` being `n x k` row-major ([`linear`]'s B):
/// each element the dot product of a row of A and a row of W, summed over k in
/// order; pieces of one row of A by a block of rows of W, as [`reference()`]'s.
pub fn reference_linear(a: &[bf16], w: &[bf16], m: usize, n: usize, k: usize) -> Vec<f64> {
    let blocks = n.div_ceil(REFERENCE_COLUMNS);
    parallel::map_indices(m * blocks, |piece| {
        let (row, block) = (piece / blocks, piece % blocks);
        let a_row = &a[row * k..(row + 1) * k];
        (block * REFERENCE_COLUMNS..((block + 1) * REFERENCE_COLUMNS).min(n))
            .map(|col| {
                let w_row = &w[col * k..(col + 1) * k];
                a_row
                    .iter()
                    .zip(w_row)
                    .fold(0.0f64, |sum, (av, wv)| sum + av.to_f64() * wv.to_f64())
            })
            .collect::<Vec<_>>()
    })
    .concat()
}

/// Columns of one piece of [`reference`]'s work.
const REFERENCE_COLUMNS: usize = 512;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_is_the_triple_loop_in_float64() {
        // n not a multiple of the piece's columns, several rows.
        let (m, n, k) = (3, 2 * REFERENCE_COLUMNS + 37, 19);
        let mut a = vec![bf16::ZERO; m * k];
        let mut b = vec![bf16::ZERO; k * n];
        fill_uniform(&mut a, 1, -1.0, 1.0);
        fill_uniform(&mut b, 2, -1.0, 1.0);
        let got = reference(&a, &b, m, n, k);
        assert_eq!(got.len(), m * n);
        for row in 0..m {
            for col in 0..n {
                let mut want = 0.0f64;
                for kk in 0..k {
                    want += a[row * k + kk].to_f64() * b[kk * n + col].to_f64();
                }
                assert_eq!(got[row * n + col], want, "({row}, {col})");
            }
        }
    }

    #[test]
    fn the_linear_reference_is_the_reference_of_the_transposed_weights() {
        let (m, n, k) = (3, REFERENCE_COLUMNS + 41, 23);
        let mut a = vec![bf16::ZERO; m * k];
        let mut w = vec![bf16::ZERO; n * k];
        fill_uniform(&mut a, 3, -1.0, 1.0);
        fill_uniform(&mut w, 4, -1.0, 1.0);
        let mut b = vec![bf16::ZERO; k * n];
        for col in 0..n {
            for kk in 0..k {
                b[kk * n + col] = w[col * k + kk];
            }
        }
        assert_eq!(
            reference_linear(&a, &w, m, n, k),
            reference(&a, &b, m, n, k)
        );
    }

    #[test]
    fn cublas_takes_the_weights_transposed_with_their_row_as_leading_dimension() {
        assert_eq!(
            column_major_b(Layout::KxN, 14336, 4096),
            (cublasOperation_t::CUBLAS_OP_N, 14336)
        );
        assert_eq!(
            column_major_b(Layout::NxK, 14336, 4096),
            (cublasOperation_t::CUBLAS_OP_T, 4096)
        );
    }
}
