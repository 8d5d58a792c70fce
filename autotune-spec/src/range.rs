//! [`KeyRange`]: one range of the key and what it holds, the one form of a range
//! from the decision rule (`KeyRange<usize>`, a candidate's index) through the
//! tables (`KeyRange<String>`, a variant's name) to the generated dispatch
//! (`KeyRange<Choice>`).

use std::fmt;

/// `first..=last` of the key goes to `choice`. In a table file the choice is the
/// field `variant` (a variant's name, or `fallback`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct KeyRange<C> {
    pub first: u64,
    /// Inclusive; `u64::MAX` for the range that runs to the end.
    pub last: u64,
    #[cfg_attr(feature = "serde", serde(rename = "variant"))]
    pub choice: C,
}

impl<C> KeyRange<C> {
    pub const fn new(first: u64, last: u64, choice: C) -> Self {
        Self {
            first,
            last,
            choice,
        }
    }

    pub fn contains(&self, key: u64) -> bool {
        self.first <= key && key <= self.last
    }

    /// The same range holding `f(choice)`.
    pub fn map<D>(self, f: impl FnOnce(C) -> D) -> KeyRange<D> {
        KeyRange::new(self.first, self.last, f(self.choice))
    }

    /// The same range holding a reference to its choice.
    pub fn as_ref(&self) -> KeyRange<&C> {
        KeyRange::new(self.first, self.last, &self.choice)
    }

    /// `first..=last`, or `first..` for the range that runs to the end.
    pub fn span(&self) -> Span {
        Span {
            first: self.first,
            last: self.last,
        }
    }
}

/// A range's keys as Rust writes them: `first..=last`, or `first..` to the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    first: u64,
    last: u64,
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Padded as a string is (`{:<24}`), for the columns of a report.
        if self.last == u64::MAX {
            f.pad(&format!("{}..", self.first))
        } else {
            f.pad(&format!("{}..={}", self.first, self.last))
        }
    }
}

/// Appends `first..=last` holding `choice` to `ranges`, merged into the last range
/// when that holds the same choice (the ranges being consecutive).
pub fn push_merged<C: PartialEq>(ranges: &mut Vec<KeyRange<C>>, first: u64, last: u64, choice: C) {
    match ranges.last_mut() {
        Some(previous) if previous.choice == choice => previous.last = last,
        _ => ranges.push(KeyRange::new(first, last, choice)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_reads_as_rust_and_the_last_range_runs_to_the_end() {
        assert_eq!(KeyRange::new(0, 99, 1).span().to_string(), "0..=99");
        assert_eq!(KeyRange::new(100, u64::MAX, 2).span().to_string(), "100..");
        assert_eq!(format!("{:<6}|", KeyRange::new(1, 2, 0).span()), "1..=2 |");
        assert!(KeyRange::new(100, u64::MAX, 2).contains(u64::MAX));
        assert!(!KeyRange::new(0, 99, 1).contains(100));
    }

    #[test]
    fn pushing_the_same_choice_extends_the_last_range() {
        let mut ranges = Vec::new();
        push_merged(&mut ranges, 0, 9, "a");
        push_merged(&mut ranges, 10, 19, "a");
        push_merged(&mut ranges, 20, u64::MAX, "b");
        assert_eq!(
            ranges,
            [KeyRange::new(0, 19, "a"), KeyRange::new(20, u64::MAX, "b")]
        );
    }
}
