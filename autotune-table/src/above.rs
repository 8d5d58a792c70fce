//! How a table decided the keys above the largest declared size, and the sentence
//! the report, the baked plan and `selection()` say it with.

use serde::{Deserialize, Serialize};

/// Keys above the largest declared size (the top): what the sweep timed there and
/// who owns them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AboveRecord {
    /// The attribute's rule: `measure`, `extend` or `incumbent`.
    pub rule: String,
    /// The largest declared size.
    pub top: u64,
    /// The key timed past the top (twice it), when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<u64>,
    /// Whether the pick at the largest measured key owns every larger key.
    pub extends: bool,
    /// Why nothing decided the keys above the top by measurement, when the rule
    /// asked for it (out of memory there, the key type too small, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl AboveRecord {
    /// The largest key any variant was timed at.
    pub fn measured_to(&self) -> u64 {
        self.probe.unwrap_or(self.top)
    }
}

/// One line on the keys above the measured ones, for a plan whose largest declared
/// size is `top` (`above` is `None` for tables from before the rule existed).
pub fn describe(above: Option<&AboveRecord>, key: &str, top: u64) -> String {
    let Some(above) = above else {
        return format!(
            "measured up to {key}={top}; above it, the incumbent (not measured past it)"
        );
    };
    let measured = above.measured_to();
    let why = above
        .note
        .as_deref()
        .map(|n| format!(": {n}"))
        .unwrap_or_default();
    match (above.extends, above.rule.as_str()) {
        (true, "extend") => format!(
            "measured up to {key}={measured}; above it, the pick there (extrapolated, as the \
             attribute states)"
        ),
        (true, _) => format!(
            "measured up to {key}={measured} (twice the largest size); above it, the pick there \
             (extrapolated)"
        ),
        (false, "incumbent") => format!(
            "measured up to {key}={measured}; above it, the incumbent (as the attribute states)"
        ),
        (false, _) if above.probe.is_some() => format!(
            "measured up to {key}={measured} (twice the largest size); above it, the incumbent, \
             which won there"
        ),
        (false, _) => format!("measured up to {key}={measured}; above it, the incumbent{why}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(rule: &str, probe: Option<u64>, extends: bool, note: Option<&str>) -> AboveRecord {
        AboveRecord {
            rule: rule.into(),
            top: 8192,
            probe,
            extends,
            note: note.map(String::from),
        }
    }

    #[test]
    fn each_outcome_says_what_was_measured_and_who_owns_the_rest() {
        let line = |r: Option<&AboveRecord>| describe(r, "m", 8192);
        assert_eq!(
            line(Some(&record("measure", Some(16384), true, None))),
            "measured up to m=16384 (twice the largest size); above it, the pick there (extrapolated)"
        );
        assert!(
            line(Some(&record("measure", Some(16384), false, None))).ends_with("which won there")
        );
        assert!(line(Some(&record("extend", None, true, None))).contains("m=8192"));
        assert!(
            line(Some(&record(
                "measure",
                None,
                false,
                Some("out of memory at m=16384")
            )))
            .ends_with("the incumbent: out of memory at m=16384")
        );
        assert!(line(None).contains("not measured past it"));
    }

    #[test]
    fn it_round_trips_through_json_and_omits_what_is_absent() {
        let r = record("measure", Some(16384), true, None);
        let text = serde_json::to_string(&r).unwrap();
        assert!(!text.contains("note"), "{text}");
        assert_eq!(serde_json::from_str::<AboveRecord>(&text).unwrap(), r);
    }
}
