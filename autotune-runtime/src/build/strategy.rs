//! Which points to time at one key: all of them (`grid`), or, for spaces too large
//! to enumerate, a budget of them chosen by random sampling or by local search
//! (hill climbing over neighbouring points, restarting at random points while
//! budget remains). The incumbent is always timed first.

use std::collections::BTreeMap;

use crate::random::Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    Grid,
    /// The incumbent and `budget - 1` points drawn at random.
    Random {
        budget: usize,
        seed: u64,
    },
    /// Hill climbing from the incumbent over neighbours (one parameter one step
    /// away), restarting from random points, until `budget` points are timed.
    Local {
        budget: usize,
        seed: u64,
    },
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Grid => f.write_str("grid (every point)"),
            Self::Random { budget, .. } => write!(f, "random, {budget} points per key"),
            Self::Local { budget, .. } => write!(f, "local search, {budget} points per key"),
        }
    }
}

impl Strategy {
    /// `grid`, `random` or `local`, with a budget of points per key.
    pub fn parse(name: &str, budget: Option<usize>, seed: u64) -> Result<Self, String> {
        let need = || {
            budget
                .filter(|&b| b > 0)
                .ok_or_else(|| format!("strategy `{name}` needs a budget of points per key"))
        };
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
            other => Err(format!("unknown strategy `{other}` (grid, random, local)")),
        }
    }

    /// Searches one key. `points[i]` are the values of point `i`; `start` is the
    /// incumbent; `measure(batch)` times the points of `batch` and returns each
    /// median (`None`: the point is out). Returns the points timed, in order.
    pub fn search(
        &self,
        points: &[Vec<u32>],
        start: usize,
        measure: &mut dyn FnMut(&[usize]) -> Vec<Option<f64>>,
    ) -> Vec<usize> {
        let mut timed: BTreeMap<usize, Option<f64>> = BTreeMap::new();
        let mut order = Vec::new();
        let mut run = |batch: Vec<usize>,
                       timed: &mut BTreeMap<usize, Option<f64>>,
                       order: &mut Vec<usize>| {
            let batch: Vec<usize> = batch
                .into_iter()
                .filter(|i| !timed.contains_key(i))
                .collect();
            if batch.is_empty() {
                return;
            }
            for (i, median) in batch.iter().zip(measure(&batch)) {
                timed.insert(*i, median);
                order.push(*i);
            }
        };
        match *self {
            Self::Grid => run((0..points.len()).collect(), &mut timed, &mut order),
            Self::Random { budget, seed } => {
                let mut rng = Rng::new(seed);
                let mut batch = vec![start];
                let mut rest: Vec<usize> = (0..points.len()).filter(|&i| i != start).collect();
                while batch.len() < budget.min(points.len()) && !rest.is_empty() {
                    let pick = (rng.next_u64() % rest.len() as u64) as usize;
                    batch.push(rest.swap_remove(pick));
                }
                run(batch, &mut timed, &mut order);
            }
            Self::Local { budget, seed } => {
                let budget = budget.min(points.len());
                let mut rng = Rng::new(seed);
                let mut current = start;
                run(vec![start], &mut timed, &mut order);
                while timed.len() < budget {
                    let room = budget - timed.len();
                    let fresh: Vec<usize> = neighbours(points, current)
                        .into_iter()
                        .filter(|i| !timed.contains_key(i))
                        .take(room)
                        .collect();
                    if fresh.is_empty() {
                        // A local optimum: restart from a random point not yet timed.
                        let untimed: Vec<usize> = (0..points.len())
                            .filter(|i| !timed.contains_key(i))
                            .collect();
                        let Some(&restart) =
                            untimed.get((rng.next_u64() % untimed.len().max(1) as u64) as usize)
                        else {
                            break;
                        };
                        run(vec![restart], &mut timed, &mut order);
                        current = restart;
                        continue;
                    }
                    run(fresh, &mut timed, &mut order);
                    let best = timed
                        .iter()
                        .filter_map(|(&i, m)| m.map(|m| (i, m)))
                        .min_by(|a, b| a.1.total_cmp(&b.1))
                        .map_or(current, |(i, _)| i);
                    if best != current {
                        current = best;
                    } else if neighbours(points, current)
                        .iter()
                        .all(|i| timed.contains_key(i))
                    {
                        continue; // the restart branch picks up next round
                    }
                }
            }
        }
        order
    }
}

/// Points that differ from `points[of]` in one parameter, by one step of that
/// parameter's values.
pub fn neighbours(points: &[Vec<u32>], of: usize) -> Vec<usize> {
    let dims = points.first().map_or(0, Vec::len);
    let values: Vec<Vec<u32>> = (0..dims)
        .map(|d| {
            let mut v: Vec<u32> = points.iter().map(|p| p[d]).collect();
            v.sort_unstable();
            v.dedup();
            v
        })
        .collect();
    let here = &points[of];
    let step = |d: usize, a: u32, b: u32| {
        let (ia, ib) = (values[d].binary_search(&a), values[d].binary_search(&b));
        matches!((ia, ib), (Ok(x), Ok(y)) if x.abs_diff(y) == 1)
    };
    (0..points.len())
        .filter(|&j| {
            let differing: Vec<usize> = (0..dims).filter(|&d| points[j][d] != here[d]).collect();
            differing.len() == 1 && step(differing[0], points[j][differing[0]], here[differing[0]])
        })
        .collect()
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

    #[test]
    fn neighbours_are_one_step_in_one_parameter() {
        let points = grid();
        let of = points.iter().position(|p| *p == [4, 3]).unwrap();
        let mut found: Vec<Vec<u32>> = neighbours(&points, of)
            .into_iter()
            .map(|i| points[i].clone())
            .collect();
        found.sort();
        assert_eq!(found, [vec![2, 3], vec![4, 2], vec![4, 4], vec![8, 3]]);
    }

    #[test]
    fn local_search_finds_the_bowls_minimum_within_budget() {
        let points = grid();
        let start = 0;
        let mut measure = |batch: &[usize]| batch.iter().map(|&i| Some(cost(&points[i]))).collect();
        // From the far corner (1, 1) of a 25-point grid, 14 timings reach (8, 4).
        let timed = Strategy::Local {
            budget: 14,
            seed: 1,
        }
        .search(&points, start, &mut measure);
        assert!(timed.len() <= 14);
        let best = timed
            .iter()
            .min_by(|&&a, &&b| cost(&points[a]).total_cmp(&cost(&points[b])))
            .unwrap();
        assert_eq!(points[*best], [8, 4]);
    }

    #[test]
    fn random_and_grid_respect_their_budgets_and_time_the_incumbent_first() {
        let points = grid();
        let mut calls = 0;
        let mut measure = |batch: &[usize]| {
            calls += 1;
            batch.iter().map(|_| Some(1.0)).collect()
        };
        let timed = Strategy::Random { budget: 7, seed: 3 }.search(&points, 12, &mut measure);
        assert_eq!(timed.len(), 7);
        assert_eq!(timed[0], 12);
        assert_eq!(Strategy::Grid.search(&points, 0, &mut measure).len(), 25);
        assert_eq!(calls, 2);
        assert!(Strategy::parse("local", None, 0).is_err());
        assert!(Strategy::parse("annealing", Some(3), 0).is_err());
    }
}
