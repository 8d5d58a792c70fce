//! Keep or revert, per range, for a kernel's candidate sources (`source = [old,
//! new, ...]`): what `cargo autotune judge` decides from a table tuned with them.
//!
//! A range is kept for a candidate when the table bakes one of its variants there,
//! which the sweep allows only where it beat the incumbent source's best by more
//! than the margin and the noise (`ranges::decide_with_candidates`). Everywhere
//! else the verdict is revert, with the reason: every candidate variant failed (the
//! stages and first reasons), or its best was slower, or faster by less than the
//! noise, at the keys timed in that range.

use serde::{Deserialize, Serialize};

use autotune_table::table::{KernelTable, KeyRange, VariantRecord};

/// One range of the key and what to do there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RangeVerdict {
    pub first: u64,
    pub last: u64,
    /// `keep` (a candidate owns it) or `revert`.
    pub verdict: String,
    /// The variant the table bakes there.
    pub owner: String,
    /// Why, in one line.
    pub reason: String,
}

/// The judge's answer for one kernel's candidates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    pub kernel: String,
    /// Whether any range keeps a candidate.
    pub keep: bool,
    pub ranges: Vec<RangeVerdict>,
    /// Candidate variants that failed, `name: stage: reason`.
    pub rejected: Vec<String>,
}

/// The journal of verdicts, one JSON [`JournalEntry`] a line, beside the tables.
pub const JOURNAL_FILE: &str = "judge-journal.jsonl";

/// One verdict as the journal keeps it: what was judged (the sources' digest, so a
/// rejected idea is recognised when it comes back) and the answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    pub tuned_on: String,
    /// The files nvcc read for the kernel: its sources, the candidates among them.
    pub sources: Vec<String>,
    pub sources_sha256: String,
    pub wrapper_sha256: String,
    pub judgement: Judgement,
}

impl JournalEntry {
    pub fn new(judgement: Judgement, entry: &KernelTable) -> Self {
        Self {
            tuned_on: entry.tuned_on.clone(),
            sources: entry.fingerprint.sources.clone(),
            sources_sha256: entry.fingerprint.sources_sha256.clone(),
            wrapper_sha256: entry.fingerprint.wrapper_sha256.clone(),
            judgement,
        }
    }

    /// One Markdown line: when, what, the answer and its first reason.
    pub fn summary(&self) -> String {
        let answer = if self.judgement.keep {
            "keep"
        } else {
            "revert"
        };
        let why = self
            .judgement
            .ranges
            .iter()
            .find(|r| r.verdict == answer)
            .map(|r| r.reason.as_str())
            .or(self.judgement.rejected.first().map(String::as_str))
            .unwrap_or("");
        let digest: String = self.sources_sha256.chars().take(12).collect();
        format!(
            "{}: {answer} ({}, sources {digest}…): {why}",
            self.tuned_on,
            self.sources.join(", ")
        )
    }
}

