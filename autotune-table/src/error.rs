//! Why reading, writing or locking tables failed.

use std::path::PathBuf;

/// A table, log or lock could not be written or taken.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot serialise the table: {0}")]
    Serialise(serde_json::Error),
    /// A path that is not written to: a symlink, a folder, a tuning table.
    #[error("{} {why}", path.display())]
    Refused { path: PathBuf, why: &'static str },
}

impl TableError {
    /// A `map_err` adapter: `fs::write(..).map_err(TableError::io("cannot write", &p))`.
    pub fn io(what: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { what, path, source }
    }
}
