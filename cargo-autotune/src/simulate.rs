//! Replays a search strategy over a table's full-grid measurements: at every key
//! where every valid point was timed, how close does a budgeted search get to the
//! grid's best? Each run draws its own seed; a timing is looked up, not re-run.

use std::process::ExitCode;

use autotune_table::strategy::{Budget, Strategy, StrategyError};
use autotune_table::table::{self, KernelTable, Role};

use crate::args::SimulateArgs;
use crate::error::CliError;

pub fn run(args: &SimulateArgs) -> Result<ExitCode, CliError> {
    let path = args.table.display();
    let name = &args.kernel;
    let runs = args.runs;
    let table = table::read(&args.table).map_err(CliError::unreadable(&path))?;
    let kernel = table.kernels.get(name).ok_or_else(|| CliError::NoKernel {
        kernel: name.clone(),
        path: path.to_string(),
        known: crate::summaries::entries_of(&table),
    })?;
    let strategy_name = args.strategy.as_str();
    let points = args.budget;
    let budget = points.map(Budget::Points);
    let summary = replay(
        kernel,
        |seed| Strategy::parse(strategy_name, budget, seed),
        runs,
    )
    .map_err(|e| CliError::Refused(e.to_string()))?;
    let header = format!(
        "{name} on {}: {strategy_name}, budget {} of {} points, {runs} runs per key",
        table.gpu.name,
        points.unwrap_or(0),
        summary.points
    );
    println!("{}", autotune_table::shown::line(&header));
    println!(
        "  {:>10} {:>12} {:>14} {:>14} {:>12}",
        "key", "grid best us", "mean regret", "worst regret", "within 3%"
    );
    for row in &summary.keys {
        println!(
            "  {:>10} {:>12.2} {:>13.2}% {:>13.2}% {:>11.0}%",
            row.key,
            row.best_us,
            row.mean_regret * 100.0,
            row.worst_regret * 100.0,
            row.within_3pct * 100.0
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug)]
pub struct KeyReplay {
    pub key: u64,
    pub best_us: f64,
    pub mean_regret: f64,
    pub worst_regret: f64,
    pub within_3pct: f64,
}

#[derive(Debug)]
pub struct Replay {
    pub points: usize,
    pub keys: Vec<KeyReplay>,
}

/// Replays `strategy(seed)` `runs` times at each fully timed key of `kernel`.
pub fn replay(
    kernel: &KernelTable,
    strategy: impl Fn(u64) -> Result<Strategy, StrategyError>,
    runs: usize,
) -> Result<Replay, StrategyError> {
    let points: Vec<_> = kernel
        .variants
        .iter()
        .filter(|v| v.role == Role::Tuned && v.rejected.is_none())
        .collect();
    let values: Vec<Vec<u32>> = points.iter().map(|v| v.values.clone()).collect();
    let start = points
        .iter()
        .position(|v| v.name == kernel.default)
        .unwrap_or(0);
    let mut keys = Vec::new();
    for size in kernel.sizes.iter().filter(|s| !s.refinement) {
        let medians: Vec<Option<f64>> = points.iter().map(|v| v.median_at(size.key)).collect();
        if medians.iter().any(Option::is_none) {
            continue; // not a full-grid key
        }
        let best = medians
            .iter()
            .flatten()
            .fold(f64::INFINITY, |a, &b| a.min(b));
        let mut regrets = Vec::with_capacity(runs);
        for run in 0..runs {
            let strategy = strategy(run as u64 + 1)?;
            let mut measure = |batch: &[usize]| batch.iter().map(|&i| medians[i]).collect();
            // A replay looks timings up: only a budget of points means anything.
            let timed = strategy.search(&values, start, &[], &mut measure, &|| false);
            let found = timed
                .iter()
                .filter_map(|&i| medians[i])
                .fold(f64::INFINITY, f64::min);
            regrets.push(found / best - 1.0);
        }
        keys.push(KeyReplay {
            key: size.key,
            best_us: best,
            mean_regret: regrets.iter().sum::<f64>() / regrets.len() as f64,
            worst_regret: regrets.iter().fold(0.0, |a, &b| a.max(b)),
            within_3pct: regrets.iter().filter(|&&r| r <= 0.03).count() as f64
                / regrets.len() as f64,
        });
    }
    Ok(Replay {
        points: points.len(),
        keys,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_search_on_a_quarter_of_the_gemm_space_stays_within_3_percent() {
        // The session-4 GEMM table, timed on the full grid (the shipped one is timed by
        // local search, which a replay cannot score).
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../bench/results/h200-session4/gemm-grid.json"
        );
        let table = table::read(std::path::Path::new(path)).unwrap();
        let gemm = &table.kernels["gemm"];
        let points = gemm
            .variants
            .iter()
            .filter(|v| v.rejected.is_none() && v.role == Role::Tuned)
            .count();
        let budget = points.div_ceil(4);
        let replay = replay(
            gemm,
            |seed| Strategy::parse("local", Some(Budget::Points(budget)), seed),
            20,
        )
        .unwrap();
        assert!(replay.keys.len() >= 5, "{replay:?}");
        for key in &replay.keys {
            assert!(key.worst_regret <= 0.03, "{key:?}");
        }
    }
}
