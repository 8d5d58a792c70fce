//! Why the build step failed.

use std::fmt;
use std::path::PathBuf;

/// Why the build step failed. Lack of a GPU or of nvcc is never one of these: the
/// build then bakes the committed tables or the defaults and says so in a warning.
#[derive(thiserror::Error)]
pub enum BuildError {
    /// The build script was compiled from another checkout's wrappers.
    #[error("{0}")]
    OtherCheckout(String),
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("environment variable {name} is not set: run this from a cargo build script")]
    MissingEnv { name: &'static str },
    #[error("two #[autotune] wrappers are named `{0}`: kernel names must be unique in a crate")]
    DuplicateKernel(String),
    #[error("kernel `{kernel}`: {message}")]
    Kernel { kernel: String, message: String },
    #[error(
        "generated code for `{kernel}` does not parse ({message}); this is a bug in autotune-runtime"
    )]
    Codegen { kernel: String, message: String },
    #[error("the sweep worker: {0}")]
    Worker(String),
    #[error(transparent)]
    Table(#[from] autotune_table::TableError),
    #[error("tuning setting {0}")]
    Settings(#[from] crate::settings::SettingsError),
    #[error("cannot write the build summary: {0}")]
    Summary(String),
    /// A variable that sets how nvcc runs has a value no build can use: refused,
    /// never taken as "no nvcc".
    #[error("{0}")]
    NvccSetting(crate::nvcc::NvccError),
}

impl BuildError {
    pub(crate) fn io(
        what: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { what, path, source }
    }
}

// `fn main() -> Result<(), BuildError>` prints the Debug form: make it the message.
impl fmt::Debug for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
