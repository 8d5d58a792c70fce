//! Joining the partial tables of a run spread over machines (see [`crate::shard`]):
//! the digest shards of one run agree on, and the checks that every shard of that
//! run, and nothing else, is joined.

use sha2::{Digest, Sha256};

use crate::shard::{Shard, ShardRecord, TunedBy};
use crate::table::{Fingerprint, TuningTable};

/// The digest shards of one run agree on: each entry of the work with its
/// fingerprint's digests, nvcc, flags and versions.
pub fn work_digest<'a>(work: impl IntoIterator<Item = (&'a str, &'a Fingerprint)>) -> String {
    let mut sorted: Vec<(&str, &Fingerprint)> = work.into_iter().collect();
    sorted.sort_by_key(|(name, _)| *name);
    let mut hash = Sha256::new();
    for (name, f) in sorted {
        for part in [
            name,
            &f.spec_sha256,
            &f.wrapper_sha256,
            &f.sources_sha256,
            &f.nvcc,
            &f.crate_version,
            &f.tuner_version,
        ] {
            hash.update(part.as_bytes());
            hash.update([0]);
        }
        for flag in &f.flags {
            hash.update(flag.as_bytes());
            hash.update([1]);
        }
    }
    crate::hex(&hash.finalize())
}

/// Why shards cannot be joined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    #[error("{0} is not a shard's table (it records no shard)")]
    NotAShard(String),
    #[error("{name} is shard {shard}, {first} one of {count}: shards of one run only")]
    OtherCount {
        name: String,
        shard: Shard,
        first: String,
        count: u32,
    },
    #[error(
        "{name} was tuned from other sources, flags or nvcc than {first} (its work digest \
         differs): retune it from the same checkout"
    )]
    OtherWork { name: String, first: String },
    #[error("{name} is shard {shard} again (and so is {other})")]
    Twice {
        name: String,
        other: String,
        shard: Shard,
    },
    #[error("shard {missing} of {count} is missing: every shard's table is needed")]
    Missing { missing: String, count: u32 },
    #[error("{name} lacks entries its shard was to tune ({entries}): it did not finish")]
    Unfinished { name: String, entries: String },
    #[error("{name} records shard {index} of {count}: a shard is i/N with 1 <= i <= N <= {max}")]
    NotInRun {
        name: String,
        index: u32,
        count: u32,
        max: u32,
    },
    #[error("{name} and {other} both tuned {entry}: shards of one run share no entry")]
    Overlap {
        name: String,
        other: String,
        entry: String,
    },
    #[error("{name} lists {entry}, which is not in its run's work")]
    NotInWork { name: String, entry: String },
    #[error("{name} holds {entry}, which its shard was not to tune")]
    Stray { name: String, entry: String },
    #[error("no shard tuned {entries}, which the run's work lists")]
    Uncovered { entries: String },
    #[error("{name} is for {gpu}, {first} for {first_gpu}: shards run on one GPU model")]
    OtherGpu {
        name: String,
        gpu: String,
        first: String,
        first_gpu: String,
    },
    #[error(
        "{name} was measured under driver {driver}, {first} under {first_driver}: \
         shards run under one driver"
    )]
    OtherDriver {
        name: String,
        driver: String,
        first: String,
        first_driver: String,
    },
}

/// Joins the partial tables of every shard of one run into `base` (the table the
/// shards started from, or an empty one): each shard's entries replace `base`'s,
/// marked with the shard that tuned them. Refuses shards of different runs (count,
/// work digest), GPU models or drivers, a shard given twice, a missing one, and one
/// without every entry it was to tune.
pub fn join(base: TuningTable, shards: &[(&str, TuningTable)]) -> Result<TuningTable, ShardError> {
    let mut records = Vec::new();
    for (name, table) in shards {
        let record = table
            .shard
            .as_ref()
            .ok_or_else(|| ShardError::NotAShard(name.to_string()))?;
        records.push((*name, table, record));
    }
    let Some(&(first, first_table, first_record)) = records.first() else {
        return Ok(base);
    };
    for &(name, _, record) in &records {
        check_shard(name, record)?;
    }
    let count = first_record.shard.count;
    let mut seen: Vec<Option<&str>> = vec![None; count as usize];
    let mut tuned_by: std::collections::BTreeMap<&str, &str> = Default::default();
    for &(name, table, record) in &records {
        check_same_run(first, first_table, first_record, name, table, record)?;
        let slot = &mut seen[record.shard.index as usize - 1];
        if let Some(other) = slot {
            return Err(ShardError::Twice {
                name: name.to_string(),
                other: other.to_string(),
                shard: record.shard,
            });
        }
        *slot = Some(name);
        check_entries(name, table, record, &mut tuned_by)?;
        check_finished(name, table, record)?;
    }
    let absent: Vec<String> = (1..=count)
        .filter(|i| seen[*i as usize - 1].is_none())
        .map(|i| i.to_string())
        .collect();
    if !absent.is_empty() {
        return Err(ShardError::Missing {
            missing: absent.join(", "),
            count,
        });
    }
    let uncovered: Vec<&str> = first_record
        .work
        .iter()
        .map(String::as_str)
        .filter(|entry| !tuned_by.contains_key(entry))
        .collect();
    if !uncovered.is_empty() {
        return Err(ShardError::Uncovered {
            entries: uncovered.join(", "),
        });
    }
    let mut merged = base;
    merged.gpu = first_table.gpu.clone();
    merged.shard = None;
    for (_, table, record) in records {
        for name in &record.entries {
            if let Some(entry) = table.kernels.get(name) {
                let mut entry = entry.clone();
                entry.tuned_by = Some(TunedBy {
                    shard: record.shard,
                    host: record.host.clone(),
                });
                merged.kernels.insert(name.clone(), entry);
            }
        }
    }
    Ok(merged)
}

