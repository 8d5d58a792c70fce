//! [`Builder`]: the build step's options, set in `build.rs`.

use std::path::PathBuf;

use crate::settings::Settings;
use crate::tunables::Tunables;
use crate::{BuildError, step, worker_entry};

/// The build step, configured in `build.rs`; every option is overridden by its
/// `AUTOTUNE_*` environment variable where that is set (see [`Settings`]).
///
/// ```no_run
/// // build.rs
/// fn main() -> Result<(), autotune_build::BuildError> {
///     autotune_build::Builder::new()
///         .tables_dir("kernels/tuning")
///         .min_margin(0.02)
///         .tune(autotune_build::tunables!())
/// }
/// ```
#[derive(Debug, Clone, Default)]
pub struct Builder {
    tables_dir: Option<PathBuf>,
    /// Set through the setters: [`Settings`]'s declaration makes one per setting
    /// that `build.rs` may set (`seed`, `min_margin`, ...).
    pub(crate) settings: Settings,
}

impl Builder {
    /// Tables in `<crate>/tuning`, the default settings.
    pub fn new() -> Self {
        Self::default()
    }

    /// Where the tuning tables live, relative to the crate root (default `tuning`).
    ///
    /// ```no_run
    /// # fn main() -> Result<(), autotune_build::BuildError> {
    /// # let tunables = autotune_build::Tunables::new(env!("CARGO_MANIFEST_DIR"));
    /// // build.rs
    /// autotune_build::Builder::new()
    ///     .tables_dir("kernels/tuning")
    ///     .tune(tunables)
    /// # }
    /// ```
    pub fn tables_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.tables_dir = Some(dir.into());
        self
    }

    /// The architectures to compile for, the first one the sweep's (`AUTOTUNE_ARCH`).
    ///
    /// ```no_run
    /// # fn main() -> Result<(), autotune_build::BuildError> {
    /// # let tunables = autotune_build::Tunables::new(env!("CARGO_MANIFEST_DIR"));
    /// // build.rs
    /// autotune_build::Builder::new()
    ///     .archs(["sm_90a", "sm_100"])
    ///     .tune(tunables)
    /// # }
    /// ```
    pub fn archs<S: Into<String>>(mut self, archs: impl IntoIterator<Item = S>) -> Self {
        self.settings.archs = archs.into_iter().map(Into::into).collect();
        self
    }

    /// Runs the build step over `tunables`. See the crate documentation. A build
    /// script that a sweep started as its worker serves the sweep here instead
    /// and exits.
    pub fn tune(self, tunables: Tunables) -> Result<(), BuildError> {
        let stray_worker = worker_entry::enter(&tunables);
        step::run(self.tables_dir, self.settings, tunables, stray_worker)
    }
}
