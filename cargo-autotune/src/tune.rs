//! Tuning from the terminal: `cargo build --release --features autotune` (the same
//! library path as any build), with the options as `AUTOTUNE_*` variables, then the
//! report of what changed.

use std::process::{Command, ExitCode};

use crate::args::Args;

pub fn run(args: &Args) -> Result<ExitCode, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    command.args(["build", "--release", "--features", "autotune"]);
    if let Some(manifest) = args.value("--manifest-path") {
        command.arg("--manifest-path").arg(manifest);
    }
    if let Some(kernel) = args.value("--kernel") {
        command.env("AUTOTUNE_FORCE", kernel);
    }
    if let Some(strategy) = args.value("--strategy") {
        command.env("AUTOTUNE_STRATEGY", strategy);
    }
    if let Some(budget) = args.number("--budget")? {
        command.env("AUTOTUNE_BUDGET", budget.to_string());
    }
    if let Some(device) = args.number("--device")? {
        command.env("AUTOTUNE_DEVICE", device.to_string());
    }
    let status = command
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Ok(ExitCode::from(1));
    }
    crate::report::run(args)
}
