//! Tuning from the terminal: first a look for the driver and a GPU (before anything
//! compiles), then `cargo build --release --features autotune` (the same library
//! path as any build), with the options as `AUTOTUNE_*` variables, progress
//! bars drawn from what the build script reports, then a summary of what changed.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use autotune_table::summary::BuildSummary;
use autotune_table::table::{self, KernelTable};
use autotune_table::vars;

use crate::args::TuneArgs;
use crate::bars::Bars;
use crate::error::CliError;

pub fn run(args: &TuneArgs) -> Result<ExitCode, CliError> {
    // Nothing to tune without a driver and a GPU: said before anything compiles.
    crate::gpu_probe::look().map_err(|why| CliError::NotTuned(why.to_string()))?;
    let mut command = tuning_build(args);
    let progress_path = progress_file()?;
    command.env(vars::PROGRESS.name, &progress_path);
    let before = tuned_entries(args);
    let built = build_with_bars(&mut command, &progress_path);
    let _ = std::fs::remove_file(&progress_path);
    let (status, messages) = built?;
    if !status.success() {
        return Err(CliError::BuildFailed(status.to_string()));
    }
    let summaries = crate::summaries::read(&messages)?;
    if let Some(asked) = &args.kernel {
        let known = crate::summaries::kernels(&summaries);
        for name in asked.split(',').map(str::trim) {
            crate::summaries::check_kernel(name, &known, "this crate")?;
        }
    }
    let after = tuned_entries(args);
    let changed: Vec<(&String, &KernelTable)> = after
        .iter()
        .filter(|&(name, entry)| before.get(name) != Some(entry))
        .collect();
    if !changed.is_empty() {
        println!("{}", summary(&changed));
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(why) = crate::summaries::why_nothing_was_tuned(&summaries) {
        return Err(CliError::NotTuned(why));
    }
    if args.kernel.is_some() {
        return Err(CliError::NotTuned(
            "the build tuned none of the kernels asked for (its warning above says why)".into(),
        ));
    }
    println!(
        "nothing to tune: every kernel's table is fresh for {} (--kernel NAME, or all, retunes)",
        gpu_names(&summaries)
    );
    Ok(ExitCode::SUCCESS)
}

/// `cargo build --release --features autotune` with what `args` asks passed on as
/// the build step's variables.
fn tuning_build(args: &TuneArgs) -> Command {
    let cargo = vars::CARGO.text_or_none().unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    // Diagnostics as text on stderr (above the bars), the build scripts' JSON
    // messages on stdout: they say where each build's summary is.
    command.args([
        "build",
        "--release",
        "--features",
        "autotune",
        "--message-format=json-render-diagnostics",
    ]);
    if let Some(manifest) = &args.manifest_path {
        command.arg("--manifest-path").arg(manifest);
    }
    if let Some(kernel) = &args.kernel {
        command.env(vars::FORCE.name, kernel);
    }
    if let Some(strategy) = args.strategy {
        command.env(vars::STRATEGY.name, strategy.as_str());
    }
    // Parsed (and so checked) before cargo starts.
    if let Some((budget, _)) = &args.budget {
        command.env(vars::BUDGET.name, budget);
    }
    if let Some(devices) = &args.devices {
        command.env(vars::DEVICES.name, devices);
    }
    if let Some(shard) = args.shard {
        command.env(vars::SHARD.name, shard.to_string());
    }
    command
}

/// Runs the build, its progress drawn as bars from `progress_path` and cargo's own
/// lines (the build script's warning among them) printed above them; its exit
/// status and its JSON messages.
fn build_with_bars(
    command: &mut Command,
    progress_path: &std::path::Path,
) -> Result<(std::process::ExitStatus, String), CliError> {
    let mut progress = File::open(progress_path).map_err(CliError::io("read", progress_path))?;
    let mut child = command
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(CliError::Cargo)?;
    let stdout = child.stdout.take();
    let messages = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut stdout) = stdout {
            let _ = std::io::Read::read_to_string(&mut stdout, &mut text);
        }
        text
    });
    let (lines, cargo_lines) = std::sync::mpsc::channel::<String>();
    let stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        if let Some(stderr) = stderr {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if lines.send(line).is_err() {
                    break;
                }
            }
        }
    });
    let mut bars = Bars::new();
    let status = loop {
        while let Ok(line) = cargo_lines.try_recv() {
            bars.println(&line);
        }
        bars.poll(&mut progress);
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => return Err(CliError::Waiting(e)),
        }
    };
    let _ = reader.join();
    for line in cargo_lines.try_iter() {
        bars.println(&line);
    }
    bars.poll(&mut progress);
    bars.finish();
    Ok((status, messages.join().unwrap_or_default()))
}

/// The GPU models the builds tuned for.
fn gpu_names(summaries: &[BuildSummary]) -> String {
    let mut names: Vec<&str> = summaries
        .iter()
        .filter_map(|s| s.gpu.as_ref().map(|g| g.name.as_str()))
        .collect();
    names.dedup();
    names.join(", ")
}

/// An empty file for this run's progress lines, under the system's temp folder.
fn progress_file() -> Result<PathBuf, CliError> {
    let path = std::env::temp_dir().join(format!("cargo-autotune-{}.progress", std::process::id()));
    autotune_spec::guarded::write::write_atomic(&path, b"")
        .map_err(|e| CliError::io("create", &path)(e.into()))?;
    Ok(path)
}

/// Every kernel entry of every readable table, by `kernel on GPU`.
fn tuned_entries(args: &TuneArgs) -> BTreeMap<String, KernelTable> {
    let Ok(dir) = args.tables.dir() else {
        return BTreeMap::new();
    };
    let mut entries = BTreeMap::new();
    for (_, table) in table::read_all(&dir) {
        let Ok(table) = table else { continue };
        for (name, entry) in table.kernels {
            entries.insert(format!("{name} on {}", table.gpu.name), entry);
        }
    }
    entries
}

/// One row per kernel tuned in this run.
fn summary(changed: &[(&String, &KernelTable)]) -> String {
    let mut rows = vec![[
        "kernel".to_string(),
        "points".into(),
        "valid".into(),
        "ranges".into(),
        "picks".into(),
        "nvcc s".into(),
        "sweep s".into(),
        "GPUs".into(),
    ]];
    for (name, k) in changed {
        let valid = k.variants.iter().filter(|v| v.rejected.is_none()).count();
        let mut picks: Vec<&str> = k.ranges.iter().map(|r| r.choice.as_str()).collect();
        picks.sort_unstable();
        picks.dedup();
        rows.push([
            name.to_string(),
            k.variants.len().to_string(),
            valid.to_string(),
            k.ranges.len().to_string(),
            picks.len().to_string(),
            format!("{:.1}", k.seconds.compile),
            format!("{:.1}", k.seconds.sweep),
            k.seconds.gpus.to_string(),
        ]);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::from("\ntuned in this run (`cargo autotune report` for the ranges):\n");
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, &w))| {
                if c == 0 {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        out.push_str("  ");
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_has_a_row_per_tuned_kernel() {
        let table = autotune_table::testing::fixture_table();
        let names: Vec<String> = table.kernels.keys().cloned().collect();
        let changed: Vec<(&String, &KernelTable)> = names
            .iter()
            .filter_map(|n| table.kernels.get(n).map(|k| (n, k)))
            .collect();
        let text = summary(&changed);
        assert_eq!(text.lines().count(), 3 + names.len(), "{text}");
        assert!(text.contains("rms_norm"), "{text}");
        assert!(
            text.lines().nth(2).is_some_and(|l| l.contains("GPUs")),
            "{text}"
        );
    }
}
