//! The command line, parsed by clap: `cargo autotune <command> [options]`. Unknown
//! options are errors (exit 2), `--flag=value` and `--flag value` both work.

use std::path::{Path, PathBuf};

use autotune_table::shard::Shard;
use autotune_table::strategy::{Budget, StrategyError};
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::error::CliError;

/// `cargo` runs `cargo-autotune autotune ARGS`; the binary run directly takes the
/// same arguments with or without the leading `autotune`.
#[derive(Debug, Parser)]
#[command(
    name = "cargo-autotune",
    bin_name = "cargo autotune",
    version,
    about = "Tune #[autotune] CUDA kernels and work with their tables: init, tune, check, \
             report, plot, compare, simulate, merge, context, judge, fleet"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Add autotune to the crate here: dependencies, the `autotune` feature,
    /// build.rs, a tables folder, the build-override, and a sample kernel (its
    /// wrapper, case, CUDA source and test). Never overwrites a file.
    Init(InitArgs),
    /// Looks for the CUDA driver and a GPU, then `cargo build --release --features
    /// autotune` with these options, with progress bars and a summary of what was
    /// tuned.
    Tune(TuneArgs),
    /// Per kernel and range: the pick, margins, rejected variants, fingerprint.
    Report(ReportArgs),
    /// An SVG per kernel: every valid variant's time relative to the incumbent.
    Plot(PlotArgs),
    /// Exit 0 when every kernel bakes a table measured on this GPU model with this
    /// nvcc and these sources; 1 when not.
    Check(ManifestArgs),
    /// Combine tables of one GPU model tuned on different machines.
    Merge(MergeArgs),
    /// Two tunings of one kernel side by side.
    Compare(CompareArgs),
    /// Replay a budgeted search over a table's full-grid measurements.
    Simulate(SimulateArgs),
    /// Markdown for whoever proposes the next kernel change: the GPU, the best rates
    /// reached, each kernel's ranges with margins and noise, what was rejected.
    Context(ContextArgs),
    /// Keep or revert a kernel's candidate sources, per range: tunes it into a
    /// scratch copy of the tables and exits 0 (keep), 1 (revert) or 2 (no verdict).
    Judge(JudgeArgs),
    /// A recipe that spreads a tuning run over N GPU machines of one model on a
    /// scheduler (Slurm job array, Kubernetes Indexed Job, GitHub Actions matrix),
    /// each machine tuning its shard, then one merge into the model's table.
    Fleet(FleetArgs),
}

/// `init` and `check`: the crate, by its manifest.
#[derive(Debug, Args)]
pub struct ManifestArgs {
    /// The crate's manifest (default `./Cargo.toml`).
    #[arg(long, value_name = "PATH")]
    pub manifest_path: Option<PathBuf>,
}

/// `init`: the crate, and where its autotune crates come from.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The crate's manifest (default `./Cargo.toml`).
    #[arg(long, value_name = "PATH")]
    pub manifest_path: Option<PathBuf>,
    /// A checkout of the autotune repository: the dependencies are written with a
    /// `path` into it (beside the version), so the crate builds before the crates
    /// are on a registry (default: from the registry, by version).
    #[arg(long, value_name = "CHECKOUT")]
    pub path: Option<PathBuf>,
}

/// The tables folder: `--tables DIR`, else `kernels/tuning` or `tuning` here.
#[derive(Debug, Args)]
pub struct TablesArg {
    /// The tables folder (default: `kernels/tuning` or `tuning` in the crate).
    #[arg(long, value_name = "DIR")]
    pub tables: Option<PathBuf>,
}

impl TablesArg {
    /// `--tables DIR`, else `kernels/tuning` or `tuning` under the current folder.
    pub fn dir(&self) -> Result<PathBuf, CliError> {
        self.dir_in(Path::new(""))
    }

