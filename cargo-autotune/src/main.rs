//! `cargo autotune`: tuning from the terminal, on the same library path as build.rs.
//!
//! ```text
//! cargo autotune init     [--manifest-path P]   add autotune and a sample kernel to a crate
//! cargo autotune tune     [--kernel NAME|all] [--devices 0,1|all] [--strategy grid|random|local --budget N|60s]
//! cargo autotune report   [--tables DIR] [--kernel NAME]
//! cargo autotune plot     [--tables DIR] [--out DIR]
//! cargo autotune check                     exit 0 when every kernel bakes a table for this machine
//! cargo autotune tune     --shard i/N          this machine's part of a run over N
//! cargo autotune merge    OUT.json IN.json...  (shards of one run join on top)
//! cargo autotune fleet    slurm|kubernetes|github --shards N --gpu LABEL [--table FILE]
//! cargo autotune compare  REFERENCE.json OTHER.json --kernel NAME
//! cargo autotune simulate --table FILE --kernel NAME --strategy random|local --budget N [--runs N]
//! cargo autotune context  [--tables DIR] [--kernel NAME] [--out FILE]
//! cargo autotune judge    --kernel NAME [--table FILE] [--json]   exit 0 keep, 1 revert, 2 no verdict
//! ```
//!
//! It links no CUDA library: it reads tables and the build's JSON summary, and runs
//! cargo for everything that needs the GPU.

mod args;
mod bars;
mod check;
mod compare;
mod context;
mod error;
mod fleet;
mod gpu_probe;
mod init;
mod judge;
mod markdown;
mod merge;
mod plot;
mod report;
mod simulate;
mod summaries;
mod tune;
mod verdict;

use std::process::ExitCode;

use args::{Cli, Command};

fn main() -> ExitCode {
    let cli = match Cli::parse_from_cargo(std::env::args().skip(1).collect()) {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return ExitCode::from(if error.use_stderr() { 2 } else { 0 });
        }
    };
    let result = match &cli.command {
        Command::Init(args) => init::run(args),
        Command::Tune(args) => tune::run(args),
        Command::Report(args) => report::run(args),
        Command::Plot(args) => plot::run(args),
        Command::Check(args) => check::run(args),
        Command::Merge(args) => merge::run(args),
        Command::Fleet(args) => fleet::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Simulate(args) => simulate::run(args),
        Command::Context(args) => context::run(args),
        Command::Judge(args) => judge::run(args),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!(
                "cargo autotune: {}",
                autotune_table::shown::lines(&message.to_string())
            );
            ExitCode::from(2)
        }
    }
}
