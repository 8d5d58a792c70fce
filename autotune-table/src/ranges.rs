//! From measurements to dispatch: the winner at each timed key value (a challenger
//! must beat the incumbent by more than the noise), the points worth timing to place
//! a boundary, and the ranges.

use autotune_spec::KeyRange;
use autotune_spec::range::push_merged;

use crate::duel::Duel;

/// One variant's times at one key value, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timed {
    pub variant: usize,
    pub median: f64,
    pub p25: f64,
    pub p75: f64,
}

impl Timed {
    fn spread(&self) -> f64 {
        if self.median > 0.0 {
            (self.p75 - self.p25) / (2.0 * self.median)
        } else {
            0.0
        }
    }
}

/// Everything timed at one key value.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeTimings {
    pub key: u64,
    pub timed: Vec<Timed>,
    /// How far the incumbent's second timing, after the others, fell from its
    /// first, relative to it (the largest over the GPUs that timed it).
    pub repeat_noise: Option<f64>,
    pub refinement: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub key: u64,
    pub winner: usize,
    pub winner_us: f64,
    pub incumbent: usize,
    pub incumbent_us: f64,
    pub margin: f64,
    pub noise: f64,
    pub runner_up: Option<usize>,
    pub refinement: bool,
    /// The interleaved rounds of a challenger against the incumbent, where it was
    /// timed so (see [`crate::duel`]): the key is the challenger's only where they
    /// said so. The fastest challenger by median meets the incumbent first; where
    /// it hands the key back, the next fastest does (the build's
    /// `CHALLENGERS_PER_KEY`). This is the duel of the one that took the key, or,
    /// where none did, the first one's.
    pub duel: Option<Duel>,
    /// The same duel in a fresh worker process, where the first gave the key to the
    /// challenger: the key stays the challenger's only where this says so too.
    pub confirmation: Option<Duel>,
}

impl Decision {
    /// The table's record of this decision, each variant by `name`.
    pub fn record(&self, name: impl Fn(usize) -> String) -> crate::table::SizeRecord {
        crate::table::SizeRecord {
            key: self.key,
            winner: name(self.winner),
            winner_us: self.winner_us,
            incumbent: name(self.incumbent),
            incumbent_us: self.incumbent_us,
            margin: self.margin,
            noise: self.noise,
            runner_up: self.runner_up.map(&name),
            refinement: self.refinement,
            duel: self.duel,
            confirmation: self.confirmation,
        }
    }
}

/// The winner at one key value. The incumbent (the default, or the fallback when
/// declared) keeps the key unless the fastest challenger's median is lower by more
/// than `max(min_margin, noise)`, where noise is the larger relative half-IQR of the
/// two and the relative difference between the incumbent's two timings. `None` when
/// nothing valid was timed.
pub fn decide(timings: &SizeTimings, incumbent: usize, min_margin: f64) -> Option<Decision> {
    let mut sorted = timings.timed.clone();
    sorted.sort_by(|a, b| a.median.total_cmp(&b.median));
    let best = *sorted.first()?;
    let holder = timings
        .timed
        .iter()
        .find(|t| t.variant == incumbent)
        .copied()
        .unwrap_or(best);
    let repeat_noise = match timings.repeat_noise {
        Some(noise) if holder.variant == incumbent => noise,
        _ => 0.0,
    };
    let noise = best.spread().max(holder.spread()).max(repeat_noise);
    let margin = if best.median > 0.0 {
        holder.median / best.median - 1.0
    } else {
        0.0
    };
    let winner = if margin > noise.max(min_margin) {
        best
    } else {
        holder
    };
    let runner_up = sorted
        .iter()
        .find(|t| t.variant != winner.variant)
        .map(|t| t.variant);
    Some(Decision {
        key: timings.key,
        winner: winner.variant,
        winner_us: winner.median,
        incumbent: holder.variant,
        incumbent_us: holder.median,
        margin,
        noise,
        runner_up,
        refinement: timings.refinement,
        duel: None,
        confirmation: None,
    })
}

