//! `cargo autotune judge --kernel K`: keep or revert a kernel's candidate sources
//! (`source = [old, new]` in its attribute), per range, from a sweep on this GPU.
//!
//! The kernel is tuned again (`cargo build --release --features autotune`) into a
//! scratch copy of the tables (`AUTOTUNE_TABLES_DIR`), so the committed ones stay as
//! they are whatever the verdict; the sweep gates and times every variant of every
//! source over the whole range, past its top, and a candidate owns only the ranges
//! where it beats the old source's best by more than the margin and the noise. The
//! verdict is printed (or `--json`), appended to `judge-journal.jsonl` beside the
//! tables, and is the exit code: 0 keep (somewhere), 1 revert, 2 no verdict.
//!
//! Each launch is timed as a replay of the CUDA graph it was captured into
//! (`AUTOTUNE_GRAPH=1`), as graph-using code runs it: a candidate that works only
//! with graphs off is out. A kernel with shapes gets a verdict per shape (`--json`
//! prints them as an array then).

use std::io::Write;
use std::path::Path;
use std::process::{Command, ExitCode};

use crate::verdict::{self, JOURNAL_FILE, JournalEntry, Judgement};
use autotune_table::table::{self, KernelTable};
use autotune_table::vars;

use crate::args::JudgeArgs;
use crate::error::CliError;

/// The scratch tables folder, relative to the crate root.
const SCRATCH: &str = "target/autotune-judge";

pub fn run(args: &JudgeArgs) -> Result<ExitCode, CliError> {
    if let Some(path) = &args.table {
        let table = table::read(path).map_err(CliError::unreadable(path.display()))?;
        let known = crate::summaries::entries_of(&table);
        let judged = of_kernel(table.kernels, &args.kernel);
        if judged.is_empty() {
            return Err(CliError::NoKernel {
                kernel: args.kernel.clone(),
                path: path.display().to_string(),
                known,
            });
        }
        let judgements = judge_all(&judged)?;
        return Ok(answer(args, &judgements, &judged));
    }
    // The crate's folder: the manifest's, else the nearest folder up from here that
    // holds a Cargo.toml (as cargo finds it), never the current folder as such (from
    // `src/`, the scratch tables went to `src/target/`).
    let found = match args.manifest_path.as_deref() {
        Some(manifest) => manifest.parent().map(Path::to_path_buf),
        None => std::env::current_dir().ok().and_then(|here| {
            here.ancestors()
                .find(|dir| dir.join("Cargo.toml").is_file())
                .map(Path::to_path_buf)
        }),
    };
    let root_dir = found.unwrap_or_default();
    let root = root_dir.as_path();
    if args.kernel == "all" {
        return Err(CliError::Refused(
            "judge takes one kernel's candidate sources at a time: name the kernel".into(),
        ));
    }
    let committed = args.tables.dir_in(root)?;
    let scratch = root.join(SCRATCH);
    // The scratch folder is emptied: never when it is (or holds) the tables judged.
    let resolved = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    if resolved(&committed).starts_with(resolved(&scratch)) {
        return Err(CliError::Refused(format!(
            "--tables {} is the judge's scratch folder ({SCRATCH}), which it empties: \
             judge the committed tables",
            committed.display()
        )));
    }
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).map_err(CliError::io("create", &scratch))?;
    let before = entries(&committed, &args.kernel);
    for (path, _) in table::read_all(&committed) {
        if let Some(name) = path.file_name() {
            std::fs::copy(&path, scratch.join(name)).map_err(CliError::io("copy", &path))?;
        }
    }
    let stdout = tune_candidates(args)?;
    // A name the crate does not have is that, whatever the GPU.
    let summaries = crate::summaries::read(&stdout)?;
    let known = crate::summaries::kernels(&summaries);
    crate::summaries::check_kernel(&args.kernel, &known, "this crate")?;
    if let Some(why) = crate::summaries::why_nothing_was_tuned(&summaries) {
        return Err(CliError::NoVerdict(format!(
            "the build could not tune `{}` ({why}): no verdict",
            args.kernel
        )));
    }
    let judged: Vec<(String, KernelTable)> = entries(&scratch, &args.kernel)
        .into_iter()
        .filter(|entry| !before.contains(entry))
        .collect();
    if judged.is_empty() {
        return Err(CliError::NoVerdict(format!(
            "the build did not tune `{}` (no GPU or no nvcc here? its warning above says \
             why): no verdict",
            args.kernel
        )));
    }
    let judgements = judge_all(&judged)?;
    for (judgement, (_, entry)) in judgements.iter().zip(&judged) {
        journal(&committed.join(JOURNAL_FILE), judgement, entry)?;
    }
    Ok(answer(args, &judgements, &judged))
}

