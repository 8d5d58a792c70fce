//! How far tuning has come, for a terminal to draw: with `AUTOTUNE_PROGRESS=FILE`
//! set (as `cargo autotune tune` does), every step appends one JSON line to FILE,
//! `{"kernel":"gemm","phase":"time","done":57,"total":904}`. Cargo keeps a build
//! script's own output until it ends, so a file is the one channel that is live.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// The three phases a point goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// nvcc (or the cache) produced its binary.
    Compile,
    /// Its output on fresh random inputs matched the reference.
    Verify,
    /// It was timed at one key value.
    Time,
}

impl Phase {
    pub const ALL: [Phase; 3] = [Phase::Compile, Phase::Verify, Phase::Time];
}

/// One progress line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Line {
    pub kernel: String,
    pub phase: Phase,
    pub done: u64,
    pub total: u64,
}

/// Counts per phase for one kernel, written out as they change. Shared by the
/// compile threads and the sweep's device lanes.
#[derive(Debug)]
pub struct Progress {
    kernel: String,
    sink: Option<Mutex<File>>,
    /// `(done, total)` per phase, in `Phase::ALL` order.
    counts: Mutex<[(u64, u64); 3]>,
}

impl Progress {
    /// Progress for `kernel`, written where `AUTOTUNE_PROGRESS` says (nowhere without it).
    pub fn from_env(kernel: &str) -> Self {
        let sink = crate::vars::PROGRESS
            .os()
            .filter(|path| !path.is_empty())
            .and_then(|path| OpenOptions::new().create(true).append(true).open(path).ok());
        Self::with_sink(kernel, sink)
    }

    /// Progress that is counted but written nowhere.
    pub fn silent(kernel: &str) -> Self {
        Self::with_sink(kernel, None)
    }

    fn with_sink(kernel: &str, sink: Option<File>) -> Self {
        Self {
            kernel: kernel.to_string(),
            sink: sink.map(Mutex::new),
            counts: Mutex::new([(0, 0); 3]),
        }
    }

    /// `count` more steps to do in `phase` (negative: fewer than announced).
    pub fn expect(&self, phase: Phase, count: i64) {
        self.update(phase, |(_, total)| {
            *total = total.saturating_add_signed(count);
        });
    }

    /// One step of `phase` done.
    pub fn step(&self, phase: Phase) {
        self.advance(phase, 1);
    }

    /// `count` steps of `phase` done.
    pub fn advance(&self, phase: Phase, count: usize) {
        if count > 0 {
            self.update(phase, |(done, _)| *done += count as u64);
        }
    }

    /// `(done, total)` of `phase`.
    pub fn count(&self, phase: Phase) -> (u64, u64) {
        self.counts
            .lock()
            .map_or((0, 0), |counts| counts[phase as usize])
    }

    fn update(&self, phase: Phase, change: impl FnOnce(&mut (u64, u64))) {
        let Ok(mut counts) = self.counts.lock() else {
            return;
        };
        let slot = &mut counts[phase as usize];
        change(slot);
        slot.1 = slot.1.max(slot.0);
        let line = Line {
            kernel: self.kernel.clone(),
            phase,
            done: slot.0,
            total: slot.1,
        };
        // Written under the counts' lock, so lines of one phase never go backwards.
        if let Some(sink) = &self.sink
            && let Ok(mut text) = serde_json::to_string(&line)
            && let Ok(mut file) = sink.lock()
        {
            // One write per line, so that lines of several build scripts appending
            // to one file do not interleave. A lost line costs a stale bar, never
            // the build.
            text.push('\n');
            let _ = file.write_all(text.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_count_up_to_a_total_that_can_shrink() {
        let path = crate::testing::scratch("progress").join("lines");
        let progress = Progress::with_sink("k", File::create(&path).ok());
        progress.expect(Phase::Time, 3);
        progress.step(Phase::Time);
        progress.expect(Phase::Time, -1);
        progress.step(Phase::Time);
        assert_eq!(progress.count(Phase::Time), (2, 2));
        assert_eq!(progress.count(Phase::Compile), (0, 0));
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let lines: Vec<Line> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(
            lines.last(),
            Some(&Line {
                kernel: "k".into(),
                phase: Phase::Time,
                done: 2,
                total: 2
            })
        );
        let _ = std::fs::remove_file(&path);
    }
}
