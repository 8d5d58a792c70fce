//! Where `#[autotune]` is expanding: in the crate, in its build script (twin
//! compile), or in a crate without a build script.

use std::path::PathBuf;

/// Where a wrapper is being expanded.
#[derive(Debug, Clone)]
pub(crate) enum Site {
    /// Compiling the crate, after its build script generated the dispatch plans.
    Crate { manifest_dir: Option<PathBuf> },
    /// Compiling `build.rs`, which includes the wrapper's file to run the sweep.
    BuildScript { manifest_dir: Option<PathBuf> },
    /// Compiling a crate that has no build script: nothing generated a plan.
    NoBuildScript,
}

impl Site {
    /// Cargo compiles a build script as crate `build_script_build` and sets
    /// `OUT_DIR` only for the package's other targets.
    // The macro reads what cargo sets for the crate being compiled (it does not
    // link the tables crate, whose registry the build side reads through).
    #[allow(clippy::disallowed_methods)]
    pub(crate) fn detect() -> Self {
        let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
        let crate_name = std::env::var("CARGO_CRATE_NAME").unwrap_or_default();
        if crate_name.starts_with("build_script_") {
            Self::BuildScript { manifest_dir }
        } else if std::env::var_os("OUT_DIR").is_some() {
            Self::Crate { manifest_dir }
        } else {
            Self::NoBuildScript
        }
    }

    pub(crate) fn manifest_dir(&self) -> Option<&std::path::Path> {
        match self {
            Self::Crate { manifest_dir } | Self::BuildScript { manifest_dir } => {
                manifest_dir.as_deref()
            }
            Self::NoBuildScript => None,
        }
    }
}
