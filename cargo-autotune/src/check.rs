//! Does every kernel bake a committed table measured on this machine's GPU model,
//! with this nvcc and these sources? The build script answers (same fingerprints as
//! tuning) in its JSON summary, found through `cargo build --message-format=json`;
//! nothing is read from the text of cargo's warnings. Exit code: 0 yes, 1 no.

use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};

use autotune_table::summary::{BuildSummary, CHECK_ENV, KernelSummary, SUMMARY_PATH};
use autotune_table::table::GpuRecord;

use crate::args::CheckArgs;
use crate::error::CliError;

pub fn run(args: &CheckArgs) -> Result<ExitCode, CliError> {
    let summaries = build_summaries(args)?;
    if summaries.is_empty() {
        return Err(CliError::Refused(
            "the build wrote no autotune summary: is this a crate with #[autotune] wrappers?"
                .into(),
        ));
    }
    let mut all_ok = true;
    for summary in &summaries {
        println!("{}", summary.package);
        match &summary.nvcc {
            Some(version) => println!("  nvcc {version}"),
            None => {
                let why = summary.nvcc_missing.as_deref().unwrap_or("not found");
                println!("  nvcc: {why} (kernels can be baked but not compiled)");
            }
        }
        match &summary.gpu {
            Some(gpu) => println!(
                "  GPU: {} (sm_{}{}, {} SMs)",
                gpu.name, gpu.compute_capability[0], gpu.compute_capability[1], gpu.sm_count
            ),
            None => println!(
                "  GPU: none here ({}); checking sources, spec, nvcc and versions only",
                summary.gpu_missing.as_deref().unwrap_or("not looked at")
            ),
        }
        for kernel in &summary.kernels {
            let verdict = verdict(kernel, summary.gpu.as_ref());
            all_ok &= verdict.is_ok();
            let (mark, note) = match &verdict {
                Ok(note) => ("ok   ", note.clone()),
                Err(note) => ("STALE", note.clone()),
            };
            println!("  {:<24} {mark}  {note}", kernel.name);
        }
    }
    Ok(if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Whether `kernel` runs a fresh tuned plan on `gpu` (or, with no GPU here, on
/// some GPU), with what it says either way.
fn verdict(kernel: &KernelSummary, gpu: Option<&GpuRecord>) -> Result<String, String> {
    let skipped = || {
        let reasons: Vec<String> = kernel
            .skipped
            .iter()
            .map(|s| format!("{} {}", s.table, s.reason))
            .collect();
        if reasons.is_empty() {
            String::new()
        } else {
            format!(": {}", reasons.join("; "))
        }
    };
    let plan = match gpu {
        Some(gpu) => kernel.plan_for(gpu),
        None => kernel.plans.first(),
    };
    match plan {
        None => Err(format!("defaults ({}){}", kernel.default, skipped())),
        Some(_) if !kernel.compiled => Err("not compiled (no nvcc): load() would fail".into()),
        Some(plan) => Ok(format!(
            "tuned for {} on {} ({})",
            plan.gpu.name, plan.tuned_on, plan.table
        )),
    }
}

/// The summaries of every build script of the build that wrote one.
fn build_summaries(args: &CheckArgs) -> Result<Vec<BuildSummary>, CliError> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    command.args(["build", "--message-format=json"]);
    if let Some(manifest) = &args.manifest_path {
        command.arg("--manifest-path").arg(manifest);
    }
    let output = command
        .env(CHECK_ENV, "1")
        .stderr(Stdio::inherit())
        .output()
        .map_err(CliError::Cargo)?;
    if !output.status.success() {
        return Err(CliError::BuildFailed(output.status.to_string()));
    }
    let mut summaries = Vec::new();
    for out_dir in out_dirs(&String::from_utf8_lossy(&output.stdout)) {
        let path = out_dir.join(SUMMARY_PATH);
        if path.is_file() {
            summaries.push(
                BuildSummary::read(&path).map_err(|reason| CliError::Unreadable {
                    path: path.display().to_string(),
                    reason,
                })?,
            );
        }
    }
    Ok(summaries)
}

/// The `out_dir` of every `build-script-executed` message in cargo's JSON output.
fn out_dirs(messages: &str) -> Vec<PathBuf> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m.get("reason").and_then(|r| r.as_str()) == Some("build-script-executed"))
        .filter_map(|m| m.get("out_dir")?.as_str().map(PathBuf::from))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use autotune_table::summary::{BakedPlan, SkippedTable};

    fn gpu(name: &str) -> GpuRecord {
        GpuRecord {
            name: name.into(),
            compute_capability: [9, 0],
            sm_count: 132,
            driver: "13.0".into(),
            l2_bytes: 60 << 20,
            memory_bytes: 0,
            shared_per_block: 0,
        }
    }

    fn kernel(plans: Vec<BakedPlan>) -> KernelSummary {
        KernelSummary {
            name: "k".into(),
            plans,
            skipped: vec![SkippedTable {
                table: "tuning/x.json".into(),
                reason: "is stale for X (the wrapper's Rust code changed)".into(),
            }],
            default: "block=64".into(),
            compiled: true,
        }
    }

    #[test]
    fn decides_from_fields_not_from_text() {
        // A table whose GPU name mimics the old warning text fools nothing: it is
        // not this GPU's model.
        let mimic = BakedPlan {
            table: "tuning/mimic.json".into(),
            gpu: gpu("tuned for NVIDIA H200 on"),
            tuned_on: "2026-11-30".into(),
        };
        let h200 = gpu("NVIDIA H200");
        assert!(verdict(&kernel(vec![mimic.clone()]), Some(&h200)).is_err());
        let real = BakedPlan {
            gpu: h200.clone(),
            ..mimic
        };
        assert!(verdict(&kernel(vec![real]), Some(&h200)).is_ok());
        assert!(verdict(&kernel(vec![]), None).is_err());
    }

    #[test]
    fn reads_out_dirs_from_cargo_messages() {
        let messages = r#"{"reason":"compiler-artifact","package_id":"x"}
{"reason":"build-script-executed","package_id":"k","out_dir":"/t/build/k-1/out"}
not json
{"reason":"build-finished","success":true}"#;
        assert_eq!(out_dirs(messages), [PathBuf::from("/t/build/k-1/out")]);
    }
}
