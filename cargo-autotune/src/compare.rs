//! Two tunings of one kernel side by side: a reference (a full grid, say on one GPU)
//! and another (on two GPUs, a budgeted search, or a second sweep on the same GPU).
//! At every key both decided, do the picks agree, and what does the other's pick
//! cost in the reference's own timings? Where they differ, did a duel at that key
//! say the rounds could not tell (a tie, where two sweeps may differ), are the two
//! picks challengers the sweeps ranked by medians whose quartiles overlap (within
//! the spread: no duel sets one challenger against another), or do the two sweeps
//! disagree outside the noise? The vendor's points (its ranked algorithms
//! against its default) are compared the same way. Plus the sweep times, so that a
//! faster sweep is shown with what it bought.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use autotune_table::duel::DuelVerdict;
use autotune_table::table::{self, KernelTable, SizeRecord};

use crate::args::CompareArgs;
use crate::error::CliError;

pub fn run(args: &CompareArgs) -> Result<ExitCode, CliError> {
    let (reference, other) = (
        args.reference.display().to_string(),
        args.other.display().to_string(),
    );
    let name = &args.kernel;
    let load = |path: &str| -> Result<Vec<(String, KernelTable)>, CliError> {
        let table = table::read(Path::new(path)).map_err(CliError::unreadable(path))?;
        let entries = entries_named(&table.kernels, name);
        if entries.is_empty() {
            return Err(CliError::NoKernel {
                kernel: name.clone(),
                path: path.to_string(),
                known: crate::summaries::entries_of(&table),
            });
        }
        Ok(entries)
    };
    let (ours, theirs) = (load(&reference)?, load(&other)?);
    let mut total = Total::default();
    for (entry, reference_entry) in &ours {
        let Some((_, other_entry)) = theirs.iter().find(|(e, _)| e == entry) else {
            let said = format!("{entry}: only in {reference}");
            println!("{}\n", autotune_table::shown::line(&said));
            continue;
        };
        let comparison = compare(reference_entry, other_entry)?;
        let rendered = render(entry, &reference, &other, &comparison);
        print!("{}", autotune_table::shown::lines(&rendered));
        total.add(&comparison);
    }
    for (entry, _) in theirs
        .iter()
        .filter(|(e, _)| !ours.iter().any(|(o, _)| o == e))
    {
        let said = format!("{entry}: only in {other}");
        println!("{}\n", autotune_table::shown::line(&said));
    }
    // The last line sums the entries of a kernel with shapes (each one's own line
    // is above it).
    if total.entries > 1 {
        let Total {
            entries,
            sweep,
            vendor,
        } = total;
        let mut line = format!(
            "{name}: picks agree at {} of {} keys over its {entries} entries{}",
            sweep.same,
            sweep.keys(),
            differing(&sweep)
        );
        if vendor.keys() > 0 {
            line += &format!(
                "; the vendor's points at {} of {}{}",
                vendor.same,
                vendor.keys(),
                differing(&vendor)
            );
        }
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Over every entry compared: the sweep's keys, and the vendor's points' on their own.
#[derive(Debug, Default)]
struct Total {
    entries: usize,
    sweep: Counts,
    vendor: Counts,
}

impl Total {
    fn add(&mut self, c: &Comparison) {
        self.entries += 1;
        self.sweep.add(&c.keys);
        self.vendor.add(&c.vendor_keys);
    }
}

/// Keys by how their picks stand.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Counts {
    same: usize,
    tie: usize,
    spread: usize,
    apart: usize,
}

impl Counts {
    fn of(keys: &[KeyComparison]) -> Self {
        let mut counts = Self::default();
        counts.add(keys);
        counts
    }

    fn add(&mut self, keys: &[KeyComparison]) {
        for k in keys {
            match k.standing {
                Standing::Same => self.same += 1,
                Standing::Tie => self.tie += 1,
                Standing::Spread => self.spread += 1,
                Standing::Apart => self.apart += 1,
            }
        }
    }

    fn keys(&self) -> usize {
        self.same + self.tie + self.spread + self.apart
    }
}

/// `; 2 differ on a tie, 1 outside the noise`, or nothing where all agree; with
/// `3 between two of ours within their quartiles` where some do.
fn differing(counts: &Counts) -> String {
    let Counts {
        tie, spread, apart, ..
    } = *counts;
    if tie + spread + apart == 0 {
        return String::new();
    }
    let spread = if spread > 0 {
        format!(", {spread} between two of ours within their quartiles")
    } else {
        String::new()
    };
    format!("; {tie} differ on a tie{spread}, {apart} outside the noise")
}

/// The entries `name` means: the entry of that name (`gemm@n=4096,k=4096`, `rms_norm`),
/// else every shape's entry of the kernel so named (`gemm`).
fn entries_named(
    kernels: &BTreeMap<String, KernelTable>,
    name: &str,
) -> Vec<(String, KernelTable)> {
    if let Some(entry) = kernels.get(name) {
        return vec![(name.to_string(), entry.clone())];
    }
    kernels
        .iter()
        .filter(|(entry, _)| {
            entry
                .split_once('@')
                .is_some_and(|(kernel, _)| kernel == name)
        })
        .map(|(entry, table)| (entry.clone(), table.clone()))
        .collect()
}

/// How the two picks at one key stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Both tables pick the same.
    Same,
    /// They differ, and a duel at this key (either table's, the sweep's or the
    /// vendor's points', or its confirmation) could not tell its two apart: its
    /// interval holds `1 + margin` ([`DuelVerdict::Tie`]). Two sweeps may differ
    /// here.
    Tie,
    /// They differ between two challengers, each of which took the key from the
    /// incumbent in its own table, and whose interquartile ranges at this key
    /// overlap. A sweep ranks its challengers by median and duels none against
    /// another, so neither sweep told these two apart: they differ within the
    /// spread of their timings.
    Spread,
    /// They differ, and neither a duel nor the quartiles said tie: each table
    /// decided outside its noise, and they decided differently.
    Apart,
}