    /// `--tables DIR`, else `kernels/tuning` or `tuning` under the crate folder `root`.
    pub fn dir_in(&self, root: &Path) -> Result<PathBuf, CliError> {
        if let Some(dir) = &self.tables {
            return Ok(dir.clone());
        }
        ["kernels/tuning", "tuning"]
            .iter()
            .map(|dir| root.join(dir))
            .find(|p| p.is_dir())
            .ok_or(CliError::NoTablesFolder)
    }
}

#[derive(Debug, Args)]
pub struct TuneArgs {
    /// Retune this kernel (or `all`) even when its table entry is fresh.
    #[arg(long, value_name = "NAME|all")]
    pub kernel: Option<String>,
    /// The CUDA devices to tune on: `0,1` or `all`.
    #[arg(long, value_name = "0,1|all")]
    pub devices: Option<String>,
    /// Which points to time at each key: every one (`grid`), or a budgeted
    /// search (`random`, `local`; `--budget` sets how many).
    #[arg(long, value_enum)]
    pub strategy: Option<StrategyName>,
    /// Points per key (`28`) or seconds for a kernel's whole search (`60s`).
    #[arg(long, value_name = "N|Ns", value_parser = parse_budget)]
    pub budget: Option<(String, Budget)>,
    /// This machine's part of a run spread over N machines of one GPU model: tunes
    /// shard `i` of what is stale into the tables folder's `shards/`; `merge` joins
    /// the shards.
    #[arg(long, value_name = "i/N")]
    pub shard: Option<Shard>,
    /// The crate's manifest (default: `./Cargo.toml`).
    #[arg(long, value_name = "PATH")]
    pub manifest_path: Option<PathBuf>,
    #[command(flatten)]
    pub tables: TablesArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StrategyName {
    Grid,
    Random,
    Local,
}

impl StrategyName {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Grid => "grid",
            Self::Random => "random",
            Self::Local => "local",
        }
    }
}

/// The most replays `simulate` runs per key.
pub const MAX_RUNS: usize = 100_000;

/// A `--runs` that is not a whole number from 1 to [`MAX_RUNS`].
#[derive(Debug, thiserror::Error)]
#[error("a whole number from 1 to {MAX_RUNS}")]
pub struct RunsOutOfRange;

fn parse_runs(text: &str) -> Result<usize, RunsOutOfRange> {
    match text.parse::<usize>() {
        Ok(runs) if (1..=MAX_RUNS).contains(&runs) => Ok(runs),
        _ => Err(RunsOutOfRange),
    }
}

fn parse_budget(text: &str) -> Result<(String, Budget), StrategyError> {
    Budget::parse(text).map(|budget| (text.to_string(), budget))
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    #[command(flatten)]
    pub tables: TablesArg,
    /// Only this kernel.
    #[arg(long)]
    pub kernel: Option<String>,
}

#[derive(Debug, Args)]
pub struct JudgeArgs {
    /// The kernel whose candidate sources (`source = [old, new]`) to judge.
    #[arg(long)]
    pub kernel: String,
    /// Judge this already tuned table instead of tuning (no GPU needed).
    #[arg(long, value_name = "FILE")]
    pub table: Option<PathBuf>,
    /// The verdict as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// The crate's manifest (default: `./Cargo.toml`).
    #[arg(long, value_name = "PATH")]
    pub manifest_path: Option<PathBuf>,
    #[command(flatten)]
    pub tables: TablesArg,
}

#[derive(Debug, Args)]
pub struct ContextArgs {
    #[command(flatten)]
    pub tables: TablesArg,
    /// Only this kernel.
    #[arg(long)]
    pub kernel: Option<String>,
    /// Write it here instead of to stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct PlotArgs {
    #[command(flatten)]
    pub tables: TablesArg,
    /// Where to write the SVGs (default: `plots/` in the tables folder).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The table to write (often the first input: the model's committed table).
    pub out: PathBuf,
    /// Tables of one GPU model, and the shards of one run (`tuning/shards/*`).
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The table compared against (the committed one).
    pub reference: PathBuf,
    /// The other tuning (a retune, another machine's).
    pub other: PathBuf,
    /// The kernel (every entry of it, one per shape), or `all`.
    #[arg(long)]
    pub kernel: String,
}

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// A table tuned with the full grid (every point timed at every key).
    #[arg(long)]
    pub table: PathBuf,
    /// The kernel entry to replay (`gemm@n=4096,k=4096`).
    #[arg(long)]
    pub kernel: String,
    /// The search to replay over the grid's times.
    #[arg(long, value_enum)]
    pub strategy: StrategyName,
    /// Points per key.
    #[arg(long)]
    pub budget: Option<usize>,
    /// Replays per key, 1 to 100000.
    #[arg(long, default_value_t = 200, value_parser = parse_runs)]
    pub runs: usize,
}

