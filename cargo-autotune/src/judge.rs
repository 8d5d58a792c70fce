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

use std::io::Write;
use std::path::Path;
use std::process::{Command, ExitCode};

use autotune_table::summary::TABLES_DIR_ENV;
use autotune_table::table::{self, KernelTable};
use autotune_table::verdict::{self, JOURNAL_FILE, JournalEntry, Judgement};

use crate::args::JudgeArgs;

/// The scratch tables folder, relative to the crate root.
const SCRATCH: &str = "target/autotune-judge";

pub fn run(args: &JudgeArgs) -> Result<ExitCode, String> {
    if let Some(path) = &args.table {
        let table = table::read(path).map_err(|e| format!("{}: {}", path.display(), e.reason))?;
        let entry = table
            .kernels
            .get(&args.kernel)
            .ok_or_else(|| format!("{} has no kernel `{}`", path.display(), args.kernel))?;
        let judgement = verdict::judge(&args.kernel, entry)?;
        return Ok(answer(args, &judgement, entry));
    }
    let root = args
        .manifest_path
        .as_deref()
        .and_then(Path::parent)
        .unwrap_or(Path::new(""));
    let committed = crate::tables_dir_in(root, &args.tables)?;
    let scratch = root.join(SCRATCH);
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)
        .map_err(|e| format!("cannot create {}: {e}", scratch.display()))?;
    let before = entries(&committed, &args.kernel);
    for (path, _) in table::read_all(&committed) {
        if let Some(name) = path.file_name() {
            std::fs::copy(&path, scratch.join(name))
                .map_err(|e| format!("cannot copy {}: {e}", path.display()))?;
        }
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .args(["build", "--release", "--features", "autotune"])
        .env("AUTOTUNE_FORCE", &args.kernel)
        .env(TABLES_DIR_ENV, SCRATCH);
    // A second input draw after the timing catches a candidate that caches its
    // result between launches; the caller's own setting wins.
    if std::env::var_os("AUTOTUNE_CHECK_SEEDS").is_none() {
        command.env("AUTOTUNE_CHECK_SEEDS", "2");
    }
    if let Some(manifest) = &args.manifest_path {
        command.arg("--manifest-path").arg(manifest);
    }
    let status = command
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("the build failed ({status})"));
    }
    let after = entries(&scratch, &args.kernel);
    let Some(entry) = after.iter().find(|a| !before.contains(a)) else {
        return Err(format!(
            "the build did not tune `{}` (no GPU or no nvcc here? its warning above says \
             why): no verdict",
            args.kernel
        ));
    };
    let judgement = verdict::judge(&args.kernel, entry)?;
    journal(&committed.join(JOURNAL_FILE), &judgement, entry)?;
    Ok(answer(args, &judgement, entry))
}

/// Prints the verdict and turns it into the exit code.
fn answer(args: &JudgeArgs, judgement: &Judgement, entry: &KernelTable) -> ExitCode {
    if args.json {
        match serde_json::to_string_pretty(judgement) {
            Ok(text) => println!("{text}"),
            Err(e) => eprintln!("cannot write the verdict as JSON: {e}"),
        }
    } else {
        print!("{}", judgement.render(&entry.key));
    }
    ExitCode::from(if judgement.keep { 0 } else { 1 })
}

/// Every entry for `kernel` in the tables of `dir`.
fn entries(dir: &Path, kernel: &str) -> Vec<KernelTable> {
    table::read_all(dir)
        .into_iter()
        .filter_map(|(_, t)| t.ok()?.kernels.remove(kernel))
        .collect()
}

/// Appends one JSON line: when, what sources (the fingerprint's), the verdict.
fn journal(path: &Path, judgement: &Judgement, entry: &KernelTable) -> Result<(), String> {
    let line = serde_json::to_string(&JournalEntry::new(judgement.clone(), entry))
        .map_err(|e| format!("cannot write the verdict: {e}"))?;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    writeln!(file, "{line}").map_err(|e| format!("cannot write {}: {e}", path.display()))
}