/// The tuning build of the kernel judged, into the scratch tables folder, with a
/// second input draw and graph timing unless the caller set them; its JSON
/// messages.
fn tune_candidates(args: &JudgeArgs) -> Result<String, CliError> {
    let cargo = vars::CARGO.text_or_none().unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .args(["build", "--release", "--features", "autotune"])
        .env(vars::FORCE.name, &args.kernel)
        .env(vars::TABLES_DIR.name, SCRATCH);
    // A second input draw after the timing catches a candidate that caches its
    // result between launches, and graph timing one that needs graphs off; the
    // caller's own settings win.
    for (var, value) in [(vars::CHECK_SEEDS, "2"), (vars::GRAPH, "1")] {
        if !var.is_set() {
            command.env(var.name, value);
        }
    }
    if let Some(manifest) = &args.manifest_path {
        command.arg("--manifest-path").arg(manifest);
    }
    command.arg("--message-format=json-render-diagnostics");
    // A tuning build: its sweep may take hours on a large crate.
    let timeout = std::time::Duration::from_secs(12 * 3600);
    let output = autotune_spec::guarded::run::run_showing_stderr(command, timeout, "cargo build")
        .map_err(|e| CliError::Cargo(e.into()))?;
    if !output.status.success() {
        return Err(CliError::BuildFailed(output.status.to_string()));
    }
    Ok(output.stdout)
}

/// A verdict per table entry (per shape of a kernel with shapes).
fn judge_all(judged: &[(String, KernelTable)]) -> Result<Vec<Judgement>, CliError> {
    judged
        .iter()
        .map(|(name, entry)| {
            verdict::judge(name, entry).map_err(|e| CliError::Refused(e.to_string()))
        })
        .collect()
}

/// Prints the verdicts and turns them into the exit code: keep if any shape keeps.
fn answer(
    args: &JudgeArgs,
    judgements: &[Judgement],
    judged: &[(String, KernelTable)],
) -> ExitCode {
    if args.json {
        let text = match judgements {
            [one] => serde_json::to_string_pretty(one),
            all => serde_json::to_string_pretty(all),
        };
        match text {
            Ok(text) => println!("{text}"),
            Err(e) => eprintln!("cannot write the verdict as JSON: {e}"),
        }
    } else {
        for (judgement, (_, entry)) in judgements.iter().zip(judged) {
            print!("{}", judgement.render(&entry.key));
        }
    }
    ExitCode::from(if judgements.iter().any(|j| j.keep) {
        0
    } else {
        1
    })
}

/// The entries of `kernel` among `kernels`: its own, or one per shape
/// (`kernel@n=4096,...`), by name.
fn of_kernel(
    kernels: std::collections::BTreeMap<String, KernelTable>,
    kernel: &str,
) -> Vec<(String, KernelTable)> {
    kernels
        .into_iter()
        .filter(|(name, _)| table::is_entry_of(name, kernel))
        .collect()
}

/// Every entry for `kernel` in the tables of `dir`.
fn entries(dir: &Path, kernel: &str) -> Vec<(String, KernelTable)> {
    table::read_all(dir)
        .into_iter()
        .filter_map(|(_, t)| t.ok())
        .flat_map(|t| of_kernel(t.kernels, kernel))
        .collect()
}

/// Appends one JSON line: when, what sources (the fingerprint's), the verdict.
fn journal(path: &Path, judgement: &Judgement, entry: &KernelTable) -> Result<(), CliError> {
    let line = serde_json::to_string(&JournalEntry::new(judgement.clone(), entry))?;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(CliError::io("open", path))?;
    writeln!(file, "{line}").map_err(CliError::io("write", path))
}
