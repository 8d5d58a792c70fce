//! What stands beside a committed table and must follow it: the text report
//! (`<gpu>-report.txt`) and one plot per kernel (`plots/<gpu>-<kernel>.svg`).
//! A tuning build rewrites them with the table, so that they never lag it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use autotune_spec::guarded::write::{Commit, WriteError};

use autotune_spec::names::gpu_slug;

use crate::error::TableError;
use crate::table::TuningTable;
use crate::{plot, report};

/// The report's path for tables of `gpu` in `dir`.
pub fn report_path(dir: &Path, gpu: &str) -> PathBuf {
    dir.join(format!("{}-report.txt", gpu_slug(gpu)))
}

/// The plot's file name for every kernel entry of `table`, made safe and unique:
/// only letters, digits, `_` and `-` reach a file name (a name with `/` or `..`
/// stays one file in `plots/`), and entries whose safe names would be one
/// (`silu_mul`, `silu/mul`, `silu.mul`) each get a digest of their own name.
pub fn plot_files(table: &TuningTable) -> BTreeMap<String, String> {
    let fragment = |name: &str| autotune_spec::names::file_fragment(name);
    let mut count: BTreeMap<String, usize> = BTreeMap::new();
    for name in table.kernels.keys() {
        *count.entry(fragment(name)).or_default() += 1;
    }
    let slug = gpu_slug(&table.gpu.name);
    table
        .kernels
        .keys()
        .map(|name| {
            let safe = fragment(name);
            let file = if count.get(&safe).copied().unwrap_or(0) > 1 {
                use sha2::Digest;
                let digest = crate::hex(&sha2::Sha256::digest(name.as_bytes())[..4]);
                format!("{slug}-{safe}-{digest}.svg")
            } else {
                format!("{slug}-{safe}.svg")
            };
            (name.clone(), file)
        })
        .collect()
}

/// Writes the report and the plots of `table` (at `shown`, the table's path as the
/// report names it) into `dir`; returns the files written.
pub fn write_beside(
    dir: &Path,
    shown: &str,
    table: &TuningTable,
) -> Result<Vec<PathBuf>, TableError> {
    let mut commit = Commit::default();
    let written = stage_beside(&mut commit, dir, shown, table)?;
    commit.finish().map_err(write_error)?;
    Ok(written)
}

/// [`write_beside`]'s files staged in `commit` (written, not yet renamed), so that
/// a caller writing the table too replaces all of them or none. The report's text
/// is escaped ([`crate::shown::lines`]: a shard's host or a rejection reason
/// reaches no terminal as an escape sequence), and a `plots` folder that is a
/// symlink is refused, not followed.
pub fn stage_beside(
    commit: &mut Commit,
    dir: &Path,
    shown: &str,
    table: &TuningTable,
) -> Result<Vec<PathBuf>, TableError> {
    let mut written = Vec::new();
    let path = report_path(dir, &table.gpu.name);
    let report = crate::shown::lines(&report::render(shown, table, None));
    commit
        .stage(&path, report.as_bytes())
        .map_err(write_error)?;
    written.push(path);
    let plots = dir.join("plots");
    if std::fs::symlink_metadata(&plots).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(TableError::Refused {
            path: plots,
            why: "is a symlink: plots are not written through it",
        });
    }
    let files = plot_files(table);
    for (name, kernel) in &table.kernels {
        let Some(file) = files.get(name) else {
            continue;
        };
        let path = plots.join(file);
        let text = plot::render(name, kernel, table);
        commit.stage(&path, text.as_bytes()).map_err(write_error)?;
        written.push(path);
    }
    Ok(written)
}

/// The table crate's error for a guarded write's.
pub fn write_error(error: WriteError) -> TableError {
    match error {
        WriteError::Refused { path, why } => TableError::Refused { path, why },
        WriteError::Io { what, path, source } => TableError::Io { what, path, source },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table_of(names: &[&str]) -> TuningTable {
        let mut table = crate::testing::fixture_table();
        let entry = table
            .kernels
            .get("rms_norm")
            .cloned()
            .unwrap_or_else(|| panic!("rms_norm"));
        table.kernels = names
            .iter()
            .map(|n| (n.to_string(), entry.clone()))
            .collect();
        table
    }

    #[test]
    fn kernel_names_from_tables_make_safe_file_names() {
        let files = plot_files(&table_of(&["rms_norm", "../../etc/x"]));
        assert_eq!(files["rms_norm"], "nvidia-h200-rms_norm.svg");
        assert_eq!(files["../../etc/x"], "nvidia-h200-______etc_x.svg");
    }

    /// `silu_mul`, `silu/mul` and `silu.mul` all plotted to one file, the last
    /// one winning.
    #[test]
    fn names_that_would_share_a_file_each_get_their_own() {
        let files = plot_files(&table_of(&["silu_mul", "silu/mul", "silu.mul", "other"]));
        let unique: std::collections::BTreeSet<&String> = files.values().collect();
        assert_eq!(unique.len(), 4, "{files:?}");
        assert_eq!(files["other"], "nvidia-h200-other.svg");
        assert!(
            files["silu/mul"].starts_with("nvidia-h200-silu_mul-"),
            "{files:?}"
        );
    }
}
