//! Writing a file whole or not at all, never through a symlink (see the
//! [module](super) above).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Why a file was not written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// A path that is never written to: a symlink, a folder.
    #[error("{} {why}", path.display())]
    Refused { path: PathBuf, why: &'static str },
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

impl From<WriteError> for std::io::Error {
    fn from(error: WriteError) -> Self {
        match error {
            WriteError::Io { source, .. } => source,
            refused => std::io::Error::new(std::io::ErrorKind::InvalidInput, refused.to_string()),
        }
    }
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> WriteError {
    let path = path.to_path_buf();
    move |source| WriteError::Io { what, path, source }
}

/// Writes `bytes` to `path` atomically: into a new temporary file beside it
/// (`O_EXCL`), flushed to disk, renamed over `path`, the folder flushed too. Never
/// through a symlink (a link could aim the write at any file) and never over a
/// folder; a failed write leaves no temporary file behind.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    let mut commit = Commit::default();
    commit.stage(path, bytes)?;
    commit.finish()
}

/// A log that grows line by line while a reader may look at it (a sweep's live
/// log): `path` created afresh, never through a symlink (`O_NOFOLLOW`) and never
/// over a folder. The one file this module writes other than whole.
pub fn create_log(path: &Path) -> Result<File, WriteError> {
    refuse_link_or_folder(path)?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Linux's value, as `read` names its O_NONBLOCK: a link made between the
        // check above and the open is refused by the kernel.
        const O_NOFOLLOW: i32 = 0o400_000;
        options.custom_flags(O_NOFOLLOW);
    }
    options.open(path).map_err(io("cannot create", path))
}

/// Several files written whole, or none of them: [`Commit::stage`] writes each into
/// its temporary file (every check and every byte first), [`Commit::finish`]
/// renames them all last. Dropped unfinished, it removes what it staged.
#[derive(Debug, Default)]
pub struct Commit {
    staged: Vec<(PathBuf, PathBuf)>,
}

impl Commit {
    /// Writes `bytes` into a new temporary file beside `path` (refused where `path`
    /// is a symlink or a folder), flushed; `path` is untouched until [`finish`].
    ///
    /// [`finish`]: Commit::finish
    pub fn stage(&mut self, path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
        refuse_link_or_folder(path)?;
        let dir = folder_of(path);
        std::fs::create_dir_all(&dir).map_err(io("cannot create", &dir))?;
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let partial = dir.join(format!(
            ".{name}.partial-{}-{nanos}-{}",
            std::process::id(),
            self.staged.len()
        ));
        let written = (|| {
            let mut file = File::options()
                .write(true)
                .create_new(true)
                .open(&partial)
                .map_err(io("cannot create", &partial))?;
            file.write_all(bytes)
                .and_then(|()| file.sync_all())
                .map_err(io("cannot write", &partial))
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        written?;
        self.staged.push((partial, path.to_path_buf()));
        Ok(())
    }

    /// Renames every staged file over its target (each checked again: a symlink
    /// put there meanwhile is refused), then flushes their folders.
    pub fn finish(mut self) -> Result<(), WriteError> {
        let staged = std::mem::take(&mut self.staged);
        let mut folders: Vec<PathBuf> = Vec::new();
        for (index, (partial, path)) in staged.iter().enumerate() {
            let renamed = refuse_link_or_folder(path)
                .and_then(|()| std::fs::rename(partial, path).map_err(io("cannot replace", path)));
            if let Err(error) = renamed {
                for (left, _) in &staged[index..] {
                    let _ = std::fs::remove_file(left);
                }
                return Err(error);
            }
            let dir = folder_of(path);
            if !folders.contains(&dir) {
                folders.push(dir);
            }
        }
        for dir in folders {
            // The renames themselves, on disk.
            if let Ok(folder) = File::open(&dir) {
                let _ = folder.sync_all();
            }
        }
        Ok(())
    }
}

impl Drop for Commit {
    fn drop(&mut self) {
        for (partial, _) in &self.staged {
            let _ = std::fs::remove_file(partial);
        }
    }
}

fn folder_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn refuse_link_or_folder(path: &Path) -> Result<(), WriteError> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    let why = if meta.file_type().is_symlink() {
        "is a symlink: not written through"
    } else if meta.is_dir() {
        "is a folder"
    } else {
        return Ok(());
    };
    Err(WriteError::Refused {
        path: path.to_path_buf(),
        why,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn files_are_replaced_whole_never_through_a_link_and_a_commit_is_all_or_nothing() {
        let dir = std::env::temp_dir().join(format!("autotune-write-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("Cargo.toml");
        write_atomic(&file, b"[package]\n").unwrap();
        write_atomic(&file, b"[package]\nname = \"k\"\n").unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"[package]\nname = \"k\"\n");
        let target = dir.join("elsewhere");
        std::os::unix::fs::symlink(&target, dir.join("build.rs")).unwrap();
        assert!(matches!(
            write_atomic(&dir.join("build.rs"), b"x"),
            Err(WriteError::Refused { .. })
        ));
        assert!(
            !target.exists(),
            "nothing was created through the dangling link"
        );
        // A commit whose second file is refused leaves the first untouched.
        let mut commit = Commit::default();
        commit.stage(&file, b"changed").unwrap();
        assert!(commit.stage(&dir.join("build.rs"), b"x").is_err());
        drop(commit);
        assert_eq!(std::fs::read(&file).unwrap(), b"[package]\nname = \"k\"\n");
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
        assert_eq!(left.len(), 2, "no temporary file is left: {left:?}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_log_is_created_afresh_and_never_through_a_link() {
        use std::io::Write as _;
        let dir = std::env::temp_dir().join(format!("autotune-log-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("gemm.log");
        create_log(&log).unwrap().write_all(b"first run\n").unwrap();
        create_log(&log).unwrap().write_all(b"second\n").unwrap();
        assert_eq!(std::fs::read(&log).unwrap(), b"second\n");
        let target = dir.join("elsewhere");
        std::os::unix::fs::symlink(&target, dir.join("linked.log")).unwrap();
        assert!(matches!(
            create_log(&dir.join("linked.log")),
            Err(WriteError::Refused { .. })
        ));
        assert!(!target.exists());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
