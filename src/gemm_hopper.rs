//! The GEMM's `algo = 2` (`kernels/gemm_hopper.cu`, compiled through
//! `kernels/gemm.cu`): TMA loads with 128-byte swizzle, `wgmma.mma_async` from
//! shared memory, a producer warpgroup feeding one or two consumer warpgroups
//! through an mbarrier ring, persistent over output tiles, split-K across the blocks
//! of a thread-block cluster; sm_90a only. This module launches a compiled point of
//! it: the two tensor maps built on the host (no allocation, no synchronisation, so
//! a launch can be captured in a CUDA graph), the dynamic shared memory raised, the
//! grid sized to the blocks that fit at once (asked of the driver once, by the caller).

use std::ffi::c_void;

use autotune_runtime::cudarc::driver::sys::{
    self, CUdevice_attribute, CUresult, CUtensorMap, CUtensorMapDataType, CUtensorMapFloatOOBfill,
    CUtensorMapInterleave, CUtensorMapL2promotion, CUtensorMapSwizzle,
};
use autotune_runtime::cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DevicePtr, DeviceRepr, DriverError, LaunchConfig,
    PushKernelArg,
};
use autotune_runtime::half::bf16;
use autotune_runtime::{Kernel, KernelError, KernelSpec, params};

use super::Gemm;

/// The CUDA source the GEMM compiles (it includes the Hopper kernel's own file).
pub const SOURCE: &str = "kernels/gemm.cu";
/// The Hopper kernel's entry point in it.
pub const ENTRY: &str = "gemm_bf16_wgmma";
/// The architecture it needs (wgmma and setmaxnreg are sm_90a instructions).
pub const ARCH: &str = "sm_90a";
/// The compute capability whose machine code that is.
const COMPUTE_CAPABILITY: (i32, i32) = (9, 0);

/// The parameters of an `algo = 2` point of the GEMM: the row tile (64 or 128: one
/// or two consumer warpgroups), the column tile, the pipeline depth, the blocks of a
/// cluster that split K.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HopperParams {
    pub bm: u32,
    pub bn: u32,
    pub stages: u32,
    pub split: u32,
}

impl HopperParams {
    /// The `algo = 2` points of the GEMM's space, in its order, each with all of the
    /// GEMM's parameter values (`-D` defines for compiling it alone).
    pub fn all() -> Vec<(Self, Vec<String>)> {
        Self::all_of(&<Gemm as Kernel>::SPEC)
    }

    /// The `algo = 2` points of `spec`, a space with the GEMM's parameters
    /// ([`super::linear`]'s too), as [`HopperParams::all`].
    pub fn all_of(spec: &KernelSpec) -> Vec<(Self, Vec<String>)> {
        let index = |name: &str| spec.params.iter().position(|p| *p == name);
        let (Some(algo), Some(bm), Some(bn), Some(stages), Some(split)) = (
            index("algo"),
            index("bm"),
            index("bn"),
            index("stages"),
            index("split"),
        ) else {
            return Vec::new();
        };
        spec.points
            .iter()
            .filter(|point| point[algo] == 2)
            .map(|point| {
                let params = Self {
                    bm: point[bm],
                    bn: point[bn],
                    stages: point[stages],
                    split: point[split],
                };
                (params, spec.defines(point))
            })
            .collect()
    }

    /// Dynamic shared memory: the ring (an A tile of `bm x 64` and a B tile of
    /// `64 x bn`, bf16, per stage) and the f32 partial tile of split-K (rows padded
    /// by 8 floats). The 1024 bytes that align the ring to the swizzle atom are the
    /// kernel's static shared memory (`extern __shared__ __align__(1024)` puts the
    /// dynamic part after a 1024-byte static one), so the two together stay within
    /// the 227 KiB a block may have; the space's constraint counts them.
    pub fn shared_bytes(&self) -> u32 {
        let partial = if self.split > 1 {
            self.bm * (self.bn + 8) * 4
        } else {
            0
        };
        self.stages * (self.bm * 64 + 64 * self.bn) * 2 + partial
    }

    /// Threads per block: a producer warpgroup and `bm / 64` consumers.
    pub fn threads(&self) -> u32 {
        128 * (self.bm / 64 + 1)
    }

