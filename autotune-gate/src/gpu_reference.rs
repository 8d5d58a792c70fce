//! A case's reference computed by a kernel of its own on the GPU, trusted while it
//! gives the CPU's values.
//!
//! Where the CPU's reference is most of a sweep's gate, a case can compute it with
//! a trusted kernel instead: committed as PTX, loaded once per case, and checked on
//! every draw against the CPU at a few [`sample_indices`](crate::case::sample_indices)
//! before the rest of its values are used. A driver that cannot load the PTX, or a
//! sampled value that differs, gives the GPU up for the rest of the case, and the
//! CPU computes every later draw. The reference is never wrong, only slower.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, DriverError};
use cudarc::nvrtc::Ptx;

/// A reference kernel, while the case still trusts it.
#[derive(Debug, Clone, Default)]
pub struct GpuReference(Option<CudaFunction>);

impl GpuReference {
    /// `entry` of `ptx` on `ctx`, or a reference not in use (the CPU computes)
    /// where the driver cannot load it.
    pub fn load(ctx: &Arc<CudaContext>, ptx: &str, entry: &str) -> Self {
        Self(Self::try_load(ctx, ptx, entry).ok())
    }

    /// `entry` of `ptx` on `ctx`, with the driver's error where it cannot load it
    /// (a test of the kernel itself wants to know why).
    pub fn try_load(
        ctx: &Arc<CudaContext>,
        ptx: &str,
        entry: &str,
    ) -> Result<CudaFunction, DriverError> {
        // cudarc hands both to the driver as C strings (and panics on a NUL inside):
        // a text with a NUL is no PTX and no symbol.
        if ptx.contains('\0') || entry.contains('\0') {
            return Err(DriverError(
                cudarc::driver::sys::cudaError_enum::CUDA_ERROR_INVALID_PTX,
            ));
        }
        ctx.load_module(Ptx::from_src(ptx))?.load_function(entry)
    }

    /// The kernel, while it is trusted.
    pub fn function(&self) -> Option<&CudaFunction> {
        self.0.as_ref()
    }

    /// Whether the GPU computes the reference (it loaded and has not differed from
    /// the CPU).
    pub fn in_use(&self) -> bool {
        self.0.is_some()
    }

    /// Gives the kernel up: a sampled value differed from the CPU's. The case
    /// computes this draw and every later one on the CPU.
    pub fn distrust(&mut self) {
        self.0 = None;
    }
}

#[cfg(test)]
mod tests {
    use super::GpuReference;

    #[test]
    fn a_reference_given_up_stays_with_the_cpu() {
        let mut reference = GpuReference::default();
        assert!(!reference.in_use());
        assert!(reference.function().is_none());
        reference.distrust();
        assert!(!reference.in_use());
    }
}
