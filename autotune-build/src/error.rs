//! Why the build step failed.

use std::fmt;
use std::path::PathBuf;

/// Why the build step failed. Lack of a GPU or of nvcc is never one of these: the
/// build then bakes the committed tables or the defaults and says so in a warning.
#[derive(thiserror::Error)]
pub enum BuildError {
    /// The build script was compiled from another checkout's wrappers: cargo
    /// reused a build script compiled at `compiled_at`, whose `file` differs from
    /// this checkout's (`root`).
    #[error(
        "this build script was compiled from {}, whose {file} differs from {}'s: two \
         checkouts of `{krate}` share a target folder and cargo reused the other's build \
         script. Run `cargo clean -p {krate}` here, or give each checkout its own \
         CARGO_TARGET_DIR",
        compiled_at.display(),
        root.display()
    )]
    OtherCheckout {
        compiled_at: PathBuf,
        file: String,
        root: PathBuf,
        krate: String,
    },
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
    /// What is wrong with one kernel.
    #[error("kernel `{kernel}`: {fault}")]
    Kernel { kernel: String, fault: KernelFault },
    #[error(
        "generated code for `{kernel}` does not parse ({message}); this is a bug in autotune-runtime"
    )]
    Codegen { kernel: String, message: String },
    #[error("the sweep worker: {0}")]
    Worker(WorkerFault),
    #[error(transparent)]
    Table(#[from] autotune_table::TableError),
    #[error("tuning setting {0}")]
    Settings(#[from] crate::settings::SettingsError),
    #[error("cannot write the build summary: {0}")]
    Summary(serde_json::Error),
    /// A variable that sets how nvcc runs has a value no build can use: refused,
    /// never taken as "no nvcc".
    #[error("{0}")]
    NvccSetting(crate::nvcc::NvccError),
}

/// What is wrong with one kernel, as data: the file, image or entry at fault.
#[derive(Debug, thiserror::Error)]
pub enum KernelFault {
    /// A file of the wrapper's does not lex as Rust (the lexer's words).
    #[error("{} does not lex as Rust: {reason}", path.display())]
    NotRust { path: PathBuf, reason: String },
    /// The modules and includes of a file of the wrapper's cannot be followed.
    #[error("{}: {reason}", path.display())]
    Unfollowable {
        path: PathBuf,
        reason: crate::wrapper_files::Unfollowable,
    },
    /// `from` declares a module whose file is none of the candidates.
    #[error(
        "{} declares a module whose file is none of {}",
        from.display(),
        shown(candidates)
    )]
    ModuleNotFound {
        from: PathBuf,
        candidates: Vec<PathBuf>,
    },
    /// The wrapper includes more files than this many.
    #[error("the wrapper includes more than {0} files")]
    TooManyIncluded(usize),
    /// A module of the wrapper's is not UTF-8.
    #[error("{} is not UTF-8", .0.display())]
    NotUtf8(PathBuf),
    /// A source path names a variable that cannot be resolved.
    #[error("source {written}: {reason}")]
    Unresolved {
        written: String,
        reason: autotune_spec::image::Unresolved,
    },
    /// A precompiled image's path names no file.
    #[error("the kernel image {written} ({}) is not a file", path.display())]
    ImageNotAFile { written: String, path: PathBuf },
    /// A constant image does not hold an entry's symbol.
    #[error(
        "`{entry}` is not a symbol of the image {image}: name the kernel's symbol with \
         `entry = \"...\"` (as the image spells it)"
    )]
    MissingSymbol { entry: String, image: String },
    /// nvcc could not list what a source includes.
    #[error("{0}")]
    Dependencies(crate::nvcc::NvccError),
    /// The fingerprint cannot be computed.
    #[error("{0}")]
    Unfingerprintable(Unfingerprintable),
    /// A variant to bake did not compile.
    #[error("{variant} failed to compile: {error}")]
    Compile {
        variant: String,
        error: crate::nvcc::NvccError,
    },
    /// The declared default is not a point of the space.
    #[error("the default is not a point of the space")]
    DefaultNotAPoint,
    /// The GPU throttled for heat during the sweep: its times cannot be compared.
    #[error("{}", .0.moved().unwrap_or_default())]
    Throttled(autotune_table::clocks::ClockRecord),
    /// The sweep's table breaks the table rules (a bug of the tool).
    #[error("the sweep produced an invalid table: {0}")]
    InvalidTable(autotune_table::table::InvalidTable),
}

/// Why a fingerprint cannot be taken now: a source the table names is outside the
/// crate, or a file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum Unfingerprintable {
    #[error("the table names a source outside the crate: {0:?}")]
    Outside(String),
    #[error("cannot read {}: {error}", .path.display())]
    Unreadable {
        path: PathBuf,
        error: std::io::Error,
    },
}

/// Paths as a list for a sentence.
fn shown(paths: &[PathBuf]) -> String {
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    shown.join(", ")
}

/// Why the sweep's worker failed.
#[derive(Debug, thiserror::Error)]
pub enum WorkerFault {
    /// No GPU to sweep on.
    #[error("no device to sweep on")]
    NoDevice,
    /// A worker stopped before finishing any task of its job.
    #[error(
        "a worker for `{kernel}` on device {device} stopped before finishing any task; see \
         the log above"
    )]
    Stopped { kernel: String, device: usize },
    /// A job or a journal line could not be encoded.
    #[error("cannot encode a job: {0}")]
    Encode(serde_json::Error),
    /// A job could not be sent to the worker.
    #[error("cannot send a job: {0}")]
    Send(std::io::Error),
    /// The worker (this build script's own file) could not be started.
    #[error("cannot start {}: {error}", exe.display())]
    Start { exe: PathBuf, error: std::io::Error },
    /// The worker has no standard input to send jobs to.
    #[error("no stdin for the worker")]
    NoStdin,
    /// The worker died.
    #[error("the worker died")]
    Died,
    /// The build script cannot find its own executable (the worker is that file).
    #[error("cannot find this build script's path: {0}")]
    OwnPath(std::io::Error),
    /// A kernel's inputs were not gathered before its sweep.
    #[error("no inputs for `{0}`")]
    NoInputs(String),
}

impl BuildError {
    /// [`BuildError::Kernel`] of `kernel`.
    pub(crate) fn kernel(kernel: &str, fault: KernelFault) -> Self {
        Self::Kernel {
            kernel: kernel.to_string(),
            fault,
        }
    }

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
