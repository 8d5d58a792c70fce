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

pub mod dispatch;
pub mod error;
pub mod gpu;
pub mod kernel;
pub mod params;
pub mod spec;
pub mod vendor;

/// Is a variant right and how fast is it: cases, verdicts, guards, inputs and the
/// references on the GPU, which a crate's wrapper files reach through [`prelude`].
pub use autotune_gate as gate;
pub use autotune_macro::{autotune, tunables};
pub use autotune_spec::shape::{self, Shape};
pub use cudarc;
pub use dispatch::{Choice, LoadError, Selection};
pub use error::{KernelError, LaunchError};
pub use half;
pub use kernel::Kernel;
pub use params::{Params, Variant};
pub use spec::KernelSpec;
pub use vendor::{Vendor, VendorCase, VendorSpec};

// 0.1's paths of what moved to autotune-gate: they still work, out of the docs.
#[doc(hidden)]
pub use autotune_gate::{
    Bounds, Case, CaseError, Element, ErrorSum, Guarded, Inspection, Reference, Verdict, Work,
    case, compare, compare_blocks, device_kernels, gpu_reference, guard, input, parallel, poison,
    random, relative_error, rotation,
};

/// What a wrapper module usually needs.
pub mod prelude {
    pub use autotune_gate::case::{
        Bounds, Case, Element, ErrorSum, Reference, Verdict, Work, compare, compare_blocks,
        inputs_phase, reference_phase, sample_indices,
    };
    pub use autotune_gate::device_kernels::DeviceKernels;
    pub use autotune_gate::error::CaseError;
    pub use autotune_gate::gpu_reference::GpuReference;
    pub use autotune_gate::guard::{Guarded, Inspection, poison};
    pub use autotune_gate::input::Input;
    pub use autotune_gate::parallel;

    pub use crate::{KernelError, Params, Shape, Variant, Vendor, autotune};
    pub use autotune_gate::random::{Rng, fill_normal, fill_uniform};
    pub use autotune_gate::rotation::{Rotate, Rotating};
    pub use cudarc::driver::{
        CudaContext, CudaSlice, CudaStream, DriverError, LaunchConfig, PushKernelArg,
    };
    pub use half::{bf16, f16};
    pub use std::sync::Arc;
}
