//! What a `cargo autotune` command can fail on: the message goes to standard error
//! and the exit code is 2 (0 and 1 are answers: check's and judge's).

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(
        "no tables folder here (kernels/tuning or tuning); pass --tables DIR, or make one \
         with `cargo autotune tune` on a machine with a GPU"
    )]
    NoTablesFolder,
    #[error(
        "no tables in {}: this crate was never tuned; `cargo autotune tune` on a machine \
         with a GPU writes one (until then every build bakes the defaults, or the \
         fallback where one is declared)",
        .0.display()
    )]
    NoTables(PathBuf),
    /// A table, a summary or a progress file that cannot be used as it is.
    #[error("{path}: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("no kernel `{kernel}` in {path}; its entries: {known}")]
    NoKernel {
        kernel: String,
        path: String,
        known: String,
    },
    /// A kernel name that the crate (or the tables) does not have.
    #[error("no kernel `{kernel}` in {whose}; its kernels: {known}")]
    UnknownKernel {
        kernel: String,
        whose: String,
        known: String,
    },
    /// `tune` could not tune what was asked, with why.
    #[error("nothing tuned: {0}")]
    NotTuned(String),
    #[error("cannot {action} {}: {source}", .path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot run cargo: {0}")]
    Cargo(#[source] std::io::Error),
    #[error("waiting for cargo: {0}")]
    Waiting(#[source] std::io::Error),
    #[error("the build failed ({0})")]
    BuildFailed(String),
    /// The build ran but made nothing to judge, with why.
    #[error("{0}")]
    NoVerdict(String),
    /// What was asked for cannot be done with these tables (merging two GPU models,
    /// comparing a kernel tuned at other keys, judging a kernel without candidates).
    #[error("{0}")]
    Refused(String),
    #[error("cannot write the verdict: {0}")]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Table(#[from] autotune_table::error::TableError),
}

impl CliError {
    /// `cannot <action> <path>: <error>`, for `map_err`.
    pub fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io {
            action,
            path,
            source,
        }
    }

    /// A table that `autotune_table::table::read` refused.
    pub fn unreadable(
        path: impl std::fmt::Display,
    ) -> impl FnOnce(autotune_table::table::Unreadable) -> Self {
        let path = path.to_string();
        move |e| Self::Unreadable {
            path,
            reason: e.reason,
        }
    }
}
