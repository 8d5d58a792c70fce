//! One SVG per kernel and table: every valid variant's time relative to the
//! incumbent (the default, or the fallback) against the key, both on log scales,
//! with the dispatch ranges shaded and labelled with their pick.

use std::path::Path;
use std::process::ExitCode;

use autotune_table::artifacts::plot_file_name;
use autotune_table::plot::render;
use autotune_table::table;

use crate::args::PlotArgs;
use crate::error::CliError;

pub fn run(args: &PlotArgs) -> Result<ExitCode, CliError> {
    let dir = crate::tables_dir(&args.tables)?;
    let out = args.out.clone().unwrap_or_else(|| dir.join("plots"));
    std::fs::create_dir_all(&out).map_err(CliError::io("create", &out))?;
    for (path, table) in table::read_all(&dir) {
        let table = table.map_err(CliError::unreadable(path.display()))?;
        for (name, kernel) in &table.kernels {
            let file = out.join(plot_file_name(&table.gpu.name, name));
            write(&file, &render(name, kernel, &table))?;
            println!("wrote {}", file.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn write(path: &Path, text: &str) -> Result<(), CliError> {
    std::fs::write(path, text).map_err(CliError::io("write", path))
}
