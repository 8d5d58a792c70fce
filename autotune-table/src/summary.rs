//! The build's outcome as data: what it baked per kernel ([`KernelSummary`]) and
//! everything else it has to say ([`Note`], what tuning did among it), written by
//! every run of the build step to `OUT_DIR/autotune/summary.json` and read by
//! `cargo autotune check` (which finds `OUT_DIR` through `cargo build
//! --message-format=json`). The cargo warning, the summary and `check` are all
//! rendered from these values (`Display` of [`Note`] and [`TuningOutcome`],
//! [`KernelSummary::account`]): tools decide from the fields, never from text.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::table::GpuRecord;

/// The version of this format.
pub const SUMMARY_FORMAT: u32 = 3;

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
    pub tuning: Option<TuningOutcome>,
    pub kernels: Vec<KernelSummary>,
    /// Everything else the build has to say, problems first: with each kernel's
    /// [`KernelSummary::account`], the build's whole account, of which its one
    /// cargo warning is the short form.
    pub notes: Vec<Note>,
}

/// What is wrong with the folder `AUTOTUNE_TABLES_DIR` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TablesDirProblem {
    /// The value is empty or blank (ignored: build.rs's folder is read).
    NamesNoFolder,
    /// It names a file.
    IsAFile,
    /// It names nothing.
    DoesNotExist,
}

/// Something the build says besides each kernel's plans.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Note {
    /// The sweep's worker variable is set, but no sweep started this build.
    StrayWorker { variable: String },
    /// A setting this build cannot use; it does not tune, so it goes on without it.
    SettingIgnored { error: String },
    /// The tables folder `AUTOTUNE_TABLES_DIR` names (`value`) is not one.
    TablesDir {
        value: String,
        problem: TablesDirProblem,
    },
    /// `AUTOTUNE_FORCE` names no kernel of this crate.
    ForceUnknown {
        unknown: Vec<String>,
        known: Vec<String>,
    },
    /// What tuning did.
    Tuning { outcome: TuningOutcome },
    /// A tuning build whose build script was compiled without optimisation.
    UnoptimisedBuildScript,
    /// No nvcc: no binaries, `load()` fails.
    NoBinaries {
        reason: String,
        /// Tuning was asked for on a GPU, and did not run for want of nvcc.
        nothing_tuned: bool,
        /// Some kernels are precompiled images and were baked all the same.
        precompiled_others: bool,
    },
    /// A table holds entries no kernel of this crate has.
    UnknownEntries { table: String, entries: Vec<String> },
}

/// A note as one line of visible characters: what it quotes of a table (a GPU's
/// or an entry's name, a parse error) may hold control or direction-changing
/// characters, escaped here, whoever prints it.
impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = self.sentence();
        f.write_str(&crate::shown::line(&text))
    }
}

impl Note {
    /// The note's sentence, as the tables and settings spelled it.
    fn sentence(&self) -> String {
        match self {
            Note::StrayWorker { variable } => format!(
                "{variable} is set but this build was not started by a sweep: ignored (unset it)"
            ),
            Note::SettingIgnored { error } => format!("{error} (ignored: not tuning)"),
            Note::TablesDir { value, problem } => {
                let name = crate::vars::TABLES_DIR.name;
                match problem {
                    TablesDirProblem::NamesNoFolder => {
                        format!("{name}={value:?} names no folder: ignored")
                    }
                    TablesDirProblem::IsAFile => {
                        format!("{name}={value} is a file, not a folder: no table read")
                    }
                    TablesDirProblem::DoesNotExist => {
                        format!("{name}={value} does not exist: no table read")
                    }
                }
            }
            Note::ForceUnknown { unknown, known } => format!(
                "{} names no kernel of this crate: {} (its kernels: {})",
                crate::vars::FORCE.name,
                unknown.join(", "),
                known.join(", ")
            ),
            Note::Tuning { outcome } => outcome.to_string(),
            Note::UnoptimisedBuildScript => {
                "build script unoptimised: set [profile.release.build-override] opt-level = 3"
                    .to_string()
            }
            Note::NoBinaries {
                reason,
                nothing_tuned,
                precompiled_others,
            } => format!(
                "{reason}: {}, load() will fail{}",
                if *nothing_tuned {
                    "nothing tuned, no binaries"
                } else {
                    "no binaries"
                },
                if *precompiled_others {
                    " for the kernels not precompiled"
                } else {
                    ""
                }
            ),
            Note::UnknownEntries { table, entries } => format!(
                "{table} holds kernels this crate does not have: {}",
                entries.join(", ")
            ),
        }
    }
}

