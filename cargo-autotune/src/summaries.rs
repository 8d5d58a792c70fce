//! What a build of the crate said about itself: every build script's JSON summary
//! (`OUT_DIR/autotune/summary.json`), found through cargo's JSON messages, and the
//! kernel names a command may be asked for.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use autotune_table::summary::{BuildSummary, SUMMARY_PATH};
use autotune_table::table::{self, TuningTable};

use crate::error::CliError;

/// The summaries of every build script that wrote one, from cargo's JSON messages
/// (`--message-format=json` or `json-render-diagnostics`); refused when none did
/// (a crate without `#[autotune]` wrappers has nothing to check, tune or judge).
pub fn read(messages: &str) -> Result<Vec<BuildSummary>, CliError> {
    let mut summaries = Vec::new();
    for out_dir in out_dirs(messages) {
        let path = out_dir.join(SUMMARY_PATH);
        if path.is_file() {
            summaries.push(
                BuildSummary::read(&path).map_err(|reason| CliError::Unreadable {
                    path: path.display().to_string(),
                    reason: reason.to_string(),
                })?,
            );
        }
    }
    if summaries.is_empty() {
        return Err(CliError::Refused(
            "the build wrote no autotune summary: is this a crate with #[autotune] wrappers \
             and `autotune_build` in its build.rs?"
                .into(),
        ));
    }
    Ok(summaries)
}

/// The `out_dir` of every `build-script-executed` message in cargo's JSON output.
pub fn out_dirs(messages: &str) -> Vec<PathBuf> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m.get("reason").and_then(|r| r.as_str()) == Some("build-script-executed"))
        .filter_map(|m| m.get("out_dir")?.as_str().map(PathBuf::from))
        .collect()
}

/// Why the builds could not tune (no GPU, no nvcc: each that is so, the GPU's
/// first), for each build that says so.
pub fn why_nothing_was_tuned(summaries: &[BuildSummary]) -> Option<String> {
    let reasons: Vec<String> = summaries
        .iter()
        .filter_map(|s| {
            let gpu = s.gpu.is_none().then(|| s.gpu_missing.clone()).flatten();
            let missing: Vec<String> = gpu.into_iter().chain(s.nvcc_missing.clone()).collect();
            (!missing.is_empty()).then(|| format!("{}: {}", s.package, missing.join(", and ")))
        })
        .collect();
    (!reasons.is_empty()).then(|| reasons.join("; "))
}

/// The kernels the builds baked.
pub fn kernels(summaries: &[BuildSummary]) -> BTreeSet<String> {
    summaries
        .iter()
        .flat_map(|s| s.kernels.iter().map(|k| k.name.clone()))
        .collect()
}

/// The kernels of `tables` (an entry per shape counts as its kernel).
pub fn kernels_in<'a>(tables: impl IntoIterator<Item = &'a TuningTable>) -> BTreeSet<String> {
    tables
        .into_iter()
        .flat_map(|t| t.kernels.keys())
        .map(|entry| entry.split('@').next().unwrap_or(entry).to_string())
        .collect()
}

/// A table file of a folder, read or not.
pub type ReadTable = (PathBuf, Result<TuningTable, table::Unreadable>);

/// The tables of `dir` (at least one), after checking that `kernel`, where one
/// is asked for, is among their kernels.
pub fn tables_with(dir: &Path, kernel: Option<&str>) -> Result<Vec<ReadTable>, CliError> {
    let tables = table::read_all(dir);
    if tables.is_empty() {
        return Err(CliError::NoTables(dir.to_path_buf()));
    }
    if let Some(kernel) = kernel {
        let known = kernels_in(tables.iter().filter_map(|(_, t)| t.as_ref().ok()));
        check_kernel(kernel, &known, &format!("the tables of {}", dir.display()))?;
    }
    Ok(tables)
}

/// The entries of `table`, for an error message.
pub fn entries_of(table: &TuningTable) -> String {
    let names: Vec<&str> = table.kernels.keys().map(String::as_str).collect();
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

/// `Ok` when `asked` is `all` or one of `known`; else the error that lists them.
pub fn check_kernel(asked: &str, known: &BTreeSet<String>, whose: &str) -> Result<(), CliError> {
    if asked == "all" || known.contains(asked) {
        return Ok(());
    }
    Err(CliError::UnknownKernel {
        kernel: asked.to_string(),
        whose: whose.to_string(),
        known: if known.is_empty() {
            "none".to_string()
        } else {
            known.iter().cloned().collect::<Vec<_>>().join(", ")
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_out_dirs_from_cargo_messages() {
        let messages = r#"{"reason":"compiler-artifact","package_id":"x"}
{"reason":"build-script-executed","package_id":"k","out_dir":"/t/build/k-1/out"}
not json
{"reason":"build-finished","success":true}"#;
        assert_eq!(out_dirs(messages), [PathBuf::from("/t/build/k-1/out")]);
    }

    #[test]
    fn an_unknown_kernel_lists_the_known_ones() {
        let known: BTreeSet<String> = ["gemm".to_string(), "rms_norm".to_string()].into();
        assert!(check_kernel("gemm", &known, "this crate").is_ok());
        assert!(check_kernel("all", &known, "this crate").is_ok());
        let error = check_kernel("nosuch", &known, "this crate")
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some("no kernel `nosuch` in this crate; its kernels: gemm, rms_norm")
        );
    }
}
