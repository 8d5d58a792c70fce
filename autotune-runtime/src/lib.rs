//! Kernels that tune themselves at `cargo build` time.
//!
//! Annotate a launch wrapper with [`autotune`], call `autotune_build::Builder` from
//! `build.rs` (the `autotune-build` crate), and the crate gets a dispatch struct that picks, per range of a
//! size argument, the variant that measured fastest on this GPU model:
//!
//! ```ignore
//! #[autotune(source = "kernels/rmsnorm.cu", key = n_rows, sizes = [512, 8k, 64k],
//!            case = RmsNormCase, block = [64, 128, 256], stages = 1..4)]
//! pub fn rms_norm(stream: &CudaStream, variant: &Variant<RmsNormParams>, /* ... */
//!                 n_rows: usize) -> Result<(), DriverError> { /* grid, block, launch */ }
//!
//! let norm = RmsNorm::load(&ctx)?;      // once: loads the baked variants
//! norm.launch(&stream, /* ... */)?;      // a `match` on n_rows, no sync, no allocation
//! ```

pub mod case;
pub mod device_kernels;
pub mod dispatch;
pub mod error;
pub mod gpu;
pub mod gpu_reference;
pub mod guard;
pub mod input;
pub mod kernel;
pub mod parallel;
pub mod params;
pub mod random;
pub mod rotation;
pub mod shape;
pub mod spec;
pub mod vendor;

pub use autotune_macro::{autotune, tunables};
pub use case::{
    Bounds, Case, Element, ErrorSum, Reference, Verdict, Work, compare, compare_blocks,
    relative_error,
};
pub use cudarc;
pub use dispatch::{Choice, LoadError, Selection};
pub use error::{CaseError, KernelError, LaunchError};
pub use guard::{Guarded, Inspection, poison};
pub use half;
pub use kernel::Kernel;
pub use params::{Params, Variant};
pub use shape::Shape;
pub use spec::KernelSpec;
pub use vendor::{Vendor, VendorCase, VendorSpec};

/// What a wrapper module usually needs.
pub mod prelude {
    pub use crate::case::{
        Bounds, Case, Element, ErrorSum, Reference, Verdict, Work, compare, compare_blocks,
        inputs_phase, reference_phase, sample_indices,
    };
    pub use crate::device_kernels::DeviceKernels;
    pub use crate::error::CaseError;
    pub use crate::gpu_reference::GpuReference;
    pub use crate::guard::{Guarded, Inspection, poison};
    pub use crate::input::Input;
    pub use crate::parallel;

    pub use crate::random::{Rng, fill_normal, fill_uniform};
    pub use crate::rotation::{Rotate, Rotating};
    pub use crate::{KernelError, Params, Shape, Variant, Vendor, autotune};
    pub use cudarc::driver::{
        CudaContext, CudaSlice, CudaStream, DriverError, LaunchConfig, PushKernelArg,
    };
    pub use half::{bf16, f16};
    pub use std::sync::Arc;
}
