//! One machine's part of a tuning run spread over several (`AUTOTUNE_SHARD=i/N`):
//! which stale entries it tunes (a kernel with its fallback at the same shape, as a
//! unit, assigned by [`autotune_table::shard::assign`]), and the partial table it
//! writes into the tables folder's `shards/`.

use std::path::{Path, PathBuf};

use autotune_runtime::KernelSpec;
use autotune_spec::names::gpu_slug;
use autotune_table::shard::{self, Shard, ShardRecord, Unit};
use autotune_table::shard_join;
use autotune_table::table::{Fingerprint, GpuRecord, TuningTable};

/// A stale entry as the shard plan sees it.
#[derive(Debug)]
pub struct Entry<'a> {
    pub spec: &'static KernelSpec,
    pub entry: &'a str,
    pub shape: &'a [u64],
    pub fingerprint: &'a Fingerprint,
    /// Seconds its last sweep took, from the table being retuned (absent for an
    /// entry the table lacks).
    pub last_sweep_s: Option<f64>,
}

/// This machine's shard of the run, and what its partial table records.
#[derive(Debug)]
pub struct ShardRun {
    pub record: ShardRecord,
}

impl ShardRun {
    /// The plan of `shard` over `stale` (the whole run's stale entries, fallbacks
    /// first): every machine of the run computes the same units and assignment.
    pub fn plan(shard: Shard, stale: &[Entry<'_>]) -> Self {
        let units = units(stale);
        let work = shard::work_of(&units);
        Self {
            record: ShardRecord {
                shard,
                work_sha256: shard_join::work_digest(
                    stale.iter().map(|s| (s.entry, s.fingerprint)),
                ),
                work,
                entries: shard::entries_of(&units, shard),
                host: host(),
            },
        }
    }

    /// Whether this shard tunes `entry`.
    pub fn owns(&self, entry: &str) -> bool {
        self.record.entries.iter().any(|e| e == entry)
    }

    /// `<tables>/shards/nvidia-h200.shard-1-of-2.json`.
    pub fn path(&self, tables_dir: &Path, gpu: &GpuRecord) -> PathBuf {
        tables_dir
            .join("shards")
            .join(self.record.shard.file_name(&gpu_slug(&gpu.name)))
    }

    /// The partial table: this shard's entries as `tuned` holds them, and the record.
    pub fn table(&self, tuned: &TuningTable) -> TuningTable {
        let mut table = tuned.clone();
        table.kernels.retain(|name, _| self.owns(name));
        table.shard = Some(self.record.clone());
        table
    }
}

/// The units of `stale`: each entry with the entries of its fallback chain at the
/// same shape that are stale too, fallbacks first; the cost of a unit is the sum of
/// its entries' costs ([`measured_costs`], else points times sizes of each entry).
fn units(stale: &[Entry<'_>]) -> Vec<Unit> {
    let mut units: Vec<(String, Unit)> = Vec::new();
    let measured = measured_costs(stale);
    for (index, entry) in stale.iter().enumerate() {
        let root = root_of(entry, stale);
        let cost = match &measured {
            Some(ms) => ms[index],
            None => (entry.spec.points.len() * entry.spec.sizes.len().max(1)) as u64,
        };
        match units.iter_mut().find(|(r, _)| *r == root) {
            Some((_, unit)) => {
                unit.entries.push(entry.entry.to_string());
                unit.cost += cost;
            }
            None => units.push((
                root,
                Unit {
                    entries: vec![entry.entry.to_string()],
                    cost,
                },
            )),
        }
    }
    units.into_iter().map(|(_, unit)| unit).collect()
}

/// Each entry's cost as the milliseconds its last sweep took, when the table holds
/// a last sweep of every one; else `None`, and each costs its points x keys. Times
/// and point counts are not mixed: one entry without a time makes every cost a
/// count. The times come from the table every machine of the run reads, so every
/// machine computes the same plan. Counts do not see what a point costs (a softmax
/// of 4096 columns takes about four times one of 768 at the same points and keys);
/// times do.
fn measured_costs(stale: &[Entry<'_>]) -> Option<Vec<u64>> {
    stale
        .iter()
        .map(|entry| {
            let seconds = entry.last_sweep_s.filter(|s| s.is_finite() && *s > 0.0)?;
            // At least 1 ms: a unit of no cost would never weigh on a shard.
            Some(((seconds * 1e3).round() as u64).max(1))
        })
        .collect()
}

/// The entry at the end of `entry`'s chain of stale fallbacks at its shape (itself
/// where its fallback is fresh or none is declared): what it is tuned together with.
fn root_of(entry: &Entry<'_>, stale: &[Entry<'_>]) -> String {
    let mut kernel = entry.spec;
    let mut root = entry.entry.to_string();
    // A chain is at most as long as the kernels (the macro refuses cycles).
    for _ in 0..stale.len() {
        let Some(fallback) = kernel.fallback else {
            break;
        };
        let Some(next) = stale
            .iter()
            .find(|s| s.spec.name == fallback.name && s.shape == entry.shape)
        else {
            break;
        };
        kernel = next.spec;
        root = next.entry.to_string();
    }
    root
}

/// This machine's name, for the report.
fn host() -> String {
    autotune_spec::guarded::read::read_to_string(
        std::path::Path::new("/proc/sys/kernel/hostname"),
        4096,
    )
    .ok()
    .map(|name| name.trim().to_string())
    .filter(|name| !name.is_empty())
    .unwrap_or_else(|| "unknown host".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use autotune_table::shard::Shard;

    const LIBRARY: KernelSpec =
        KernelSpec::new("library", "src/k.rs", "k.cu", &["k"], "n", &[1024, 4096]);
    const TUNED: KernelSpec = KernelSpec {
        fallback: Some(&LIBRARY),
        ..KernelSpec::new("tuned", "src/k.rs", "k.cu", &["k"], "n", &[1024, 4096]).with_space(
            &["block"],
            &[&[64], &[128], &[256]],
            &[64],
        )
    };
    const OTHER: KernelSpec = KernelSpec::new("other", "src/o.rs", "o.cu", &["o"], "n", &[1024])
        .with_space(&["block"], &[&[64], &[128]], &[64]);

    fn fingerprint() -> Fingerprint {
        Fingerprint {
            spec_sha256: "a".into(),
            wrapper_sha256: "b".into(),
            sources: Vec::new(),
            sources_sha256: "c".into(),
            nvcc: "13.0.88".into(),
            flags: Vec::new(),
            crate_version: "0.1.0".into(),
            tuner_version: "0.1.0".into(),
            vendor: None,
        }
    }

    /// A kernel goes with its fallback at the same shape, the fallback first; the
    /// plan is the same whichever shard computes it.
    #[test]
    fn a_kernel_and_its_fallback_at_one_shape_are_one_unit() {
        let f = fingerprint();
        let entry = |spec: &'static KernelSpec, entry: &'static str, shape: &'static [u64]| Entry {
            spec,
            entry,
            shape,
            fingerprint: &f,
            last_sweep_s: None,
        };
        // Fallbacks first, as `tune_stale` sorts them.
        let stale = [
            entry(&LIBRARY, "library@c=1", &[1]),
            entry(&LIBRARY, "library@c=2", &[2]),
            entry(&TUNED, "tuned@c=1", &[1]),
            entry(&TUNED, "tuned@c=2", &[2]),
            entry(&OTHER, "other", &[]),
        ];
        let units = units(&stale);
        let entries: Vec<&[String]> = units.iter().map(|u| u.entries.as_slice()).collect();
        assert_eq!(
            entries,
            [
                &["library@c=1".to_string(), "tuned@c=1".to_string()][..],
                &["library@c=2".to_string(), "tuned@c=2".to_string()][..],
                &["other".to_string()][..],
            ]
        );
        // (1 + 3 points) x 2 sizes; 2 points x 1 size.
        assert_eq!(units.iter().map(|u| u.cost).collect::<Vec<_>>(), [8, 8, 2]);
        let first = ShardRun::plan(Shard { index: 1, count: 2 }, &stale);
        let second = ShardRun::plan(Shard { index: 2, count: 2 }, &stale);
        // 8 and 8 to shards 1 and 2, then 2 to the first of the two equal loads.
        assert_eq!(first.record.entries, ["library@c=1", "tuned@c=1", "other"]);
        assert_eq!(second.record.entries, ["library@c=2", "tuned@c=2"]);
        assert_eq!(first.record.work, second.record.work);
        assert_eq!(first.record.work_sha256, second.record.work_sha256);
        assert_eq!(first.record.work.len(), 5);
        assert!(first.owns("tuned@c=1") && !first.owns("tuned@c=2"));
    }

    /// Issue 35 on the H200: two shards of examples/library took 117 s and 31 s,
    /// since counts of points x keys made the wide shape's entries as cheap as the
    /// narrow one's. With the table's last sweep times the costliest units are split.
    #[test]
    fn the_last_sweep_times_weigh_the_units_when_the_table_has_all_of_them() {
        let f = fingerprint();
        let entry =
            |spec: &'static KernelSpec, entry: &'static str, shape: &'static [u64], s| Entry {
                spec,
                entry,
                shape,
                fingerprint: &f,
                last_sweep_s: s,
            };
        let timed = [
            entry(&LIBRARY, "library@c=1", &[1], Some(7.3)),
            entry(&LIBRARY, "library@c=2", &[2], Some(1.9)),
            entry(&TUNED, "tuned@c=1", &[1], Some(68.6)),
            entry(&TUNED, "tuned@c=2", &[2], Some(18.9)),
            entry(&OTHER, "other", &[], Some(40.0)),
        ];
        let costs: Vec<u64> = units(&timed).iter().map(|u| u.cost).collect();
        assert_eq!(costs, [75_900, 20_800, 40_000]);
        let first = ShardRun::plan(Shard { index: 1, count: 2 }, &timed);
        let second = ShardRun::plan(Shard { index: 2, count: 2 }, &timed);
        assert_eq!(first.record.entries, ["library@c=1", "tuned@c=1"]);
        assert_eq!(second.record.entries, ["library@c=2", "tuned@c=2", "other"]);
        // One entry the table lacks: every cost is a count again.
        let mut partly = timed;
        partly[4].last_sweep_s = None;
        let costs: Vec<u64> = units(&partly).iter().map(|u| u.cost).collect();
        assert_eq!(costs, [8, 8, 2]);
    }
}
