//! `cargo autotune context`: the Markdown an engineer or an agent reads before
//! proposing a kernel change (the GPU, the best rates reached, each kernel's ranges
//! with their margins and noise, and what was tried and rejected), from the tables.

use std::process::ExitCode;

use autotune_table::context::render;
use autotune_table::{table, verdict};

use crate::args::ContextArgs;
use crate::error::CliError;

pub fn run(args: &ContextArgs) -> Result<ExitCode, CliError> {
    let dir = args.tables.dir()?;
    let tables = crate::summaries::tables_with(&dir, args.kernel.as_deref())?;
    let journal = verdict::read_journal(&dir.join(verdict::JOURNAL_FILE));
    let mut text = String::new();
    for (path, table) in tables {
        match table {
            Ok(table) => {
                text.push_str(&render(
                    &path.display().to_string(),
                    &table,
                    args.kernel.as_deref(),
                    &journal,
                ));
                text.push('\n');
            }
            Err(unreadable) => {
                return Err(CliError::Unreadable {
                    path: path.display().to_string(),
                    reason: format!("unreadable: {}", unreadable.reason),
                });
            }
        }
    }
    // Table text reaches a terminal or a file: control, bidi and zero-width
    // characters escaped.
    let text = autotune_table::shown::lines(&text);
    match &args.out {
        Some(out) => {
            // Markdown never replaces a tuning table (`--out tuning/nvidia-h200.json`).
            if table::read(out).is_ok() {
                return Err(CliError::Refused(format!(
                    "{} is a tuning table: not overwritten (write the context elsewhere)",
                    out.display()
                )));
            }
            table::write_text_atomic(out, &text)?
        }
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}
