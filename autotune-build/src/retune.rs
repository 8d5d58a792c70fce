//! Retuning what is stale: every kernel entry whose table entry is missing or
//! stale on this GPU, tuned under the tables lock, the table written after each
//! entry (a killed run keeps what it finished) and its report and plots at the
//! end; a table measured under other conditions kept whole beside it.

use std::io::Write;
use std::path::Path;

use autotune_runtime::KernelSpec;
use autotune_spec::names::gpu_slug;
use autotune_table::artifacts;
use autotune_table::shown;
use autotune_table::summary::TuningOutcome;
use autotune_table::table::{self, GpuRecord, TuningTable};
use autotune_table::vars;

use crate::error::{KernelFault, WorkerFault};
use crate::fingerprint::{self, KernelInputs};
use crate::live_log::LiveLog;
use crate::nvcc::Nvcc;
use crate::probe::on_devices;
use crate::shard_run::{self, ShardRun};
use crate::step::Build;
use crate::tuner::{self, TuneJob};
use crate::{BuildError, Tunables};

impl Build {
    /// Tunes every kernel whose entry in this GPU's table is missing or stale,
    /// under the tables lock, writing the table after each entry.
    pub(crate) fn tune_stale(
        &self,
        tunables: &Tunables,
        inputs: &[(&'static KernelSpec, KernelInputs)],
        nvcc: &Nvcc,
        gpu: &GpuRecord,
        devices: &[usize],
    ) -> Result<TuningOutcome, BuildError> {
        let path = self
            .tables_dir
            .join(format!("{}.json", gpu_slug(&gpu.name)));
        let shown = fingerprint::relative(&path, &self.root);
        let kernels = fingerprinted(inputs)?;
        if self
            .stale(&kernels, table::read(&path).ok().as_ref(), gpu)
            .is_empty()
        {
            return Ok(TuningOutcome::UpToDate {
                table: shown,
                gpu: gpu.name.clone(),
            });
        }
        // A shard writes its own file, never the table: shards of one run sharing a
        // tables folder (a shared file system) do not wait for each other.
        let _lock = match self.settings.shard {
            None => Some(table::TablesLock::acquire(&self.tables_dir)?),
            Some(_) => None,
        };
        // Another build may have tuned while this one waited for the lock.
        let mut table = self.open_table(&path, &shown, gpu)?;
        let (todo, shard_run) = self.todo(tunables, &kernels, &table, gpu);
        let exe =
            std::env::current_exe().map_err(|e| BuildError::Worker(WorkerFault::OwnPath(e)))?;
        let tuner = tuner::Tuner {
            root: &self.root,
            work_dir: self.out_dir.join("autotune").join("sweep"),
            cache_dir: self.cache_dir.clone(),
            nvcc,
            gpu,
            devices: devices.to_vec(),
            settings: &self.settings,
            exe,
        };
        // Each entry's result is on disk before the next begins: a run killed
        // later keeps what it finished (see `in_turn`).
        let (done, failed) = in_turn(
            &todo,
            &mut table,
            |stale, table| {
                let tuned = self.tune_one(&tuner, stale, &kernels, table)?;
                Ok(Finished {
                    shown: format!("{} in {:.1} s", stale.entry, tuned.seconds.total),
                    entry: stale.entry.clone(),
                    // A kernel that gained shapes: its entry from before them is superseded.
                    supersedes: (!stale.spec.shapes.is_empty())
                        .then(|| stale.spec.name.to_string()),
                    tuned,
                })
            },
            |table| self.keep_finished(&path, table, shard_run.as_ref()),
        )?;
        let written = self.write_tuned(&path, &shown, &table, shard_run.as_ref(), &done)?;
        if let Some(error) = failed {
            return Err(error);
        }
        Ok(TuningOutcome::Tuned {
            entries: done,
            gpu: gpu.name.clone(),
            written,
        })
    }

    /// The stale entries of `table` to tune, fallbacks first (a kernel's sweep
    /// times its fallback through the fallback's plan); with a shard, this
    /// machine's part of them only, and the shard's plan.
    fn todo(
        &self,
        tunables: &Tunables,
        kernels: &[Fingerprinted<'_>],
        table: &TuningTable,
        gpu: &GpuRecord,
    ) -> (Vec<Stale>, Option<ShardRun>) {
        let mut todo = self.stale(kernels, Some(table), gpu);
        let is_a_fallback = |name: &str| {
            tunables
                .specs()
                .any(|other| other.fallback.is_some_and(|f| f.name == name))
        };
        todo.sort_by_key(|stale| !is_a_fallback(stale.spec.name));
        let shard_run = self.settings.shard.map(|shard| {
            let entries: Vec<shard_run::Entry<'_>> = todo.iter().map(Stale::as_entry).collect();
            ShardRun::plan(shard, &entries)
        });
        if let Some(run) = &shard_run {
            todo.retain(|stale| run.owns(&stale.entry));
        }
        (todo, shard_run)
    }

    /// Writes the table as it stands (for a shard, its partial table): called after
    /// each entry, and once more at the end.
    fn keep_finished(
        &self,
        path: &Path,
        table: &TuningTable,
        shard_run: Option<&ShardRun>,
    ) -> Result<(), BuildError> {
        match shard_run {
            Some(run) => {
                let path = run.path(&self.tables_dir, &table.gpu);
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(BuildError::io("cannot create", dir))?;
                }
                table::write_atomic(&path, &run.table(table))?;
            }
            None => table::write_atomic(path, table)?,
        }
        Ok(())
    }

    /// Writes what was tuned at the end of the run: the table with every entry (the
    /// ones kept and the ones tuned before any failure) and its report and plots;
    /// or, for a shard, its partial table (written even when its part is empty, so
    /// that the merge sees every shard). Returns the file written, as shown.
    fn write_tuned(
        &self,
        path: &Path,
        shown: &str,
        table: &TuningTable,
        shard_run: Option<&ShardRun>,
        done: &[String],
    ) -> Result<String, BuildError> {
        if let Some(run) = shard_run {
            self.keep_finished(path, table, Some(run))?;
            return Ok(format!(
                "{} (shard {}; `cargo autotune merge` joins the shards into {shown})",
                fingerprint::relative(&run.path(&self.tables_dir, &table.gpu), &self.root),
                run.record.shard
            ));
        }
        if !done.is_empty() {
            self.keep_finished(path, table, None)?;
            // The committed report and plots follow the table they show.
            artifacts::write_beside(&self.tables_dir, shown, table)?;
        }
        Ok(shown.to_string())
    }

    /// The entries to tune (one per kernel, or per declared shape of a kernel with
    /// shapes) against `table`, each with why.
    fn stale(
        &self,
        kernels: &[Fingerprinted<'_>],
        table: Option<&TuningTable>,
        gpu: &GpuRecord,
    ) -> Vec<Stale> {
        let mut out = Vec::new();
        for kernel in kernels {
            let spec = kernel.spec;
            for (entry, shape) in spec.tuned_shapes() {
                let reason = match table {
                    _ if self.settings.forced(spec.name) => vars::FORCE.name.to_string(),
                    None => "no table for this GPU".to_string(),
                    Some(t) if !t.gpu.same_conditions(gpu) => {
                        format!("the table was measured under driver {} ", t.gpu.driver)
                    }
                    Some(t) => match t.kernels.get(&entry) {
                        None => "not in the table".to_string(),
                        Some(recorded) => {
                            let d = recorded.fingerprint.differences(&kernel.fingerprint);
                            if d.is_empty() {
                                continue;
                            }
                            d.join("; ")
                        }
                    },
                };
                let last_sweep_s = table
                    .and_then(|t| t.kernels.get(&entry))
                    .map(|recorded| recorded.seconds.sweep);
                out.push(Stale {
                    spec,
                    entry,
                    shape: shape.values().to_vec(),
                    fingerprint: kernel.fingerprint.clone(),
                    reason,
                    last_sweep_s,
                });
            }
        }
        out
    }

    /// The table at `path` to tune into: an unreadable one moved aside and started
    /// afresh, one measured under other conditions kept whole beside it.
    fn open_table(
        &self,
        path: &Path,
        shown: &str,
        gpu: &GpuRecord,
    ) -> Result<TuningTable, BuildError> {
        let table = match table::read(path) {
            Ok(table) => table,
            Err(unreadable) if path.exists() => {
                let keep = table::unused_path(&path.with_extension("json.unreadable"));
                std::fs::rename(path, &keep).map_err(BuildError::io("cannot move aside", path))?;
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
        let (table, aside) = rebase(table, gpu);
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
        Ok(table)
    }

    /// Tunes one stale entry, its log written beside the tables whatever happens.
    fn tune_one(
        &self,
        tuner: &tuner::Tuner<'_>,
        stale: &Stale,
        kernels: &[Fingerprinted<'_>],
        table: &TuningTable,
    ) -> Result<table::KernelTable, BuildError> {
        let (spec, entry, gpu) = (stale.spec, &stale.entry, tuner.gpu);
        let log_path = self.tables_dir.join("logs").join(format!(
            "{}-{}.log",
            gpu_slug(&gpu.name),
            autotune_spec::names::file_fragment(entry)
        ));
        let mut log = LiveLog::create(&tuner.work_dir.join(format!(
            "{}.log",
            autotune_spec::names::file_fragment(entry)
        )));
        let _ = writeln!(
            log,
            "autotune-build {}: tuning `{entry}` on {}{} (driver {}, {}), {}, nvcc {}, seed {}: {}",
            env!("CARGO_PKG_VERSION"),
            gpu.name,
            on_devices(&tuner.devices),
            gpu.driver,
            gpu.arch(),
            tuner::today(),
            tuner.nvcc.version,
            self.settings.seed,
            stale.reason
        );
        let fresh = |name: &str| kernels.iter().find(|k| k.spec.name == name);
        let fallback_table = spec.fallback.and_then(|f| {
            let entry = table.kernels.get(f.name)?;
            entry
                .fingerprint
                .differences(&fresh(f.name)?.fingerprint)
                .is_empty()
                .then_some(entry)
        });
        let inputs = fresh(spec.name)
            .map(|k| k.inputs)
            .ok_or_else(|| BuildError::Worker(WorkerFault::NoInputs(spec.name.to_string())))?;
        let job = TuneJob {
            spec,
            entry,
            shape: &stale.shape,
            inputs,
            fingerprint: &stale.fingerprint,
            fallback_table,
            previous: table.kernels.get(entry.as_str()),
        };
        let result = tuner.tune(&job, &mut log);
        table::write_text_atomic(&log_path, &log.text())?;
        result
    }
}

/// A kernel of this crate with its inputs and their fingerprint.
struct Fingerprinted<'a> {
    spec: &'static KernelSpec,
    inputs: &'a KernelInputs,
    fingerprint: table::Fingerprint,
}

/// A table entry to tune, and why.
struct Stale {
    spec: &'static KernelSpec,
    entry: String,
    shape: Vec<u64>,
    fingerprint: table::Fingerprint,
    reason: String,
    /// How long its last sweep took, where the table holds one (the shard plan's
    /// cost of it).
    last_sweep_s: Option<f64>,
}

impl Stale {
    fn as_entry(&self) -> shard_run::Entry<'_> {
        shard_run::Entry {
            spec: self.spec,
            entry: &self.entry,
            shape: &self.shape,
            fingerprint: &self.fingerprint,
            last_sweep_s: self.last_sweep_s,
        }
    }
}

/// Each kernel with its inputs' fingerprint.
fn fingerprinted<'a>(
    inputs: &'a [(&'static KernelSpec, KernelInputs)],
) -> Result<Vec<Fingerprinted<'a>>, BuildError> {
    inputs
        .iter()
        .map(|(spec, inputs)| {
            let fingerprint = inputs.fingerprint(None).map_err(|why| {
                BuildError::kernel(spec.name, KernelFault::Unfingerprintable(why))
            })?;
            Ok(Fingerprinted {
                spec,
                inputs,
                fingerprint,
            })
        })
        .collect()
}

