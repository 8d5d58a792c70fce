//! The text report of a table, per kernel and range: the variant the build bakes
//! there, then each key timed inside it with the fastest variant, its margin over
//! the incumbent and over the runner-up; what was rejected and why, and the
//! fingerprint. `cargo autotune report` prints it; a tuning build writes it beside
//! the table it rewrote.

use std::fmt::Write as _;

use crate::duel::{Duel, DuelVerdict};
use crate::table::{KernelTable, KeyRange, SizeRecord, TuningTable};

pub fn render(path: &str, table: &TuningTable, only: Option<&str>) -> String {
    let gpu = &table.gpu;
    let mut out = format!(
        "{path}: {} ({}, {} SMs, driver {}, L2 {} MiB)\n",
        gpu.name,
        gpu.arch(),
        gpu.sm_count,
        gpu.driver,
        gpu.l2_bytes >> 20
    );
    if let Some(line) = shards_line(table) {
        out.push_str(&line);
    }
    for (name, kernel) in &table.kernels {
        if only.is_some_and(|o| !crate::table::is_entry_of(name, o)) {
            continue;
        }
        out.push_str(&kernel_report(name, kernel));
    }
    out
}

/// `shards: 1/2 on gpu-a (4 entries, median noise 0.6%), 2/2 on gpu-b (...)`, for a
/// table joined from shards: each entry was decided among times of one machine, so
/// the machines are not calibrated against each other; their noise is shown.
fn shards_line(table: &TuningTable) -> Option<String> {
    let mut shards: Vec<(&crate::shard::TunedBy, Vec<f64>, usize)> = Vec::new();
    for kernel in table.kernels.values() {
        let Some(by) = &kernel.tuned_by else { continue };
        let noise = kernel.sizes.iter().map(|s| s.noise);
        match shards.iter_mut().find(|(b, _, _)| *b == by) {
            Some((_, all, entries)) => {
                all.extend(noise);
                *entries += 1;
            }
            None => shards.push((by, noise.collect(), 1)),
        }
    }
    if shards.is_empty() {
        return None;
    }
    shards.sort_by_key(|(by, _, _)| by.shard.index);
    let parts: Vec<String> = shards
        .into_iter()
        .map(|(by, mut noise, entries)| {
            noise.sort_by(f64::total_cmp);
            let median = noise.get(noise.len() / 2).copied().unwrap_or(0.0);
            format!(
                "{} on {} ({entries} entries, median noise {:.1}%)",
                by.shard,
                by.host,
                median * 100.0
            )
        })
        .collect();
    Some(format!(
        "shards: {}; each entry was decided among times of one machine\n",
        parts.join(", ")
    ))
}

/// `tuning bought 1.11-1.14x over softmax_library; 1.05-1.08x over its default
/// block=64`: what the range's variant gained at the declared sizes timed inside
/// it (refinement keys and the probe above the top left out), over the incumbent
/// (the default, or what the fallback's own plan runs) and over the kernel's own
/// default point, which tells a better algorithm from better parameters. `None`
/// where the incumbent owns the range.
fn bought(k: &KernelTable, range: &KeyRange<String>, inside: &[&SizeRecord]) -> Option<String> {
    let owner = k.variant(&range.choice)?;
    let tuned: Vec<&SizeRecord> = inside
        .iter()
        .copied()
        .filter(|s| s.incumbent != range.choice && !s.refinement)
        .collect();
    let mut ratios = Vec::new();
    let mut over: Vec<String> = Vec::new();
    for size in &tuned {
        ratios.push(size.incumbent_us / owner.median_at(size.key)?);
        let incumbent = k.known_as(&size.incumbent);
        if !over.contains(&incumbent) {
            over.push(incumbent);
        }
    }
    let mut said = format!("tuning bought {} over {}", by(&ratios)?, over.join(", "));
    let default = k
        .variant(&k.default)
        .filter(|d| d.name != owner.name && over != [k.known_as(&d.name)]);
    if let Some(default) = default {
        let over_default: Option<Vec<f64>> = tuned
            .iter()
            .map(|size| Some(default.median_at(size.key)? / owner.median_at(size.key)?))
            .collect();
        if let Some(text) = over_default.as_deref().and_then(by) {
            said.push_str(&format!("; {text} over its default {}", k.default));
        }
    }
    Some(said)
}

/// `1.11-1.14x` (or `1.12x`) over `ratios`; `None` without any.
fn by(ratios: &[f64]) -> Option<String> {
    let low = ratios.iter().copied().reduce(f64::min)?;
    let high = ratios.iter().copied().reduce(f64::max)?;
    Some(if format!("{low:.2}") == format!("{high:.2}") {
        format!("{low:.2}x")
    } else {
        format!("{low:.2}-{high:.2}x")
    })
}

