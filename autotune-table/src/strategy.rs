//! Which points to time at one key: all of them (`grid`), or, for spaces too large
//! to enumerate, a budget of them chosen by random sampling or by local search
//! (hill climbing over neighbouring points, restarting at random points while
//! budget remains). A budget is points per key, or seconds for a kernel's whole
//! search. The incumbent is always timed first, then any seeds (a stale table's
//! winners, where the build retunes one): a retune after a small edit of the kernel
//! starts where the last search ended, not from the default alone.

use std::collections::BTreeMap;

use autotune_spec::rng::Rng;

/// How much a search may time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Budget {
    /// This many points at each key (`28`).
    Points(usize),
    /// About this many seconds for the kernel's whole search (`60s`), shared
    /// evenly by its keys; each key times its incumbent whatever is left.
    Seconds(f64),
}

/// Why a strategy or a budget was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StrategyError {
    #[error("budget `{0}` is neither points (`28`) nor seconds (`60s`)")]
    Budget(String),
    #[error("strategy `{0}` needs a budget (`28` points per key, or `60s`)")]
    NoBudget(String),
    #[error("unknown strategy `{0}` (grid, random, local)")]
    Unknown(String),
}

impl Budget {
    /// `28` (points per key) or `60s` (seconds for the kernel).
    pub fn parse(text: &str) -> Result<Self, StrategyError> {
        let text = text.trim();
        let invalid = || StrategyError::Budget(text.to_string());
        if let Some(seconds) = text.strip_suffix('s') {
            let seconds: f64 = seconds.trim().parse().map_err(|_| invalid())?;
            if !(seconds.is_finite() && seconds >= 0.0) {
                return Err(invalid());
            }
            return Ok(Self::Seconds(seconds));
        }
        match text.parse() {
            Ok(0) | Err(_) => Err(invalid()),
            Ok(points) => Ok(Self::Points(points)),
        }
    }

    /// The most points one key may time, out of `available`.
    fn points(self, available: usize) -> usize {
        match self {
            Self::Points(points) => points.min(available),
            Self::Seconds(_) => available,
        }
    }
}

impl std::fmt::Display for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Points(points) => write!(f, "{points} points per key"),
            Self::Seconds(seconds) => write!(f, "{seconds} s for the kernel"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Strategy {
    Grid,
    /// The incumbent, then points drawn at random until the budget is spent.
    Random {
        budget: Budget,
        seed: u64,
    },
    /// Hill climbing from the incumbent over neighbours (one parameter one step
    /// away), restarting from random points, until the budget is spent.
    Local {
        budget: Budget,
        seed: u64,
    },
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Grid => f.write_str("grid (every point)"),
            Self::Random { budget, .. } => write!(f, "random, {budget}"),
            Self::Local { budget, .. } => write!(f, "local search, {budget}"),
        }
    }
}

/// Points a time-budgeted random search times between looks at the clock.
const RANDOM_BATCH: usize = 4;