    /// `bm=128,bn=256,stages=4,split=1`.
    pub fn name(&self) -> String {
        format!(
            "bm={},bn={},stages={},split={}",
            self.bm, self.bn, self.stages, self.split
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

/// Raises `function`'s dynamic shared memory limit to what `params` needs (once per
/// function suffices; again is harmless). Before [`resident_blocks`] and [`launch`].
pub fn allow_shared(function: &CudaFunction, params: &HopperParams) -> Result<(), KernelError> {
    params::allow_dynamic_shared(function, params.shared_bytes())
}

/// How many blocks of `function` (a point compiled with `params`) fit on the device
/// at once: the persistent grid's bound, which [`launch`] takes. Raises the shared
/// memory limit and asks the driver (`params::resident_blocks`); the GEMM's wrapper
/// keeps the answer in its variant (`Variant::resident_blocks`).
pub fn resident_blocks(
    stream: &CudaStream,
    function: &CudaFunction,
    params: &HopperParams,
) -> Result<u32, KernelError> {
    allow_shared(function, params)?;
    params::resident_blocks(stream, function, params.threads(), params.shared_bytes())
}

/// `c[m x n] = a[m x k] · b[k x n]` (row-major bf16), or `a · b^T` with `b` of
/// `n x k` where `dims` says so ([`super::checked_linear_dims`]), with `function`, the
/// [`ENTRY`] of a point of [`SOURCE`] compiled with `params` for [`ARCH`], its
/// shared memory allowed ([`allow_shared`]) and `resident` its
/// [`resident_blocks`]: no driver query but two device attributes per call.
/// Refuses (before launching) on a GPU of another compute capability, where the
/// image's entry would be the trapping stub of the portable architectures.
#[allow(clippy::too_many_arguments)]
pub fn launch(
    stream: &CudaStream,
    function: &CudaFunction,
    params: &HopperParams,
    resident: u32,
    a: &CudaSlice<bf16>,
    b: &CudaSlice<bf16>,
    c: &mut CudaSlice<bf16>,
    dims: super::Dims,
) -> Result<(), KernelError> {
    let super::Dims { m, n, k, .. } = dims;
    let (mi, ni, ki) = dims.launch_args();
    let ctx = stream.context();
    let capability = (
        ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
        ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
    );
    KernelError::check(capability == COMPUTE_CAPABILITY, || {
        format!(
            "the Hopper GEMM (algo 2) needs compute capability 9.0 (sm_90a), not {}.{}",
            capability.0, capability.1
        )
    })?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    KernelError::check(resident > 0, || {
        format!(
            "a block of {} threads with {} bytes of shared memory does not fit on this GPU",
            params.threads(),
            params.shared_bytes()
        )
    })?;
    let shared = params.shared_bytes();
    let units =
        m.div_ceil(params.bm as usize) * n.div_ceil(params.bn as usize) * params.split as usize;
    // Persistent: as many blocks as fit at once, each walking the units; split-K
    // clusters are launched one per tile instead (a cluster needs its blocks in one
    // GPC, so fewer fit than the multiprocessors would say).
    let grid = if params.split > 1 {
        units
    } else {
        units.min(resident as usize)
    };
    let Ok(grid) = u32::try_from(grid) else {
        return Err(KernelError::Arguments(format!(
            "{m}x{n}x{k} needs more blocks than a launch has"
        )));
    };
    let (a_ptr, read_a) = a.device_ptr(stream);
    let (b_ptr, read_b) = b.device_ptr(stream);
    let map_a = tensor_map(a_ptr, m as u64, k as u64, params.bm)?;
    // B's boxes are 64 x 64 either way: along N by K rows (k x n), along K by N
    // rows (n x k, read K-major as A is).
    let map_b = match dims.layout() {
        super::Layout::KxN => tensor_map(b_ptr, k as u64, n as u64, 64)?,
        super::Layout::NxK => tensor_map(b_ptr, n as u64, k as u64, 64)?,
    };
    let config = LaunchConfig {
        grid_dim: (grid, 1, 1),
        block_dim: (params.threads(), 1, 1),
        shared_mem_bytes: shared,
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
    // m x n. The maps hold a's and b's addresses: their guards (cudarc's ordering
    // against other streams) live until the launch is queued, as a launch
    // argument's would.
    unsafe { launch.launch(config) }?;
    drop((read_a, read_b));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The most shared memory a Hopper block may have, static and dynamic together.
    const BLOCK_SHARED_LIMIT: u32 = 227 * 1024;
    /// The kernel's static shared memory: the 1024 bytes before the aligned ring
    /// (`ptxas -v` reports them for every point).
    const STATIC_SHARED: u32 = 1024;

    #[test]
    fn the_hopper_points_are_the_gemm_spaces_algo_2() {
        let points = HopperParams::all();
        assert_eq!(points.len(), 25);
        for (point, defines) in &points {
            assert!([64, 128].contains(&point.bm) && [128, 256].contains(&point.bn));
            assert!(point.split == 1 || point.bm == 64, "{}", point.name());
            assert!(defines.contains(&"-DALGO=2".to_string()), "{defines:?}");
            assert!(
                defines.contains(&format!("-DBM={}", point.bm)),
                "{defines:?}"
            );
            assert!(
                defines.contains(&format!("-DSPLIT={}", point.split)),
                "{defines:?}"
            );
        }
    }

    /// The bug seen on the H200 (session 6): `bm=64,bn=256,stages=4,split=2` asked
    /// for 232448 dynamic bytes, 1024 of them alignment slack, and the launch failed
    /// with CUDA_ERROR_INVALID_VALUE once the static 1024 were added.
    #[test]
    fn every_point_fits_a_block_with_its_static_shared_memory() {
        for (point, _) in HopperParams::all() {
            let total = point.shared_bytes() + STATIC_SHARED;
            assert!(
                total <= BLOCK_SHARED_LIMIT,
                "{}: {total} bytes of shared memory",
                point.name()
            );
        }
        let largest = HopperParams {
            bm: 64,
            bn: 256,
            stages: 4,
            split: 2,
        };
        assert_eq!(largest.shared_bytes() + STATIC_SHARED, BLOCK_SHARED_LIMIT);
    }

    #[test]
    fn threads_are_a_producer_and_a_consumer_per_64_rows() {
        let point = |bm| HopperParams {
            bm,
            bn: 128,
            stages: 4,
            split: 1,
        };
        assert_eq!(point(64).threads(), 256);
        assert_eq!(point(128).threads(), 384);
    }
}
