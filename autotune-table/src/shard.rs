//! Tuning spread over machines of one GPU model: which machine (shard `i` of `N`)
//! tunes which table entries, the partial table each writes, and joining them.
//!
//! The grain is the table entry (a kernel, or one shape of a kernel with shapes),
//! together with its fallback's entry at the same shape (a kernel's sweep times its
//! fallback through the fallback's plan, so the two are tuned on one machine, the
//! fallback first). Every decision of a sweep compares times of one entry, so every
//! decision is taken among times from one machine: machines need no calibration
//! against each other, and the merged plan is the one each machine would have
//! decided for its entries. What differs from one machine tuning everything is only
//! each machine's own noise, which the report shows per shard.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Shard `index` of `count` (`2/4`; `index` from 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

/// The most machines one tuning run may be spread over.
pub const MAX_SHARDS: u32 = 1024;

/// Why `i/N` is not a shard.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a shard: write `i/N`, 1 <= i <= N <= {MAX_SHARDS} (`1/2`)")]
pub struct NotAShard {
    pub text: String,
}

impl FromStr for Shard {
    type Err = NotAShard;

    fn from_str(text: &str) -> Result<Self, NotAShard> {
        let refuse = || NotAShard {
            text: text.to_string(),
        };
        let (index, count) = text.trim().split_once('/').ok_or_else(refuse)?;
        let number = |s: &str| s.trim().parse::<u32>().map_err(|_| refuse());
        let (index, count) = (number(index)?, number(count)?);
        if index == 0 || index > count || count > MAX_SHARDS {
            return Err(refuse());
        }
        Ok(Self { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// `nvidia-h200.shard-1-of-2.json`: the partial table of this shard, in the
    /// tables folder's `shards/`.
    pub fn file_name(&self, gpu_slug: &str) -> String {
        format!("{gpu_slug}.shard-{}-of-{}.json", self.index, self.count)
    }
}

/// A unit of work: table entries tuned together on one machine, in order (a
/// fallback's entry before the kernel's), with what it is expected to cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    pub entries: Vec<String>,
    /// Points times sizes, summed over the entries: the sweep's tasks, a proxy of
    /// its time.
    pub cost: u64,
}

/// The shard (1-based) each unit goes to: longest-processing-time first. Units are
/// taken by decreasing cost (ties by their first entry's name) and each goes to the
/// shard with the least cost so far (ties to the lowest index). Deterministic: every
/// machine, given the same units, computes the same assignment. Its makespan is at
/// most 4/3 of the best possible (Graham's bound for LPT).
pub fn assign(units: &[Unit], count: u32) -> Vec<u32> {
    let count = count.max(1) as usize;
    let mut order: Vec<usize> = (0..units.len()).collect();
    order.sort_by(|&a, &b| {
        units[b]
            .cost
            .cmp(&units[a].cost)
            .then_with(|| units[a].entries.cmp(&units[b].entries))
    });
    let mut load = vec![0u64; count];
    let mut shard_of = vec![0u32; units.len()];
    for unit in order {
        let lightest = (0..count).min_by_key(|&s| (load[s], s)).unwrap_or(0);
        load[lightest] += units[unit].cost;
        shard_of[unit] = lightest as u32 + 1;
    }
    shard_of
}

/// What a shard's partial table records about the run it is part of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardRecord {
    #[serde(flatten)]
    pub shard: Shard,
    /// Every entry of the whole run (all shards'), sorted.
    pub work: Vec<String>,
    /// Digest of `work` with each entry's fingerprint: shards of one run agree on
    /// it; a shard built from other sources, flags or nvcc does not.
    pub work_sha256: String,
    /// This shard's entries.
    pub entries: Vec<String>,
    /// The machine (`hostname`), for the report.
    pub host: String,
}

/// Which shard tuned an entry, kept in the merged table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TunedBy {
    #[serde(flatten)]
    pub shard: Shard,
    pub host: String,
}

impl fmt::Display for TunedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "shard {} on {}", self.shard, self.host)
    }
}

/// The entries of `units` that shard `shard` tunes, in the order to tune them.
pub fn entries_of(units: &[Unit], shard: Shard) -> Vec<String> {
    let owners = assign(units, shard.count);
    units
        .iter()
        .zip(owners)
        .filter(|(_, owner)| *owner == shard.index)
        .flat_map(|(unit, _)| unit.entries.iter().cloned())
        .collect()
}

/// Every entry of `units`, sorted: the run's work.
pub fn work_of(units: &[Unit]) -> Vec<String> {
    let set: BTreeSet<&String> = units.iter().flat_map(|u| &u.entries).collect();
    set.into_iter().cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(name: &str, cost: u64) -> Unit {
        Unit {
            entries: vec![name.to_string()],
            cost,
        }
    }

    #[test]
    fn shards_are_written_i_of_n() {
        assert_eq!("2/4".parse(), Ok(Shard { index: 2, count: 4 }));
        assert_eq!(" 1 / 1 ".parse(), Ok(Shard { index: 1, count: 1 }));
        for bad in ["0/2", "3/2", "2", "a/b", "1/0", "1/2000", ""] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        let shard = Shard { index: 1, count: 2 };
        assert_eq!(shard.to_string(), "1/2");
        assert_eq!(
            shard.file_name("nvidia-h200"),
            "nvidia-h200.shard-1-of-2.json"
        );
    }

    #[test]
    fn the_costliest_units_go_first_to_the_least_loaded_shard() {
        // 4 GEMM shapes of 138 x 9, an RMSNorm of 9 x 5, a top-k pair of 87 x 6 + 4 x 6.
        let units = [
            unit("gemm@a", 1242),
            unit("gemm@b", 1242),
            unit("gemm@c", 1242),
            unit("gemm@d", 1242),
            unit("rms_norm", 45),
            Unit {
                entries: vec!["topk_keep_all".into(), "topk_indexer".into()],
                cost: 546,
            },
        ];
        let two = assign(&units, 2);
        assert_eq!(two, [1, 2, 1, 2, 2, 1]);
        let load = |shard: u32| -> u64 {
            units
                .iter()
                .zip(&two)
                .filter(|(_, s)| **s == shard)
                .map(|(u, _)| u.cost)
                .sum()
        };
        assert_eq!((load(1), load(2)), (3030, 2529));
        // Every unit somewhere, the same every time, one shard takes all.
        assert_eq!(assign(&units, 2), two);
        assert!(assign(&units, 1).iter().all(|&s| s == 1));
        // More shards than units: some get none.
        let many = assign(&units, 8);
        assert_eq!(many.iter().collect::<BTreeSet<_>>().len(), units.len());
        // A fallback stays with its kernel, before it.
        let second = entries_of(&units, Shard { index: 1, count: 2 });
        assert_eq!(
            second,
            ["gemm@a", "gemm@c", "topk_keep_all", "topk_indexer"]
        );
        assert_eq!(work_of(&units).len(), 7);
    }
}