fn kernel_report(name: &str, k: &KernelTable) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n{name}: key `{}`, {} variants ({} valid), default {}{}, tuned {} in {:.1} s (nvcc {:.1} s)",
        k.key,
        k.variants.len(),
        k.valid_variants(),
        k.default,
        k.with_fallback(),
        k.tuned_on,
        k.seconds.total,
        k.seconds.compile
    );
    if let Some(by) = &k.tuned_by {
        let _ = writeln!(out, "  tuned by {by}");
    }
    if let Some(check) = &k.check {
        let _ = writeln!(out, "  checked: {check}");
    }
    if let Some(line) = compile_times(k) {
        let _ = writeln!(out, "  {line}");
    }
    if let Some(phases) = &k.seconds.phases {
        let _ = writeln!(out, "  {}", phases.describe());
    }
    let _ = writeln!(
        out,
        "  {:<24} {:<48} {:>10} {:>12} {:>12}  runner-up",
        "range: bakes", "timed key: fastest", "at key", "vs incumb.", "vs runner-up"
    );
    for range in &k.ranges {
        out.push_str(&range_report(k, range));
    }
    let _ = writeln!(out, "  keys: {}", k.keys_line());
    if let Some(off_grid) = &k.off_grid {
        let _ = writeln!(out, "  {}", off_grid.describe(&k.key));
    }
    if let Some(clocks) = &k.clocks {
        let _ = writeln!(out, "  {}", clocks.describe());
    }
    let rejected = k.rejected();
    if !rejected.is_empty() {
        let _ = writeln!(out, "  rejected:");
        for (v, r) in rejected {
            let _ = writeln!(out, "    {:<40} {r}", v.name);
        }
    }
    let f = &k.fingerprint;
    let short = |digest: &str| digest.chars().take(12).collect::<String>();
    let _ = writeln!(
        out,
        "  fingerprint: spec {}…, wrapper {}…, sources {}… ({}), nvcc {}, flags [{}], {}, autotune-build {}",
        short(&f.spec_sha256),
        short(&f.wrapper_sha256),
        short(&f.sources_sha256),
        f.sources.join(", "),
        f.nvcc,
        f.flags.join(" "),
        f.crate_version,
        f.tuner_version
    );
    if let Some(vendor) = &f.vendor {
        let _ = writeln!(out, "  vendor fallback: {vendor}");
    }
    out.push_str(&vendor_report(k));
    out
}

/// A range's lines: what it bakes (and what tuning bought there), then each key
/// timed inside it with its fastest variant, its margins and its duel.
fn range_report(k: &KernelTable, range: &KeyRange<String>) -> String {
    let mut out = String::new();
    let span = range.span();
    let inside = k.sizes_in(range);
    let after = if inside.is_empty() {
        "  (no key timed inside)".to_string()
    } else {
        bought(k, range, &inside).map_or_else(String::new, |b| format!("  ({b})"))
    };
    let _ = writeln!(out, "  {span:<24} {}{after}", range.choice);
    for size in inside {
        out.push_str(&size_lines(k, size));
    }
    out
}

/// The vendor's own points, where it has them: which of its launches each range
/// runs (the incumbent there), then each key of its own sweep inside the range.
fn vendor_report(k: &KernelTable) -> String {
    let mut out = String::new();
    if k.vendor_plan.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "  the vendor's own points, swept against its default launch (the incumbent per range):"
    );
    for range in &k.vendor_plan {
        let _ = writeln!(out, "  {:<24} {}", range.span(), range.choice);
        for size in k.vendor_sizes.iter().filter(|s| range.contains(s.key)) {
            out.push_str(&size_lines(k, size));
        }
    }
    out
}

/// A timed key's line (its fastest, the margins, the runner-up) and its duels'.
fn size_lines(k: &KernelTable, size: &SizeRecord) -> String {
    let mut out = String::new();
    let runner_up = size.runner_up.as_deref().unwrap_or("-");
    let over_runner_up = size
        .runner_up
        .as_deref()
        .and_then(|r| k.variant(r))
        .and_then(|v| v.median_at(size.key))
        .map(|us| format!("{:+.1}%", (us / size.winner_us - 1.0) * 100.0))
        .unwrap_or_else(|| "-".into());
    let _ = writeln!(
        out,
        "  {:<24} {:<48} {:>10} {:>+11.1}% {:>12}  {runner_up}",
        "",
        size.winner,
        size.key,
        size.margin * 100.0,
        over_runner_up
    );
    // The challenger's median: the winner's where it took the key, else the
    // runner-up's (the one the duel handed the key back from).
    let challenger_us = if size.winner == size.incumbent {
        size.runner_up
            .as_deref()
            .and_then(|r| k.variant(r))
            .and_then(|v| v.median_at(size.key))
    } else {
        Some(size.winner_us)
    };
    let medians = challenger_us.map(|c| (size.incumbent_us, c));
    if let Some(duel) = &size.duel {
        let _ = writeln!(
            out,
            "  {:<24} {}",
            "",
            duel_line(duel, k.min_margin, medians)
        );
    }
    if let Some(duel) = &size.confirmation {
        let line = duel_line(duel, k.min_margin, medians);
        let _ = writeln!(out, "  {:<24} again in a fresh worker: {line}", "");
    }
    out
}