/// The winner at one key value when some variants come from candidate sources
/// (`candidate(v)`): a candidate must beat the incumbent *source*, not just its
/// default point. First the incumbent source decides as [`decide`] does among its
/// own variants (and the fallback's), giving `w₀`; then the fastest candidate `c`
/// replaces `w₀` only if `median(w₀) / median(c) − 1 > max(min_margin, noise)`,
/// the noise that of `c` and `w₀` (and the incumbent's repeat at this key). The decision's incumbent is `w₀`, so the
/// table says by how much a candidate won over the best the old source had. With
/// no valid variant of the incumbent source, the candidates decide among
/// themselves against `incumbent`'s rule.
pub fn decide_with_candidates(
    timings: &SizeTimings,
    incumbent: usize,
    min_margin: f64,
    candidate: &dyn Fn(usize) -> bool,
) -> Option<Decision> {
    let only = |keep: &dyn Fn(usize) -> bool| SizeTimings {
        timed: timings
            .timed
            .iter()
            .copied()
            .filter(|t| keep(t.variant))
            .collect(),
        ..timings.clone()
    };
    let Some(old) = decide(&only(&|v| !candidate(v)), incumbent, min_margin) else {
        return decide(timings, incumbent, min_margin);
    };
    if !timings.timed.iter().any(|t| candidate(t.variant)) {
        return Some(old);
    }
    let head_to_head = only(&|v| v == old.winner || candidate(v));
    let mut new = decide(&head_to_head, old.winner, min_margin)?;
    if new.winner == old.winner {
        // The old source keeps the key: its own decision says by how much it won.
        return Some(Decision {
            runner_up: old.runner_up.or(new.runner_up),
            ..old
        });
    }
    new.noise = new.noise.max(old.noise);
    Some(new)
}

/// Where to time both winners of adjacent decisions with different winners, A at
/// `low` and B at `high`, to place the boundary between them:
///
/// - at `low` where B was not timed there, and at `high` where A was not (a
///   search may find B at one key and never try it at its neighbour, where it
///   may win too: on an H100, `gemm@n=14336,k=4096`'s winner at m=19..64 was
///   never timed at m=16, and won there by 5.7% in a decode step);
/// - at the geometric midpoint `sqrt(low * high)` where the gap is wider than
///   25% (`high > 1.25 low`).
///
/// `timed(key, variant)`: whether the variant has a timing (or was put out) at
/// that key. Each point is `(key, A, B)`.
pub fn refinement_points(
    decisions: &[Decision],
    timed: impl Fn(u64, usize) -> bool,
) -> Vec<(u64, usize, usize)> {
    let mut points = Vec::new();
    for pair in decisions.windows(2) {
        let (a, b) = (pair[0].winner, pair[1].winner);
        if a == b {
            continue;
        }
        let (low, high) = (pair[0].key, pair[1].key);
        if !timed(low, b) {
            points.push((low, a, b));
        }
        if !timed(high, a) {
            points.push((high, a, b));
        }
        let mid = midpoint(low, high);
        if high as f64 > low as f64 * 1.25 && mid > low && mid < high {
            points.push((mid, a, b));
        }
    }
    points.sort_unstable();
    points.dedup();
    points
}

fn midpoint(low: u64, high: u64) -> u64 {
    ((low as f64) * (high as f64)).sqrt().round() as u64
}

/// Ranges covering every key, each held by its owner's index: each decision's winner owns the
/// keys up to the geometric midpoint to the next decision with another winner;
/// the first owner extends down to 0; keys above the largest timed value go to
/// `beyond` (the fallback, or the default), since nothing was timed there, unless
/// `extend`: then the last decision's winner keeps them.
pub fn ranges(decisions: &[Decision], beyond: usize, extend: bool) -> Vec<KeyRange<usize>> {
    let beyond = match decisions.last() {
        Some(last) if extend => last.winner,
        _ => beyond,
    };
    let mut out: Vec<KeyRange<usize>> = Vec::new();
    let mut push = |first: u64, last: u64, owner: usize| push_merged(&mut out, first, last, owner);
    let mut first = Some(0u64);
    for (index, decision) in decisions.iter().enumerate() {
        let Some(start) = first else { break };
        let last = match decisions.get(index + 1) {
            Some(next) if next.winner != decision.winner => {
                midpoint(decision.key, next.key).clamp(decision.key, next.key - 1)
            }
            Some(next) => next.key - 1,
            None => decision.key,
        };
        push(start, last, decision.winner);
        first = last.checked_add(1);
    }
    if let Some(start) = first {
        push(start, u64::MAX, beyond);
    }
    out
}

/// The lead over the incumbent a range must have had where it was tuned for a shape
/// that was not tuned to borrow it (see [`borrowed`]).
pub const BORROW_LEAD: f64 = 1.35;

