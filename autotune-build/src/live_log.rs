//! A sweep's log as it is written: kept in memory for the tables folder's copy,
//! which is written once the entry is done, and appended line by line to a file
//! in the build's own `OUT_DIR`, so that a build killed or still running shows
//! where its time went (cargo keeps a build script's output until it ends).

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

use autotune_spec::guarded::write::create_log;

/// The log of one entry's sweep.
#[derive(Debug)]
pub struct LiveLog {
    text: Vec<u8>,
    /// The file the lines go to as they come; `None` where it could not be made
    /// (the log in memory still is).
    file: Option<File>,
}

impl LiveLog {
    /// Starts the log at `path` (its folder made, any earlier run's log replaced).
    pub fn create(path: &Path) -> Self {
        let file = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .ok()
            .and_then(|()| create_log(path).ok());
        Self {
            text: Vec::new(),
            file,
        }
    }

    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.text).into_owned()
    }
}

impl Write for LiveLog {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.text.extend_from_slice(bytes);
        // The file is a view for whoever looks while the build runs: a failed write
        // stops the view, never the sweep.
        if let Some(file) = &mut self.file
            && file.write_all(bytes).is_err()
        {
            self.file = None;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_line_is_in_the_file_before_the_log_ends() {
        let dir = std::env::temp_dir().join(format!("autotune-live-log-{}", std::process::id()));
        let path = dir.join("sweep").join("gemm.log");
        let mut log = LiveLog::create(&path);
        let _ = writeln!(log, "  n=1024 v=1 3.0 us");
        assert_eq!(
            std::fs::read_to_string(&path).ok().as_deref(),
            Some("  n=1024 v=1 3.0 us\n")
        );
        let _ = writeln!(log, "  n=2048 v=1 5.0 us");
        assert_eq!(log.text(), "  n=1024 v=1 3.0 us\n  n=2048 v=1 5.0 us\n");
        assert_eq!(std::fs::read_to_string(&path).ok(), Some(log.text()));
        // A second run of the same entry starts its file afresh.
        let _again = LiveLog::create(&path);
        assert_eq!(std::fs::read_to_string(&path).ok().as_deref(), Some(""));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
