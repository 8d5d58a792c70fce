//! The build's one cargo warning: a single line of at most [`MAX_CHARS`]
//! characters, problems first, each reason said once. The whole account (every
//! kernel's plans and every table skipped, with the reason) is the summary's
//! `notes`, which `cargo autotune check` prints.

use std::collections::BTreeMap;

use autotune_table::shown;
use autotune_table::summary::KernelSummary;

/// The longest warning line, in characters (after `autotune: `).
pub const MAX_CHARS: usize = 200;

/// What ends a part that had to be cut inside (one longer than the whole line).
const CUT: &str = "… (cargo autotune check)";

/// What was baked, compactly: kernels with a tuned plan grouped by the tables
/// they came from (`baked gemm, rms_norm from kernels/tuning/nvidia-h200.json`),
/// then each kernel that got its defaults with the first reason a table was not
/// used (`scale: defaults (block=128): tuning/x.json is stale for ...`).
pub fn baked(kernels: &[KernelSummary], lines: &[String]) -> Vec<String> {
    let mut by_tables: BTreeMap<Vec<&str>, Vec<&str>> = BTreeMap::new();
    let mut parts = Vec::new();
    for (kernel, line) in kernels.iter().zip(lines) {
        if kernel.plans.is_empty() {
            // The bake's own line: `scale: <why a table was skipped>; defaults (...)`.
            parts.push(line.clone());
        } else {
            let mut tables: Vec<&str> = kernel.plans.iter().map(|p| p.table.as_str()).collect();
            tables.dedup();
            by_tables
                .entry(tables)
                .or_default()
                .push(kernel.name.as_str());
        }
    }
    let mut tuned: Vec<String> = by_tables
        .into_iter()
        .map(|(tables, names)| {
            let names = if names.join(", ").chars().count() > 60 {
                format!("{} kernels", names.len())
            } else {
                names.join(", ")
            };
            format!("baked {names} from {}", tables.join(", "))
        })
        .collect();
    tuned.append(&mut parts);
    tuned
}

/// The warning: `parts` (problems first, then what was baked, a part per kernel
/// or group of kernels) joined, without a part that repeats an earlier one, in
/// one line of printable characters of at most [`MAX_CHARS`]: cut between parts,
/// never inside one, the rest counted (`; and 2 more: cargo autotune check`).
pub fn line(parts: &[String]) -> String {
    let mut kept: Vec<String> = Vec::new();
    for part in parts {
        // One line of visible characters (`shown::line`): what may follow
        // `cargo::warning=` without starting a directive of its own.
        let part = shown::line(part.trim());
        if !part.is_empty() && !kept.iter().any(|k| k.contains(&part)) {
            kept.push(part);
        }
    }
    fit(&kept, MAX_CHARS)
}

/// The most whole `parts` that fit `max` characters with the count of the rest
/// (`; and 2 more: cargo autotune check`). Where the next part would not fit
/// whole, as much of it as fits is kept, cut between two words (never inside one)
/// and marked `…`, so that the line still says why the first kernel got what it
/// got; the count then includes that part.
fn fit(parts: &[String], max: usize) -> String {
    let whole = parts.join("; ");
    if whole.chars().count() <= max {
        return whole;
    }
    let tail = |rest: usize| format!("; and {rest} more: cargo autotune check");
    let mut keep = 0;
    while keep < parts.len() {
        let head = parts[..=keep].join("; ");
        if head.chars().count() + tail(parts.len() - keep - 1).chars().count() > max {
            break;
        }
        keep += 1;
    }
    let head = parts[..keep].join("; ");
    let rest = parts.len() - keep;
    let room = max.saturating_sub(head.chars().count() + tail(rest).chars().count() + 3);
    let partial = parts.get(keep).and_then(|next| {
        let words: String = next.chars().take(room).collect();
        let cut_at = words.rfind(' ')?;
        (cut_at >= 20).then(|| format!("{}…", words[..cut_at].trim_end()))
    });
    let shown: Vec<String> = parts[..keep].iter().cloned().chain(partial).collect();
    if shown.is_empty() {
        return cut(&whole, max);
    }
    shown.join("; ") + &tail(rest)
}

/// `text`, or its first characters and [`CUT`], in at most `max` characters.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let keep = max.saturating_sub(CUT.chars().count());
    let head: String = text.chars().take(keep).collect();
    format!("{}{CUT}", head.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;
    use autotune_table::summary::BakedPlan;

    fn kernel(name: &str, table: Option<&str>) -> KernelSummary {
        KernelSummary {
            name: name.into(),
            plans: table
                .map(|t| BakedPlan {
                    table: t.into(),
                    gpu: autotune_table::testing::h200(),
                    tuned_on: "2026-12-01".into(),
                })
                .into_iter()
                .collect(),
            skipped: Vec::new(),
            default: "block=128".into(),
            compiled: false,
        }
    }

    #[test]
    fn tuned_kernels_are_grouped_by_table_and_defaults_keep_their_reason() {
        let kernels = [
            kernel("gemm", Some("kernels/tuning/nvidia-h200.json")),
            kernel("scale", None),
            kernel("rms_norm", Some("kernels/tuning/nvidia-h200.json")),
        ];
        let lines = [
            "gemm: tuned for NVIDIA H200 at n=4096,k=4096 | n=8192,k=8192 on 2026-12-01".into(),
            "scale: tuning/x.json is stale; defaults (block=128)".into(),
            "rms_norm: tuned".into(),
        ];
        assert_eq!(
            baked(&kernels, &lines).join("; "),
            "baked gemm, rms_norm from kernels/tuning/nvidia-h200.json; \
             scale: tuning/x.json is stale; defaults (block=128)"
        );
    }

    #[test]
    fn the_line_is_short_printable_and_says_each_reason_once() {
        let nvcc = "nvcc not found: set NVCC or CUDA_PATH, or put nvcc on PATH".to_string();
        let long = "x".repeat(400);
        let text = line(&[
            nvcc.clone(),
            nvcc.clone(),
            "a\nnewline".into(),
            long.clone(),
        ]);
        assert!(text.chars().count() <= MAX_CHARS, "{text}");
        assert_eq!(text.matches("nvcc not found").count(), 1, "{text}");
        assert!(text.contains("a\\u{a}newline"), "{text}");
        assert!(
            text.ends_with("; and 1 more: cargo autotune check"),
            "{text}"
        );
        assert_eq!(line(&["short".into()]), "short");
        // Issue 49: the line was cut mid-word (`softmax_candle: defa…`); it is cut
        // between kernels now, the rest counted.
        let kernels: Vec<String> = (0..9)
            .map(|i| format!("softmax_candle_{i}: defaults (threads=32): no table for this GPU"))
            .collect();
        let text = line(&kernels);
        assert!(text.chars().count() <= MAX_CHARS, "{text}");
        assert!(
            text.ends_with("; and 7 more: cargo autotune check"),
            "{text}"
        );
        assert!(
            text.starts_with(&kernels[0]) && text.contains(&kernels[1]),
            "{text}"
        );
        // Whatever is cut is cut between words: every word shown is whole.
        let words: Vec<&str> = kernels.iter().flat_map(|k| k.split(' ')).collect();
        let shown = text.split("; and ").next().unwrap_or_default();
        for word in shown.split([' ', ';']).filter(|w| !w.is_empty()) {
            let word = word.trim_end_matches('…');
            assert!(words.contains(&word), "{word:?} in {text}");
        }
        // One part longer than the line is cut inside, said.
        assert!(line(&[long]).ends_with(CUT));
    }
}
