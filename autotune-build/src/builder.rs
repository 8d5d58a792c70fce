//! [`Builder`]: the build step's options, set in `build.rs`.

use std::path::PathBuf;
use std::time::Duration;

use autotune_table::strategy::Strategy;

use crate::settings::{Devices, Settings};
use crate::tunables::Tunables;
use crate::{BuildError, step, worker_entry};

/// The build step, configured in `build.rs`; every option is overridden by its
/// `AUTOTUNE_*` environment variable where that is set (see [`Settings`]).
///
/// ```ignore
/// autotune_build::Builder::new()
///     .tables_dir("kernels/tuning")
///     .min_margin(0.02)
///     .tune(autotune_build::tunables!())
/// ```
#[derive(Debug, Clone, Default)]
pub struct Builder {
    tables_dir: Option<PathBuf>,
    settings: Settings,
}

impl Builder {
    /// Tables in `<crate>/tuning`, the default settings.
    pub fn new() -> Self {
        Self::default()
    }

    /// Where the tuning tables live, relative to the crate root (default `tuning`).
    pub fn tables_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.tables_dir = Some(dir.into());
        self
    }

    /// The devices to tune on (`AUTOTUNE_DEVICES`).
    pub fn devices(mut self, devices: Devices) -> Self {
        self.settings.devices = devices;
        self
    }

    /// The architectures to compile for, the first one the sweep's (`AUTOTUNE_ARCH`).
    pub fn archs<S: Into<String>>(mut self, archs: impl IntoIterator<Item = S>) -> Self {
        self.settings.archs = archs.into_iter().map(Into::into).collect();
        self
    }

    /// Keep variants whose registers spill (`AUTOTUNE_ALLOW_SPILLS`).
    pub fn allow_spills(mut self, allow: bool) -> Self {
        self.settings.allow_spills = allow;
        self
    }

    /// The least relative win that replaces the incumbent (`AUTOTUNE_MIN_MARGIN`).
    pub fn min_margin(mut self, margin: f64) -> Self {
        self.settings.min_margin = margin;
        self
    }

    /// Rounds of boundary refinement (`AUTOTUNE_REFINE`).
    pub fn refine_rounds(mut self, rounds: u32) -> Self {
        self.settings.refine_rounds = rounds;
        self
    }

    /// How long a variant may go without a result (`AUTOTUNE_TASK_TIMEOUT_S`).
    pub fn task_timeout(mut self, timeout: Duration) -> Self {
        self.settings.task_timeout = timeout;
        self
    }

    /// The seed of the random inputs (`AUTOTUNE_SEED`).
    pub fn seed(mut self, seed: u64) -> Self {
        self.settings.seed = seed;
        self
    }

    /// Draws of random inputs each variant is checked on at each size
    /// (`AUTOTUNE_CHECK_SEEDS`, default 1).
    pub fn check_seeds(mut self, draws: u32) -> Self {
        self.settings.check_seeds = draws;
        self
    }

    /// The time budget per variant and key, in ms (`AUTOTUNE_TARGET_MS`).
    pub fn target_ms(mut self, target_ms: f64) -> Self {
        self.settings.timing.target_ms = target_ms;
        self
    }

    /// Time each launch as a replay of the CUDA graph it was captured into, and put
    /// out a variant whose launch cannot be captured (`AUTOTUNE_GRAPH=1`, default off;
    /// `cargo autotune judge` turns it on).
    pub fn graph(mut self, graph: bool) -> Self {
        self.settings.timing.graph = graph;
        self
    }

    /// Which points the sweep times (`AUTOTUNE_STRATEGY`, `AUTOTUNE_BUDGET`).
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.settings.strategy = strategy;
        self
    }

    /// Runs the build step over `tunables`. See the crate documentation. A build
    /// script that a sweep started as its worker serves the sweep here instead
    /// and exits ([`worker_entry::enter`]).
    pub fn tune(self, tunables: Tunables) -> Result<(), BuildError> {
        let stray_worker = worker_entry::enter(&tunables);
        step::run(self.tables_dir, self.settings, tunables, stray_worker)
    }
}
