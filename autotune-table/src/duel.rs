//! The last word at a key a challenger would take from the incumbent: the two
//! launched alternately, round after round, in a shuffled order, and the ratio of
//! their times given with a confidence interval. A challenger takes the key only
//! where the interval's lower end clears the margin.
//!
//! # The rule
//!
//! Round `i` times the incumbent (`aᵢ`) and the challenger (`bᵢ`) back to back, in
//! an order drawn for the round, each launch prepared as every timed launch is (the
//! L2 evicted first). Its ratio is `rᵢ = aᵢ / bᵢ`: above 1, the challenger was
//! faster in that round. Drift of the clocks or of the temperature over the rounds
//! moves `aᵢ` and `bᵢ` together and cancels in `rᵢ`; that is why the rounds are
//! paired rather than the two medians compared.
//!
//! The estimate is the median `r̃` of the `n` ratios. Its interval is the
//! distribution-free one for a median: with the ratios sorted, `r₍₁₎ ≤ … ≤ r₍ₙ₎`,
//!
//! ```text
//! P( r₍ⱼ₎ ≤ m ≤ r₍ₙ₋ⱼ₊₁₎ ) = 1 − 2 · P( Bin(n, ½) ≤ j − 1 )
//! ```
//!
//! for the true median `m` of the ratio, whatever its distribution (each `rᵢ`
//! falls below `m` with probability ½, independently). [`interval`] takes the
//! largest `j` for which that is at least [`CONFIDENCE`] (95%); with fewer than 6
//! rounds no `j` reaches it and the interval is the whole sample, `[r₍₁₎, r₍ₙ₎]`.
//!
//! With the sweep's minimum margin `μ`:
//!
//! - **challenger** where `low > 1 + μ`: it is faster by more than the margin, with
//!   95% confidence;
//! - **incumbent** where `high < 1 + μ`: it is not, with 95% confidence;
//! - **tie** otherwise: the interval holds `1 + μ`, the rounds cannot tell, and the
//!   incumbent keeps the key. Two sweeps may only disagree on a tie.
//!
//! A challenger the rounds give the key to meets the incumbent once more, in a fresh
//! worker process, and keeps the key only where that duel says **challenger** too
//! (`SizeRecord::confirmation`): the paired rounds cancel drift within a process,
//! not what differs between processes (the clocks a process starts at, a library's
//! choice made once per process): on an H100, cuBLAS's median at one key was
//! 46.66 us in one sweep and 42.98 us in another an hour later, a change larger
//! than either sweep's interval (`bench/results/h100-session29/README.md`).

//!
//! A duel is evidence only for the work its sides' medians were measured on: where
//! either side's time over the rounds lies more than [`MEDIAN_AGREEMENT`] times
//! from that variant's median at the key, either way ([`Duel::off_medians`]), the
//! duel timed something else (on an H100, duels on inputs never drawn took the
//! top-k 1.2 to 23 times their medians), and it hands the key back.

use serde::{Deserialize, Serialize};

/// The confidence of the interval a challenger's lower end must clear.
pub const CONFIDENCE: f64 = 0.95;

/// How far, as a factor either way, a duel's side may run from the same variant's
/// median at the key and still count: the two are timed the same way (the same
/// inputs, condition and graphs), so they differ by what drifts over a sweep (a
/// few percent), not by a quarter.
pub const MEDIAN_AGREEMENT: f64 = 1.25;

/// The interleaved rounds of one challenger against the incumbent at one key.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Duel {
    /// Rounds timed (a launch of each per round).
    pub rounds: u32,
    /// The median over the rounds of `incumbent / challenger` (above 1: the
    /// challenger is faster).
    pub ratio: f64,
    /// The interval of that median at [`CONFIDENCE`] (see the module's rule).
    pub low: f64,
    pub high: f64,
    /// The ratios' half interquartile range relative to their median.
    pub spread: f64,
    /// The medians of each side over the rounds, in microseconds.
    pub incumbent_us: f64,
    pub challenger_us: f64,
}

/// What the rounds say about the key, against the sweep's minimum margin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DuelVerdict {
    /// The interval's lower end clears `1 + margin`: the challenger takes the key.
    Challenger,
    /// The interval holds `1 + margin`: the incumbent keeps the key.
    Tie,
    /// The interval lies below `1 + margin`: the incumbent keeps the key.
    Incumbent,
}