/// One key both tunings decided.
#[derive(Debug, PartialEq)]
pub struct KeyComparison {
    pub key: u64,
    pub reference_pick: String,
    pub other_pick: String,
    /// The other's pick as the reference timed it, over the reference's pick.
    pub cost: Option<f64>,
    pub standing: Standing,
}

#[derive(Debug, PartialEq)]
pub struct Comparison {
    /// The picks of the sweep (ours against the incumbent), per key.
    pub keys: Vec<KeyComparison>,
    /// The picks among the vendor's points, per key (empty where neither table
    /// swept them).
    pub vendor_keys: Vec<KeyComparison>,
    /// `(sweep seconds, GPUs, points timed)` of the reference and the other.
    pub reference_sweep: (f64, u32, usize),
    pub other_sweep: (f64, u32, usize),
}

/// Whether a duel at `key` in `table` said tie at its margin: the sweep's or the
/// vendor's points' duel, or either one's confirmation. Where the vendor's points
/// tied, the sweep's incumbent at that key may differ between two tables too.
fn tied_at(table: &KernelTable, key: u64) -> bool {
    table
        .sizes
        .iter()
        .chain(&table.vendor_sizes)
        .filter(|record| record.key == key)
        .flat_map(|record| [record.duel, record.confirmation])
        .flatten()
        .any(|duel| duel.verdict(table.min_margin) == DuelVerdict::Tie)
}

/// Whether the two picks at one key (`ours` in the reference, `theirs` in the
/// other) are two challengers that each took the key from its table's incumbent,
/// and whose interquartile ranges there overlap: each pick's quartiles as the
/// reference timed it, else as the other did. The sweep ranks challengers by
/// median alone, so two such picks are a tie of that ranking.
fn challengers_overlap(
    reference: &KernelTable,
    other: &KernelTable,
    ours: &SizeRecord,
    theirs: &SizeRecord,
) -> bool {
    let challenger = |record: &SizeRecord| record.winner != record.incumbent;
    if !challenger(ours) || !challenger(theirs) {
        return false;
    }
    let quartiles = |pick: &str| {
        [reference, other].into_iter().find_map(|table| {
            let variant = table.variant(pick).filter(|v| v.rejected.is_none())?;
            let at = variant.measurements.iter().find(|m| m.key == ours.key)?;
            Some((at.p25_us, at.p75_us))
        })
    };
    match (quartiles(&ours.winner), quartiles(&theirs.winner)) {
        (Some((low, high)), Some((other_low, other_high))) => {
            low <= other_high && other_low <= high
        }
        _ => false,
    }
}