/// The journal at `path`, oldest first; lines that do not parse are skipped.
pub fn read_journal(path: &std::path::Path) -> Vec<JournalEntry> {
    use autotune_spec::guarded::read;
    read::read_to_string(path, 1 << 30)
        .map(|text| {
            text.lines()
                .filter_map(|line| serde_json::from_str(line).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The source index of a variant named `source=N,...` (`None` without sources).
pub fn source_index(name: &str) -> Option<u32> {
    name.strip_prefix("source=")?
        .split(',')
        .next()?
        .parse()
        .ok()
}

fn is_candidate(variant: &VariantRecord) -> bool {
    source_index(&variant.name).is_some_and(|index| index > 0)
}

/// A kernel whose table holds no candidate variants to judge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{kernel}` has no candidate variants in this table: list the candidate in its \
     attribute (`source = [\"old.cu\", \"new.cu\"]`) and tune it"
)]
pub struct NoCandidates {
    pub kernel: String,
}

/// Judges the candidate variants of `kernel` (named `source=N,...`, N >= 1).
pub fn judge(name: &str, kernel: &KernelTable) -> Result<Judgement, NoCandidates> {
    let candidates: Vec<&VariantRecord> =
        kernel.variants.iter().filter(|v| is_candidate(v)).collect();
    if candidates.is_empty() {
        return Err(NoCandidates {
            kernel: name.to_string(),
        });
    }
    let rejected: Vec<String> = candidates
        .iter()
        .filter_map(|v| v.rejected.as_ref().map(|r| format!("{}: {r}", v.name)))
        .collect();
    let valid: Vec<&&VariantRecord> = candidates.iter().filter(|v| v.rejected.is_none()).collect();
    let mut ranges = Vec::new();
    for range in &kernel.ranges {
        let owner = kernel.variants.iter().find(|v| v.name == range.choice);
        if owner.is_some_and(is_candidate) {
            let won: Vec<String> = kernel
                .sizes_in(range)
                .into_iter()
                .filter(|s| s.winner == range.choice)
                .map(|s| {
                    format!(
                        "{}={}: {:.1}% faster than {} (noise {:.1}%)",
                        kernel.key,
                        s.key,
                        s.margin * 100.0,
                        s.incumbent,
                        s.noise * 100.0
                    )
                })
                .collect();
            ranges.push(RangeVerdict {
                first: range.first,
                last: range.last,
                verdict: "keep".into(),
                owner: range.choice.clone(),
                reason: if won.is_empty() {
                    "the candidate owns it (no key timed inside)".into()
                } else {
                    won.join("; ")
                },
            });
            continue;
        }
        let reason = if valid.is_empty() {
            format!(
                "every candidate variant failed ({} of them)",
                candidates.len()
            )
        } else {
            why_reverted(kernel, range)
        };
        ranges.push(RangeVerdict {
            first: range.first,
            last: range.last,
            verdict: "revert".into(),
            owner: range.choice.clone(),
            reason,
        });
    }
    Ok(Judgement {
        kernel: name.to_string(),
        keep: ranges.iter().any(|r| r.verdict == "keep"),
        ranges,
        rejected,
    })
}

/// Why a range the candidates do not own reverts: at each key timed inside it,
/// the best valid candidate was slower than the range's owner, or faster by less
/// than the noise or the margin.
fn why_reverted(kernel: &KernelTable, range: &KeyRange<String>) -> String {
    let keys: Vec<String> = kernel
        .sizes_in(range)
        .into_iter()
        .filter_map(|s| {
            let owner_us = kernel
                .variant(&range.choice)
                .and_then(|v| v.median_at(s.key))
                .unwrap_or(s.winner_us);
            let (best, us) =
                kernel.fastest_at(s.key, |v| is_candidate(v) && v.rejected.is_none())?;
            let best = &best.name;
            let change = us / owner_us - 1.0;
            Some(if change >= 0.0 {
                format!(
                    "{}={}: slower, {best} {:+.1}%",
                    kernel.key,
                    s.key,
                    change * 100.0
                )
            } else {
                format!(
                    "{}={}: {best} {:+.1}%, within the noise ({:.1}%) or the margin ({:.1}%)",
                    kernel.key,
                    s.key,
                    change * 100.0,
                    s.noise * 100.0,
                    kernel.min_margin * 100.0
                )
            })
        })
        .collect();
    if keys.is_empty() {
        "no candidate was timed here".to_string()
    } else {
        keys.join("; ")
    }
}

impl Judgement {
    /// One line per range, then the failed candidate variants.
    pub fn render(&self, key: &str) -> String {
        let mut out = format!(
            "{}: {}\n",
            self.kernel,
            if self.keep {
                "keep the candidate where it wins"
            } else {
                "revert the candidate"
            }
        );
        for r in &self.ranges {
            let span = if r.last == u64::MAX {
                format!("{key} >= {}", r.first)
            } else {
                format!("{key} in {}..={}", r.first, r.last)
            };
            out.push_str(&format!(
                "  {span:<28} {:<6} {}: {}\n",
                r.verdict, r.owner, r.reason
            ));
        }
        for line in &self.rejected {
            out.push_str(&format!("  failed: {line}\n"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autotune_table::table::{KeyRange, Rejection, Role, SizeRecord, Stage};

    fn variant(name: &str, times: &[(u64, f64)], rejected: Option<&str>) -> VariantRecord {
        VariantRecord {
            name: name.into(),
            values: vec![source_index(name).unwrap_or(0), 1],
            role: Role::Tuned,
            resources: None,
            compile_s: None,
            rejected: rejected.map(|reason| Rejection {
                stage: Stage::WrongResult,
                reason: reason.into(),
            }),
            measurements: times
                .iter()
                .map(|&(key, median_us)| {
                    autotune_table::testing::measurement(key, median_us, median_us, median_us)
                })
                .collect(),
        }
    }

    fn size(
        key: u64,
        winner: &str,
        winner_us: f64,
        incumbent: &str,
        incumbent_us: f64,
    ) -> SizeRecord {
        SizeRecord {
            key,
            winner: winner.into(),
            winner_us,
            incumbent: incumbent.into(),
            incumbent_us,
            margin: incumbent_us / winner_us - 1.0,
            noise: 0.01,
            runner_up: None,
            refinement: false,
            duel: None,
            confirmation: None,
        }
    }

    /// The candidate (source=1) wins at 64k and loses at 1k.
    fn tuned() -> KernelTable {
        let mut k = autotune_table::testing::sample_table().kernels["k"].clone();
        k.key = "n".into();
        k.variants = vec![
            variant("source=0,b=1", &[(1024, 10.0), (65536, 100.0)], None),
            variant("source=1,b=1", &[(1024, 12.0), (65536, 80.0)], None),
        ];
        k.sizes = vec![
            size(1024, "source=0,b=1", 10.0, "source=0,b=1", 10.0),
            size(65536, "source=1,b=1", 80.0, "source=0,b=1", 100.0),
        ];
        k.ranges = vec![
            KeyRange {
                first: 0,
                last: 8191,
                choice: "source=0,b=1".into(),
            },
            KeyRange {
                first: 8192,
                last: u64::MAX,
                choice: "source=1,b=1".into(),
            },
        ];
        k
    }

    #[test]
    fn keeps_the_ranges_a_candidate_owns_and_says_why_elsewhere() {
        let j = judge("k", &tuned()).unwrap();
        assert!(j.keep);
        assert_eq!(j.ranges[0].verdict, "revert");
        assert!(
            j.ranges[0]
                .reason
                .contains("n=1024: slower, source=1,b=1 +20.0%"),
            "{j:?}"
        );
        assert_eq!(j.ranges[1].verdict, "keep");
        assert!(
            j.ranges[1]
                .reason
                .contains("25.0% faster than source=0,b=1"),
            "{j:?}"
        );
        let text = j.render("n");
        assert!(text.contains("n >= 8192"), "{text}");
    }

    #[test]
    fn a_wrong_candidate_is_reverted_everywhere_with_its_reason() {
        let mut k = tuned();
        k.variants[1].rejected = Some(Rejection {
            stage: Stage::WrongResult,
            reason: "element error 2.0e0 > 2e-2 at n=65536".into(),
        });
        k.ranges = vec![KeyRange {
            first: 0,
            last: u64::MAX,
            choice: "source=0,b=1".into(),
        }];
        let j = judge("k", &k).unwrap();
        assert!(!j.keep);
        assert!(
            j.ranges[0]
                .reason
                .contains("every candidate variant failed"),
            "{j:?}"
        );
        assert_eq!(
            j.rejected,
            ["source=1,b=1: WrongResult: element error 2.0e0 > 2e-2 at n=65536"]
        );
        let round_trip: Judgement =
            serde_json::from_str(&serde_json::to_string(&j).unwrap()).unwrap();
        assert_eq!(round_trip, j);
    }

    #[test]
    fn the_journal_round_trips_and_skips_what_it_cannot_read() {
        let entry = tuned();
        let line = JournalEntry::new(judge("k", &entry).unwrap(), &entry);
        let dir = autotune_table::testing::scratch("journal");
        let path = dir.join(JOURNAL_FILE);
        let text = format!("{}\nnot json\n", serde_json::to_string(&line).unwrap());
        std::fs::write(&path, text).unwrap();
        let read = read_journal(&path);
        assert_eq!(read, [line]);
        assert!(
            read[0].summary().contains(": keep ("),
            "{}",
            read[0].summary()
        );
        assert!(read_journal(&dir.join("none.jsonl")).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_kernel_without_candidates_is_an_error() {
        let k = autotune_table::testing::sample_table().kernels["k"].clone();
        assert_eq!(
            judge("k", &k).map(|_| ()),
            Err(NoCandidates { kernel: "k".into() })
        );
        assert_eq!(source_index("source=2,block=64"), Some(2));
        assert_eq!(source_index("block=64"), None);
    }
}
