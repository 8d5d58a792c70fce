//! Does every kernel bake a committed table measured on this machine's GPU model,
//! with this nvcc and these sources? The build script answers (same fingerprints as
//! tuning) in its JSON summary, found through `cargo build --message-format=json`;
//! nothing is read from the text of cargo's warnings. Exit code: 0 yes, 1 no.

use std::process::{Command, ExitCode};

use autotune_table::summary::{BuildSummary, KernelSummary};
use autotune_table::table::GpuRecord;
use autotune_table::vars;

use autotune_spec::guarded::run;

use crate::args::ManifestArgs;

/// `println!` of text that holds a table's words (a GPU's name, a note): escaped,
/// so that no escape sequence in a table reaches the terminal as one.
macro_rules! say {
    ($($arg:tt)*) => {
        println!("{}", autotune_table::shown::line(&format!($($arg)*)))
    };
}
use crate::error::CliError;

pub fn run(args: &ManifestArgs) -> Result<ExitCode, CliError> {
    let summaries = build_summaries(args)?;
    let mut all_ok = true;
    for summary in &summaries {
        say!("{}", summary.package);
        match &summary.nvcc {
            Some(version) => say!("  nvcc {version}"),
            None => {
                let why = summary.nvcc_missing.as_deref().unwrap_or("not found");
                say!("  nvcc: {why} (kernels can be baked but not compiled)");
            }
        }
        match &summary.gpu {
            Some(gpu) => say!(
                "  GPU: {} (sm_{}{}, {} SMs)",
                gpu.name,
                gpu.compute_capability[0],
                gpu.compute_capability[1],
                gpu.sm_count
            ),
            None => say!(
                "  GPU: none here ({}); checking sources, spec, nvcc and versions only",
                summary.gpu_missing.as_deref().unwrap_or("not looked at")
            ),
        }
        let mut said: Vec<String> = Vec::new();
        for kernel in &summary.kernels {
            let verdict = verdict(kernel, summary.gpu.as_ref());
            all_ok &= verdict.is_ok();
            let (mark, note) = match &verdict {
                Ok(note) => ("ok          ", note.clone()),
                Err(Unfit::Untuned(note)) => ("STALE       ", note.clone()),
                Err(Unfit::NoTable(note)) => ("NO TABLE    ", note.clone()),
                Err(Unfit::NotCompiled(note)) => ("NOT COMPILED", note.clone()),
            };
            say!("  {:<24} {mark}  {note}", kernel.name);
            said.push(note);
        }
        // Each note once (its own rendering, as in the warning): one a kernel's
        // line already gave is not repeated.
        for note in &summary.notes {
            let note = note.to_string();
            if !said
                .iter()
                .any(|s| s.contains(note.as_str()) || note.contains(s.as_str()))
            {
                say!("  note: {note}");
                said.push(note);
            }
        }
    }
    Ok(if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Why a kernel does not run a fresh tuned plan here.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Unfit {
    /// A table for this GPU model that could not be used (stale, unreadable, for
    /// another compiler): it runs its defaults.
    Untuned(String),
    /// Never tuned (for this GPU model, where one is here): no table was skipped.
    NoTable(String),
    /// A fresh plan, but no binaries (no nvcc at build time): `load()` fails.
    NotCompiled(String),
}

/// Whether `kernel` runs a fresh tuned plan on `gpu` (or, with no GPU here, on
/// some GPU), with what it says either way.
fn verdict(kernel: &KernelSummary, gpu: Option<&GpuRecord>) -> Result<String, Unfit> {
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
        None if kernel.skipped.is_empty() => Err(Unfit::NoTable(format!(
            "{}: no table {} (`cargo autotune tune` on {} writes one)",
            kernel.without_plans(),
            if kernel.plans.is_empty() {
                "yet"
            } else {
                "for this GPU"
            },
            gpu.map_or("a GPU".to_string(), |g| g.name.clone())
        ))),
        None => Err(Unfit::Untuned(format!(
            "{}{}",
            kernel.without_plans(),
            skipped()
        ))),
        Some(plan) if !kernel.compiled => Err(Unfit::NotCompiled(format!(
            "tuned for {} ({}, fresh), but no nvcc at build time: load() would fail",
            plan.gpu.name, plan.table
        ))),
        Some(plan) => Ok(format!(
            "tuned for {} on {} ({})",
            plan.gpu.name, plan.tuned_on, plan.table
        )),
    }
}

/// The longest a checking build may take (a cold build of a large crate).
const BUILD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2 * 3600);

/// The summaries of every build script of the build that wrote one.
fn build_summaries(args: &ManifestArgs) -> Result<Vec<BuildSummary>, CliError> {
    let cargo = vars::CARGO.text_or_none().unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.args(["build", "--message-format=json"]);
    if let Some(manifest) = &args.manifest_path {
        command.arg("--manifest-path").arg(manifest);
    }
    command.env(vars::CHECK.name, "1");
    let output = run::run_showing_stderr(command, BUILD_TIMEOUT, "cargo build")
        .map_err(|e| CliError::Cargo(e.into()))?;
    if !output.status.success() {
        return Err(CliError::BuildFailed(output.status.to_string()));
    }
    crate::summaries::read(&output.stdout)
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
            without_plan: plans
                .is_empty()
                .then_some(autotune_table::summary::WithoutPlan::TablesSkipped),
            plans,
            skipped: vec![SkippedTable {
                table: "tuning/x.json".into(),
                reason: "is stale for X (the wrapper's Rust code changed)".into(),
            }],
            default: "block=64".into(),
            incumbent: None,
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
            shape: String::new(),
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

    /// A fresh table that was only not compiled is not called stale.
    #[test]
    fn not_compiled_is_told_from_stale() {
        let h200 = gpu("NVIDIA H200");
        let plan = BakedPlan {
            table: "tuning/nvidia-h200.json".into(),
            gpu: h200.clone(),
            tuned_on: "2026-11-30".into(),
            shape: String::new(),
        };
        let mut uncompiled = kernel(vec![plan]);
        uncompiled.compiled = false;
        assert!(matches!(
            verdict(&uncompiled, Some(&h200)),
            Err(Unfit::NotCompiled(_))
        ));
        assert!(matches!(
            verdict(&kernel(vec![]), Some(&h200)),
            Err(Unfit::Untuned(_))
        ));
    }

    /// Issue 49: a kernel never tuned was `STALE`; it is `NO TABLE`, with what to run.
    #[test]
    fn never_tuned_is_told_from_stale() {
        let h200 = gpu("NVIDIA H200");
        let mut never = kernel(vec![]);
        never.skipped.clear();
        let verdict = verdict(&never, Some(&h200));
        assert!(
            matches!(&verdict, Err(Unfit::NoTable(note))
                if note == "defaults (block=64): no table yet (`cargo autotune tune` on NVIDIA H200 writes one)"),
            "{verdict:?}"
        );
    }
}
