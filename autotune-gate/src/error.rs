//! The error of the gate: a case that cannot be built or checked.

use cudarc::driver::DriverError;

/// A case could not be built or checked.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    #[error("CUDA driver: {0}")]
    Driver(#[from] DriverError),
    #[error("{0}")]
    Other(String),
}

impl From<String> for CaseError {
    fn from(message: String) -> Self {
        Self::Other(message)
    }
}