/// Every entry `record` says the shard was to tune is in its table.
fn check_finished(name: &str, table: &TuningTable, record: &ShardRecord) -> Result<(), ShardError> {
    let missing: Vec<&str> = record
        .entries
        .iter()
        .filter(|e| !table.kernels.contains_key(*e))
        .map(String::as_str)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(ShardError::Unfinished {
        name: name.to_string(),
        entries: missing.join(", "),
    })
}

/// A record whose shard is in its run before its index is used: `1 <= i <= N <=`
/// [`MAX_SHARDS`](crate::shard::MAX_SHARDS) (a crafted `"index": 0` underflowed,
/// `3` of `2` indexed past the end, `4294967295` shards allocated 64 GiB).
fn check_shard(name: &str, record: &ShardRecord) -> Result<(), ShardError> {
    let Shard { index, count } = record.shard;
    let max = crate::shard::MAX_SHARDS;
    if index == 0 || index > count || count > max {
        return Err(ShardError::NotInRun {
            name: name.to_string(),
            index,
            count,
            max,
        });
    }
    Ok(())
}

/// Each entry a shard lists is in the run's work and listed by no other shard, and
/// its table holds nothing else (overlapping shards were merged, the last winning).
fn check_entries<'a>(
    name: &'a str,
    table: &TuningTable,
    record: &'a ShardRecord,
    tuned_by: &mut std::collections::BTreeMap<&'a str, &'a str>,
) -> Result<(), ShardError> {
    for entry in &record.entries {
        if !record.work.contains(entry) {
            return Err(ShardError::NotInWork {
                name: name.to_string(),
                entry: entry.clone(),
            });
        }
        if let Some(other) = tuned_by.insert(entry, name) {
            return Err(ShardError::Overlap {
                name: name.to_string(),
                other: other.to_string(),
                entry: entry.clone(),
            });
        }
    }
    if let Some(stray) = table.kernels.keys().find(|k| !record.entries.contains(k)) {
        return Err(ShardError::Stray {
            name: name.to_string(),
            entry: stray.clone(),
        });
    }
    Ok(())
}

