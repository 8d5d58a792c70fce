//! The build's machine-readable account of what it baked: written by every run of
//! the build step to `OUT_DIR/autotune/summary.json`, read by `cargo autotune check`
//! (which finds `OUT_DIR` through `cargo build --message-format=json`). Tools decide
//! from these fields, never from the text of cargo's warnings.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::table::GpuRecord;

/// The version of this format.
pub const SUMMARY_FORMAT: u32 = 2;

/// Where the summary lives under a build script's `OUT_DIR`.
pub const SUMMARY_PATH: &str = "autotune/summary.json";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildSummary {
    pub format: u32,
    /// `name version` of the crate.
    pub package: String,
    /// The nvcc version used, or `None` (then `nvcc_missing` says why).
    pub nvcc: Option<String>,
    pub nvcc_missing: Option<String>,
    /// The GPU the build looked at (with tuning on, or when asked to check), if any.
    pub gpu: Option<GpuRecord>,
    /// Why no GPU was looked at or found, where that is so.
    pub gpu_missing: Option<String>,
    /// What tuning did, when it was on.
    pub tuning: Option<String>,
    pub kernels: Vec<KernelSummary>,
    /// The build's whole account, a line each, of which its one cargo warning is
    /// the short form: what tuning did, every problem, each kernel's plans.
    pub notes: Vec<String>,
}

/// What one kernel got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelSummary {
    pub name: String,
    /// One per table that was baked.
    pub plans: Vec<BakedPlan>,
    /// Tables that hold this kernel but were not baked, with the reason.
    pub skipped: Vec<SkippedTable>,
    /// The default point's name (what runs where no plan applies).
    pub default: String,
    /// Whether the variants were compiled (nvcc present).
    pub compiled: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BakedPlan {
    /// The table, relative to the crate root.
    pub table: String,
    pub gpu: GpuRecord,
    pub tuned_on: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkippedTable {
    pub table: String,
    pub reason: String,
}

impl KernelSummary {
    /// The plan baked for `gpu`'s model (name, compute capability and SM count, as
    /// dispatch matches it at run time), if any.
    pub fn plan_for(&self, gpu: &GpuRecord) -> Option<&BakedPlan> {
        self.plans.iter().find(|plan| {
            plan.gpu.name == gpu.name
                && plan.gpu.compute_capability == gpu.compute_capability
                && plan.gpu.sm_count == gpu.sm_count
        })
    }
}

/// Why a build summary could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SummaryError {
    #[error("{}: {reason}", path.display())]
    Unreadable { path: PathBuf, reason: String },
    #[error("{} is not a build summary: {reason}", path.display())]
    NotASummary { path: PathBuf, reason: String },
    #[error("{} has summary format {format}; this version reads {SUMMARY_FORMAT}", path.display())]
    Format { path: PathBuf, format: u32 },
}

impl BuildSummary {
    /// Reads a summary file.
    pub fn read(path: &Path) -> Result<Self, SummaryError> {
        use autotune_spec::guarded::read;
        let text = read::read_to_string(path, read::MAX_SOURCE_BYTES).map_err(|e| {
            SummaryError::Unreadable {
                path: path.to_path_buf(),
                reason: e.to_string(),
            }
        })?;
        let summary: Self = serde_json::from_str(&text).map_err(|e| SummaryError::NotASummary {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        if summary.format != SUMMARY_FORMAT {
            return Err(SummaryError::Format {
                path: path.to_path_buf(),
                format: summary.format,
            });
        }
        Ok(summary)
    }
}
