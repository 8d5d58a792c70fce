//! Combines tables of one GPU model tuned on different machines (or at different
//! times): per kernel, the most recently tuned entry wins.

use std::process::ExitCode;

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
    table::write_atomic(&args.out, &merged)?;
    println!(
        "{}: {} kernels from {} tables",
        args.out.display(),
        merged.kernels.len(),
        args.inputs.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// Refuses tables of different GPU models: one file per model.
pub fn merge(tables: &[(&str, TuningTable)]) -> Result<TuningTable, CliError> {
    let Some((first_name, first)) = tables.first() else {
        return Err(CliError::Refused("nothing to merge".into()));
    };
    let mut merged = first.clone();
    for (name, table) in &tables[1..] {
        let (a, b) = (&merged.gpu, &table.gpu);
        if (&a.name, a.compute_capability, a.sm_count)
            != (&b.name, b.compute_capability, b.sm_count)
        {
            return Err(CliError::Refused(format!(
                "{name} is for {} ({}), {first_name} for {}: tables are per GPU model",
                b.name,
                b.arch(),
                a.name
            )));
        }
        for (kernel, entry) in &table.kernels {
            let newer = merged
                .kernels
                .get(kernel)
                .is_none_or(|have| entry.tuned_on >= have.tuned_on);
            if newer {
                merged.kernels.insert(kernel.clone(), entry.clone());
                merged.gpu = table.gpu.clone();
            }
        }
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GEMM: &str = "gemm@n=4096,k=4096";

    fn committed() -> TuningTable {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../kernels/tuning/nvidia-h200.json"
        );
        table::read(std::path::Path::new(path)).unwrap()
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
