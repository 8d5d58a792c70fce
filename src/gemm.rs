//! `C = A · B` in bf16 (f32 accumulate), row-major, tuned across M (the key) from
//! decode (M = 1) to large square products: `algo = 0` is the tensor-core kernel
//! (tile shape, pipeline depth, warps, split-K), `algo = 1` the CUDA-core kernel for
//! a few rows of A (rows per block, columns per block, warps, split-K).
//!
//! The sweep's cases use `(N, K) = (4096, 4096)` up to M = 4096 and `N = K = M`
//! above: the plan is tuned on those shapes and applied to any `(N, K)`.

use autotune_runtime::cudarc::cublas::{CudaBlas, Gemm as _, GemmConfig, sys::cublasOperation_t};
use autotune_runtime::cudarc::driver::sys::CUfunction_attribute;
use autotune_runtime::cudarc::driver::{CudaSlice, PinnedHostSlice};
use autotune_runtime::prelude::*;

/// The `f32`s of workspace a call of shape `m x n` needs with any variant: the
/// split-K accumulator and one counter per output tile (tiles are at least 1 x 64).
/// Allocate it zeroed; every call leaves it zero.
pub fn workspace_len(m: usize, n: usize) -> usize {
    m * n + m * n.div_ceil(64)
}

/// `(N, K)` of the sweep's case at `M = m`: squares above 4096 (N and K rounded up
/// to the multiple of 8 the kernel needs, for refinement sizes between powers of two).
pub fn case_shape(m: usize) -> (usize, usize) {
    if m > 4096 {
        let side = m.next_multiple_of(8);
        (side, side)
    } else {
        (4096, 4096)
    }
}

/// `(N, K)` every variant is also checked at: multiples of 8 (what the wrapper
/// takes) but of no tile width (64, 128, 256) nor of `bk` (32), so that the
/// edge tiles and the K tail run.
pub const ALTERNATE_SHAPE: (usize, usize) = (1096, 1048);

/// `c[m x n] = a[m x k] · b[k x n]`, all row-major bf16. `k` and `n` must be
/// multiples of 8.
#[autotune(
    source = "kernels/gemm.cu",
    entry = ["gemm_bf16", "gemv_bf16"],
    key = m,
    sizes = [1, 16, 64, 256, 1k, 4k, 8k],
    case = GemmCase,
    algo = [0, 1],
    bm = [1, 4, 16, 64, 128],
    bn = [64, 128, 256],
    bk = 32,
    stages = [3, 4],
    warps = [4, 8],
    split = [1, 4, 16],
    where = "(algo == 0 && bm >= 16
              && ((bm < 64 && bn % (16 * warps) == 0 && (bm / 16) * (bn / warps / 8) <= 32)
                  || (bm >= 64 && bn % (8 * warps) == 0 && (bm / 32) * (bn * 2 / warps / 8) <= 32))
              && stages * (bm * (bk + 8) + bk * (bn + 8)) * 2 <= 200000
              && (split == 1 || bm <= 64))
             || (algo == 1 && bm <= 16 && bn >= 128 && bk == 32 && stages == 3)",
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
    KernelError::check(k.is_multiple_of(8) && n.is_multiple_of(8), || {
        format!("k = {k} and n = {n} must be multiples of 8")
    })?;
    KernelError::check(
        a.len() >= m * k && b.len() >= k * n && c.len() >= m * n,
        || {
            format!(
                "a ({}), b ({}) or c ({}) is smaller than {m}x{k}, {k}x{n}, {m}x{n}",
                a.len(),
                b.len(),
                c.len()
            )
        },
    )?;
    let p = variant.params();
    let (bm, bn) = (p.bm as usize, p.bn as usize);
    let tiles = m.div_ceil(bm) * n.div_ceil(bn);
    KernelError::check(p.split == 1 || workspace.len() >= m * n + tiles, || {
        format!(
            "workspace holds {} of workspace_len({m}, {n}) = {}",
            workspace.len(),
            workspace_len(m, n)
        )
    })?;
    let dims = (
        i32::try_from(m),
        i32::try_from(n),
        i32::try_from(k),
        u32::try_from(tiles),
    );
    let (Ok(mi), Ok(ni), Ok(ki), Ok(grid)) = dims else {
        return Err(KernelError::Arguments(format!(
            "{m}x{n}x{k} does not fit a launch"
        )));
    };
    if m == 0 || n == 0 {
        return Ok(());
    }
    let function = variant
        .functions()
        .get(p.algo as usize)
        .ok_or_else(|| KernelError::Arguments(format!("no entry for algo {}", p.algo)))?;
    let config = if p.algo == 0 {
        let shared = p.stages * (p.bm * (p.bk + 8) + p.bk * (p.bn + 8)) * 2;
        if shared > 48 * 1024 {
            function.set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                shared as i32,
            )?;
        }
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
    // SAFETY: both entries are `(const bf16*, const bf16*, bf16*, float*, int, int,
    // int)`; sizes and alignment checked above.
    unsafe { launch.launch(config) }?;
    Ok(())
}

