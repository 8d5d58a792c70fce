//! Everything about tuning results that needs neither a GPU nor nvcc: the table
//! format ([`table`], with [`above`] for keys past the largest size), the rule that turns timings into ranges ([`ranges`]), the
//! search strategies ([`strategy`]), the progress lines a terminal draws
//! ([`progress`]), the build's machine-readable summary ([`summary`]), the
//! report and plots that stand beside a committed table ([`artifacts`]), and the
//! Markdown context an agent reads before proposing a change ([`context`]), and the
//! keep-or-revert verdict on candidate sources ([`verdict`]).
//!
//! The build library (`autotune-build`) writes these; `cargo autotune` reads them
//! without linking cudarc.

pub mod above;
pub mod artifacts;
pub mod context;
pub mod error;
pub mod plot;
pub mod progress;
pub mod ranges;
pub mod regular;
pub mod report;
pub mod resources;
pub mod shown;
pub mod strategy;
pub mod summary;
pub mod table;
pub mod vars;
pub mod verdict;

pub use error::TableError;
pub use resources::Resources;

/// Fixtures for this repository's tests: no stability promise.
#[doc(hidden)]
pub mod testing {
    use crate::table::{FORMAT, GpuRecord, KernelTable, TuningTable};

    /// The H200 the shipped table was tuned on, as a table records it (facts a
    /// table may predate, memory and shared memory, left out).
    pub fn h200() -> GpuRecord {
        GpuRecord {
            name: "NVIDIA H200".into(),
            compute_capability: [9, 0],
            sm_count: 132,
            driver: "13.0".into(),
            l2_bytes: 62_914_560,
            memory_bytes: 0,
            shared_per_block: 0,
        }
    }

    /// Fails naming every one of `needles` that `text` lacks, and the text.
    #[track_caller]
    pub fn assert_contains(text: &str, needles: &[&str]) {
        let missing: Vec<&&str> = needles.iter().filter(|n| !text.contains(**n)).collect();
        assert!(missing.is_empty(), "missing {missing:?} in:\n{text}");
    }

    /// An empty folder of this process for the test `name` (under the system's
    /// temporary folder; emptied first, where an earlier run left it).
    pub fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("autotune-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        if let Err(error) = std::fs::create_dir_all(&dir) {
            panic!("cannot make {}: {error}", dir.display());
        }
        dir
    }

    /// A table of the H200 holding `kernels` by entry name.
    pub fn table<'a>(kernels: impl IntoIterator<Item = (&'a str, KernelTable)>) -> TuningTable {
        TuningTable {
            format: FORMAT,
            gpu: h200(),
            kernels: kernels
                .into_iter()
                .map(|(name, kernel)| (name.to_string(), kernel))
                .collect(),
        }
    }
}

/// Lower-case hexadecimal of `bytes` (digests in tables and file names).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