impl Strategy {
    /// The name [`Strategy::parse`] takes: `grid`, `random` or `local`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Grid => "grid",
            Self::Random { .. } => "random",
            Self::Local { .. } => "local",
        }
    }

    /// `grid`, `random` or `local`, the last two with a budget.
    pub fn parse(name: &str, budget: Option<Budget>, seed: u64) -> Result<Self, StrategyError> {
        let need = || budget.ok_or_else(|| StrategyError::NoBudget(name.to_string()));
        match name {
            "grid" => Ok(Self::Grid),
            "random" => Ok(Self::Random {
                budget: need()?,
                seed,
            }),
            "local" => Ok(Self::Local {
                budget: need()?,
                seed,
            }),
            other => Err(StrategyError::Unknown(other.to_string())),
        }
    }

    /// The seconds a time budget gives the kernel's search, if it is one.
    pub fn seconds(&self) -> Option<f64> {
        match self {
            Self::Random {
                budget: Budget::Seconds(s),
                ..
            }
            | Self::Local {
                budget: Budget::Seconds(s),
                ..
            } => Some(*s),
            _ => None,
        }
    }

    /// Searches one key. `points[i]` are the values of point `i`; `start` is the
    /// incumbent; `seeds` are points to time with it, within the budget (the grid
    /// times every point anyway; the random search draws the rest; the local search
    /// climbs from the best of them); `measure(batch)` times the points of `batch`
    /// and returns each median (`None`: the point is out); `spent()` says the key's
    /// time is up (asked before every batch but the first). Returns the points
    /// timed, in order.
    pub fn search(
        &self,
        points: &[Vec<u32>],
        start: usize,
        seeds: &[usize],
        measure: &mut dyn FnMut(&[usize]) -> Vec<Option<f64>>,
        spent: &dyn Fn() -> bool,
    ) -> Vec<usize> {
        // The incumbent, then the seeds: distinct points of the space.
        let mut first = vec![start];
        for &seed in seeds {
            if seed < points.len() && !first.contains(&seed) {
                first.push(seed);
            }
        }
        let mut searched = Searched {
            timed: BTreeMap::new(),
            order: Vec::new(),
            measure,
        };
        match *self {
            Self::Grid => searched.run((0..points.len()).collect()),
            Self::Random { budget, seed } => {
                let mut rng = Rng::new(seed);
                let mut drawn = first;
                drawn.truncate(budget.points(points.len()).max(1));
                let mut rest: Vec<usize> =
                    (0..points.len()).filter(|i| !drawn.contains(i)).collect();
                while drawn.len() < budget.points(points.len()) && !rest.is_empty() {
                    let pick = (rng.next_u64() % rest.len() as u64) as usize;
                    drawn.push(rest.swap_remove(pick));
                }
                match budget {
                    // One batch: the worker times them back to back.
                    Budget::Points(_) => searched.run(drawn),
                    Budget::Seconds(_) => {
                        searched.run(vec![start]);
                        for batch in drawn[1..].chunks(RANDOM_BATCH) {
                            if spent() {
                                break;
                            }
                            searched.run(batch.to_vec());
                        }
                    }
                }
            }
            Self::Local { budget, seed } => {
                searched.climb(points, &first, budget.points(points.len()), seed, spent);
            }
        }
        searched.order
    }
}

/// The points a search timed: each one's median (`None`: out), in the order timed.
struct Searched<'m> {
    timed: BTreeMap<usize, Option<f64>>,
    order: Vec<usize>,
    measure: &'m mut dyn FnMut(&[usize]) -> Vec<Option<f64>>,
}

impl Searched<'_> {
    /// Times the points of `batch` not timed yet, as one batch.
    fn run(&mut self, batch: Vec<usize>) {
        let batch: Vec<usize> = batch
            .into_iter()
            .filter(|i| !self.timed.contains_key(i))
            .collect();
        if batch.is_empty() {
            return;
        }
        for (i, median) in batch.iter().zip((self.measure)(&batch)) {
            self.timed.insert(*i, median);
            self.order.push(*i);
        }
    }

    /// The local search: from the incumbent (`first[0]`), then the best of the
    /// seeds (`first[1..]`), to the fastest untimed neighbour each round, restarting
    /// from a random untimed point at a local optimum, until `budget` points are
    /// timed or the time is `spent`.
    fn climb(
        &mut self,
        points: &[Vec<u32>],
        first: &[usize],
        budget: usize,
        seed: u64,
        spent: &dyn Fn() -> bool,
    ) {
        let mut rng = Rng::new(seed);
        let mut current = first[0];
        self.run(vec![current]);
        if first.len() > 1 && !spent() {
            let room = budget.saturating_sub(self.timed.len());
            self.run(first[1..].iter().copied().take(room).collect());
            current = fastest(&self.timed).unwrap_or(current);
        }
        while self.timed.len() < budget && !spent() {
            let room = budget - self.timed.len();
            let fresh: Vec<usize> = neighbours(points, current)
                .into_iter()
                .filter(|i| !self.timed.contains_key(i))
                .take(room)
                .collect();
            if fresh.is_empty() {
                // A local optimum: restart from a random point not yet timed.
                let untimed: Vec<usize> = (0..points.len())
                    .filter(|i| !self.timed.contains_key(i))
                    .collect();
                let Some(&restart) =
                    untimed.get((rng.next_u64() % untimed.len().max(1) as u64) as usize)
                else {
                    break;
                };
                self.run(vec![restart]);
                current = restart;
                continue;
            }
            self.run(fresh);
            let best = fastest(&self.timed).unwrap_or(current);
            if best != current {
                current = best;
            }
            // Else, with every neighbour timed, the restart branch picks up next round.
        }
    }
}

