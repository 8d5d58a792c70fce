//! The errors of the run-time side: a wrapper that refuses its arguments or fails
//! to launch (a case that cannot be built is the gate's
//! [`CaseError`](autotune_gate::CaseError)).

use std::error::Error;

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