/// What a tuning build did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case", deny_unknown_fields)]
pub enum TuningOutcome {
    /// Entries tuned (`entry in 12.3 s`), on `gpu`, into `written` (a table, or a
    /// shard's file).
    Tuned {
        entries: Vec<String>,
        gpu: String,
        written: String,
    },
    /// Nothing was stale.
    UpToDate { table: String, gpu: String },
    /// Tuning could not run.
    NothingTuned { reason: String },
}

impl std::fmt::Display for TuningOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TuningOutcome::Tuned {
                entries,
                gpu,
                written,
            } => write!(f, "tuned {} on {gpu} -> {written}", entries.join(", ")),
            TuningOutcome::UpToDate { table, gpu } => write!(f, "{table} is up to date for {gpu}"),
            TuningOutcome::NothingTuned { reason } => write!(f, "nothing tuned: {reason}"),
        }
    }
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
    /// The incumbent (a vendor library or a fallback wrapper) by name, where the
    /// kernel has one: it runs where no plan applies, instead of the default.
    pub incumbent: Option<String>,
    /// Why no table gave a plan, where none did.
    pub without_plan: Option<WithoutPlan>,
    /// Whether the variants were compiled (nvcc present).
    pub compiled: bool,
}

/// Why a kernel baked no plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WithoutPlan {
    /// The build read no table.
    NoTableYet,
    /// No table it read has this kernel.
    NoTableHasIt,
    /// Tables have it but were skipped (`skipped` says why).
    TablesSkipped,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BakedPlan {
    /// The table, relative to the crate root.
    pub table: String,
    pub gpu: GpuRecord,
    pub tuned_on: String,
    /// The tuned shape the plan is for (`n=4096,k=4096`); empty for a kernel
    /// without shapes.
    pub shape: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkippedTable {
    pub table: String,
    pub reason: String,
}

impl KernelSummary {
    /// What runs where no plan applies: the incumbent at every size, or the
    /// defaults.
    pub fn without_plans(&self) -> String {
        match &self.incumbent {
            Some(incumbent) => format!("{incumbent} (its incumbent) at every size"),
            None => format!("defaults ({})", self.default),
        }
    }

    /// The kernel's account (one line of visible characters), a part per table (each table's plans, `tuned for
    /// NVIDIA H200 at n=4096,k=4096 on 2026-12-05 (tuning/nvidia-h200.json)`, then
    /// each table skipped with the reason) and, without a plan, what runs and why:
    /// `scale: tuning/x.json is stale for ...; defaults (block=128)`.
    pub fn account(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        let mut tables: Vec<&str> = self.plans.iter().map(|p| p.table.as_str()).collect();
        tables.dedup();
        for table in tables {
            let plans: Vec<&BakedPlan> = self.plans.iter().filter(|p| p.table == table).collect();
            let shapes: Vec<&str> = plans
                .iter()
                .map(|p| p.shape.as_str())
                .filter(|s| !s.is_empty())
                .collect();
            let at = if shapes.is_empty() {
                String::new()
            } else {
                format!(" at {}", shapes.join(" | "))
            };
            if let Some(last) = plans.last() {
                parts.push(format!(
                    "tuned for {}{at} on {} ({table})",
                    last.gpu.name, last.tuned_on
                ));
            }
        }
        parts.extend(
            self.skipped
                .iter()
                .map(|s| format!("{} {}", s.table, s.reason)),
        );
        if let Some(why) = self.without_plan {
            let why = match why {
                WithoutPlan::NoTableYet => ": no table yet",
                WithoutPlan::NoTableHasIt => ": no table has it",
                WithoutPlan::TablesSkipped => "",
            };
            parts.push(format!("{}{why}", self.without_plans()));
        }
        // What it quotes of a table (a parse error, a GPU's name) is escaped.
        crate::shown::line(&format!("{}: {}", self.name, parts.join("; ")))
    }

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
