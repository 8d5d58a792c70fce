//! Tuning tables: one JSON file per GPU model (`tuning/nvidia-h200.json`) holding,
//! per kernel, the fingerprint it was tuned under, every variant's measurements or
//! the reason it was rejected, the decision at each size, and the ranges.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::TableError;
use crate::resources::Resources;

/// The file format this version reads and writes.
pub const FORMAT: u32 = 2;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuningTable {
    pub format: u32,
    pub gpu: GpuRecord,
    pub kernels: BTreeMap<String, KernelTable>,
}

/// The GPU model a table was measured on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuRecord {
    pub name: String,
    pub compute_capability: [u32; 2],
    pub sm_count: u32,
    /// CUDA driver API version (`13.0`).
    pub driver: String,
    pub l2_bytes: u64,
}

impl GpuRecord {
    pub fn arch(&self) -> String {
        format!(
            "sm_{}{}",
            self.compute_capability[0], self.compute_capability[1]
        )
    }
}

/// What a kernel's measurements depend on besides the GPU: if any of it changes,
/// the kernel is tuned again (with the feature) or its table is not used. Each
/// part changes only when the compiled code or the measurement would: comments,
/// doc comments and formatting of the wrapper file do not count, and the
/// attribute counts as the data it validates to, not as text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fingerprint {
    /// The validated spec (entries, key, sizes, parameters, points, default,
    /// flags, source path), the kernel's and its fallback's.
    pub spec_sha256: String,
    /// The Rust items of the wrapper files (the kernel's and the fallback's), doc
    /// comments, comments and formatting removed.
    pub wrapper_sha256: String,
    /// Every file nvcc reads for the kernel besides the toolkit's own headers
    /// (root sources first), relative to the crate root where inside it.
    pub sources: Vec<String>,
    /// The contents of `sources`.
    pub sources_sha256: String,
    pub nvcc: String,
    /// Every flag nvcc gets besides defines and targets, and the environment
    /// variables nvcc reads itself (`NVCC_APPEND_FLAGS=...`).
    pub flags: Vec<String>,
    /// `name version` of the crate that holds the wrapper.
    pub crate_version: String,
    /// The version of the build library that measured.
    pub tuner_version: String,
}

