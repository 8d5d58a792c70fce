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
//!
//! A vendor may have points of its own (`vendor_points = N`): cuBLASLt ranks
//! algorithms for each problem, and its first choice is not always its fastest.
//! Such a type also has inherent `points(&self, count, ...)` (up to `count` points
//! for the problem of the call's arguments, best first, each a few `u32` words the
//! vendor alone reads) and `launch_point(&self, point, ...)` (the launch at one of
//! them; where a point cannot run a call, the vendor's default launch). The sweep
//! times them at every size against the default launch; one that beats it beyond
//! the noise is the incumbent there, which ours must then beat, and dispatch runs
//! the point the table chose for the range.

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
    /// How many of its own points the sweep asks for at each size
    /// (`vendor_points = N`); 0 for a vendor timed at its default launch alone.
    pub points: u32,
}

/// The vendor's launch with the arguments a case holds (the macro implements it
/// for each wrapper with a vendor, so the sweep can time it).
pub trait VendorCase<C>: 'static {
    fn launch_case(&self, case: &mut C, stream: &Arc<CudaStream>) -> Result<(), LaunchError>;

    /// Up to `count` of the vendor's own points for the case's problem, best
    /// first (`vendor_points = N`); none for a vendor without points.
    fn points(
        &self,
        case: &mut C,
        stream: &Arc<CudaStream>,
        count: u32,
    ) -> Result<Vec<Vec<u32>>, LaunchError> {
        let _ = (case, stream, count);
        Ok(Vec::new())
    }

    /// The vendor's launch at one of its points (as `points` gave it).
    fn launch_case_at(
        &self,
        case: &mut C,
        stream: &Arc<CudaStream>,
        point: &[u32],
    ) -> Result<(), LaunchError> {
        let _ = point;
        self.launch_case(case, stream)
    }
}
