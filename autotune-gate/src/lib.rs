//! Is a variant right, and how fast is it: what the sweep runs on each compiled
//! variant of an `#[autotune]` kernel before any of its timings count.
//!
//! A kernel's [`Case`] draws its inputs afresh for each check and computes the
//! reference; the variant's outputs are [`Guarded`] (poisoned with NaN, guard bytes
//! on both sides), its [`Input`](input::Input)s must come back unchanged, and
//! [`compare`] gives the [`Verdict`] with a relative-error tolerance per element
//! type. [`Rotating`](rotation::Rotating) buffers are the inputs the sweep times
//! cold; [`GpuReference`](gpu_reference::GpuReference) and
//! [`DeviceKernels`](device_kernels::DeviceKernels) keep the checks off the CPU.
//!
//! Wrapper files reach all of this through `autotune_runtime::prelude`; the build
//! side runs it in its worker, with feature `timing`: [`timing`] (CUDA events
//! around each launch, the L2 flush, repeats, interleaved rounds) and
//! [`condition`] (each timed launch's inputs rotated cold, flushed, or warm).

pub mod case;
#[cfg(feature = "timing")]
pub mod condition;
pub mod device_kernels;
pub mod error;
pub mod gpu_reference;
pub mod guard;
pub mod input;
pub mod parallel;
pub mod random;
pub mod rotation;
#[cfg(feature = "timing")]
pub mod timing;

pub use case::{
    Bounds, Case, Element, ErrorSum, Reference, Verdict, Work, compare, compare_blocks,
    relative_error,
};
pub use error::CaseError;
pub use guard::{Guarded, Inspection, poison};
