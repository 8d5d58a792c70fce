//! `cargo autotune context`: the Markdown an engineer or an agent reads before
//! proposing a kernel change (the GPU, the best rates reached, each kernel's ranges
//! with their margins and noise, and what was tried and rejected), from the tables.

use std::process::ExitCode;

use autotune_table::table;

use crate::markdown::render;
use crate::verdict;

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
            // Markdown never replaces a tuning table (`--out tuning/nvidia-h200.json`),
            // nor anything else of the tables folder: the judge's journal, a log, a
            // report, a plot.
            // The path as it will be, resolved as far as it exists (`tuning/logs/`
            // may not yet).
            let inside = |p: &std::path::Path| {
                let p = std::path::Path::new(".").join(p);
                p.ancestors().find_map(|existing| {
                    let rest = p.strip_prefix(existing).ok()?;
                    existing.canonicalize().ok().map(|f| f.join(rest))
                })
            };
            let owned = match (inside(out), dir.canonicalize().ok()) {
                (Some(out), Some(tables)) => out.starts_with(&tables),
                _ => false,
            };
            if owned {
                return Err(CliError::Refused(format!(
                    "{} is inside the tables folder {}, whose files the tool writes (tables, \
                     the judge's journal, logs, reports, plots): write the context elsewhere",
                    out.display(),
                    dir.display()
                )));
            }
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