/// Each key both tables decided in `records` (the sweep's or the vendor's points'):
/// the picks, how they stand, and the other's pick's cost where `timed` has both.
fn pair_keys(
    reference: &KernelTable,
    other: &KernelTable,
    records: fn(&KernelTable) -> &[SizeRecord],
    timed: impl Fn(&SizeRecord, &str) -> Option<f64>,
    within_spread: impl Fn(&SizeRecord, &SizeRecord) -> bool,
) -> Vec<KeyComparison> {
    let mut keys = Vec::new();
    for theirs in records(other) {
        let Some(ours) = records(reference).iter().find(|s| s.key == theirs.key) else {
            continue;
        };
        let cost = timed(ours, &theirs.winner)
            .zip(timed(ours, &ours.winner))
            .map(|(theirs, ours)| theirs / ours);
        let standing = if theirs.winner == ours.winner {
            Standing::Same
        } else if tied_at(reference, ours.key) || tied_at(other, ours.key) {
            Standing::Tie
        } else if within_spread(ours, theirs) {
            Standing::Spread
        } else {
            Standing::Apart
        };
        keys.push(KeyComparison {
            key: theirs.key,
            reference_pick: ours.winner.clone(),
            other_pick: theirs.winner.clone(),
            cost,
            standing,
        });
    }
    keys
}

pub fn compare(reference: &KernelTable, other: &KernelTable) -> Result<Comparison, CliError> {
    if reference.key != other.key {
        return Err(CliError::Refused(format!(
            "the tables tune different keys (`{}`, `{}`)",
            reference.key, other.key
        )));
    }
    // The reference's median of a variant that passed its checks.
    let keys = pair_keys(
        reference,
        other,
        |table| &table.sizes,
        |record, pick| {
            reference
                .variant(pick)
                .filter(|v| v.rejected.is_none())
                .and_then(|v| v.median_at(record.key))
        },
        |ours, theirs| challengers_overlap(reference, other, ours, theirs),
    );
    // The vendor's sweep keeps its medians in its records (the winner's and the
    // incumbent's), not as the variants' measurements.
    let vendor_keys = pair_keys(
        reference,
        other,
        |table| &table.vendor_sizes,
        |record, pick| {
            if pick == record.winner {
                Some(record.winner_us)
            } else if pick == record.incumbent {
                Some(record.incumbent_us)
            } else {
                None
            }
        },
        // The vendor's records keep medians only: no quartiles to read.
        |_, _| false,
    );
    let sweep = |k: &KernelTable| {
        let points: usize = k.variants.iter().map(|v| v.measurements.len()).sum();
        (k.seconds.sweep, k.seconds.gpus, points)
    };
    Ok(Comparison {
        keys,
        vendor_keys,
        reference_sweep: sweep(reference),
        other_sweep: sweep(other),
    })
}

