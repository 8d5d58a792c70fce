//! One SVG per kernel and table: every valid variant's time relative to the
//! incumbent (the default, or the fallback) against the key, both on log scales,
//! with the dispatch ranges shaded and labelled with their pick.

use std::process::ExitCode;

use autotune_table::artifacts::plot_files;
use autotune_table::plot::render;
use autotune_table::table;

use crate::args::PlotArgs;
use crate::error::CliError;

pub fn run(args: &PlotArgs) -> Result<ExitCode, CliError> {
    let dir = args.tables.dir()?;
    let out = args.out.clone().unwrap_or_else(|| dir.join("plots"));
    std::fs::create_dir_all(&out).map_err(CliError::io("create", &out))?;
    for (path, table) in table::read_all(&dir) {
        let table = table.map_err(CliError::unreadable(path.display()))?;
        let files = plot_files(&table);
        for (name, kernel) in &table.kernels {
            let Some(file) = files.get(name) else {
                continue;
            };
            let file = out.join(file);
            table::write_text_atomic(&file, &render(name, kernel, &table))?;
            println!("wrote {}", file.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