impl Duel {
    /// The duel of paired rounds (`incumbent_us[i]` and `challenger_us[i]` timed in
    /// round `i`). `None` without a round whose two times are positive and finite;
    /// a round with any other time is left out.
    pub fn from_rounds(incumbent_us: &[f64], challenger_us: &[f64]) -> Option<Self> {
        let pairs: Vec<(f64, f64)> = incumbent_us
            .iter()
            .zip(challenger_us)
            .map(|(&a, &b)| (a, b))
            .filter(|&(a, b)| a.is_finite() && b.is_finite() && a > 0.0 && b > 0.0)
            .collect();
        if pairs.is_empty() {
            return None;
        }
        let mut ratios: Vec<f64> = pairs.iter().map(|&(a, b)| a / b).collect();
        ratios.sort_by(f64::total_cmp);
        let ratio = quantile(&ratios, 0.5);
        let (low, high) = interval(&ratios, CONFIDENCE);
        let spread = (quantile(&ratios, 0.75) - quantile(&ratios, 0.25)) / (2.0 * ratio);
        let side = |pick: fn(&(f64, f64)) -> f64| {
            let mut times: Vec<f64> = pairs.iter().map(pick).collect();
            times.sort_by(f64::total_cmp);
            quantile(&times, 0.5)
        };
        Some(Self {
            rounds: u32::try_from(ratios.len()).unwrap_or(u32::MAX),
            ratio,
            low,
            high,
            spread,
            incumbent_us: side(|p| p.0),
            challenger_us: side(|p| p.1),
        })
    }

    /// The verdict against `min_margin` (see the module's rule).
    pub fn verdict(&self, min_margin: f64) -> DuelVerdict {
        let bar = 1.0 + min_margin;
        if self.low > bar {
            DuelVerdict::Challenger
        } else if self.high < bar {
            DuelVerdict::Incumbent
        } else {
            DuelVerdict::Tie
        }
    }

    /// The duel's sides over the medians of the same two variants at its key
    /// (`incumbent_us`, `challenger_us`), where either lies beyond
    /// [`MEDIAN_AGREEMENT`] either way: then the rounds timed other work than the
    /// medians did, and they decide nothing. `None` where both agree.
    pub fn off_medians(&self, incumbent_us: f64, challenger_us: f64) -> Option<(f64, f64)> {
        let sides = (
            self.incumbent_us / incumbent_us,
            self.challenger_us / challenger_us,
        );
        let agrees = |r: f64| (1.0 / MEDIAN_AGREEMENT..=MEDIAN_AGREEMENT).contains(&r);
        (!agrees(sides.0) || !agrees(sides.1)).then_some(sides)
    }

    /// `1.043x [1.031, 1.055] over 60 rounds`, for reports.
    pub fn describe(&self) -> String {
        format!(
            "{:.3}x [{:.3}, {:.3}] over {} interleaved rounds",
            self.ratio, self.low, self.high, self.rounds
        )
    }
}

/// The quantile the timing's samples take too (one definition, in
/// `autotune-spec`).
pub use autotune_spec::quantile::quantile;