pub fn render(name: &str, reference: &str, other: &str, c: &Comparison) -> String {
    let mut out = String::new();
    let line = |(seconds, gpus, points): (f64, u32, usize)| {
        format!(
            "{seconds:.1} s sweep on {gpus} GPU{}, {points} timings",
            if gpus == 1 { "" } else { "s" }
        )
    };
    let _ = writeln!(
        out,
        "{name}: reference {reference}: {}",
        line(c.reference_sweep)
    );
    let _ = writeln!(out, "{name}: other     {other}: {}", line(c.other_sweep));
    if c.other_sweep.0 > 0.0 {
        let _ = writeln!(
            out,
            "sweep time: reference / other = {:.2}x",
            c.reference_sweep.0 / c.other_sweep.0
        );
    }
    rows(&mut out, &c.keys);
    if !c.vendor_keys.is_empty() {
        let _ = writeln!(
            out,
            "the vendor's points (its ranked algorithms against its default launch):"
        );
        rows(&mut out, &c.vendor_keys);
        let vendor = Counts::of(&c.vendor_keys);
        let _ = writeln!(
            out,
            "the vendor's points agree at {} of {} keys{}",
            vendor.same,
            vendor.keys(),
            differing(&vendor)
        );
    }
    let sweep = Counts::of(&c.keys);
    let worst = c.keys.iter().filter_map(|k| k.cost).fold(1.0f64, f64::max);
    let untimed = c.keys.iter().filter(|k| k.cost.is_none()).count();
    let _ = writeln!(
        out,
        "picks agree at {} of {} keys{}; the other's picks cost at most {:+.2}% in the reference's timings{}",
        sweep.same,
        sweep.keys(),
        differing(&sweep),
        (worst - 1.0) * 100.0,
        if untimed > 0 {
            format!(
                " ({untimed} untimed there: the reference's sweep never timed the other's pick at that key)"
            )
        } else {
            String::new()
        }
    );
    out
}

