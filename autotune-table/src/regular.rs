//! Reading a file that a table, a tables folder or the environment names, as
//! only a regular file and only so much of it: a FIFO (which blocks a reader until
//! someone writes), a device such as `/dev/zero` (endless) or a symlink to either
//! is refused, never waited on or read to the end of memory.

use std::path::Path;

use autotune_spec::guarded::read as guarded;

/// The most a tuning table may hold (the shipped H200 table is under 1 MiB).
pub const MAX_TABLE_BYTES: u64 = 64 << 20;

/// The most a kernel's source file may hold, for the fingerprint.
pub const MAX_SOURCE_BYTES: u64 = guarded::MAX_SOURCE_BYTES;

/// The bytes of `path`, if it is a regular file (symlinks followed) of at most
/// `max` bytes ([`autotune_spec::guarded::read`]).
pub fn read(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    Ok(guarded::read(path, max)?)
}

/// [`read`] as UTF-8 text.
pub fn read_to_string(path: &Path, max: u64) -> std::io::Result<String> {
    Ok(guarded::read_to_string(path, max)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_of_bounded_size_are_read() {
        let dir = crate::testing::scratch("regular");
        let file = dir.join("t.json");
        std::fs::write(&file, "{}").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read_to_string(&file, 10).ok().as_deref(), Some("{}"));
        assert!(read(&file, 1).is_err(), "over the limit");
        assert!(read(Path::new("/dev/zero"), 1 << 20).is_err(), "a device");
        assert!(read(&dir, 1 << 20).is_err(), "a folder");
        let fifo = dir.join("fifo.json");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            assert!(read(&fifo, 1 << 20).is_err(), "a FIFO, without blocking");
            let link = dir.join("link.json");
            std::os::unix::fs::symlink(&fifo, &link).unwrap_or_else(|e| panic!("{e}"));
            assert!(read(&link, 1 << 20).is_err(), "a symlink to a FIFO");
        }
    }
}
