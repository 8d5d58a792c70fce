//! Fixtures for this repository's tests: no stability promise.

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

/// The library tests' table: a snapshot of the shipped H200 table (2026-12-05)
/// under this crate's `tests/fixtures/`, so that a retune of the shipped kernels
/// changes no library test.
pub const FIXTURE_TABLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/nvidia-h200.json"
);

/// [`FIXTURE_TABLE`], read.
pub fn fixture_table() -> TuningTable {
    crate::table::read(std::path::Path::new(FIXTURE_TABLE))
        .unwrap_or_else(|e| panic!("{FIXTURE_TABLE}: {}", e.reason))
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
        shard: None,
    }
}
