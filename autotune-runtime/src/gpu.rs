//! Which GPU this is: what a tuning table is matched against at load time.

use std::fmt;

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaContext, DriverError};

/// The properties a tuning table was measured under and must match to be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuIdentity {
    pub name: String,
    pub compute_capability: (u32, u32),
    pub sm_count: u32,
}

impl GpuIdentity {
    pub fn of(ctx: &CudaContext) -> Result<Self, DriverError> {
        let (major, minor) = ctx.compute_capability()?;
        let sm_count =
            ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        Ok(Self {
            name: ctx.name()?,
            compute_capability: (major.unsigned_abs(), minor.unsigned_abs()),
            sm_count: sm_count.unsigned_abs(),
        })
    }

    /// `sm_90`.
    pub fn arch(&self) -> String {
        autotune_spec::names::arch(self.compute_capability)
    }

    /// `sm_90a` on compute capability 9.0, [`arch`](Self::arch) before Hopper: what
    /// a sweep on this GPU compiles ([`autotune_spec::names::arch_specific`]).
    pub fn arch_specific(&self) -> String {
        autotune_spec::names::arch_specific(self.compute_capability)
    }
}

impl fmt::Display for GpuIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}, {} SMs)", self.name, self.arch(), self.sm_count)
    }
}

/// Whether the CUDA driver library can be loaded at all. cudarc panics on first use
/// when it cannot, so every path that may run without a GPU asks this first.
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the driver library; no driver call is made.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// A context on device `ordinal`, or why there is none (no driver, no device).
pub fn open(ordinal: usize) -> Result<std::sync::Arc<CudaContext>, NoGpu> {
    if !driver_present() {
        return Err(NoGpu::NoDriver);
    }
    match CudaContext::device_count() {
        Ok(count) if usize::try_from(count).is_ok_and(|c| c > ordinal) => {
            CudaContext::new(ordinal).map_err(NoGpu::Driver)
        }
        Ok(count) => Err(NoGpu::NoDevice {
            ordinal,
            count: count.max(0).unsigned_abs(),
        }),
        Err(error) => Err(NoGpu::Driver(error)),
    }
}

/// Why no GPU can be used.
#[derive(Debug, thiserror::Error)]
pub enum NoGpu {
    #[error("no CUDA driver (libcuda could not be loaded)")]
    NoDriver,
    #[error("no CUDA device {ordinal} (the driver sees {count})")]
    NoDevice { ordinal: usize, count: u32 },
    #[error("the CUDA driver failed: {0}")]
    Driver(DriverError),
}