/// A row per key: the picks, the cost and, where they differ, how they stand.
fn rows(out: &mut String, keys: &[KeyComparison]) {
    let _ = writeln!(
        out,
        "  {:>10}  {:<56} {:<56} {:>8}  standing",
        "key", "reference pick", "other pick", "cost"
    );
    for k in keys {
        let cost = k.cost.map_or("untimed".to_string(), |c| {
            format!("{:+.2}%", (c - 1.0) * 100.0)
        });
        let (other, standing) = match k.standing {
            Standing::Same => ("(same)", ""),
            Standing::Tie => (k.other_pick.as_str(), "tie"),
            Standing::Spread => (k.other_pick.as_str(), "within the quartiles"),
            Standing::Apart => (k.other_pick.as_str(), "outside the noise"),
        };
        let row = format!(
            "  {:>10}  {:<56} {:<56} {cost:>8}  {standing}",
            k.key, k.reference_pick, other
        );
        let _ = writeln!(out, "{}", row.trim_end());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed(kernel: &str) -> KernelTable {
        // The library tests' snapshot of the H200 table, not the shipped one.
        let table = autotune_table::testing::fixture_table();
        let Some(entry) = table.kernels.get(kernel) else {
            panic!("`{kernel}` is in the committed table");
        };
        entry.clone()
    }

    /// Issue 35: `compare --kernel gemm` refused the shipped table ("no kernel
    /// `gemm`"), whose entries are per shape; a kernel's name means all of them.
    #[test]
    fn a_kernel_name_means_every_shape_entry() {
        let table = autotune_table::testing::fixture_table();
        let gemm: Vec<String> = entries_named(&table.kernels, "gemm")
            .into_iter()
            .map(|(entry, _)| entry)
            .collect();
        assert_eq!(gemm.len(), 4, "{gemm:?}");
        assert!(gemm.iter().all(|e| e.starts_with("gemm@n=")), "{gemm:?}");
        let one = entries_named(&table.kernels, "gemm@n=4096,k=4096");
        assert_eq!(one.len(), 1);
        // `topk` is neither an entry nor a kernel with shapes (`topk_indexer` is).
        assert!(entries_named(&table.kernels, "topk").is_empty());
        assert_eq!(entries_named(&table.kernels, "rms_norm").len(), 1);
    }

    #[test]
    fn a_table_agrees_with_itself_and_a_changed_pick_costs_its_time() {
        let reference = committed("rms_norm");
        let same = compare(&reference, &reference).unwrap_or_else(|e| panic!("{e}"));
        assert!(!same.keys.is_empty());
        assert!(same.keys.iter().all(|k| k.cost == Some(1.0)));
        // Swap the pick at the first key for the slowest variant timed there.
        let mut other = reference.clone();
        let key = other.sizes[0].key;
        let (slowest, slowest_us) = reference
            .variants
            .iter()
            .filter_map(|v| {
                v.measurements
                    .iter()
                    .find(|m| m.key == key)
                    .map(|m| (v.name.clone(), m.median_us))
            })
            .fold((String::new(), 0.0), |a, b| if b.1 > a.1 { b } else { a });
        other.sizes[0].winner = slowest.clone();
        let c = compare(&reference, &other).unwrap_or_else(|e| panic!("{e}"));
        let expected = slowest_us / reference.sizes[0].winner_us;
        assert!(c.keys[0].cost.is_some_and(|c| (c - expected).abs() < 1e-9));
        let text = render("rms_norm", "a", "b", &c);
        assert!(
            text.contains(&format!("picks agree at {} of", c.keys.len() - 1)),
            "{text}"
        );
        other.key = "elsewhere".into();
        assert!(compare(&reference, &other).is_err());
    }

    /// A duel with the interval `[low, high]` around `ratio`.
    fn duel(low: f64, ratio: f64, high: f64) -> autotune_table::duel::Duel {
        autotune_table::duel::Duel {
            rounds: 60,
            ratio,
            low,
            high,
            spread: 0.001,
            incumbent_us: 10.0 * ratio,
            challenger_us: 10.0,
        }
    }

    /// The library tests' `rms_norm` with no duel at any key and no vendor's
    /// points: how two picks stand is then the tests' to set.
    fn without_duels() -> KernelTable {
        let mut table = committed("rms_norm");
        for record in &mut table.sizes {
            (record.duel, record.confirmation) = (None, None);
        }
        table.vendor_sizes.clear();
        table
    }

    /// How the sweep's picks at `key` stand between the two tables.
    fn standing_at(reference: &KernelTable, other: &KernelTable, key: u64) -> Option<Standing> {
        let c = compare(reference, other).unwrap_or_else(|e| panic!("{e}"));
        c.keys.iter().find(|k| k.key == key).map(|k| k.standing)
    }

    /// Issue 48: two sweeps may differ only where a duel says tie. A changed pick
    /// is a tie where either table's duel at that key (or its confirmation, or the
    /// vendor's points' duel there) holds `1 + margin`, and outside the noise
    /// where none does; the vendor's points are compared the same way.
    #[test]
    fn a_changed_pick_is_a_tie_only_where_a_duel_at_its_key_says_so() {
        let mut reference = without_duels();
        reference.min_margin = 0.01;
        let key = reference.sizes[0].key;
        let elsewhere = reference
            .variants
            .iter()
            .map(|v| v.name.clone())
            .find(|name| *name != reference.sizes[0].winner)
            .unwrap_or_else(|| panic!("a second variant"));
        let mut other = reference.clone();
        other.sizes[0].winner = elsewhere;
        let standing =
            |reference: &KernelTable, other: &KernelTable| standing_at(reference, other, key);
        assert_eq!(standing(&reference, &other), Some(Standing::Apart));
        // The challenger's rounds cleared the margin in the other sweep: still apart.
        other.sizes[0].duel = Some(duel(1.02, 1.03, 1.04));
        assert_eq!(standing(&reference, &other), Some(Standing::Apart));
        // Its confirmation held 1.01: a tie.
        other.sizes[0].confirmation = Some(duel(1.005, 1.012, 1.02));
        assert_eq!(standing(&reference, &other), Some(Standing::Tie));
        other.sizes[0].confirmation = None;
        // The reference's vendor's points tied at that key: the sweep's incumbent
        // there may differ, so a tie too.
        let mut point = reference.sizes[0].clone();
        point.duel = Some(duel(0.995, 1.008, 1.02));
        reference.vendor_sizes.push(point.clone());
        assert_eq!(standing(&reference, &other), Some(Standing::Tie));
        assert_eq!(standing(&reference, &reference), Some(Standing::Same));

        // The vendor's points: a point beat the default launch beyond the noise in
        // one sweep, and another point did in the other.
        let mut with_point = reference.clone();
        let record = &mut with_point.vendor_sizes[0];
        (record.winner, record.winner_us) = ("vendor:cuBLAS@0000cafe".into(), 10.0);
        (record.incumbent, record.incumbent_us) = ("vendor:cuBLAS".into(), 11.0);
        record.duel = Some(duel(1.05, 1.06, 1.07));
        let mut changed = with_point.clone();
        changed.vendor_sizes[0].winner = "vendor:cuBLAS@0000beef".into();
        let c = compare(&with_point, &changed).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.vendor_keys.len(), 1);
        assert_eq!(c.vendor_keys[0].standing, Standing::Apart);
        assert_eq!(c.vendor_keys[0].cost, None, "the reference never timed it");
        let text = render("rms_norm", "a", "b", &c);
        assert!(
            text.contains(
                "the vendor's points agree at 0 of 1 keys; 0 differ on a tie, 1 outside the noise"
            ),
            "{text}"
        );
        // The other kept the default launch: priced at the reference's incumbent.
        changed.vendor_sizes[0].winner = "vendor:cuBLAS".into();
        let c = compare(&with_point, &changed).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            c.vendor_keys[0]
                .cost
                .is_some_and(|c| (c - 1.1).abs() < 1e-9)
        );
    }

    /// Session 41, two top-k sweeps on one H100: 15 of 70 keys "outside the noise"
    /// whose picks were two of our points 0.1-0.9% apart by median, each of which
    /// had beaten the incumbent in its duel. The sweep ranks its challengers by
    /// median and duels none against another, so where the two picks' quartiles
    /// overlap the two sweeps could not tell them apart: within the spread, not
    /// apart. Disjoint quartiles stay apart, and a pick that is the incumbent stays
    /// the duel's to judge.
    #[test]
    fn two_challengers_whose_quartiles_overlap_differ_within_the_spread() {
        let mut reference = without_duels();
        let key = reference.sizes[0].key;
        reference.sizes[0].incumbent = "incumbent".into();
        let names: Vec<String> = reference.variants.iter().map(|v| v.name.clone()).collect();
        let (first, second) = (names[0].clone(), names[1].clone());
        let set = |table: &mut KernelTable, name: &str, (p25, median, p75): (f64, f64, f64)| {
            let Some(variant) = table.variants.iter_mut().find(|v| v.name == name) else {
                panic!("`{name}` is a variant");
            };
            variant.measurements.retain(|m| m.key != key);
            variant
                .measurements
                .push(autotune_table::testing::measurement(key, p25, median, p75));
        };
        set(&mut reference, &first, (9.9, 10.0, 10.1));
        set(&mut reference, &second, (9.95, 10.05, 10.15));
        reference.sizes[0].winner = first.clone();
        let mut other = reference.clone();
        other.sizes[0].winner = second.clone();
        let standing =
            |reference: &KernelTable, other: &KernelTable| standing_at(reference, other, key);
        assert_eq!(standing(&reference, &other), Some(Standing::Spread));
        let c = compare(&reference, &other).unwrap_or_else(|e| panic!("{e}"));
        let text = render("rms_norm", "a", "b", &c);
        assert!(text.contains("within their quartiles"), "{text}");
        // Timed only in the other sweep, the other's pick is read there.
        let mut untimed = reference.clone();
        for variant in untimed.variants.iter_mut().filter(|v| v.name == second) {
            variant.measurements.retain(|m| m.key != key);
        }
        assert_eq!(standing(&untimed, &other), Some(Standing::Spread));
        // Quartiles apart: the medians told them apart, and the sweeps disagree.
        set(&mut reference, &second, (10.2, 10.3, 10.4));
        set(&mut other, &second, (10.2, 10.3, 10.4));
        assert_eq!(standing(&reference, &other), Some(Standing::Apart));
        // One sweep kept the incumbent: its duel decides (none here: apart).
        set(&mut reference, &second, (9.95, 10.05, 10.15));
        set(&mut other, &second, (9.95, 10.05, 10.15));
        other.sizes[0].winner = "incumbent".into();
        assert_eq!(standing(&reference, &other), Some(Standing::Apart));
    }
}
