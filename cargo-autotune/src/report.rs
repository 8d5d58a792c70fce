//! Per kernel and range: the pick, its margin over the runner-up and over the
//! incumbent, what was rejected and why, and the fingerprint.

use std::process::ExitCode;

use autotune_table::report::render;
use autotune_table::shown;

use crate::args::ReportArgs;
use crate::error::CliError;

pub fn run(args: &ReportArgs) -> Result<ExitCode, CliError> {
    let dir = args.tables.dir()?;
    let kernel = args.kernel.as_deref();
    let tables = crate::summaries::tables_with(&dir, kernel)?;
    let mut unreadable_tables = 0;
    for (path, table) in tables {
        match table {
            Ok(table) => print!(
                "{}",
                shown::lines(&render(&path.display().to_string(), &table, kernel))
            ),
            Err(unreadable) => {
                unreadable_tables += 1;
                eprintln!(
                    "{}: unreadable: {}\n",
                    shown::line(&path.display().to_string()),
                    shown::line(&unreadable.reason)
                );
            }
        }
    }
    // As `context` and `plot` do: a table that cannot be read is a failure (2).
    Ok(if unreadable_tables == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}