/// `c = a · b` by cuBLAS (row-major, through the column-major transpose identity).
pub fn cublas_gemm(
    blas: &CudaBlas,
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    c: &mut CudaSlice<bf16>,
    (m, n, k): (usize, usize, usize),
) -> Result<(), CaseError> {
    let dims = |v: usize| {
        i32::try_from(v).map_err(|_| CaseError::Other(format!("{v} does not fit cuBLAS")))
    };
    let config = GemmConfig {
        transa: cublasOperation_t::CUBLAS_OP_N,
        transb: cublasOperation_t::CUBLAS_OP_N,
        m: dims(n)?,
        n: dims(m)?,
        k: dims(k)?,
        alpha: bf16::ONE,
        lda: dims(n)?,
        ldb: dims(k)?,
        beta: bf16::ZERO,
        ldc: dims(n)?,
    };
    // SAFETY: b is k x n and a is m x k row-major, i.e. column-major n x k and k x m;
    // c is n x m column-major = m x n row-major. Sizes are the callers'.
    unsafe { blas.gemm(config, b, a, c) }.map_err(|e| CaseError::Other(format!("cuBLAS: {e:?}")))
}

/// Random `A` and `B` at `M = key` (see [`case_shape`]), and the reference: float64
/// on the CPU for small products, cuBLAS above.
#[derive(Debug)]
pub struct GemmCase {
    a: CudaSlice<bf16>,
    b: CudaSlice<bf16>,
    c: Guarded<bf16>,
    workspace: Guarded<f32>,
    reference: CudaSlice<bf16>,
    m: usize,
    n: usize,
    k: usize,
    host_a: PinnedHostSlice<bf16>,
    host_b: PinnedHostSlice<bf16>,
    host_c: PinnedHostSlice<bf16>,
    blas: CudaBlas,
}

/// Products up to this many multiply-adds are checked against the CPU.
const CPU_REFERENCE_MACS: usize = 1 << 28;

impl GemmCase {
    fn with_shape(
        stream: &Arc<CudaStream>,
        key: u64,
        shape: impl Fn(usize) -> (usize, usize),
    ) -> Result<Self, CaseError> {
        let m = usize::try_from(key).map_err(|_| format!("m = {key}"))?;
        let (n, k) = shape(m);
        let ctx = stream.context();
        Ok(Self {
            a: stream.alloc_zeros(m * k)?,
            b: stream.alloc_zeros(k * n)?,
            c: Guarded::alloc(stream, m * n)?,
            workspace: Guarded::alloc(stream, workspace_len(m, n))?,
            reference: stream.alloc_zeros(m * n)?,
            m,
            n,
            k,
            // SAFETY: written before being read (randomize, memcpy_dtoh).
            host_a: unsafe { ctx.alloc_pinned(m * k) }?,
            // SAFETY: as host_a.
            host_b: unsafe { ctx.alloc_pinned(k * n) }?,
            // SAFETY: as host_a.
            host_c: unsafe { ctx.alloc_pinned(m * n) }?,
            blas: CudaBlas::new(stream.clone())
                .map_err(|e| CaseError::Other(format!("cuBLAS: {e:?}")))?,
        })
    }
}

