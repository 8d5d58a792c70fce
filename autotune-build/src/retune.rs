//! Retuning what is stale: every kernel entry whose table entry is missing or
//! stale on this GPU, tuned under the tables lock, the table written once with
//! every entry; a table measured under other conditions kept whole beside it.

use std::io::Write;
use std::path::Path;

use autotune_runtime::KernelSpec;
use autotune_spec::names::gpu_slug;
use autotune_table::artifacts;
use autotune_table::shown;
use autotune_table::table::{self, GpuRecord, TuningTable};

use crate::fingerprint::{self, KernelInputs};
use crate::nvcc::Nvcc;
use crate::probe::on_devices;
use crate::step::Build;
use crate::{BuildError, Tunables, tune};

impl Build {
    /// Tunes every kernel whose entry in this GPU's table is missing or stale,
    /// under the tables lock, writing the table after each kernel.
    pub(crate) fn tune_stale(
        &self,
        tunables: &Tunables,
        inputs: &[(&'static KernelSpec, KernelInputs)],
        nvcc: &Nvcc,
        gpu: &GpuRecord,
        devices: &[usize],
    ) -> Result<String, BuildError> {
        let path = self
            .tables_dir
            .join(format!("{}.json", gpu_slug(&gpu.name)));
        let shown = fingerprint::relative(&path, &self.root);
        let mut fingerprints = Vec::new();
        for (spec, inputs) in inputs {
            let fingerprint = inputs
                .fingerprint(None)
                .map_err(|message| BuildError::Kernel {
                    kernel: spec.name.to_string(),
                    message,
                })?;
            fingerprints.push((*spec, inputs, fingerprint));
        }
        // One entry per kernel, or per declared shape of a kernel with shapes.
        let stale = |table: &Option<TuningTable>| -> Vec<Stale> {
            let mut out = Vec::new();
            for (spec, _, fp) in &fingerprints {
                for (entry, shape) in spec.tuned_shapes() {
                    let reason = match table.as_ref() {
                        _ if self.settings.forced(spec.name) => "AUTOTUNE_FORCE".to_string(),
                        None => "no table for this GPU".to_string(),
                        Some(t) if !t.gpu.same_conditions(gpu) => {
                            format!("the table was measured under driver {} ", t.gpu.driver)
                        }
                        Some(t) => match t.kernels.get(&entry) {
                            None => "not in the table".to_string(),
                            Some(recorded) => {
                                let d = recorded.fingerprint.differences(fp);
                                if d.is_empty() {
                                    continue;
                                }
                                d.join("; ")
                            }
                        },
                    };
                    out.push(Stale {
                        spec,
                        entry,
                        shape: shape.values().to_vec(),
                        fingerprint: fp.clone(),
                        reason,
                    });
                }
            }
            out
        };
        let readable = |path: &Path| table::read(path).ok();
        if stale(&readable(&path)).is_empty() {
            return Ok(format!("{shown} is up to date for {}", gpu.name));
        }
        let _lock = table::TablesLock::acquire(&self.tables_dir)?;
        // Another build may have tuned while this one waited for the lock.
        let mut table = match table::read(&path) {
            Ok(table) => table,
            Err(unreadable) if path.exists() => {
                let keep = table::unused_path(&path.with_extension("json.unreadable"));
                std::fs::rename(&path, &keep)
                    .map_err(BuildError::io("cannot move aside", &path))?;
                println!(
                    "cargo::warning=autotune: {}",
                    shown::line(&format!(
                        "{shown} was unreadable ({}); moved to {} and tuning afresh",
                        unreadable.reason,
                        keep.display()
                    ))
                );
                fresh_table(gpu)
            }
            Err(_) => fresh_table(gpu),
        };
        let (rebased, aside) = rebase(table, gpu);
        table = rebased;
        if let Some(old) = aside {
            // Measured under another driver, L2 or memory: kept whole beside it,
            // entries of kernels this crate lacks included, never dropped.
            let keep = table::unused_path(&path.with_extension(format!(
                "json.driver-{}",
                autotune_spec::names::file_fragment(&old.gpu.driver)
            )));
            table::write_atomic(&keep, &old)?;
            println!(
                "cargo::warning=autotune: {}",
                shown::line(&format!(
                    "{shown} was measured under driver {}; kept as {} and tuned afresh",
                    old.gpu.driver,
                    fingerprint::relative(&keep, &self.root)
                ))
            );
        }
        // Fallbacks first: a kernel's sweep times its fallback through the fallback's plan.
        let mut todo = stale(&Some(table.clone()));
        let is_a_fallback = |name: &str| {
            tunables
                .specs()
                .any(|other| other.fallback.is_some_and(|f| f.name == name))
        };
        todo.sort_by_key(|stale| !is_a_fallback(stale.spec.name));
        let exe = std::env::current_exe().map_err(|e| {
            BuildError::Worker(format!("cannot find this build script's path: {e}"))
        })?;
        let tuner = tune::Tuner {
            root: &self.root,
            work_dir: self.out_dir.join("autotune").join("sweep"),
            cache_dir: self.cache_dir.clone(),
            nvcc,
            gpu,
            devices: devices.to_vec(),
            settings: &self.settings,
            exe,
        };
        let mut done = Vec::new();
        let mut failed = None;
        for Stale {
            spec,
            entry,
            shape,
            fingerprint: fp,
            reason,
        } in &todo
        {
            let log_path = self.tables_dir.join("logs").join(format!(
                "{}-{}.log",
                gpu_slug(&gpu.name),
                autotune_spec::names::file_fragment(entry)
            ));
            let mut log: Vec<u8> = Vec::new();
            let _ = writeln!(
                log,
                "autotune-build {}: tuning `{entry}` on {}{} (driver {}, {}), {}, nvcc {}, seed {}: {reason}",
                env!("CARGO_PKG_VERSION"),
                gpu.name,
                on_devices(devices),
                gpu.driver,
                gpu.arch(),
                tune::today(),
                nvcc.version,
                self.settings.seed
            );
            let fallback_table = spec.fallback.and_then(|f| {
                let entry = table.kernels.get(f.name)?;
                let fresh = fingerprints.iter().find(|(s, _, _)| s.name == f.name)?;
                entry
                    .fingerprint
                    .differences(&fresh.2)
                    .is_empty()
                    .then_some(entry)
            });
            let kernel_inputs = fingerprints
                .iter()
                .find(|(s, _, _)| s.name == spec.name)
                .map(|(_, inputs, _)| *inputs)
                .ok_or_else(|| BuildError::Worker(format!("no inputs for `{}`", spec.name)))?;
            let result = tuner.tune(
                spec,
                entry,
                shape,
                kernel_inputs,
                fp,
                fallback_table,
                table.kernels.get(entry.as_str()),
                &mut log,
            );
            table::write_text_atomic(&log_path, &String::from_utf8_lossy(&log))?;
            let tuned = match result {
                Ok(tuned) => tuned,
                Err(error) => {
                    failed = Some(error);
                    break;
                }
            };
            done.push(format!("{entry} in {:.1} s", tuned.seconds.total));
            table.kernels.insert(entry.clone(), tuned);
            // A kernel that gained shapes: its entry from before them is superseded.
            if !spec.shapes.is_empty() {
                table.kernels.remove(spec.name);
            }
        }
        // Once, with every entry: the ones kept and the ones tuned before any failure.
        if !done.is_empty() {
            table::write_atomic(&path, &table)?;
            // The committed report and plots follow the table they show.
            artifacts::write_beside(&self.tables_dir, &shown, &table)?;
        }
        if let Some(error) = failed {
            return Err(error);
        }
        Ok(format!(
            "tuned {} on {} -> {shown}",
            done.join(", "),
            gpu.name
        ))
    }
}

/// A table entry to tune, and why.
struct Stale<'a> {
    spec: &'a &'static KernelSpec,
    entry: String,
    shape: Vec<u64>,
    fingerprint: table::Fingerprint,
    reason: String,
}

/// The table to tune into on `gpu`: `table` itself with the facts it predates
/// filled in from this GPU, or, when it was measured under other conditions
/// (driver, L2, memory), a fresh one and the old one whole, to keep beside it.
fn rebase(table: TuningTable, gpu: &GpuRecord) -> (TuningTable, Option<TuningTable>) {
    if table.gpu.same_conditions(gpu) {
        let mut table = table;
        table.gpu = gpu.clone();
        (table, None)
    } else {
        let aside = (!table.kernels.is_empty()).then_some(table);
        (fresh_table(gpu), aside)
    }
}

fn fresh_table(gpu: &GpuRecord) -> TuningTable {
    TuningTable {
        format: table::FORMAT,
        gpu: gpu.clone(),
        kernels: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn committed() -> TuningTable {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernels/tuning/nvidia-h200.json");
        table::read(&path).unwrap_or_else(|e| panic!("{}", e.reason))
    }

    /// A tuning build on a GPU whose driver differs from the table's replaced the
    /// table, dropping the entries of kernels the crate does not have.
    #[test]
    fn a_table_of_other_conditions_is_kept_whole_not_dropped() {
        let table = committed();
        let mut gpu = table.gpu.clone();
        gpu.driver = "13.1".into();
        let (fresh, aside) = rebase(table.clone(), &gpu);
        assert!(fresh.kernels.is_empty());
        assert_eq!(fresh.gpu, gpu);
        let aside = aside.unwrap_or_else(|| panic!("the old table is kept"));
        assert_eq!(aside.kernels.len(), table.kernels.len());

        let same = table.gpu.clone();
        let (kept, aside) = rebase(table.clone(), &same);
        assert!(aside.is_none());
        assert_eq!(kept.kernels.len(), table.kernels.len());
    }
}