/// The distribution-free interval of the median of `sorted` (ascending) at
/// `confidence`: `(r₍ⱼ₎, r₍ₙ₋ⱼ₊₁₎)` for the largest `j` with
/// `1 − 2 · P(Bin(n, ½) ≤ j − 1) ≥ confidence`, or the whole sample where no
/// `j` reaches it.
pub fn interval(sorted: &[f64], confidence: f64) -> (f64, f64) {
    let n = sorted.len();
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    let alpha = 1.0 - confidence;
    // cdf(k) = P(Bin(n, 1/2) <= k), summed in log space (n may be large).
    let ln_half_n = n as f64 * 0.5f64.ln();
    let mut ln_choose = 0.0; // ln C(n, 0)
    let mut cdf = 0.0;
    let mut j = 0; // 0: no order statistic is tight enough
    for k in 0..n / 2 {
        if k > 0 {
            ln_choose += ((n - k + 1) as f64).ln() - (k as f64).ln();
        }
        cdf += (ln_choose + ln_half_n).exp();
        // Taking j = k + 1 leaves 2 * P(Bin <= k) outside the interval.
        if 2.0 * cdf <= alpha {
            j = k + 1;
        } else {
            break;
        }
    }
    if j == 0 {
        return (sorted[0], sorted[n - 1]);
    }
    (sorted[j - 1], sorted[n - j])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The H100 table's `topk_indexer_batched@batch=1` at 131072: 34.1 and 29.9 us
    /// by median, 544.1 and 273.7 us in the duel (inputs never drawn); a GEMM's
    /// decode-size duel within 1% of its medians counts.
    #[test]
    fn a_duel_far_from_its_medians_timed_other_work() {
        let duel = Duel::from_rounds(&[544.1; 8], &[273.7; 8]).unwrap();
        let (a, b) = duel.off_medians(34.1, 29.9).expect("16x and 9x off");
        assert!(a > 15.0 && b > 9.0, "{a} {b}");
        let near = Duel::from_rounds(&[43.2; 8], &[42.0; 8]).unwrap();
        assert_eq!(near.off_medians(43.5, 42.1), None);
        // Either way, either side.
        assert!(near.off_medians(43.5, 60.0).is_some());
        assert!(near.off_medians(30.0, 42.1).is_some());
    }

    #[test]
    fn the_interval_is_the_binomial_order_statistics() {
        let sorted: Vec<f64> = (1..=100).map(f64::from).collect();
        // n = 100: P(Bin(100, 1/2) <= 39) = 0.0176 <= 0.025 < P(<= 40) = 0.0284,
        // so j = 40: the 40th and the 61st values.
        assert_eq!(interval(&sorted, 0.95), (40.0, 61.0));
        // n = 6: 2 / 64 = 0.031 <= 0.05, so j = 1, the extremes.
        assert_eq!(interval(&sorted[..6], 0.95), (1.0, 6.0));
        // n = 5: no j reaches 95%; the whole sample.
        assert_eq!(interval(&sorted[..5], 0.95), (1.0, 5.0));
        // n = 20: P(Bin(20, 1/2) <= 5) = 0.0207, P(<= 6) = 0.0577: j = 6.
        assert_eq!(interval(&sorted[..20], 0.95), (6.0, 15.0));
        assert!(interval(&[], 0.95).0.is_nan());
    }

    /// Rounds of two kernels whose times drift together: the challenger is
    /// `factor` times as fast, with `noise` relative jitter of each launch.
    fn rounds(factor: f64, noise: f64, n: usize) -> (Vec<f64>, Vec<f64>) {
        let mut rng = autotune_spec::rng::Rng::new(7);
        let mut jitter = move || 1.0 + noise * rng.range(-1.0, 1.0);
        (0..n)
            .map(|i| {
                let drift = 1.0 + 0.002 * i as f64; // clocks sagging over the run
                (100.0 * drift * jitter(), 100.0 / factor * drift * jitter())
            })
            .unzip()
    }

    #[test]
    fn a_clear_win_is_the_challengers_and_a_gain_inside_the_noise_is_a_tie() {
        let (a, b) = rounds(1.10, 0.03, 60);
        let duel = Duel::from_rounds(&a, &b).map(|d| (d.verdict(0.01), d.low > 1.05));
        assert_eq!(duel, Some((DuelVerdict::Challenger, true)));
        // 1% faster with 3% jitter per launch: the interval holds 1.01.
        let (a, b) = rounds(1.01, 0.03, 60);
        let duel = Duel::from_rounds(&a, &b);
        assert_eq!(duel.map(|d| d.verdict(0.01)), Some(DuelVerdict::Tie));
        // Slower: the incumbent's.
        let (a, b) = rounds(0.90, 0.03, 60);
        let duel = Duel::from_rounds(&a, &b);
        assert_eq!(duel.map(|d| d.verdict(0.01)), Some(DuelVerdict::Incumbent));
    }

    #[test]
    fn drift_shared_by_both_sides_cancels_in_the_ratio() {
        // Both sides sag by 30% over the run, the challenger 5% faster throughout:
        // the medians of each side spread widely, the paired ratio does not.
        let a: Vec<f64> = (0..40)
            .map(|i| 100.0 * (1.0 + 0.0075 * f64::from(i)))
            .collect();
        let b: Vec<f64> = a.iter().map(|t| t / 1.05).collect();
        let duel = Duel::from_rounds(&a, &b).map(|d| (d.low, d.high, d.rounds));
        let (low, high, rounds) = duel.unwrap_or_default();
        assert!(
            (low - 1.05).abs() < 1e-9 && (high - 1.05).abs() < 1e-9,
            "{low} {high}"
        );
        assert_eq!(rounds, 40);
    }

    #[test]
    fn rounds_with_a_time_that_is_not_positive_and_finite_are_left_out() {
        let duel = Duel::from_rounds(&[2.0, f64::NAN, 2.0, 0.0], &[1.0, 1.0, f64::INFINITY, 1.0]);
        assert_eq!(duel.map(|d| (d.rounds, d.ratio)), Some((1, 2.0)));
        assert_eq!(Duel::from_rounds(&[], &[]), None);
        assert!(
            Duel::from_rounds(&[2.0; 8], &[1.0; 8])
                .is_some_and(|d| d.describe() == "2.000x [2.000, 2.000] over 8 interleaved rounds")
        );
    }
}
