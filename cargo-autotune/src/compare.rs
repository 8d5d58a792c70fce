//! Two tunings of one kernel side by side: a reference (a full grid, say on one GPU)
//! and another (on two GPUs, or a budgeted search). At every key both decided, do the
//! picks agree, and what does the other's pick cost in the reference's own timings?
//! Plus the sweep times, so that a faster sweep is shown with what it bought.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use autotune_table::table::{self, KernelTable};

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
    // Over every entry compared: keys whose picks agree, keys, entries.
    let mut total = (0, 0, 0);
    for (entry, reference_entry) in &ours {
        let Some((_, other_entry)) = theirs.iter().find(|(e, _)| e == entry) else {
            let said = format!("{entry}: only in {reference}");
            println!("{}\n", autotune_table::shown::line(&said));
            continue;
        };
        let comparison = compare(reference_entry, other_entry)?;
        let rendered = render(entry, &reference, &other, &comparison);
        print!("{}", autotune_table::shown::lines(&rendered));
        total.0 += comparison.agreeing();
        total.1 += comparison.keys.len();
        total.2 += 1;
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
    if total.2 > 1 {
        let (same, keys, entries) = total;
        println!("{name}: picks agree at {same} of {keys} keys over its {entries} entries");
    }
    Ok(ExitCode::SUCCESS)
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

/// One key both tunings decided.
#[derive(Debug, PartialEq)]
pub struct KeyComparison {
    pub key: u64,
    pub reference_pick: String,
    pub other_pick: String,
    /// The other's pick as the reference timed it, over the reference's pick.
    pub cost: Option<f64>,
}

#[derive(Debug, PartialEq)]
pub struct Comparison {
    pub keys: Vec<KeyComparison>,
    /// `(sweep seconds, GPUs, points timed)` of the reference and the other.
    pub reference_sweep: (f64, u32, usize),
    pub other_sweep: (f64, u32, usize),
}

impl Comparison {
    /// The keys where both tables pick the same.
    pub fn agreeing(&self) -> usize {
        self.keys
            .iter()
            .filter(|k| k.other_pick == k.reference_pick)
            .count()
    }
}

pub fn compare(reference: &KernelTable, other: &KernelTable) -> Result<Comparison, CliError> {
    if reference.key != other.key {
        return Err(CliError::Refused(format!(
            "the tables tune different keys (`{}`, `{}`)",
            reference.key, other.key
        )));
    }
    // The reference's medians by (variant, key).
    let timed: BTreeMap<(&str, u64), f64> = reference
        .variants
        .iter()
        .filter(|v| v.rejected.is_none())
        .flat_map(|v| {
            v.measurements
                .iter()
                .map(move |m| ((v.name.as_str(), m.key), m.median_us))
        })
        .collect();
    let mut keys = Vec::new();
    for theirs in &other.sizes {
        let Some(ours) = reference.sizes.iter().find(|s| s.key == theirs.key) else {
            continue;
        };
        let cost = timed
            .get(&(theirs.winner.as_str(), theirs.key))
            .zip(timed.get(&(ours.winner.as_str(), ours.key)))
            .map(|(theirs, ours)| theirs / ours);
        keys.push(KeyComparison {
            key: theirs.key,
            reference_pick: ours.winner.clone(),
            other_pick: theirs.winner.clone(),
            cost,
        });
    }
    let sweep = |k: &KernelTable| {
        let points: usize = k.variants.iter().map(|v| v.measurements.len()).sum();
        (k.seconds.sweep, k.seconds.gpus, points)
    };
    Ok(Comparison {
        keys,
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
    let _ = writeln!(
        out,
        "  {:>10}  {:<56} {:<56} {:>8}",
        "key", "reference pick", "other pick", "cost"
    );
    for k in &c.keys {
        let cost = k.cost.map_or("untimed".to_string(), |c| {
            format!("{:+.2}%", (c - 1.0) * 100.0)
        });
        let other = if k.other_pick == k.reference_pick {
            "(same)"
        } else {
            k.other_pick.as_str()
        };
        let _ = writeln!(
            out,
            "  {:>10}  {:<56} {:<56} {cost:>8}",
            k.key, k.reference_pick, other
        );
    }
    let same = c.agreeing();
    let worst = c.keys.iter().filter_map(|k| k.cost).fold(1.0f64, f64::max);
    let untimed = c.keys.iter().filter(|k| k.cost.is_none()).count();
    let _ = writeln!(
        out,
        "picks agree at {same} of {} keys; the other's picks cost at most {:+.2}% in the reference's timings{}",
        c.keys.len(),
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
}