/// `challenger vs incumbent 1.043x [1.031, 1.055] over 60 interleaved rounds: the
/// challenger's`: a duel at a key, with what it decided against `min_margin`, and
/// where its sides ran far from their `medians` (incumbent, challenger) at the key
/// ([`Duel::off_medians`]), by how much: such a duel timed other work (a table made
/// before the sweep put each key's own draw into the duel's case).
fn duel_line(duel: &Duel, min_margin: f64, medians: Option<(f64, f64)>) -> String {
    let verdict = match duel.verdict(min_margin) {
        DuelVerdict::Challenger => "the challenger's",
        DuelVerdict::Tie => "a tie, kept by the incumbent",
        DuelVerdict::Incumbent => "the incumbent's",
    };
    let off = medians
        .and_then(|(a, b)| duel.off_medians(a, b))
        .map_or_else(String::new, |(a, b)| {
            format!("; its sides ran {a:.2}x and {b:.2}x their medians: other work than they timed")
        });
    format!(
        "challenger vs incumbent {} (95% interval, spread ±{:.1}%): {verdict}{off}",
        duel.describe(),
        duel.spread * 100.0
    )
}

/// `nvcc per image: median 2.1 s, slowest 9.8 s (name), 12 images`, where the table
/// has them. Points that differ only in launch-only values share an image, whose
/// time the table records on the first of them.
fn compile_times(k: &KernelTable) -> Option<String> {
    let mut times: Vec<(f64, &str)> = k
        .variants
        .iter()
        .filter_map(|v| v.compile_s.map(|s| (s, v.name.as_str())))
        .collect();
    times.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (slowest, name) = *times.last()?;
    let median = times[times.len() / 2].0;
    Some(format!(
        "nvcc per image: median {median:.1} s, slowest {slowest:.1} s ({name}), {} images",
        times.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::tests::committed;
    use crate::testing::assert_contains;

    #[test]
    fn reports_each_range_with_its_margins_and_the_fingerprint() {
        let table = committed();
        let text = render("t.json", &table, Some("topk_indexer"));
        assert!(text.contains("NVIDIA H200 (sm_90, 132 SMs"));
        assert!(text.contains("topk_indexer: key `n_ctx`"));
        assert!(text.contains("with a fallback"));
        // Every fallback variant the table names at a timed key (as the fastest or
        // the runner-up) is named so in the report.
        let fallbacks: Vec<&str> = table.kernels["topk_indexer"]
            .sizes
            .iter()
            .flat_map(|s| [Some(s.winner.as_str()), s.runner_up.as_deref()])
            .flatten()
            .filter(|name| name.starts_with("fallback:"))
            .collect();
        assert!(
            !fallbacks.is_empty(),
            "the committed table names its fallback"
        );
        for name in fallbacks {
            assert!(text.contains(name), "{name} is not in:\n{text}");
        }
        assert!(text.contains("fingerprint: spec "), "{text}");
        assert!(
            text.contains("(kernels/topk.cu, kernels/ptx.cuh)"),
            "{text}"
        );
        assert!(!text.contains("gemm:"), "only the kernel asked for");
    }

    #[test]
    fn a_key_decided_in_interleaved_rounds_shows_its_interval_and_verdict() {
        let mut table = committed();
        let kernel = table.kernels.get_mut("rms_norm").unwrap();
        kernel.min_margin = 0.01;
        let incumbent = [100.0; 40];
        // Ratios 1.0000, 1.0004, ... 1.0156: the interval [1.0052, 1.0104] holds 1.01.
        let challenger: Vec<f64> = (0..40)
            .map(|i| 100.0 / (1.0 + 0.0004 * f64::from(i)))
            .collect();
        kernel.sizes[0].duel = Duel::from_rounds(&incumbent, &challenger);
        let text = render("t.json", &table, Some("rms_norm"));
        assert!(
            text.contains(
                "challenger vs incumbent 1.008x [1.005, 1.010] over 40 interleaved rounds"
            ) && text.contains("): a tie, kept by the incumbent"),
            "{text}"
        );
    }

    /// Issue 14: a range baking another variant than its key's fastest (a win
    /// under the noise keeps the incumbent) printed the fastest as if baked.
    #[test]
    fn each_range_line_names_what_is_baked_not_the_fastest() {
        let mut table = committed();
        let kernel = table.kernels.get_mut("rms_norm").unwrap();
        let size = kernel.sizes[0].clone();
        let other = kernel
            .variants
            .iter()
            .find(|v| v.rejected.is_none() && v.name != size.winner)
            .unwrap()
            .name
            .clone();
        let range = kernel
            .ranges
            .iter_mut()
            .find(|r| r.first <= size.key && size.key <= r.last)
            .unwrap();
        range.choice = other.clone();
        let first = range.first;
        let text = render("t.json", &table, Some("rms_norm"));
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{first}..")))
            .unwrap();
        // What tuning bought, in parentheses, names the incumbent it is over.
        let baked = line.split("  (").next().unwrap_or(line);
        assert!(baked.ends_with(&other), "{line}");
        assert!(!baked.contains(&size.winner), "{line}");
    }

    /// The vendor's own points: which launch each range runs, and the keys of its
    /// own sweep that decided it.
    #[test]
    fn the_vendor_s_plan_is_reported_with_its_keys() {
        let mut table = crate::testing::sample_table();
        assert!(!render("t.json", &table, None).contains("the vendor's own points"));
        let k = table.kernels.get_mut("k").unwrap();
        let point = crate::table::vendor_point_name("cuBLAS", &[3, 0]);
        k.vendor_plan = vec![
            KeyRange::new(0, 7, "vendor:cuBLAS".to_string()),
            KeyRange::new(8, u64::MAX, point.clone()),
        ];
        k.vendor_sizes = vec![SizeRecord {
            winner: point.clone(),
            incumbent: "vendor:cuBLAS".into(),
            margin: 0.084,
            ..k.sizes[0].clone()
        }];
        let text = render("t.json", &table, None);
        crate::testing::assert_contains(
            &text,
            &[
                "  the vendor's own points, swept against its default launch (the incumbent per range):\n  0..=7                    vendor:cuBLAS\n  8..                      vendor:cuBLAS@",
                "+8.4%",
            ],
        );
    }

    #[test]
    fn says_how_the_outputs_were_checked_where_recorded() {
        let mut table = committed();
        let kernel = table.kernels.get_mut("rms_norm").unwrap();
        kernel.check = Some("relative L2 <= 1e-5 only, no per-element bound".into());
        let text = render("t.json", &table, Some("rms_norm"));
        assert_contains(
            &text,
            &["  checked: relative L2 <= 1e-5 only, no per-element bound\n"],
        );
    }

    #[test]
    fn the_sweep_by_phase_is_printed_where_recorded() {
        let mut table = committed();
        let kernel = table.kernels.get_mut("rms_norm").unwrap();
        kernel.seconds.phases = None;
        assert!(!render("t.json", &table, Some("rms_norm")).contains("sweep by phase"));
        let kernel = table.kernels.get_mut("rms_norm").unwrap();
        kernel.seconds.phases = Some(crate::phases::Phases {
            inputs: 1.0,
            reference: 0.5,
            check: 1.5,
            time: 6.0,
            probe: 1.0,
        });
        let text = render("t.json", &table, Some("rms_norm"));
        assert_contains(
            &text,
            &[
                "  sweep by phase: inputs 1.0 s, reference 0.5 s, check 1.5 s, timing 6.0 s, \
               probe above 1.0 s; the gate (reference + check) 20% of it\n",
            ],
        );
    }

    #[test]
    fn compile_times_are_summarised_where_recorded() {
        let mut table = committed();
        let kernel = table.kernels.get_mut("rms_norm").unwrap();
        for v in &mut kernel.variants {
            v.compile_s = None;
        }
        assert!(!render("t.json", &table, Some("rms_norm")).contains("nvcc per image"));
        let kernel = table.kernels.get_mut("rms_norm").unwrap();
        for (i, v) in kernel.variants.iter_mut().enumerate() {
            v.compile_s = Some(1.0 + i as f64);
        }
        let slowest = kernel.variants.last().unwrap().name.clone();
        let text = render("t.json", &table, Some("rms_norm"));
        assert!(
            text.contains(&format!(
                "nvcc per image: median 5.0 s, slowest 9.0 s ({slowest}), 9 images"
            )),
            "{text}"
        );
    }
}