/// The fastest point among those `timed` that passed (a median, not `None`).
fn fastest(timed: &BTreeMap<usize, Option<f64>>) -> Option<usize> {
    timed
        .iter()
        .filter_map(|(&i, m)| m.map(|m| (i, m)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| i)
}

/// Points one step from `points[of]` along each parameter: for each parameter and
/// direction, the point whose value of it is the nearest below (above) among the
/// points of the space (those the constraint keeps) that differ from this one in
/// that parameter alone. A value the constraint excludes here is stepped over: where
/// `algo = 1` has no point with this tile, `algo = 0 -> 2` is one step (a search from
/// the default could otherwise not reach a kernel two values away).
///
/// Where no point differs in that parameter alone, the points that differ in it and
/// in one other are the step, at the nearest value of it, each other parameter at
/// its value nearest to this point's: where the constraint ties two parameters (the
/// Hopper GEMM's `warps = bm / 16`), `bm = 128 -> 64` is then a step, with `warps = 8
/// -> 4` (and, as near, the other kernel's `bm = 64` at `warps = 8`), instead of no
/// step at all.
pub fn neighbours(points: &[Vec<u32>], of: usize) -> Vec<usize> {
    let here = &points[of];
    let side = |j: usize, d: usize| usize::from(points[j][d] > here[d]);
    // Per parameter and side (below, above): the nearest point differing in it alone.
    let mut alone: Vec<[Option<usize>; 2]> = vec![[None, None]; here.len()];
    // (parameter, side, the other parameter, point) of the points differing in two.
    let mut pairs: Vec<(usize, usize, usize, usize)> = Vec::new();
    for (j, point) in points.iter().enumerate() {
        let differing: Vec<usize> = (0..here.len()).filter(|&d| point[d] != here[d]).collect();
        match differing[..] {
            [d] => {
                let slot = &mut alone[d][side(j, d)];
                if slot.is_none_or(|k| points[k][d].abs_diff(here[d]) > point[d].abs_diff(here[d]))
                {
                    *slot = Some(j);
                }
            }
            [d, e] => {
                pairs.push((d, side(j, d), e, j));
                pairs.push((e, side(j, e), d, j));
            }
            _ => {}
        }
    }
    let mut found: Vec<usize> = alone.iter().flatten().flatten().copied().collect();
    for (d, slots) in alone.iter().enumerate() {
        for (s, slot) in slots.iter().enumerate() {
            if slot.is_some() {
                continue;
            }
            let candidates: Vec<(usize, usize)> = pairs
                .iter()
                .filter(|&&(pd, ps, _, _)| pd == d && ps == s)
                .map(|&(_, _, e, j)| (e, j))
                .collect();
            let Some(step) = candidates
                .iter()
                .map(|&(_, j)| points[j][d].abs_diff(here[d]))
                .min()
            else {
                continue;
            };
            let at_step: Vec<(usize, usize)> = candidates
                .into_iter()
                .filter(|&(_, j)| points[j][d].abs_diff(here[d]) == step)
                .collect();
            for &(e, j) in &at_step {
                let nearest_e = at_step
                    .iter()
                    .filter(|&&(f, _)| f == e)
                    .map(|&(_, k)| points[k][e].abs_diff(here[e]))
                    .min();
                if nearest_e == Some(points[j][e].abs_diff(here[e])) {
                    found.push(j);
                }
            }
        }
    }
    found.sort_unstable();
    found.dedup();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid() -> Vec<Vec<u32>> {
        let mut points = Vec::new();
        for a in [1, 2, 4, 8, 16] {
            for b in [1, 2, 3, 4, 5] {
                points.push(vec![a, b]);
            }
        }
        points
    }

    /// A smooth bowl with its minimum at (8, 4).
    fn cost(p: &[u32]) -> f64 {
        let a = (p[0] as f64).log2() - 3.0;
        let b = p[1] as f64 - 4.0;
        10.0 + a * a + b * b
    }

    /// The neighbours of `of` among `points`, as points, sorted.
    fn neighbours_of(points: &[Vec<u32>], of: [u32; 2]) -> Vec<Vec<u32>> {
        let at = points.iter().position(|p| *p == of).unwrap();
        let mut found: Vec<Vec<u32>> = neighbours(points, at)
            .into_iter()
            .map(|i| points[i].clone())
            .collect();
        found.sort();
        found
    }

    #[test]
    fn neighbours_are_one_step_in_one_parameter() {
        assert_eq!(
            neighbours_of(&grid(), [4, 3]),
            [vec![2, 3], vec![4, 2], vec![4, 4], vec![8, 3]]
        );
    }

    #[test]
    fn a_value_the_constraint_excludes_here_is_stepped_over() {
        // No (8, 3): from (4, 3) the next value of the first parameter is 16. Seen on
        // the GEMM, whose `algo = 1` has no point with the default's tile, so that the
        // search never stepped from `algo = 0` to the Hopper kernel's `algo = 2`.
        let points: Vec<Vec<u32>> = grid().into_iter().filter(|p| *p != [8, 3]).collect();
        assert_eq!(
            neighbours_of(&points, [4, 3]),
            [vec![2, 3], vec![4, 2], vec![4, 4], vec![16, 3]]
        );
    }

    /// Session 8: the GEMM's Hopper points have `warps = bm / 16`, so no point of
    /// them differs from another in `bm` alone, and the search could not step from
    /// `bm = 128` (where it climbed) to `bm = 64` (where the decode shapes' fastest
    /// points were, never timed).
    #[test]
    fn tied_parameters_step_together_where_neither_can_alone() {
        // (kind, bm, warps): kind 0 has every (bm, warps); kind 2 ties warps = bm / 16.
        let mut points = Vec::new();
        for bm in [64, 128] {
            for warps in [4, 8] {
                points.push(vec![0, bm, warps]);
            }
            points.push(vec![2, bm, bm / 16]);
        }
        let at = |p: [u32; 3]| points.iter().position(|q| *q == p).unwrap();
        let found = |p: [u32; 3]| -> Vec<Vec<u32>> {
            let mut found: Vec<Vec<u32>> = neighbours(&points, at(p))
                .into_iter()
                .map(|i| points[i].clone())
                .collect();
            found.sort();
            found
        };
        // From (2, 128, 8): kind 0 alone; bm down and warps down, which neither can
        // alone, each with one other parameter: (2, 64, 4) among them.
        assert_eq!(
            found([2, 128, 8]),
            [
                vec![0, 64, 8],
                vec![0, 128, 4],
                vec![0, 128, 8],
                vec![2, 64, 4]
            ]
        );
        // Where a parameter can change alone, only that step is taken.
        assert_eq!(
            found([0, 64, 4]),
            [vec![0, 64, 8], vec![0, 128, 4], vec![2, 64, 4]]
        );
    }

    #[test]
    fn local_search_finds_the_bowls_minimum_within_budget() {
        let points = grid();
        let start = 0;
        let mut measure = |batch: &[usize]| batch.iter().map(|&i| Some(cost(&points[i]))).collect();
        // From the far corner (1, 1) of a 25-point grid, 14 timings reach (8, 4).
        let timed = Strategy::Local {
            budget: Budget::Points(14),
            seed: 1,
        }
        .search(&points, start, &[], &mut measure, &|| false);
        assert!(timed.len() <= 14);
        let best = timed
            .iter()
            .min_by(|&&a, &&b| cost(&points[a]).total_cmp(&cost(&points[b])))
            .unwrap();
        assert_eq!(points[*best], [8, 4]);
    }

    /// Session 9: a retune with 14 points per key from the default found nothing
    /// the previous search (36 points, same space) had found. Seeds (the stale
    /// table's winners) are timed right after the incumbent and climbed from.
    #[test]
    fn seeds_are_timed_after_the_incumbent_and_the_climb_starts_from_the_best() {
        let points = grid();
        let at = |p: [u32; 2]| points.iter().position(|q| *q == p).unwrap();
        let best_of = |timed: &[usize]| {
            let best = timed
                .iter()
                .min_by(|&&a, &&b| cost(&points[a]).total_cmp(&cost(&points[b])))
                .unwrap();
            points[*best].clone()
        };
        let local = Strategy::Local {
            budget: Budget::Points(6),
            seed: 1,
        };
        let mut measure = |batch: &[usize]| batch.iter().map(|&i| Some(cost(&points[i]))).collect();
        // From the far corner, six timings do not get near (8, 4) ...
        let cold = local.search(&points, at([1, 1]), &[], &mut measure, &|| false);
        assert_ne!(best_of(&cold), [8, 4]);
        // ... from a seed one step away they do; the incumbent is still first, a seed
        // equal to it or outside the space is ignored.
        let seeds = [at([1, 1]), at([8, 3]), points.len() + 3];
        let warm = local.search(&points, at([1, 1]), &seeds, &mut measure, &|| false);
        assert_eq!(warm[..2], [at([1, 1]), at([8, 3])]);
        assert_eq!(best_of(&warm), [8, 4]);
        assert!(warm.len() <= 6);
        // The random search draws the seeds first, within its budget.
        let random = Strategy::Random {
            budget: Budget::Points(2),
            seed: 5,
        };
        let drawn = random.search(
            &points,
            0,
            &[at([8, 3]), at([16, 5])],
            &mut measure,
            &|| false,
        );
        assert_eq!(drawn, [0, at([8, 3])]);
    }

    #[test]
    fn random_and_grid_respect_their_budgets_and_time_the_incumbent_first() {
        let points = grid();
        let mut calls = 0;
        let mut measure = |batch: &[usize]| {
            calls += 1;
            batch.iter().map(|_| Some(1.0)).collect()
        };
        let random = Strategy::Random {
            budget: Budget::Points(7),
            seed: 3,
        };
        let timed = random.search(&points, 12, &[], &mut measure, &|| false);
        assert_eq!(timed.len(), 7);
        assert_eq!(timed[0], 12);
        assert_eq!(
            Strategy::Grid
                .search(&points, 0, &[], &mut measure, &|| true)
                .len(),
            25
        );
        assert_eq!(calls, 2);
        assert_eq!(
            Strategy::parse("local", None, 0),
            Err(StrategyError::NoBudget("local".into()))
        );
        assert_eq!(
            Strategy::parse("annealing", Some(Budget::Points(3)), 0),
            Err(StrategyError::Unknown("annealing".into()))
        );
    }

    #[test]
    fn a_time_budget_stops_between_batches_but_always_times_the_incumbent() {
        let points = grid();
        let batches = std::cell::Cell::new(0);
        let mut measure = |batch: &[usize]| {
            batches.set(batches.get() + 1);
            batch.iter().map(|&i| Some(cost(&points[i]))).collect()
        };
        for strategy in [
            Strategy::Random {
                budget: Budget::Seconds(1.0),
                seed: 4,
            },
            Strategy::Local {
                budget: Budget::Seconds(1.0),
                seed: 4,
            },
        ] {
            batches.set(0);
            // Out of time from the start: the incumbent alone.
            let timed = strategy.search(&points, 6, &[], &mut measure, &|| true);
            assert_eq!(timed, [6], "{strategy}");
            // Time for three batches: more points, and no more than three batches.
            batches.set(0);
            let timed = strategy.search(&points, 6, &[], &mut measure, &|| batches.get() >= 3);
            assert_eq!(batches.get(), 3, "{strategy}");
            assert!(timed.len() > 3 && timed[0] == 6, "{strategy}: {timed:?}");
            // Never out of time: the whole space, as a grid would.
            let timed = strategy.search(&points, 6, &[], &mut measure, &|| false);
            assert_eq!(timed.len(), points.len(), "{strategy}");
        }
    }

    #[test]
    fn budgets_parse_as_points_or_seconds() {
        assert_eq!(Budget::parse("28"), Ok(Budget::Points(28)));
        assert_eq!(Budget::parse("60s"), Ok(Budget::Seconds(60.0)));
        assert_eq!(Budget::parse(" 2.5s "), Ok(Budget::Seconds(2.5)));
        for bad in ["0", "-3", "60m", "s", "-1s", "infs"] {
            assert_eq!(Budget::parse(bad), Err(StrategyError::Budget(bad.into())));
        }
        assert_eq!(
            Strategy::parse("local", Some(Budget::Seconds(60.0)), 1).map(|s| s.seconds()),
            Ok(Some(60.0))
        );
    }
}