impl Case for GemmCase {
    fn new(stream: &Arc<CudaStream>, key: u64) -> Result<Self, CaseError> {
        Self::with_shape(stream, key, case_shape)
    }

    fn alternates(stream: &Arc<CudaStream>, key: u64) -> Result<Vec<Self>, CaseError> {
        Ok(vec![Self::with_shape(stream, key, |_| ALTERNATE_SHAPE)?])
    }

    fn randomize(&mut self, stream: &Arc<CudaStream>, seed: u64) -> Result<(), CaseError> {
        fill_uniform(self.host_a.as_mut_slice()?, seed, -1.0, 1.0);
        fill_uniform(self.host_b.as_mut_slice()?, seed ^ 1, -1.0, 1.0);
        stream.memcpy_htod(&self.host_a, &mut self.a)?;
        stream.memcpy_htod(&self.host_b, &mut self.b)?;
        Ok(())
    }

    fn poison(&mut self, stream: &Arc<CudaStream>) -> Result<(), CaseError> {
        // Not the workspace: it must be zero when a call starts.
        Ok(self.c.poison(stream)?)
    }

    fn inspect(&self, memory: &mut Inspection) -> Result<(), CaseError> {
        memory.output("c", &self.c)?;
        memory.output("workspace", &self.workspace)?;
        memory.input("a", &self.a, self.host_a.as_slice()?)?;
        memory.input("b", &self.b, self.host_b.as_slice()?)
    }

    fn check(&mut self, stream: &Arc<CudaStream>) -> Result<Verdict, CaseError> {
        let (m, n, k) = (self.m, self.n, self.k);
        stream.memcpy_dtoh(&*self.c, &mut self.host_c)?;
        let dirty = stream
            .clone_dtoh(&*self.workspace)?
            .iter()
            .position(|&v| v != 0.0);
        stream.synchronize()?;
        if let Some(index) = dirty {
            return Ok(Verdict::failed(format!(
                "the call left workspace[{index}] non-zero"
            )));
        }
        let out = self.host_c.as_slice()?;
        if m * n * k <= CPU_REFERENCE_MACS {
            let (a, b) = (self.host_a.as_slice()?, self.host_b.as_slice()?);
            return Ok(compare(out, &reference(a, b, m, n, k)));
        }
        cublas_gemm(&self.blas, &self.a, &self.b, &mut self.reference, (m, n, k))?;
        let expected: Vec<f64> = stream
            .clone_dtoh(&self.reference)?
            .iter()
            .map(|v| v.to_f64())
            .collect();
        Ok(compare(out, &expected))
    }

    fn work(&self) -> Work {
        let (m, n, k) = (self.m as u64, self.n as u64, self.k as u64);
        Work {
            bytes: 2 * (m * k + k * n + m * n),
            flops: 2 * m * n * k,
        }
    }
}

/// `a · b` in float64 on the CPU (row-major).
pub fn reference(a: &[bf16], b: &[bf16], m: usize, n: usize, k: usize) -> Vec<f64> {
    let b: Vec<f64> = b.iter().map(|v| v.to_f64()).collect();
    parallel::map_ranges(m, 1, |rows| {
        let mut out = vec![0.0f64; rows.len() * n];
        for (r, row) in rows.enumerate() {
            let dst = &mut out[r * n..(r + 1) * n];
            for (kk, av) in a[row * k..(row + 1) * k].iter().enumerate() {
                let av = av.to_f64();
                for (d, bv) in dst.iter_mut().zip(&b[kk * n..(kk + 1) * n]) {
                    *d += av * bv;
                }
            }
        }
        out
    })
    .concat()
}
