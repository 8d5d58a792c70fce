//! Where a sweep's units of work wait for a GPU. Each GPU's lane takes the next
//! unit it may run (one pinned to it first, then one at the key it ran last, so
//! that its worker keeps its case, then any); a search posts each batch of points
//! as units and waits until they have run, so that the batches of one size can
//! spread over every GPU.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use crate::error::BuildError;
use crate::worker::Task;

/// Tasks at one key for one lane: some points, the incumbent's always among them
/// (as that GPU's anchor). Pinned to a lane when it is that lane's share of a
/// split batch.
#[derive(Debug)]
pub struct Unit {
    pub key: u64,
    pub tasks: Vec<Task>,
    pub lane: Option<usize>,
}

/// A unit taken by a lane, with the batch it belongs to.
#[derive(Debug)]
pub struct Taken {
    pub unit: Unit,
    batch: Option<u64>,
}

#[derive(Debug)]
pub struct Board {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug)]
struct State {
    waiting: VecDeque<(Unit, Option<u64>)>,
    /// Searches that may still post batches.
    posters: usize,
    /// Per posted batch: its units not yet run.
    open: BTreeMap<u64, usize>,
    next_batch: u64,
    failure: Option<BuildError>,
}

impl Board {
    /// A board holding `units`, with `posters` searches still to post theirs.
    pub fn new(units: Vec<Unit>, posters: usize) -> Self {
        Self {
            state: Mutex::new(State {
                waiting: units.into_iter().map(|u| (u, None)).collect(),
                posters,
                open: BTreeMap::new(),
                next_batch: 0,
                failure: None,
            }),
            changed: Condvar::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(&self, state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed
            .wait(state)
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The next unit for `lane`, waiting while searches may still post one;
    /// `None` when nothing is left (or the sweep failed).
    pub fn take(&self, lane: usize, last_key: Option<u64>) -> Option<Taken> {
        let mut state = self.state();
        loop {
            if state.failure.is_some() {
                return None;
            }
            let allowed = |u: &Unit| u.lane.is_none_or(|l| l == lane);
            let next = state
                .waiting
                .iter()
                .position(|(u, _)| u.lane == Some(lane))
                .or_else(|| {
                    state
                        .waiting
                        .iter()
                        .position(|(u, _)| allowed(u) && Some(u.key) == last_key)
                })
                .or_else(|| state.waiting.iter().position(|(u, _)| allowed(u)));
            if let Some((unit, batch)) = next.and_then(|i| state.waiting.remove(i)) {
                return Some(Taken { unit, batch });
            }
            if state.posters == 0 {
                return None;
            }
            state = self.wait(state);
        }
    }

    /// `taken` has run, with `outcome`; the first error stops the sweep.
    pub fn done(&self, taken: &Taken, outcome: Result<(), BuildError>) {
        let mut state = self.state();
        if let Some(batch) = taken.batch
            && let Some(open) = state.open.get_mut(&batch)
        {
            *open = open.saturating_sub(1);
        }
        if let Err(error) = outcome {
            state.failure.get_or_insert(error);
        }
        self.changed.notify_all();
    }

    /// Posts `units` as one batch and waits until every one has run. `false` when
    /// the sweep failed meanwhile.
    pub fn run_batch(&self, units: Vec<Unit>) -> bool {
        let mut state = self.state();
        let batch = state.next_batch;
        state.next_batch += 1;
        state.open.insert(batch, units.len());
        state
            .waiting
            .extend(units.into_iter().map(|u| (u, Some(batch))));
        self.changed.notify_all();
        loop {
            if state.failure.is_some() {
                return false;
            }
            if state.open.get(&batch).is_none_or(|&open| open == 0) {
                state.open.remove(&batch);
                return true;
            }
            state = self.wait(state);
        }
    }

    /// A search has posted its last batch (or failed).
    pub fn poster_done(&self, outcome: Result<(), BuildError>) {
        let mut state = self.state();
        state.posters = state.posters.saturating_sub(1);
        if let Err(error) = outcome {
            state.failure.get_or_insert(error);
        }
        self.changed.notify_all();
    }

    /// The first error, once every lane and search has stopped.
    pub fn into_failure(self) -> Option<BuildError> {
        self.state
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .failure
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(key: u64, lane: Option<usize>) -> Unit {
        Unit {
            key,
            tasks: Vec::new(),
            lane,
        }
    }

    #[test]
    fn a_lane_takes_its_pinned_share_then_its_last_key_then_any() {
        let board = Board::new(vec![unit(1, None), unit(2, None), unit(3, Some(1))], 0);
        let take = |lane, last| board.take(lane, last).map(|t| t.unit.key);
        assert_eq!(take(1, None), Some(3), "pinned first");
        assert_eq!(take(0, Some(2)), Some(2), "the key it ran last");
        assert_eq!(take(0, Some(2)), Some(1));
        assert_eq!(take(0, None), None, "nothing left, no search posting");
    }

    #[test]
    fn a_posted_batch_returns_once_lanes_ran_it_and_lanes_stop_with_the_last_search() {
        let board = Board::new(Vec::new(), 1);
        let ran = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for lane in 0..2 {
                let (board, ran) = (&board, &ran);
                scope.spawn(move || {
                    while let Some(taken) = board.take(lane, None) {
                        if let Ok(mut ran) = ran.lock() {
                            ran.push((lane, taken.unit.key));
                        }
                        board.done(&taken, Ok(()));
                    }
                });
            }
            let board = &board;
            scope.spawn(move || {
                for key in [10, 20] {
                    let batch = vec![unit(key, Some(0)), unit(key, Some(1))];
                    assert!(board.run_batch(batch));
                }
                board.poster_done(Ok(()));
            });
        });
        let mut ran = ran.into_inner().unwrap_or_default();
        ran.sort_unstable();
        assert_eq!(ran, [(0, 10), (0, 20), (1, 10), (1, 20)]);
        assert!(board.into_failure().is_none());
    }

    #[test]
    fn a_failure_releases_the_waiting_search_and_the_lanes() {
        let board = Board::new(Vec::new(), 1);
        std::thread::scope(|scope| {
            let board = &board;
            scope.spawn(move || {
                if let Some(taken) = board.take(0, None) {
                    board.done(
                        &taken,
                        Err(BuildError::Worker(crate::error::WorkerFault::Died)),
                    );
                }
                assert!(board.take(0, None).is_none());
            });
            assert!(!board.run_batch(vec![unit(5, None)]));
            board.poster_done(Ok(()));
        });
        assert!(board.into_failure().is_some());
    }
}
