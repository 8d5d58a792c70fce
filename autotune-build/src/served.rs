//! What a sweep's decisions serve: the keys above the largest declared size
//! ([`Beyond`], the table's [`AboveRecord`]) and the variant each range of the key
//! runs ([`served`]), as the table entry bakes them. The sweep checks the variants
//! off its grid where they are served; the entry is written from the same ranges.

use autotune_runtime::KernelSpec;
use autotune_runtime::spec::Above;
use autotune_spec::KeyRange;
use autotune_table::above::AboveRecord;
use autotune_table::ranges::{self, Decision};
use autotune_table::table::Rejection;

/// What the sweep did above the largest declared size (see [`Above`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Beyond {
    /// Nothing: the attribute says `above = extend` or `above = incumbent`.
    NotAsked,
    /// The incumbent owns the largest size, and so every key above it.
    IncumbentOwnsTop,
    /// The top's pick and the incumbent were timed at `key`, twice the top.
    Probed { key: u64 },
    /// They could not be timed at `key`: why (out of memory, refused arguments).
    Failed { key: u64, reason: String },
    /// Twice the top does not fit the key's type.
    OutOfRange,
}

/// The keys above the top, and who serves each range of the key (variant
/// indices, merged where adjacent ranges have one owner).
#[derive(Debug, Clone, PartialEq)]
pub struct Served {
    pub above: AboveRecord,
    pub ranges: Vec<KeyRange<usize>>,
}

/// The ranges a table entry bakes from `decisions`: each decision's winner up to
/// the geometric midpoint to the next other winner ([`ranges::ranges`]); above the
/// largest timed key, the top's pick where `above_record` says it extends, else
/// the incumbent, else the default, else (both out) the winner at the largest key.
pub fn served(
    spec: &KernelSpec,
    decisions: &[Decision],
    rejected: &[Option<Rejection>],
    beyond: &Beyond,
    incumbent: usize,
    default: usize,
) -> Served {
    let out = |v: usize| rejected.get(v).is_some_and(Option::is_some);
    let above_top = [incumbent, default]
        .into_iter()
        .find(|&v| !out(v))
        .or_else(|| decisions.last().map(|d| d.winner))
        .unwrap_or(default);
    let above = above_record(spec, beyond, decisions, incumbent);
    let ranges = ranges::ranges(decisions, above_top, above.extends);
    Served { above, ranges }
}

/// How the keys above the largest size were decided, from what the sweep timed
/// there (`incumbent` owns them unless the top's pick is extended).
pub fn above_record(
    spec: &KernelSpec,
    beyond: &Beyond,
    decisions: &[Decision],
    incumbent: usize,
) -> AboveRecord {
    let top = spec.sizes.last().copied().unwrap_or(0);
    let key = spec.key;
    let mut record = AboveRecord {
        rule: spec.above.name().to_string(),
        top,
        probe: None,
        extends: false,
        note: None,
    };
    let winner = |at: u64| decisions.iter().find(|d| d.key == at).map(|d| d.winner);
    match (spec.above, beyond) {
        (Above::Extend, _) => record.extends = true,
        (Above::Incumbent, _) => {}
        (Above::Measure, Beyond::Probed { key: probe }) => {
            record.probe = Some(*probe);
            record.extends = winner(*probe).is_some()
                && winner(*probe) == winner(top)
                && winner(top) != Some(incumbent);
        }
        (Above::Measure, Beyond::IncumbentOwnsTop) => {
            record.note = Some(format!("it won at {key}={top}"));
        }
        (Above::Measure, Beyond::Failed { key: at, reason }) => {
            record.note = Some(format!("{key}={at} could not be timed ({reason})"));
        }
        (Above::Measure, Beyond::OutOfRange) => {
            record.note = Some(format!("twice {top} does not fit the type of `{key}`"));
        }
        (Above::Measure, Beyond::NotAsked) => record.note = Some("not measured".to_string()),
    }
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decision at `key` where `winner` ran in 1 us against the incumbent
    /// (variant 0) in 2 us, or only the incumbent ran.
    fn decision(key: u64, winner: usize) -> Decision {
        let timed = |variant: usize, median: f64| ranges::Timed {
            variant,
            median,
            p25: median,
            p75: median,
        };
        let mut times = vec![timed(0, 2.0)];
        if winner != 0 {
            times.push(timed(winner, 1.0));
        }
        let timings = ranges::SizeTimings {
            key,
            timed: times,
            repeat_noise: None,
            refinement: false,
        };
        ranges::decide(&timings, 0, 0.01).expect("a decision")
    }

    const SPEC: KernelSpec = KernelSpec::new("k", "src/k.rs", "k.cu", &["k"], "m", &[64, 8192])
        .with_space(&["b"], &[&[1], &[2]], &[1]);

    #[test]
    fn the_top_pick_extends_only_where_it_won_twice_the_top() {
        let won = [decision(64, 0), decision(8192, 1), decision(16384, 1)];
        let probed = Beyond::Probed { key: 16384 };
        let record = above_record(&SPEC, &probed, &won, 0);
        assert!(record.extends && record.probe == Some(16384), "{record:?}");
        let lost = [decision(64, 0), decision(8192, 1), decision(16384, 0)];
        assert!(!above_record(&SPEC, &probed, &lost, 0).extends);
        let failed = Beyond::Failed {
            key: 16384,
            reason: "out of memory".into(),
        };
        let record = above_record(&SPEC, &failed, &won[..2], 0);
        assert!(!record.extends);
        assert_eq!(
            record.note.as_deref(),
            Some("m=16384 could not be timed (out of memory)")
        );
        let stated = KernelSpec {
            above: Above::Extend,
            ..SPEC
        };
        assert!(above_record(&stated, &Beyond::NotAsked, &won[..2], 0).extends);
    }

    #[test]
    fn keys_above_the_top_go_to_the_first_of_incumbent_and_default_still_in() {
        let won = [decision(64, 0), decision(8192, 1)];
        let ranges = |rejected: &[Option<Rejection>]| {
            served(&SPEC, &won, rejected, &Beyond::NotAsked, 0, 0).ranges
        };
        let top = |r: Vec<KeyRange<usize>>| r.last().map(|r| (r.first, r.choice));
        assert_eq!(top(ranges(&[None, None])), Some((8193, 0)));
        let out = Some(Rejection {
            stage: autotune_table::table::Stage::WrongResult,
            reason: "wrong".into(),
        });
        assert_eq!(
            top(ranges(&[out, None])),
            Some((725, 1)),
            "the winner at the top, merged"
        );
    }
}
