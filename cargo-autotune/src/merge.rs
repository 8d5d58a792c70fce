//! Combines tables of one GPU model tuned on different machines (or at different
//! times): per kernel, the most recently tuned entry wins. The partial tables of a
//! run spread over machines (`cargo autotune tune --shard i/N`) join on top: every
//! shard of the run must be there, of one GPU model, driver and set of sources.

use std::process::ExitCode;

use autotune_spec::guarded::write::Commit;
use autotune_table::TableError;
use autotune_table::artifacts;
use autotune_table::shard_join;
use autotune_table::table::{self, TuningTable};

use crate::args::MergeArgs;
use crate::error::CliError;

pub fn run(args: &MergeArgs) -> Result<ExitCode, CliError> {
    let names: Vec<String> = args
        .inputs
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let mut tables = Vec::new();
    for (input, name) in args.inputs.iter().zip(&names) {
        let table = table::read(input).map_err(CliError::unreadable(name))?;
        tables.push((name.as_str(), table));
    }
    let merged = merge(&tables)?;
    // The table, and for a run's shards its report and plots, replaced together or
    // not at all: a failure part-way (a full disk at the plots) leaves every file
    // as it was.
    let mut commit = Commit::default();
    let text = serde_json::to_string_pretty(&merged).map_err(TableError::Serialise)? + "\n";
    commit
        .stage(&args.out, text.as_bytes())
        .map_err(artifacts::write_error)?;
    if tables.iter().any(|(_, t)| t.shard.is_some()) {
        // A run's table, whole again: its report and plots beside it, as a tuning
        // build writes them.
        let dir = args.out.parent().unwrap_or(std::path::Path::new("."));
        artifacts::stage_beside(&mut commit, dir, &args.out.display().to_string(), &merged)?;
    }
    commit.finish().map_err(artifacts::write_error)?;
    println!(
        "{}: {} kernels from {} tables",
        args.out.display(),
        merged.kernels.len(),
        args.inputs.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// Refuses tables of different GPU models: one file per model. Whole tables merge
/// first (the newest entry of each kernel wins), then the shards of one run join on
/// top ([`shard_join::join`]).
pub fn merge(tables: &[(&str, TuningTable)]) -> Result<TuningTable, CliError> {
    let (shards, whole): (Vec<_>, Vec<_>) = tables
        .iter()
        .map(|(name, table)| (*name, table.clone()))
        .partition(|(_, table)| table.shard.is_some());
    let base = match (whole.is_empty(), shards.first()) {
        (true, Some((_, first))) => TuningTable {
            kernels: Default::default(),
            shard: None,
            ..first.clone()
        },
        _ => merge_whole(&whole)?,
    };
    if shards.is_empty() {
        return Ok(base);
    }
    if let Some((name, first)) = shards.first()
        && !base.kernels.is_empty()
    {
        // The base and the shards: one GPU model and conditions.
        merge_whole(&[("the whole tables", base.clone()), (name, first.clone())])?;
    }
    shard_join::join(base, &shards).map_err(|e| CliError::Refused(e.to_string()))
}

/// Whole tables (no shard among them), newest entry of each kernel first.
fn merge_whole(tables: &[(&str, TuningTable)]) -> Result<TuningTable, CliError> {
    let Some((first_name, first)) = tables.first() else {
        return Err(CliError::Refused("nothing to merge".into()));
    };
    let mut merged = first.clone();
    for (name, table) in &tables[1..] {
        let (a, b) = (&merged.gpu, &table.gpu);
        if !a.same_model(b) {
            return Err(CliError::Refused(format!(
                "{name} is for {} ({}), {first_name} for {}: tables are per GPU model",
                b.name,
                b.arch(),
                a.name
            )));
        }
        // One record for the merged file: times measured under another driver, L2
        // or memory are not comparable (they were labelled with the last table's).
        if !a.same_conditions(b) || !b.same_conditions(a) {
            return Err(CliError::Refused(format!(
                "{name} was measured under driver {} (L2 {} B, memory {} B), {first_name} under \
                 driver {} (L2 {} B, memory {} B): retune one of them, or keep them apart",
                b.driver, b.l2_bytes, b.memory_bytes, a.driver, a.l2_bytes, a.memory_bytes
            )));
        }
        for (kernel, entry) in &table.kernels {
            // Dates as dates (a table's validation refuses one that is none).
            let newer = merged.kernels.get(kernel).is_none_or(|have| {
                table::parse_date(&entry.tuned_on) >= table::parse_date(&have.tuned_on)
            });
            if newer {
                merged.kernels.insert(kernel.clone(), entry.clone());
            }
        }
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GEMM: &str = "gemm@n=4096,k=4096";

    /// The library tests' snapshot of the H200 table (not the shipped one, which a
    /// retune changes).
    fn committed() -> TuningTable {
        autotune_table::testing::fixture_table()
    }

    /// Two H200 tables from drivers 13.0 and 12.4 were merged, 13.0's entries then
    /// labelled 12.4.
    #[test]
    fn tables_measured_under_other_conditions_are_refused() {
        let a = committed();
        let mut b = committed();
        b.gpu.driver = "12.4".into();
        let error = merge(&[("a.json", a.clone()), ("b.json", b)])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains("driver 12.4"), "{error}");
        let mut c = committed();
        c.gpu.l2_bytes = 1;
        assert!(merge(&[("a.json", a), ("c.json", c)]).is_err());
    }

    #[test]
    fn the_newest_entry_of_each_kernel_wins() {
        let mut older = committed();
        older.kernels.retain(|k, _| k == GEMM || k == "rms_norm");
        older.kernels.get_mut(GEMM).unwrap().tuned_on = "2026-01-01".into();
        let mut newer = committed();
        newer
            .kernels
            .retain(|k, _| k == GEMM || k == "topk_indexer");
        newer.kernels.get_mut(GEMM).unwrap().seed = 42;
        let merged = merge(&[("old", older), ("new", newer)]).unwrap();
        assert_eq!(merged.kernels.len(), 3);
        assert_eq!(merged.kernels[GEMM].seed, 42);
    }

    /// Two shards of one run and the table they started from: the shards' entries
    /// replace the base's, the base's others stay, the report names each shard.
    #[test]
    fn shards_join_on_top_of_the_whole_tables() {
        let whole = committed();
        let work: Vec<String> = vec![GEMM.into(), "rms_norm".into()];
        let digest = shard_join::work_digest(work.iter().map(|k| {
            let entry = &whole.kernels[k];
            (k.as_str(), &entry.fingerprint)
        }));
        let part = |index: u32, entry: &str| {
            let mut table = whole.clone();
            table.kernels.retain(|k, _| k == entry);
            table.kernels.get_mut(entry).unwrap().seed = 7;
            table.shard = Some(autotune_table::shard::ShardRecord {
                shard: autotune_table::shard::Shard { index, count: 2 },
                work: work.clone(),
                work_sha256: digest.clone(),
                entries: vec![entry.to_string()],
                host: format!("gpu-{index}"),
            });
            table
        };
        let (a, b) = (part(1, GEMM), part(2, "rms_norm"));
        let merged = merge(&[("base", whole.clone()), ("a", a.clone()), ("b", b)]).unwrap();
        assert_eq!(merged.kernels.len(), whole.kernels.len());
        assert_eq!(merged.kernels[GEMM].seed, 7);
        assert_eq!(merged.kernels["rms_norm"].seed, 7);
        assert_eq!(
            merged.kernels["topk_indexer"],
            whole.kernels["topk_indexer"]
        );
        assert!(merged.shard.is_none());
        let report = autotune_table::report::render("t.json", &merged, None);
        assert!(
            report.contains("shards: 1/2 on gpu-1 (1 entries"),
            "{report}"
        );
        assert!(report.contains("  tuned by shard 2/2 on gpu-2"), "{report}");
        // One shard missing: refused, and nothing is written.
        let error = merge(&[("base", whole), ("a", a)]).unwrap_err();
        assert!(
            error.to_string().contains("shard 2 of 2 is missing"),
            "{error}"
        );
    }

    #[test]
    fn tables_of_different_gpu_models_are_refused() {
        let h200 = committed();
        let mut b200 = committed();
        b200.gpu.name = "NVIDIA B200".into();
        b200.gpu.compute_capability = [10, 0];
        let error = merge(&[("h200", h200), ("b200", b200)]).unwrap_err();
        assert!(
            matches!(&error, CliError::Refused(why) if why.contains("per GPU model")),
            "{error}"
        );
    }
}
