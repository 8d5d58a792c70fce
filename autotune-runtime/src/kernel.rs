//! The `Kernel` trait the macro implements (spec, params, case, launch).

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaStream};

pub use crate::error::{KernelError, LaunchError};
use crate::vendor::VendorCase;
use crate::{KernelSpec, Params, Variant};
use autotune_gate::Case;

/// A kernel as the sweep sees it: its spec, its params type, its case, and how to
/// launch a variant on a case. Implemented by the macro on the dispatch struct; the
/// launch calls the annotated wrapper with the case's fields of the same names.
pub trait Kernel: 'static {
    type Params: Params;
    type Case: Case;
    const SPEC: KernelSpec;

    /// Launches `variant` with the arguments held by `case`.
    fn launch_case(
        case: &mut Self::Case,
        stream: &Arc<CudaStream>,
        variant: &Variant<Self::Params>,
    ) -> Result<(), LaunchError>;

    /// Launches the declared fallback (its own wrapper) with the arguments held by
    /// `case`, at the point given by `values`, with its loaded entries.
    fn launch_fallback(
        case: &mut Self::Case,
        stream: &Arc<CudaStream>,
        functions: &[CudaFunction],
        values: &[u32],
    ) -> Result<(), LaunchError> {
        let _ = (case, stream, functions, values);
        Err(LaunchError::message(format!(
            "`{}` declares no fallback",
            Self::SPEC.name
        )))
    }

    /// The declared vendor fallback (`vendor = ...`), loaded on `stream`'s device,
    /// as the sweep launches it on a case; `None` without one.
    #[allow(clippy::type_complexity)]
    fn load_vendor(
        stream: &Arc<CudaStream>,
    ) -> Result<Option<Box<dyn VendorCase<Self::Case>>>, LaunchError> {
        let _ = stream;
        Ok(None)
    }
}
