//! The Hopper GEMM (`kernels/gemm_hopper.cu`): TMA loads with 128-byte swizzle,
//! `wgmma.mma_async` from shared memory, a producer warpgroup feeding one or two
//! consumer warpgroups through an mbarrier ring; sm_90a only. This module launches a
//! compiled point of it: the two tensor maps built on the host (no allocation, no
//! synchronisation, so a launch can be captured in a CUDA graph), the dynamic shared
//! memory raised, the grid.
//!
//! It is not yet part of the GEMM's tuned space: it joins it once it has run on an
//! H200 (issue 11). Until then `tests/hopper_gemm.rs` compiles every point for sm_90a,
//! checks ptxas (no spills) and the SASS (HGMMA, UTMALDG), and on a Hopper GPU checks
//! each point against cuBLAS on square, decode and ragged shapes.

use std::ffi::c_void;

use autotune_runtime::KernelError;
use autotune_runtime::cudarc::driver::sys::{
    self, CUfunction_attribute, CUresult, CUtensorMap, CUtensorMapDataType,
    CUtensorMapFloatOOBfill, CUtensorMapInterleave, CUtensorMapL2promotion, CUtensorMapSwizzle,
};
use autotune_runtime::cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DevicePtr, DeviceRepr, DriverError, LaunchConfig,
    PushKernelArg,
};
use autotune_runtime::half::bf16;

/// The CUDA source, relative to the crate root.
pub const SOURCE: &str = "kernels/gemm_hopper.cu";
/// Its entry point.
pub const ENTRY: &str = "gemm_bf16_wgmma";
/// The architecture it needs (wgmma and setmaxnreg are sm_90a instructions).
pub const ARCH: &str = "sm_90a";

/// A point of the kernel's space: the tile width, the pipeline depth, the consumer
/// warpgroups (the tile is `64 * consumers` rows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HopperParams {
    pub bn: u32,
    pub stages: u32,
    pub consumers: u32,
}

/// The most dynamic shared memory a block may have on Hopper.
const MAX_SHARED_BYTES: u32 = 227 * 1024;

impl HopperParams {
    /// Every point whose ring fits in shared memory.
    pub fn all() -> Vec<Self> {
        let mut points = Vec::new();
        for bn in [128, 256] {
            for stages in [3, 4, 5] {
                for consumers in [1, 2] {
                    let point = Self {
                        bn,
                        stages,
                        consumers,
                    };
                    if point.shared_bytes() <= MAX_SHARED_BYTES {
                        points.push(point);
                    }
                }
            }
        }
        points
    }

    /// Rows of the output tile.
    pub fn bm(&self) -> u32 {
        64 * self.consumers
    }

    /// Dynamic shared memory: the ring (an A tile of `bm x 64` and a B tile of
    /// `64 x bn`, bf16, per stage) and 1024 bytes to align it to the swizzle atom.
    pub fn shared_bytes(&self) -> u32 {
        self.stages * (self.bm() * 64 + 64 * self.bn) * 2 + 1024
    }

    /// `-DBN=256 -DSTAGES=4 -DCONSUMERS=2`.
    pub fn defines(&self) -> Vec<String> {
        vec![
            format!("-DBN={}", self.bn),
            format!("-DSTAGES={}", self.stages),
            format!("-DCONSUMERS={}", self.consumers),
        ]
    }

    /// `bn=256,stages=4,consumers=2`.
    pub fn name(&self) -> String {
        format!(
            "bn={},stages={},consumers={}",
            self.bn, self.stages, self.consumers
        )
    }
}

/// A TMA descriptor, passed to the kernel by value (`__grid_constant__ CUtensorMap`).
#[derive(Debug, Clone, Copy)]
#[repr(transparent)]
pub struct TensorMap(CUtensorMap);

// SAFETY: a plain 128-byte, 128-aligned value the kernel takes by value.
unsafe impl DeviceRepr for TensorMap {}

/// The map of a row-major bf16 matrix of `rows x cols` at `address` (cols
/// contiguous, a multiple of 8 so that rows are 16-byte aligned), read in boxes of
/// `box_rows x 64` columns with 128-byte swizzle; out-of-bounds parts read as zero.
fn tensor_map(address: u64, rows: u64, cols: u64, box_rows: u32) -> Result<TensorMap, KernelError> {
    let mut map = std::mem::MaybeUninit::<CUtensorMap>::uninit();
    let dims = [cols, rows];
    let strides = [cols * 2];
    let boxes = [64u32, box_rows];
    let element_strides = [1u32, 1];
    // SAFETY: every array has the rank's length (2, and 1 for the strides); the map
    // is written by the call before being read.
    let result = unsafe {
        sys::cuTensorMapEncodeTiled(
            map.as_mut_ptr(),
            CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
            2,
            address as *mut c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            element_strides.as_ptr(),
            CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    if result != CUresult::CUDA_SUCCESS {
        return Err(KernelError::Driver(DriverError(result)));
    }
    // SAFETY: the call succeeded, so it wrote the map.
    Ok(TensorMap(unsafe { map.assume_init() }))
}

/// `c[m x n] = a[m x k] · b[k x n]` (row-major bf16) with `function`, a point of
/// [`SOURCE`] compiled with `params`' defines for [`ARCH`].
#[allow(clippy::too_many_arguments)]
pub fn launch(
    stream: &CudaStream,
    function: &CudaFunction,
    params: &HopperParams,
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    c: &mut CudaSlice<bf16>,
    m: usize,
    n: usize,
    k: usize,
) -> Result<(), KernelError> {
    KernelError::check(k.is_multiple_of(8) && n.is_multiple_of(8), || {
        format!("k = {k} and n = {n} must be multiples of 8")
    })?;
    KernelError::check(
        a.len() >= m * k && b.len() >= k * n && c.len() >= m * n,
        || format!("a, b or c is smaller than {m}x{k}, {k}x{n}, {m}x{n}"),
    )?;
    let dims = (i32::try_from(m), i32::try_from(n), i32::try_from(k));
    let (Ok(mi), Ok(ni), Ok(ki)) = dims else {
        return Err(KernelError::Arguments(format!(
            "{m}x{n}x{k} does not fit a launch"
        )));
    };
    if m == 0 || n == 0 {
        return Ok(());
    }
    // The maps hold a's and b's addresses: their guards (cudarc's ordering against
    // other streams) live until the launch is queued, as a launch argument's would.
    let (a_ptr, read_a) = a.device_ptr(stream);
    let (b_ptr, read_b) = b.device_ptr(stream);
    let map_a = tensor_map(a_ptr, m as u64, k as u64, params.bm())?;
    let map_b = tensor_map(b_ptr, k as u64, n as u64, 64)?;
    function.set_attribute(
        CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
        params.shared_bytes() as i32,
    )?;
    let grid = (
        n.div_ceil(params.bn as usize) as u32,
        m.div_ceil(params.bm() as usize) as u32,
        1,
    );
    let config = LaunchConfig {
        grid_dim: grid,
        block_dim: (128 * (params.consumers + 1), 1, 1),
        shared_mem_bytes: params.shared_bytes(),
    };
    let mut launch = stream.launch_builder(function);
    launch
        .arg(&map_a)
        .arg(&map_b)
        .arg(c)
        .arg(&mi)
        .arg(&ni)
        .arg(&ki);
    // SAFETY: `(CUtensorMap, CUtensorMap, bf16*, int, int, int)` as the kernel
    // declares; the maps cover a and b, whose sizes are checked above, and c holds
    // m x n.
    unsafe { launch.launch(config) }?;
    drop((read_a, read_b));
    Ok(())
}
