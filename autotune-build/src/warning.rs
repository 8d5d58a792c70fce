//! The build's one cargo warning, rendered from its outcome ([`of`] a
//! [`BuildSummary`]): a single line of at most [`MAX_CHARS`] characters, problems
//! first, each reason said once. The whole account (every kernel's plans and every
//! table skipped, with the reason) is the same summary, which `cargo autotune
//! check` prints.

use std::collections::BTreeMap;

use autotune_table::shown;
use autotune_table::summary::{BuildSummary, KernelSummary};

/// The longest warning line, in characters (after `autotune: `).
pub const MAX_CHARS: usize = 200;

/// What ends a part that had to be cut inside (one longer than the whole line).
const CUT: &str = "… (cargo autotune check)";

/// The warning of a build whose outcome is `summary`: its notes (problems and
/// what tuning did), then what was baked.
pub fn of(summary: &BuildSummary) -> String {
    let parts: Vec<String> = summary
        .notes
        .iter()
        .map(ToString::to_string)
        .chain(baked(&summary.kernels))
        .collect();
    line(&parts)
}

/// What was baked, compactly: kernels with a tuned plan grouped by the tables
/// they came from (`baked gemm, rms_norm from kernels/tuning/nvidia-h200.json`),
/// then each kernel without one with its account: why each table was skipped and
/// what runs (`scale: tuning/x.json is stale for ...; defaults (block=128)`).
pub fn baked(kernels: &[KernelSummary]) -> Vec<String> {
    let mut by_tables: BTreeMap<Vec<&str>, Vec<&str>> = BTreeMap::new();
    let mut parts = Vec::new();
    for kernel in kernels {
        if kernel.plans.is_empty() {
            parts.push(kernel.account());
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
    use autotune_table::summary::{BakedPlan, Note, SkippedTable, TuningOutcome, WithoutPlan};

    fn kernel(name: &str, table: Option<&str>) -> KernelSummary {
        KernelSummary {
            name: name.into(),
            plans: table
                .map(|t| BakedPlan {
                    table: t.into(),
                    gpu: autotune_table::testing::h200(),
                    tuned_on: "2026-12-01".into(),
                    shape: String::new(),
                })
                .into_iter()
                .collect(),
            skipped: match table {
                Some(_) => Vec::new(),
                None => vec![SkippedTable {
                    table: "tuning/x.json".into(),
                    reason: "is stale".into(),
                }],
            },
            default: "block=128".into(),
            incumbent: None,
            without_plan: table.is_none().then_some(WithoutPlan::TablesSkipped),
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
        assert_eq!(
            baked(&kernels).join("; "),
            "baked gemm, rms_norm from kernels/tuning/nvidia-h200.json; \
             scale: tuning/x.json is stale; defaults (block=128)"
        );
    }

    /// Issue 47: the warning, `summary.json` and `check` each rebuilt the story
    /// from strings. The warning is now a function of the typed outcome alone:
    /// the same summary, read back from its JSON, gives the same line, and each
    /// part of the line is a note's or a kernel's own rendering.
    #[test]
    fn the_warning_is_rendered_from_the_typed_outcome() {
        let summary = BuildSummary {
            format: autotune_table::summary::SUMMARY_FORMAT,
            package: "k 0.1.0".into(),
            nvcc: None,
            nvcc_missing: Some("nvcc not found".into()),
            gpu: None,
            gpu_missing: Some("no CUDA driver".into()),
            tuning: Some(TuningOutcome::NothingTuned {
                reason: "no CUDA driver".into(),
            }),
            kernels: vec![kernel("scale", None)],
            notes: vec![
                Note::Tuning {
                    outcome: TuningOutcome::NothingTuned {
                        reason: "no CUDA driver".into(),
                    },
                },
                Note::NoBinaries {
                    reason: "nvcc not found".into(),
                    nothing_tuned: false,
                    precompiled_others: false,
                },
            ],
        };
        let text = of(&summary);
        assert_eq!(
            text,
            "nothing tuned: no CUDA driver; nvcc not found: no binaries, load() will fail; \
             scale: tuning/x.json is stale; defaults (block=128)"
        );
        let json = serde_json::to_string(&summary).unwrap_or_default();
        let back: BuildSummary = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, summary);
        assert_eq!(of(&back), text);
        assert!(json.contains(r#""kind":"no_binaries""#), "{json}");
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