/// One entry tuned: its result and what it replaces in the table.
struct Finished {
    /// `entry in 12.3 s`, for the build's line.
    shown: String,
    entry: String,
    /// An entry of the same kernel from before it gained shapes.
    supersedes: Option<String>,
    tuned: table::KernelTable,
}

/// Tunes `todo` in order, each result put into `table` as it comes and `table`
/// handed to `keep` (which writes it) before the next entry begins. A run killed
/// in the middle (a machine's time running out, a CI job's timeout) so leaves
/// the table with every entry it finished: a build run again finds those fresh
/// and sweeps only the rest, the entry it was in resuming from its journal.
/// The first entry that fails ends the run: its error is returned beside the
/// entries done, which stay in `table`.
fn in_turn<T>(
    todo: &[T],
    table: &mut TuningTable,
    mut tune: impl FnMut(&T, &TuningTable) -> Result<Finished, BuildError>,
    mut keep: impl FnMut(&TuningTable) -> Result<(), BuildError>,
) -> Result<(Vec<String>, Option<BuildError>), BuildError> {
    let mut done = Vec::new();
    for item in todo {
        match tune(item, table) {
            Ok(finished) => {
                table.kernels.insert(finished.entry, finished.tuned);
                if let Some(old) = finished.supersedes {
                    table.kernels.remove(&old);
                }
                keep(table)?;
                done.push(finished.shown);
            }
            Err(error) => return Ok((done, Some(error))),
        }
    }
    Ok((done, None))
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
        shard: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed() -> TuningTable {
        autotune_table::testing::fixture_table()
    }

    /// A retune killed in its second entry kept nothing of the first: the table
    /// was written once, at the end (session 29, on an H100: killed in its last
    /// entry, the ten it had finished were lost).
    #[test]
    fn each_finished_entry_is_on_disk_before_the_next_begins() {
        let fixture = committed();
        let entries: Vec<(&String, &table::KernelTable)> = fixture.kernels.iter().collect();
        assert!(entries.len() >= 2, "the fixture has two entries");
        let path = autotune_table::testing::scratch("retune-in-turn").join("gpu.json");
        let mut table = fresh_table(&fixture.gpu);
        let killed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            in_turn(
                &entries[..2],
                &mut table,
                |(entry, tuned), _| {
                    if *entry == entries[1].0 {
                        panic!("killed in the second entry");
                    }
                    Ok(Finished {
                        shown: entry.to_string(),
                        entry: entry.to_string(),
                        supersedes: None,
                        tuned: (*tuned).clone(),
                    })
                },
                |table| Ok(table::write_atomic(&path, table)?),
            )
        }));
        assert!(killed.is_err());
        let kept = table::read(&path).unwrap_or_else(|e| panic!("no table kept: {}", e.reason));
        assert_eq!(
            kept.kernels.keys().collect::<Vec<_>>(),
            [entries[0].0],
            "the finished entry is on disk, the killed one is not"
        );
    }

    /// The first failing entry ends the run; the entries before it stay, and what
    /// a finished entry supersedes is gone.
    #[test]
    fn a_failure_ends_the_run_and_keeps_the_entries_before_it() {
        let fixture = committed();
        let entries: Vec<(&String, &table::KernelTable)> = fixture.kernels.iter().collect();
        let mut table = fresh_table(&fixture.gpu);
        table
            .kernels
            .insert("before-shapes".into(), entries[0].1.clone());
        let mut writes = 0;
        let (done, failed) = in_turn(
            &entries[..2],
            &mut table,
            |(entry, tuned), _| {
                if *entry == entries[1].0 {
                    return Err(BuildError::Worker(WorkerFault::Died));
                }
                Ok(Finished {
                    shown: format!("{entry} in 1.0 s"),
                    entry: entry.to_string(),
                    supersedes: Some("before-shapes".into()),
                    tuned: (*tuned).clone(),
                })
            },
            |_| {
                writes += 1;
                Ok(())
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(done, [format!("{} in 1.0 s", entries[0].0)]);
        assert!(matches!(failed, Some(BuildError::Worker(_))));
        assert_eq!(writes, 1);
        assert_eq!(table.kernels.keys().collect::<Vec<_>>(), [entries[0].0]);
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
