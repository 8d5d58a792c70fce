//! What a sweep checked off its timed grid: each baked variant at keys of the
//! ranges it serves that no tile divides (a range's ends, seeded primes inside it),
//! so that a variant wrong only in the tail of the key dimension is not baked for
//! the sizes where it is wrong. The record and the line the report prints.

use serde::{Deserialize, Serialize};

/// The checks off the timed grid of one table entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OffGridRecord {
    /// The seed the keys inside each range were drawn from (the sweep's own).
    pub seed: u64,
    /// Every check, in the order run: the variant, the key, what came of it.
    pub checks: Vec<OffGridCheck>,
    /// Seconds the checks took, cases and references included.
    pub seconds: f64,
}

/// One variant checked at one key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OffGridCheck {
    pub key: u64,
    pub variant: String,
    pub outcome: OffGridOutcome,
}

/// What one check off the grid found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OffGridOutcome {
    /// Right there, checked as the gate checks a winner (memory, alternates, draws).
    Right,
    /// Wrong there: the variant is out for the whole kernel.
    Wrong { reason: String },
    /// Not checked there: the case could not be built (out of memory, say) or the
    /// wrapper refuses the key's arguments (and so would dispatch).
    NotChecked { reason: String },
    /// Not checked there: the variant was already out, wrong at another key or in
    /// the gate, so it is baked nowhere and a check would decide nothing.
    AlreadyOut { reason: String },
}

impl OffGridRecord {
    /// `checked off the grid at n=1 (v=1), 1031 (v=1), ...: 9 right, 1 wrong (v=8
    /// at n=1031); seed 7, 0.4 s`.
    pub fn describe(&self, key: &str) -> String {
        let keys: Vec<String> = self
            .checks
            .iter()
            .map(|c| format!("{} ({})", c.key, c.variant))
            .collect();
        let count =
            |f: fn(&OffGridOutcome) -> bool| self.checks.iter().filter(|c| f(&c.outcome)).count();
        let right = count(|o| matches!(o, OffGridOutcome::Right));
        let mut tally = format!("{right} right");
        let wrong: Vec<String> = self
            .checks
            .iter()
            .filter(|c| matches!(c.outcome, OffGridOutcome::Wrong { .. }))
            .map(|c| format!("{} at {key}={}", c.variant, c.key))
            .collect();
        if !wrong.is_empty() {
            tally.push_str(&format!(", {} wrong ({})", wrong.len(), wrong.join(", ")));
        }
        let skipped = count(|o| matches!(o, OffGridOutcome::NotChecked { .. }));
        if skipped > 0 {
            tally.push_str(&format!(
                ", {skipped} not checked (no case, or refused arguments)"
            ));
        }
        let out = count(|o| matches!(o, OffGridOutcome::AlreadyOut { .. }));
        if out > 0 {
            tally.push_str(&format!(", {out} not needed (the variant was out already)"));
        }
        format!(
            "checked off the grid at {key}={}: {tally}; seed {}, {:.1} s",
            keys.join(", "),
            self.seed,
            self.seconds
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_every_key_and_every_wrong_variant() {
        let check = |key, variant: &str, outcome| OffGridCheck {
            key,
            variant: variant.into(),
            outcome,
        };
        let record = OffGridRecord {
            seed: 7,
            checks: vec![
                check(
                    1031,
                    "v=8",
                    OffGridOutcome::Wrong {
                        reason: "relative error 1".into(),
                    },
                ),
                check(1, "v=1", OffGridOutcome::Right),
                check(1031, "v=1", OffGridOutcome::Right),
                check(
                    1 << 40,
                    "v=1",
                    OffGridOutcome::NotChecked {
                        reason: "out of memory".into(),
                    },
                ),
                check(
                    1 << 40,
                    "v=8",
                    OffGridOutcome::AlreadyOut {
                        reason: "relative error 1".into(),
                    },
                ),
            ],
            seconds: 0.42,
        };
        assert_eq!(
            record.describe("n"),
            "checked off the grid at n=1031 (v=8), 1 (v=1), 1031 (v=1), 1099511627776 (v=1), \
             1099511627776 (v=8): 2 right, 1 wrong (v=8 at n=1031), 1 not checked (no case, \
             or refused arguments), 1 not needed (the variant was out already); seed 7, 0.4 s"
        );
        let text = serde_json::to_string(&record).unwrap_or_default();
        assert!(text.contains("\"outcome\":\"right\""), "{text}");
        assert!(
            text.contains("{\"wrong\":{\"reason\":\"relative error 1\"}}"),
            "{text}"
        );
    }
}
