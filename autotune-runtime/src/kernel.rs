//! The `Kernel` trait the macro implements (spec, params, case, launch), and the
//! errors a wrapper returns.

use std::error::Error;
use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaStream};

use crate::vendor::VendorCase;
use crate::{Case, KernelSpec, Params, Variant};

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

/// A wrapper's launch failed (its own error, boxed).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LaunchError(Box<dyn Error + Send + Sync>);

impl LaunchError {
    pub fn from_error<E: Into<Box<dyn Error + Send + Sync>>>(error: E) -> Self {
        Self(error.into())
    }

    pub fn message(message: impl Into<String>) -> Self {
        Self(message.into().into())
    }

    /// The wrapper's reason when it refused its arguments
    /// ([`KernelError::Arguments`]) rather than failing to launch: the sweep then
    /// skips the variant at that key instead of putting it out.
    pub fn refused_arguments(&self) -> Option<&str> {
        match self.0.downcast_ref::<KernelError>() {
            Some(KernelError::Arguments(reason)) => Some(reason),
            _ => None,
        }
    }
}

/// What a wrapper returns when it cannot launch: a driver error, or arguments that
/// do not fit the kernel (checked before launching, never on the device).
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("CUDA driver: {0}")]
    Driver(#[from] cudarc::driver::DriverError),
    #[error("{0}")]
    Arguments(String),
    /// A vendor library's call failed (`cuBLAS: CUBLAS_STATUS_...`).
    #[error("{library}: {message}")]
    Library {
        library: &'static str,
        message: String,
    },
}

impl KernelError {
    /// `Err(KernelError::Arguments(..))` unless `ok`.
    pub fn check(ok: bool, message: impl FnOnce() -> String) -> Result<(), Self> {
        if ok {
            Ok(())
        } else {
            Err(Self::Arguments(message()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_arguments_are_told_from_other_failures() {
        let refused = LaunchError::from_error(KernelError::Arguments("k % 8 != 0".into()));
        assert_eq!(refused.refused_arguments(), Some("k % 8 != 0"));
        assert_eq!(LaunchError::message("no entry").refused_arguments(), None);
    }
}
