//! `cargo autotune`: tuning from the terminal, on the same library path as build.rs.
//!
//! ```text
//! cargo autotune tune     [--kernel NAME|all] [--devices 0,1|all] [--strategy grid|random|local --budget N|60s]
//! cargo autotune report   [--tables DIR] [--kernel NAME]
//! cargo autotune plot     [--tables DIR] [--out DIR]
//! cargo autotune check                     exit 0 when every kernel bakes a table for this machine
//! cargo autotune merge    OUT.json IN.json...
//! cargo autotune compare  REFERENCE.json OTHER.json --kernel NAME
//! cargo autotune simulate --table FILE --kernel NAME --strategy random|local --budget N [--runs N]
//! ```

mod args;
mod bars;
mod check;
mod compare;
mod merge;
mod plot;
mod report;
mod simulate;
mod tune;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use args::Args;

const USAGE: &str =
    "usage: cargo autotune <tune|report|plot|check|merge|compare|simulate> [options]
  tune      [--kernel NAME|all] [--devices 0,1|all] [--strategy grid|random|local --budget N|60s]
            [--manifest-path PATH]
  report    [--tables DIR] [--kernel NAME]
  plot      [--tables DIR] [--out DIR]
  check     [--manifest-path PATH]
  merge     OUT.json IN.json...
  compare   REFERENCE.json OTHER.json --kernel NAME
  simulate  --table FILE --kernel NAME --strategy random|local --budget N [--runs N]";

fn main() -> ExitCode {
    let mut argv: Vec<String> = std::env::args().skip(1).collect();
    // `cargo autotune ...` runs `cargo-autotune autotune ...`.
    if argv.first().is_some_and(|a| a == "autotune") {
        argv.remove(0);
    }
    let Some(command) = argv.first().cloned() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let args = Args::new(&argv[1..]);
    let result = match command.as_str() {
        "tune" => tune::run(&args),
        "report" => report::run(&args),
        "plot" => plot::run(&args),
        "check" => check::run(&args),
        "merge" => merge::run(&args),
        "compare" => compare::run(&args),
        "simulate" => simulate::run(&args),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        other => Err(format!("unknown command `{other}`\n{USAGE}")),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("cargo autotune: {message}");
            ExitCode::from(2)
        }
    }
}

/// `--tables DIR`, else `kernels/tuning` or `tuning` under the current folder.
fn tables_dir(args: &Args) -> Result<PathBuf, String> {
    if let Some(dir) = args.value("--tables") {
        return Ok(PathBuf::from(dir));
    }
    ["kernels/tuning", "tuning"]
        .iter()
        .map(Path::new)
        .find(|p| p.is_dir())
        .map(Path::to_path_buf)
        .ok_or_else(|| {
            "no tables folder here (kernels/tuning or tuning); pass --tables DIR".to_string()
        })
}
