//! Does every kernel bake a committed table measured on this machine's GPU model,
//! with this nvcc and these sources? The build script answers (same fingerprints as
//! tuning); the exit code says: 0 yes, 1 no.

use std::process::{Command, ExitCode};

use autotune_runtime::gpu::{self, GpuIdentity};

use crate::args::Args;

pub fn run(args: &Args) -> Result<ExitCode, String> {
    let gpu = gpu::open(0).ok().and_then(|ctx| GpuIdentity::of(&ctx).ok());
    let line = build_warning(args)?;
    let baked = line
        .split_once("baked ")
        .map(|(_, rest)| rest)
        .unwrap_or("");
    let mut all_ok = !baked.is_empty();
    if line.contains("nvcc not found") {
        println!("nvcc: not found here (kernels can be baked but not compiled)");
        all_ok = false;
    }
    match &gpu {
        Some(gpu) => println!("GPU: {gpu}"),
        None => println!("GPU: none here (checking sources, attribute, nvcc and versions only)"),
    }
    for entry in baked.split(" | ") {
        let (kernel, note) = entry.split_once(": ").unwrap_or((entry, ""));
        let tuned = match &gpu {
            Some(gpu) => note.contains(&format!("tuned for {} on", gpu.name)),
            None => note.contains("tuned for "),
        };
        all_ok &= tuned;
        println!(
            "  {:<24} {}  {note}",
            kernel,
            if tuned { "ok   " } else { "STALE" }
        );
    }
    Ok(if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The build's one `autotune:` warning (built once more if cargo showed none).
fn build_warning(args: &Args) -> Result<String, String> {
    for _ in 0..2 {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut command = Command::new(cargo);
        command.arg("build");
        if let Some(manifest) = args.value("--manifest-path") {
            command.arg("--manifest-path").arg(manifest);
        }
        let output = command
            .output()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() {
            return Err(format!("cargo build failed:\n{stderr}"));
        }
        if let Some(line) = stderr.lines().find(|l| l.contains(": autotune: ")) {
            return Ok(line.to_string());
        }
    }
    Err("the build printed no autotune warning: is this a crate with #[autotune] wrappers?".into())
}
