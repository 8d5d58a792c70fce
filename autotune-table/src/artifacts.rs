//! What stands beside a committed table and must follow it: the text report
//! (`<gpu>-report.txt`) and one plot per kernel (`plots/<gpu>-<kernel>.svg`).
//! A tuning build rewrites them with the table, so that they never lag it.

use std::path::{Path, PathBuf};

use autotune_spec::names::gpu_slug;

use crate::error::TableError;
use crate::table::{self, TuningTable};
use crate::{plot, report};

/// The report's path for tables of `gpu` in `dir`.
pub fn report_path(dir: &Path, gpu: &str) -> PathBuf {
    dir.join(format!("{}-report.txt", gpu_slug(gpu)))
}

/// The plot's path for `kernel` in tables of `gpu` in `dir`. The kernel's name
/// comes from a table: only letters, digits, `_` and `-` reach the file name, so
/// that a name with `/` or `..` stays one file in `plots/`.
pub fn plot_path(dir: &Path, gpu: &str, kernel: &str) -> PathBuf {
    dir.join("plots").join(plot_file_name(gpu, kernel))
}

/// `nvidia-h200-rms_norm.svg`: the plot's file name, made safe.
pub fn plot_file_name(gpu: &str, kernel: &str) -> String {
    let safe = autotune_spec::names::file_fragment(kernel);
    format!("{}-{safe}.svg", gpu_slug(gpu))
}

/// Writes the report and the plots of `table` (at `shown`, the table's path as the
/// report names it) into `dir`; returns the files written.
pub fn write_beside(
    dir: &Path,
    shown: &str,
    table: &TuningTable,
) -> Result<Vec<PathBuf>, TableError> {
    let mut written = Vec::new();
    let path = report_path(dir, &table.gpu.name);
    table::write_text_atomic(&path, &report::render(shown, table, None))?;
    written.push(path);
    for (name, kernel) in &table.kernels {
        let path = plot_path(dir, &table.gpu.name, name);
        table::write_text_atomic(&path, &plot::render(name, kernel, table))?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names_from_tables_make_safe_file_names() {
        let dir = Path::new("t");
        assert_eq!(
            plot_path(dir, "NVIDIA H200", "rms_norm"),
            Path::new("t/plots/nvidia-h200-rms_norm.svg")
        );
        assert_eq!(
            plot_path(dir, "NVIDIA H200", "../../etc/x"),
            Path::new("t/plots/nvidia-h200-______etc_x.svg")
        );
    }
}