impl Cli {
    /// Parses `argv` (without the program name), dropping the `autotune` that
    /// cargo puts first.
    pub fn parse_from_cargo(mut argv: Vec<String>) -> Result<Self, clap::Error> {
        if argv.first().is_some_and(|a| a == "autotune") {
            argv.remove(0);
        }
        Self::try_parse_from(std::iter::once("cargo-autotune".to_string()).chain(argv))
    }
}

#[cfg(test)]
mod tests {
    /// Issue 49, item 11: `--manifest-path`, `--tables`, `--strategy`, `merge`'s and
    /// `compare`'s arguments and `simulate`'s flags had no help text.
    #[test]
    fn every_command_and_argument_has_help_text() {
        use clap::CommandFactory;
        let cli = Cli::command();
        let mut missing = Vec::new();
        for sub in cli.get_subcommands() {
            if sub.get_about().is_none() {
                missing.push(sub.get_name().to_string());
            }
            for arg in sub.get_arguments() {
                let id = arg.get_id().as_str();
                if id != "help" && id != "version" && arg.get_help().is_none() {
                    missing.push(format!("{} {id}", sub.get_name()));
                }
            }
        }
        assert!(missing.is_empty(), "no help text: {missing:?}");
        let about = cli.get_about().map(ToString::to_string).unwrap_or_default();
        for sub in cli.get_subcommands() {
            assert!(
                about.contains(sub.get_name()),
                "{} in {about}",
                sub.get_name()
            );
        }
    }

    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::parse_from_cargo(args.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn both_spellings_and_no_unknown_flags() {
        let Command::Tune(tune) = parse(&["autotune", "tune", "--kernel=gemm"])
            .unwrap()
            .command
        else {
            panic!("tune")
        };
        assert_eq!(tune.kernel.as_deref(), Some("gemm"));
        let Command::Tune(tune) = parse(&["tune", "--kernel", "gemm"]).unwrap().command else {
            panic!("tune")
        };
        assert_eq!(tune.kernel.as_deref(), Some("gemm"));
        assert!(
            parse(&["tune", "--kernal", "gemm"]).is_err(),
            "a typo is refused"
        );
        assert!(parse(&["tune", "--budget", "6x"]).is_err());
        // `--runs 18446744073709551615` panicked on a capacity overflow; 0 printed NaN%.
        for runs in ["0", "18446744073709551615", "100001"] {
            let args = [
                "simulate",
                "--table",
                "t.json",
                "--kernel",
                "k",
                "--strategy",
                "local",
                "--runs",
                runs,
            ];
            assert!(parse(&args).is_err(), "{runs}");
        }
        assert!(parse(&["merge", "out.json"]).is_err(), "merge needs inputs");
    }
}

#[derive(Debug, Args)]
pub struct FleetArgs {
    /// The scheduler the recipe is for.
    #[arg(value_enum)]
    pub scheduler: Scheduler,
    /// How many machines (shards).
    #[arg(long)]
    pub shards: u32,
    /// The GPU as the scheduler names it: a Slurm GRES type (`h200`), a node
    /// label's value (`NVIDIA-H200`), a runner label.
    #[arg(long)]
    pub gpu: String,
    /// The GPU model's table the shards are merged into.
    #[arg(long, default_value = "tuning/nvidia-h200.json")]
    pub table: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scheduler {
    Slurm,
    Kubernetes,
    Github,
}
