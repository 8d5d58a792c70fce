//! Fixtures for this repository's tests: no stability promise.

use crate::table::{
    FORMAT, Fingerprint, GpuRecord, KernelTable, KeyRange, Measurement, Role, Seconds, SizeRecord,
    TuningTable, VariantRecord,
};

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

/// A measurement at `key` with the quartiles `[p25, p75]` around `median` (its
/// minimum the lower quartile, 50 repeats, nothing else recorded).
pub fn measurement(key: u64, p25: f64, median: f64, p75: f64) -> Measurement {
    Measurement {
        key,
        median_us: median,
        p25_us: p25,
        p75_us: p75,
        min_us: p25,
        repeats: 50,
        error: 0.0,
        bytes: 0,
        flops: 0,
        device: 0,
        checked_once: false,
        buffers: 0,
    }
}

/// A small table of one kernel `k` (two variants, one timed size, its ranges),
/// for tests of what reads tables.
pub fn sample_table() -> TuningTable {
    let measurement = Measurement {
        key: 8,
        median_us: 10.0,
        p25_us: 9.5,
        p75_us: 10.5,
        min_us: 9.0,
        repeats: 50,
        error: 1e-3,
        bytes: 1,
        flops: 0,
        device: 0,
        checked_once: false,
        buffers: 0,
    };
    let variant = |name: &str, values: Vec<u32>| VariantRecord {
        name: name.into(),
        values,
        role: Role::Tuned,
        resources: None,
        compile_s: None,
        rejected: None,
        measurements: vec![measurement.clone()],
    };
    let kernel = KernelTable {
        fingerprint: sample_fingerprint(),
        tuned_on: "2026-11-30".into(),
        seed: 1,
        key: "n".into(),
        default: "block=64".into(),
        fallback: None,
        check: None,
        tuned_by: None,
        timing: "events".into(),
        min_margin: 0.01,
        variants: vec![
            variant("block=64", vec![64]),
            variant("block=128", vec![128]),
        ],
        sizes: vec![SizeRecord {
            key: 8,
            winner: "block=128".into(),
            winner_us: 10.0,
            incumbent: "block=64".into(),
            incumbent_us: 10.0,
            margin: 0.0,
            noise: 0.01,
            runner_up: None,
            refinement: false,
            duel: None,
            confirmation: None,
        }],
        ranges: vec![
            KeyRange {
                first: 0,
                last: 99,
                choice: "block=128".into(),
            },
            KeyRange {
                first: 100,
                last: u64::MAX,
                choice: "block=64".into(),
            },
        ],
        above: None,
        off_grid: None,
        clocks: None,
        vendor_plan: Vec::new(),
        vendor_sizes: Vec::new(),
        seconds: Seconds {
            compile: 1.0,
            sweep: 2.0,
            total: 3.0,
            gpus: 1,
            phases: None,
        },
    };
    table([("k", kernel)])
}

/// The fingerprint of [`sample_table`]'s kernel.
fn sample_fingerprint() -> Fingerprint {
    Fingerprint {
        spec_sha256: "aa".into(),
        wrapper_sha256: "bb".into(),
        sources: vec!["kernels/k.cu".into()],
        sources_sha256: "cc".into(),
        nvcc: "13.0.88".into(),
        flags: vec!["-O3".into()],
        crate_version: "k 0.1.0".into(),
        tuner_version: "0.1.0".into(),
        vendor: None,
    }
}
