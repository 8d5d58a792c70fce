//! A vendor library's kernel as a kernel's fallback (`vendor = CublasGemm`): what a
//! user would call instead of ours, timed by the sweep at every key exactly as
//! dispatch calls it, and owning every range where no variant of ours beats it by
//! the margin.
//!
//! The type names the library and holds what it needs across calls (a handle, a
//! workspace), made once by [`Vendor::load`]. Its `launch` is an inherent method
//! taking the wrapper's arguments without the variant, in the same order, and
//! returning what the wrapper returns: the macro calls it from dispatch and from
//! the sweep's case alike. It must be graph-capture safe: no allocation, no host
//! synchronisation, no stream other than the one it is given.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream};

use crate::error::LaunchError;

/// A library kernel that can stand as a kernel's fallback.
pub trait Vendor: Sized + 'static {
    /// The library's name, as reports and `describe` show it (`cuBLAS`).
    const NAME: &'static str;

    /// `cuBLAS 13.1.0`: the library as this process would load it, or `None` where
    /// it cannot be loaded here (then the version a table recorded stands). Must not
    /// need a GPU: the build asks it for the fingerprint on any machine.
    fn library() -> Option<String>;

    /// Makes the handle and the workspace the calls share, on `ctx`'s device.
    fn load(ctx: &Arc<CudaContext>) -> Result<Self, LaunchError>;
}

/// What the spec records of a kernel's vendor fallback.
#[derive(Debug, Clone, Copy)]
pub struct VendorSpec {
    /// The type as written in the attribute (`CublasGemm`).
    pub type_name: &'static str,
    /// [`Vendor::NAME`].
    pub name: &'static str,
    /// [`Vendor::library`].
    pub library: fn() -> Option<String>,
}

/// The vendor's launch with the arguments a case holds (the macro implements it
/// for each wrapper with a vendor, so the sweep can time it).
pub trait VendorCase<C>: 'static {
    fn launch_case(&self, case: &mut C, stream: &Arc<CudaStream>) -> Result<(), LaunchError>;
}