impl Fingerprint {
    /// What differs between a table's fingerprint (`self`) and the current one.
    pub fn differences(&self, current: &Self) -> Vec<String> {
        let mut out = Vec::new();
        if self.spec_sha256 != current.spec_sha256 {
            out.push("the #[autotune] spec changed".to_string());
        }
        if self.wrapper_sha256 != current.wrapper_sha256 {
            out.push("the wrapper's Rust code changed".to_string());
        }
        if self.sources != current.sources {
            out.push(format!(
                "nvcc reads other files ({} -> {})",
                self.sources.len(),
                current.sources.len()
            ));
        } else if self.sources_sha256 != current.sources_sha256 {
            out.push("the CUDA source or a header changed".to_string());
        }
        if self.nvcc != current.nvcc {
            out.push(format!("nvcc {} -> {}", self.nvcc, current.nvcc));
        }
        if self.flags != current.flags {
            out.push(format!("flags {:?} -> {:?}", self.flags, current.flags));
        }
        if self.crate_version != current.crate_version {
            out.push(format!(
                "{} -> {}",
                self.crate_version, current.crate_version
            ));
        }
        if self.tuner_version != current.tuner_version {
            out.push(format!(
                "autotune-build {} -> {}",
                self.tuner_version, current.tuner_version
            ));
        }
        out
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelTable {
    pub fingerprint: Fingerprint,
    /// `2026-11-30`.
    pub tuned_on: String,
    pub seed: u64,
    pub key: String,
    pub default: String,
    pub fallback: Option<String>,
    /// How the times were taken.
    pub timing: String,
    /// A challenger must beat the incumbent by more than this and the noise.
    pub min_margin: f64,
    pub variants: Vec<VariantRecord>,
    /// The decision at every timed key value, refinements included.
    pub sizes: Vec<SizeRecord>,
    /// What dispatch launches per range of the key, ascending, covering `0..=u64::MAX`.
    pub ranges: Vec<RangeRecord>,
    pub seconds: Seconds,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seconds {
    pub compile: f64,
    pub sweep: f64,
    pub total: f64,
    /// How many GPUs the sweep ran on.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub gpus: u32,
}

fn one() -> u32 {
    1
}

fn is_one(value: &u32) -> bool {
    *value == 1
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Tuned,
    Fallback,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantRecord {
    pub name: String,
    pub values: Vec<u32>,
    pub role: Role,
    pub resources: Option<Resources>,
    /// `None` when the variant was measured and passed every check.
    pub rejected: Option<Rejection>,
    pub measurements: Vec<Measurement>,
}

/// Why a variant is out, and at which stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rejection {
    pub stage: Stage,
    pub reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Compile,
    Resources,
    Load,
    Launch,
    WrongResult,
    Crash,
    Timeout,
}

/// One variant at one key value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measurement {
    pub key: u64,
    pub median_us: f64,
    pub p25_us: f64,
    pub p75_us: f64,
    pub min_us: f64,
    pub repeats: u32,
    /// The check's relative error on fresh random inputs; negative when this timing
    /// was not checked (the incumbent's second timing at a key).
    pub error: f64,
    pub bytes: u64,
    pub flops: u64,
    /// The CUDA device it was timed on, when the sweep ran on several; its times
    /// are then scaled onto the reference device's by the two devices' timings of
    /// the incumbent at this key (the log has them raw).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub device: u32,
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

impl Measurement {
    /// Half the inter-quartile range over the median.
    pub fn spread(&self) -> f64 {
        if self.median_us > 0.0 {
            (self.p75_us - self.p25_us) / (2.0 * self.median_us)
        } else {
            0.0
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SizeRecord {
    pub key: u64,
    pub winner: String,
    pub winner_us: f64,
    /// The default (or the fallback, when declared): what a challenger must beat.
    pub incumbent: String,
    pub incumbent_us: f64,
    /// `incumbent_us / winner_us - 1`.
    pub margin: f64,
    /// The relative noise at this size: the spread of both, and the difference
    /// between the incumbent's two timings.
    pub noise: f64,
    pub runner_up: Option<String>,
    /// Timed to place a boundary between two sizes with different winners.
    pub refinement: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RangeRecord {
    pub first: u64,
    pub last: u64,
    /// A variant name, or `fallback`.
    pub variant: String,
}

/// The fallback kernel's name in ranges.
pub const FALLBACK: &str = "fallback";

impl KernelTable {
    /// Checks what serde cannot: ranges are contiguous from 0 to `u64::MAX` and name
    /// variants of the table (or the fallback when one is declared).
    pub fn validate(&self) -> Result<(), String> {
        let mut next = 0u64;
        for (index, range) in self.ranges.iter().enumerate() {
            if range.first != next || range.last < range.first {
                return Err(format!(
                    "range {index} ({}..={}) does not continue from {next}",
                    range.first, range.last
                ));
            }
            let known = self
                .variants
                .iter()
                .any(|v| v.name == range.variant && v.rejected.is_none())
                || (range.variant == FALLBACK && self.fallback.is_some());
            if !known {
                return Err(format!(
                    "range {index} names `{}`, which is not a valid variant of the table",
                    range.variant
                ));
            }
            if range.last == u64::MAX {
                return if index + 1 == self.ranges.len() {
                    Ok(())
                } else {
                    Err("ranges continue past u64::MAX".to_string())
                };
            }
            next = range.last + 1;
        }
        Err(format!(
            "ranges stop at {next} instead of covering every key"
        ))
    }

    pub fn variant(&self, name: &str) -> Option<&VariantRecord> {
        self.variants.iter().find(|v| v.name == name)
    }
}

/// A table file that could not be used as it is.
#[derive(Debug, Clone)]
pub struct Unreadable {
    pub path: PathBuf,
    pub reason: String,
}

/// Reads one table. A file that is not valid JSON of this format is `Unreadable`
/// (never a panic), and so is one whose kernels fail [`KernelTable::validate`].
pub fn read(path: &Path) -> Result<TuningTable, Unreadable> {
    let unreadable = |reason: String| Unreadable {
        path: path.to_path_buf(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| unreadable(e.to_string()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| unreadable(format!("not JSON: {e}")))?;
    match value.get("format").and_then(serde_json::Value::as_u64) {
        Some(format) if format == u64::from(FORMAT) => {}
        Some(format) => {
            return Err(unreadable(format!(
                "format {format}; this autotune-build reads format {FORMAT}"
            )));
        }
        None => return Err(unreadable("no `format` field".to_string())),
    }
    let table: TuningTable =
        serde_json::from_value(value).map_err(|e| unreadable(e.to_string()))?;
    for (name, kernel) in &table.kernels {
        kernel
            .validate()
            .map_err(|e| unreadable(format!("kernel `{name}`: {e}")))?;
    }
    Ok(table)
}

/// Every `*.json` table in `dir`, sorted by file name; missing folder = none.
pub fn read_all(dir: &Path) -> Vec<(PathBuf, Result<TuningTable, Unreadable>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let table = read(&p);
            (p, table)
        })
        .collect()
}

/// Writes `table` so that a reader sees the old file or the new one, never a part.
pub fn write_atomic(path: &Path, table: &TuningTable) -> Result<(), TableError> {
    let text = serde_json::to_string_pretty(table).map_err(TableError::Serialise)? + "\n";
    write_text_atomic(path, &text)
}

/// Writes `text` to `path` through a temporary file and a rename.
pub fn write_text_atomic(path: &Path, text: &str) -> Result<(), TableError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(TableError::io("cannot create", dir))?;
    }
    let partial = path.with_extension(format!("partial-{}", std::process::id()));
    std::fs::write(&partial, text).map_err(TableError::io("cannot write", &partial))?;
    std::fs::rename(&partial, path).map_err(TableError::io("cannot replace", path))
}

/// An exclusive lock on the tables of one folder, held while tuning so that
/// concurrent builds sharing the folder neither corrupt a table nor time the same
/// kernel at once (which would also spoil both measurements). The lock file lives
/// in the system temp folder, named after the tables folder.
#[derive(Debug)]
pub struct TablesLock {
    _file: File,
}

impl TablesLock {
    pub fn acquire(dir: &Path) -> Result<Self, TableError> {
        let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        let digest = {
            use sha2::Digest;
            crate::hex(&sha2::Sha256::digest(canonical.to_string_lossy().as_bytes())[..8])
        };
        let path = std::env::temp_dir().join(format!("autotune-{digest}.lock"));
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(TableError::io("cannot open lock", &path))?;
        file.lock().map_err(TableError::io("cannot lock", &path))?;
        Ok(Self { _file: file })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample() -> TuningTable {
        let fingerprint = Fingerprint {
            spec_sha256: "aa".into(),
            wrapper_sha256: "bb".into(),
            sources: vec!["kernels/k.cu".into()],
            sources_sha256: "cc".into(),
            nvcc: "13.0.88".into(),
            flags: vec!["-O3".into()],
            crate_version: "k 0.1.0".into(),
            tuner_version: "0.1.0".into(),
        };
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
        };
        let variant = |name: &str, values: Vec<u32>| VariantRecord {
            name: name.into(),
            values,
            role: Role::Tuned,
            resources: None,
            rejected: None,
            measurements: vec![measurement.clone()],
        };
        let kernel = KernelTable {
            fingerprint,
            tuned_on: "2026-11-30".into(),
            seed: 1,
            key: "n".into(),
            default: "block=64".into(),
            fallback: None,
            timing: "events".into(),
            min_margin: 0.01,
            variants: vec![
                variant("block=64", vec![64]),
                variant("block=128", vec![128]),
            ],
            sizes: vec![],
            ranges: vec![
                RangeRecord {
                    first: 0,
                    last: 99,
                    variant: "block=128".into(),
                },
                RangeRecord {
                    first: 100,
                    last: u64::MAX,
                    variant: "block=64".into(),
                },
            ],
            seconds: Seconds {
                compile: 1.0,
                sweep: 2.0,
                total: 3.0,
                gpus: 1,
            },
        };
        TuningTable {
            format: FORMAT,
            gpu: GpuRecord {
                name: "NVIDIA H200".into(),
                compute_capability: [9, 0],
                sm_count: 132,
                driver: "13.0".into(),
                l2_bytes: 62_914_560,
            },
            kernels: BTreeMap::from([("k".to_string(), kernel)]),
        }
    }

    fn temp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("autotune-table-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn round_trips_and_validates() {
        let dir = temp("roundtrip");
        let path = dir.join("nvidia-h200.json");
        write_atomic(&path, &sample()).unwrap();
        assert_eq!(read(&path).unwrap(), sample());
        assert_eq!(read_all(&dir).len(), 1);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn corrupt_and_invalid_tables_are_unreadable_with_the_file_named() {
        let dir = temp("corrupt");
        let path = dir.join("t.json");
        std::fs::write(&path, "{ \"format\": 1, \"gpu\": ").unwrap();
        let error = read(&path).unwrap_err();
        assert!(error.reason.contains("not JSON"), "{}", error.reason);
        assert_eq!(error.path, path);
        let mut table = sample();
        table.format = 7;
        std::fs::write(&path, serde_json::to_string(&table).unwrap()).unwrap();
        assert!(read(&path).unwrap_err().reason.contains("format 7"));
        let mut table = sample();
        table.kernels.get_mut("k").unwrap().ranges[1].first = 101;
        std::fs::write(&path, serde_json::to_string(&table).unwrap()).unwrap();
        assert!(
            read(&path)
                .unwrap_err()
                .reason
                .contains("does not continue from 100")
        );
        let mut table = sample();
        table.kernels.get_mut("k").unwrap().ranges[0].variant = "block=999".into();
        std::fs::write(&path, serde_json::to_string(&table).unwrap()).unwrap();
        assert!(
            read(&path)
                .unwrap_err()
                .reason
                .contains("not a valid variant")
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn fingerprint_differences_say_what_changed() {
        let a = sample().kernels["k"].fingerprint.clone();
        let mut b = a.clone();
        b.nvcc = "12.4.131".into();
        b.sources_sha256 = "dd".into();
        b.wrapper_sha256 = "ee".into();
        assert_eq!(
            a.differences(&b),
            [
                "the wrapper's Rust code changed",
                "the CUDA source or a header changed",
                "nvcc 13.0.88 -> 12.4.131"
            ]
        );
        // Another list of files says so, whatever the digest.
        b.sources.push("kernels/common.cuh".into());
        assert!(a.differences(&b)[1].starts_with("nvcc reads other files (1 -> 2)"));
    }
}