/// `record` (in `name`) belongs to the run of `first_record` (in `first`).
fn check_same_run(
    first: &str,
    first_table: &TuningTable,
    first_record: &ShardRecord,
    name: &str,
    table: &TuningTable,
    record: &ShardRecord,
) -> Result<(), ShardError> {
    if record.shard.count != first_record.shard.count {
        return Err(ShardError::OtherCount {
            name: name.to_string(),
            shard: record.shard,
            first: first.to_string(),
            count: first_record.shard.count,
        });
    }
    if record.work_sha256 != first_record.work_sha256 {
        return Err(ShardError::OtherWork {
            name: name.to_string(),
            first: first.to_string(),
        });
    }
    let (a, b) = (&first_table.gpu, &table.gpu);
    if !a.same_model(b) {
        return Err(ShardError::OtherGpu {
            name: name.to_string(),
            gpu: b.name.clone(),
            first: first.to_string(),
            first_gpu: a.name.clone(),
        });
    }
    if !a.same_conditions(b) || !b.same_conditions(a) {
        return Err(ShardError::OtherDriver {
            name: name.to_string(),
            driver: b.driver.clone(),
            first: first.to_string(),
            first_driver: a.driver.clone(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::tests::committed;

    /// The committed table cut into two shards' tables, as two machines would write
    /// them.
    fn two_shards() -> (TuningTable, TuningTable, TuningTable) {
        let whole = committed();
        let work: Vec<String> = whole.kernels.keys().cloned().collect();
        let digest = work_digest(
            whole
                .kernels
                .iter()
                .map(|(k, e)| (k.as_str(), &e.fingerprint)),
        );
        let mut shards = Vec::new();
        for index in 1..=2u32 {
            let mut table = whole.clone();
            let entries: Vec<String> = work
                .iter()
                .enumerate()
                .filter(|(i, _)| (*i as u32 % 2) + 1 == index)
                .map(|(_, e)| e.clone())
                .collect();
            table.kernels.retain(|k, _| entries.contains(k));
            table.shard = Some(ShardRecord {
                shard: Shard { index, count: 2 },
                work: work.clone(),
                work_sha256: digest.clone(),
                entries,
                host: format!("gpu-{index}"),
            });
            shards.push(table);
        }
        let second = shards.pop().unwrap_or_else(|| whole.clone());
        let first = shards.pop().unwrap_or_else(|| whole.clone());
        (whole, first, second)
    }

    #[test]
    fn the_shards_of_one_run_join_into_the_whole_table() {
        let (whole, first, second) = two_shards();
        let mut base = whole.clone();
        base.kernels.clear();
        let merged = join(base, &[("b.json", second), ("a.json", first)]).unwrap();
        assert_eq!(merged.shard, None);
        assert_eq!(merged.kernels.len(), whole.kernels.len());
        for (name, entry) in &whole.kernels {
            let got = &merged.kernels[name];
            assert_eq!(got.ranges, entry.ranges, "{name}");
            let host = &got.tuned_by.as_ref().unwrap().host;
            assert!(host == "gpu-1" || host == "gpu-2", "{host}");
        }
    }

    #[test]
    fn shards_that_do_not_make_one_run_are_refused() {
        let (whole, first, second) = two_shards();
        let base = || {
            let mut base = whole.clone();
            base.kernels.clear();
            base
        };
        let error = |shards: &[(&str, TuningTable)]| join(base(), shards).unwrap_err();
        assert!(matches!(
            error(&[("a", first.clone())]),
            ShardError::Missing { ref missing, count: 2 } if missing == "2"
        ));
        assert!(matches!(
            error(&[("a", first.clone()), ("a2", first.clone())]),
            ShardError::Twice { .. }
        ));
        let mut other = second.clone();
        if let Some(r) = other.shard.as_mut() {
            r.work_sha256 = "0".repeat(64);
        }
        assert!(matches!(
            error(&[("a", first.clone()), ("b", other)]),
            ShardError::OtherWork { .. }
        ));
        let mut other = second.clone();
        other.gpu.driver = "12.4".into();
        assert!(matches!(
            error(&[("a", first.clone()), ("b", other)]),
            ShardError::OtherDriver { .. }
        ));
        let mut other = second.clone();
        other.gpu.name = "NVIDIA B200".into();
        assert!(matches!(
            error(&[("a", first.clone()), ("b", other)]),
            ShardError::OtherGpu { .. }
        ));
        let mut unfinished = second.clone();
        let dropped = unfinished
            .kernels
            .keys()
            .next()
            .cloned()
            .unwrap_or_default();
        unfinished.kernels.remove(&dropped);
        assert!(matches!(
            error(&[("a", first.clone()), ("b", unfinished)]),
            ShardError::Unfinished { ref entries, .. } if *entries == dropped
        ));
        let mut other = second.clone();
        if let Some(r) = other.shard.as_mut() {
            r.shard.count = 3;
        }
        assert!(matches!(
            error(&[("a", first.clone()), ("b", other)]),
            ShardError::OtherCount { .. }
        ));
        assert!(matches!(
            error(&[("a", first), ("w", whole.clone())]),
            ShardError::NotAShard(_)
        ));
    }

    /// Issue 50, item 10: `merge` panicked on crafted shards (`"index": 0`: an
    /// underflow; index 3 of 2 or count 0: out of bounds; count 4294967295: a 64 GiB
    /// allocation), merged overlapping shards silently (the last won) and accepted a
    /// shard that tuned nothing of its own.
    #[test]
    fn crafted_shards_are_refused_before_use() {
        let (whole, first, second) = two_shards();
        let base = || {
            let mut base = whole.clone();
            base.kernels.clear();
            base
        };
        let error = |shards: &[(&str, TuningTable)]| join(base(), shards).unwrap_err();
        for (index, count) in [(0, 2), (3, 2), (0, 0), (1, u32::MAX)] {
            let mut crafted = second.clone();
            if let Some(r) = crafted.shard.as_mut() {
                r.shard = Shard { index, count };
            }
            assert!(
                matches!(
                    error(&[("a", first.clone()), ("b", crafted)]),
                    ShardError::NotInRun { .. }
                ),
                "{index}/{count}"
            );
        }
        // The second shard lists one of the first's entries too.
        let mut overlapping = second.clone();
        let theirs = first.shard.as_ref().unwrap().entries[0].clone();
        overlapping
            .kernels
            .insert(theirs.clone(), first.kernels[&theirs].clone());
        overlapping.shard.as_mut().unwrap().entries.push(theirs);
        assert!(matches!(
            error(&[("a", first.clone()), ("b", overlapping)]),
            ShardError::Overlap { .. }
        ));
        // A shard that claims none of its entries: its work goes untuned.
        let mut empty = second.clone();
        empty.kernels.clear();
        empty.shard.as_mut().unwrap().entries.clear();
        assert!(matches!(
            error(&[("a", first.clone()), ("b", empty)]),
            ShardError::Uncovered { .. }
        ));
        // A table holding an entry its shard was not to tune.
        let mut stray = second.clone();
        let theirs = first.shard.as_ref().unwrap().entries[0].clone();
        stray
            .kernels
            .insert(theirs.clone(), first.kernels[&theirs].clone());
        assert!(matches!(
            error(&[("a", first), ("b", stray)]),
            ShardError::Stray { .. }
        ));
    }
}