/// The ranges a shape that was not tuned takes from the nearest one that was. A range
/// keeps its choice `c` there only if, at every key `k` measured inside it where it
/// was tuned, `lead(c, k) = t_incumbent(k) / t_c(k) ≥ min_lead`; the others, and any
/// range with no measured key inside, launch `incumbent`. Adjacent ranges that end up
/// with the same choice are merged.
///
/// The incumbent is what a call would run without tuning: the declared fallback
/// (ours or a vendor's), else the default variant.
///
/// Why: a tuned range is a measurement at its own shape only. The one borrowing the
/// shipped tables have measured (the untuned GEMM 1 x 6144 x 4096, on the H200's
/// table of session 12) swung by 1.35x: the split-K point that led cuBLAS by 1.09x
/// at 1 x 4096 x 4096 ran at 0.81x there; a LayerNorm tuned at widths 768 and 4096
/// and run at 1536 took 768's first range, which ran at 0.83-0.96x of its default
/// there. So a borrowed range must lead by at least that swing ([`BORROW_LEAD`]) to
/// be expected not to lose to the incumbent, which is what a user would get without
/// the tool. `lead` is `None` where either was not timed.
pub fn borrowed<C: Copy + PartialEq>(
    ranges: &[KeyRange<C>],
    keys: &[u64],
    incumbent: C,
    min_lead: f64,
    lead: impl Fn(C, u64) -> Option<f64>,
) -> Vec<KeyRange<C>> {
    let mut out: Vec<KeyRange<C>> = Vec::with_capacity(ranges.len());
    for range in ranges {
        let choice = range.choice;
        let keep = choice == incumbent || {
            let mut inside = keys.iter().filter(|&&k| range.contains(k)).peekable();
            inside.peek().is_some()
                && inside.all(|&k| lead(choice, k).is_some_and(|l| l >= min_lead))
        };
        let choice = if keep { choice } else { incumbent };
        push_merged(&mut out, range.first, range.last, choice);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_borrowed_range_keeps_its_variant_only_where_it_led_by_the_swing() {
        // Variant 1 owns keys up to 99 (measured at 1 and 64), variant 2 keys 100..=999
        // (measured at 512), the fallback (0) the rest; 3 owns 1000.. with no key.
        let ranges = [
            KeyRange::new(0, 99, 1),
            KeyRange::new(100, 999, 2),
            KeyRange::new(1000, 4999, 0),
            KeyRange::new(5000, u64::MAX, 3),
        ];
        let keys = [1, 64, 512, 4096];
        let lead = |c: usize, k: u64| match (c, k) {
            (1, 1) => Some(1.5),
            (1, 64) => Some(1.4),
            (2, 512) => Some(1.09),
            _ => None,
        };
        assert_eq!(
            borrowed(&ranges, &keys, 0, BORROW_LEAD, lead),
            vec![KeyRange::new(0, 99, 1), KeyRange::new(100, u64::MAX, 0)]
        );
        // One measured key below the lead is enough to give a range to the fallback.
        let low_at_64 = |c: usize, k: u64| {
            if (c, k) == (1, 64) {
                Some(1.2)
            } else {
                lead(c, k)
            }
        };
        assert_eq!(
            borrowed(&ranges, &keys, 0, BORROW_LEAD, low_at_64),
            vec![KeyRange::new(0, u64::MAX, 0)]
        );
        // With no lead asked for, a borrowed plan is the tuned one (less the range that
        // no measurement supports).
        assert_eq!(
            borrowed(&ranges, &keys, 0, 0.0, lead),
            vec![
                KeyRange::new(0, 99, 1),
                KeyRange::new(100, 999, 2),
                KeyRange::new(1000, u64::MAX, 0)
            ]
        );
    }

    fn timed(variant: usize, median: f64) -> Timed {
        Timed {
            variant,
            median,
            p25: median * 0.995,
            p75: median * 1.005,
        }
    }

    fn at(key: u64, times: &[(usize, f64)]) -> SizeTimings {
        SizeTimings {
            key,
            timed: times.iter().map(|&(v, m)| timed(v, m)).collect(),
            repeat_noise: None,
            refinement: false,
        }
    }

    #[test]
    fn keeps_the_incumbent_unless_beaten_by_more_than_noise() {
        let d = decide(&at(8, &[(0, 100.0), (1, 99.5)]), 0, 0.01).unwrap();
        assert_eq!(d.winner, 0, "0.5% is inside the 1% floor");
        let d = decide(&at(8, &[(0, 100.0), (1, 90.0), (2, 95.0)]), 0, 0.01).unwrap();
        assert_eq!((d.winner, d.runner_up), (1, Some(2)));
        assert!((d.margin - (100.0 / 90.0 - 1.0)).abs() < 1e-12);
        let mut noisy = at(8, &[(0, 100.0), (1, 95.0)]);
        noisy.repeat_noise = Some(0.08);
        let d = decide(&noisy, 0, 0.01).unwrap();
        assert_eq!(d.winner, 0, "8% repeat noise hides a 5% win");
        assert!((d.noise - 0.08).abs() < 1e-12);
    }

    #[test]
    fn a_rejected_incumbent_leaves_the_best() {
        let d = decide(&at(8, &[(1, 50.0), (2, 40.0)]), 0, 0.01).unwrap();
        assert_eq!(d.winner, 2);
        assert!(decide(&at(8, &[]), 0, 0.01).is_none());
    }

    fn decision(key: u64, winner: usize) -> Decision {
        Decision {
            key,
            winner,
            winner_us: 1.0,
            incumbent: 0,
            incumbent_us: 1.0,
            margin: 0.0,
            noise: 0.0,
            runner_up: None,
            refinement: false,
            duel: None,
            confirmation: None,
        }
    }

    #[test]
    fn ranges_split_at_geometric_midpoints_and_hand_the_top_to_beyond() {
        let ds = [
            decision(100, 1),
            decision(400, 1),
            decision(1600, 2),
            decision(6400, 0),
        ];
        assert_eq!(
            ranges(&ds, 9, false),
            vec![
                KeyRange::new(0, 800, 1),
                KeyRange::new(801, 3200, 2),
                KeyRange::new(3201, 6400, 0),
                KeyRange::new(6401, u64::MAX, 9)
            ]
        );
        assert_eq!(
            ranges(&[decision(10, 3)], 3, false),
            vec![KeyRange::new(0, u64::MAX, 3)]
        );
        assert_eq!(ranges(&[], 4, false), vec![KeyRange::new(0, u64::MAX, 4)]);
        assert_eq!(
            ranges(&[decision(1, 1), decision(2, 2)], 0, false),
            vec![
                KeyRange::new(0, 1, 1),
                KeyRange::new(2, 2, 2),
                KeyRange::new(3, u64::MAX, 0)
            ]
        );
    }

    /// Variants 0-2 come from the incumbent source (0 is its default), 3-4 from a
    /// candidate: a candidate must beat the old source's best, not its default.
    #[test]
    fn a_candidate_must_beat_the_old_source_s_best_by_the_margin() {
        let candidate = |v: usize| v >= 3;
        let decide = |times: &[(usize, f64)]| {
            decide_with_candidates(&at(100, times), 0, 0.01, &candidate).unwrap()
        };
        // 2 beats the default by 20%; candidate 3 beats 2 by only 0.5%: 2 keeps it.
        let d = decide(&[(0, 10.0), (2, 8.0), (3, 7.96)]);
        assert_eq!((d.winner, d.incumbent), (2, 0), "{d:?}");
        // Candidate 4 beats 2 by 14%: it wins, measured against 2.
        let d = decide(&[(0, 10.0), (2, 8.0), (3, 7.96), (4, 7.0)]);
        assert_eq!((d.winner, d.incumbent), (4, 2), "{d:?}");
        assert!((d.margin - (8.0 / 7.0 - 1.0)).abs() < 1e-12, "{d:?}");
        // No candidate timed: the old source's decision as it is.
        let d = decide(&[(0, 10.0), (1, 9.0)]);
        assert_eq!(d.winner, 1);
        // Nothing of the old source valid: the candidates among themselves.
        let d = decide(&[(3, 7.0), (4, 6.0)]);
        assert_eq!(d.winner, 4);
    }

    /// Issue 10: a pick that still wins at twice the top keeps every larger key,
    /// instead of a cliff back to the untuned incumbent.
    #[test]
    fn extend_hands_the_top_to_the_last_winner() {
        let ds = [decision(100, 1), decision(6400, 2), decision(12800, 2)];
        assert_eq!(
            ranges(&ds, 0, true),
            vec![KeyRange::new(0, 800, 1), KeyRange::new(801, u64::MAX, 2)]
        );
        assert_eq!(ranges(&[], 4, true), vec![KeyRange::new(0, u64::MAX, 4)]);
    }

    #[test]
    fn refinement_only_where_winners_change_and_gaps_are_wide() {
        let ds = [
            decision(100, 1),
            decision(400, 1),
            decision(1600, 2),
            decision(1700, 0),
        ];
        let everything = |_: u64, _: usize| true;
        assert_eq!(refinement_points(&ds, everything), vec![(800, 1, 2)]);
    }

    #[test]
    fn a_winner_is_timed_at_its_neighbour_key_where_the_search_never_tried_it() {
        // Variant 2 won at 64 and was never timed at 16, where 1 won; 1 was timed
        // at 64. Before, only the midpoint 32 was timed, and 16 stayed 1's unseen.
        let ds = [decision(16, 1), decision(64, 2)];
        let timed = |key: u64, variant: usize| !(key == 16 && variant == 2);
        assert_eq!(refinement_points(&ds, timed), vec![(16, 1, 2), (32, 1, 2)]);
        let nothing = |_: u64, _: usize| false;
        assert_eq!(
            refinement_points(&ds, nothing),
            vec![(16, 1, 2), (32, 1, 2), (64, 1, 2)]
        );
    }
}
