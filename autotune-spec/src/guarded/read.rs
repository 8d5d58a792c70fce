//! Reading a file as only a regular file, and only so much of it (see the
//! [module](super) above).

use std::io::Read;
use std::path::{Path, PathBuf};

/// The most a kernel's source, header or precompiled image may hold.
pub const MAX_SOURCE_BYTES: u64 = 64 << 20;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{}: not a regular file (a FIFO, a device or a folder is never read)", path.display())]
    NotRegular { path: PathBuf },
    #[error("{}: {bytes} bytes, more than the {max} allowed", path.display())]
    TooLarge { path: PathBuf, bytes: u64, max: u64 },
    #[error("{} resolves to {}, outside {}", path.display(), resolved.display(), inside.display())]
    Outside {
        path: PathBuf,
        resolved: PathBuf,
        inside: PathBuf,
    },
    #[error("{}: not UTF-8 text", path.display())]
    NotText { path: PathBuf },
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl ReadError {
    /// The I/O error's kind, where the file could not be opened or read.
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            Self::Io { source, .. } => Some(source.kind()),
            _ => None,
        }
    }
}

impl From<ReadError> for std::io::Error {
    fn from(error: ReadError) -> Self {
        let kind = error.io_kind().unwrap_or(std::io::ErrorKind::InvalidInput);
        std::io::Error::new(kind, error.to_string())
    }
}

/// The bytes of `path`, if it is a regular file (symlinks followed) of at most
/// `max` bytes: checked before it is opened, opened without blocking, checked
/// again on the open file, and read no further than `max`.
pub fn read(path: &Path, max: u64) -> Result<Vec<u8>, ReadError> {
    let io = |source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let not_regular = || ReadError::NotRegular {
        path: path.to_path_buf(),
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() {
        return Err(not_regular());
    }
    let too_large = |bytes| ReadError::TooLarge {
        path: path.to_path_buf(),
        bytes,
        max,
    };
    if meta.len() > max {
        return Err(too_large(meta.len()));
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    {
        // Never block in open() if the file was swapped for a FIFO after the check.
        use std::os::unix::fs::OpenOptionsExt;
        const O_NONBLOCK: i32 = 0o4000;
        options.custom_flags(O_NONBLOCK);
    }
    let file = options.open(path).map_err(io)?;
    if !file.metadata().map_err(io)?.is_file() {
        return Err(not_regular());
    }
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > max {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// [`read`] as UTF-8 text.
pub fn read_to_string(path: &Path, max: u64) -> Result<String, ReadError> {
    String::from_utf8(read(path, max)?).map_err(|_| ReadError::NotText {
        path: path.to_path_buf(),
    })
}

/// [`read`], where `path`, every symlink resolved, lies inside one of `folders`
/// (themselves resolved): a link inside a crate to `/etc/passwd` is refused.
pub fn read_inside(path: &Path, folders: &[&Path], max: u64) -> Result<Vec<u8>, ReadError> {
    check_inside(path, folders)?;
    read(path, max)
}

/// [`read_inside`] as UTF-8 text.
pub fn read_to_string_inside(
    path: &Path,
    folders: &[&Path],
    max: u64,
) -> Result<String, ReadError> {
    check_inside(path, folders)?;
    read_to_string(path, max)
}

/// `path` resolved, if it lies inside one of `folders` (each resolved).
pub fn check_inside(path: &Path, folders: &[&Path]) -> Result<PathBuf, ReadError> {
    let resolved = path.canonicalize().map_err(|source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let inside = folders
        .iter()
        .filter_map(|f| f.canonicalize().ok())
        .any(|folder| resolved.starts_with(folder));
    if inside {
        return Ok(resolved);
    }
    Err(ReadError::Outside {
        path: path.to_path_buf(),
        resolved,
        inside: folders
            .first()
            .map_or_else(PathBuf::new, |f| f.to_path_buf()),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("autotune-guarded-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn only_regular_files_of_bounded_size_are_read() {
        let dir = scratch("read");
        let file = dir.join("k.cu");
        std::fs::write(&file, "__global__ void k() {}").unwrap();
        assert_eq!(
            read_to_string(&file, 100).unwrap(),
            "__global__ void k() {}"
        );
        assert!(matches!(
            read(&file, 4),
            Err(ReadError::TooLarge { bytes: 22, .. })
        ));
        assert!(matches!(
            read(Path::new("/dev/zero"), 1 << 20),
            Err(ReadError::NotRegular { .. })
        ));
        assert!(matches!(
            read(&dir, 1 << 20),
            Err(ReadError::NotRegular { .. })
        ));
        let fifo = dir.join("fifo.cu");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            assert!(matches!(
                read(&fifo, 1 << 20),
                Err(ReadError::NotRegular { .. })
            ));
        }
        let zero = dir.join("zero.ptx");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert!(matches!(
            read(&zero, 1 << 20),
            Err(ReadError::NotRegular { .. })
        ));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_link_out_of_the_folder_is_refused() {
        let dir = scratch("inside");
        let outside = scratch("outside");
        std::fs::write(outside.join("secret"), "root:x:0:0").unwrap();
        std::fs::create_dir_all(dir.join("kernels")).unwrap();
        std::fs::write(dir.join("kernels/k.cu"), "k").unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), dir.join("kernels/plink")).unwrap();
        std::os::unix::fs::symlink("k.cu", dir.join("kernels/inner")).unwrap();
        let folders = [dir.as_path()];
        assert!(matches!(
            read_inside(&dir.join("kernels/plink"), &folders, 100),
            Err(ReadError::Outside { .. })
        ));
        assert_eq!(
            read_to_string_inside(&dir.join("kernels/inner"), &folders, 100).unwrap(),
            "k"
        );
        std::fs::remove_dir_all(dir).unwrap();
        std::fs::remove_dir_all(outside).unwrap();
    }
}
