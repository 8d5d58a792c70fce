//! Every environment variable the tool reads, declared once: its name, what it
//! does, and whether a change of it reruns the build script. The build step and the
//! CLI read the environment only through [`Var`] (clippy's `disallowed-methods`
//! refuses `std::env::var` elsewhere), and the build prints each watched variable's
//! `cargo::rerun-if-env-changed` from [`ALL`].

use std::ffi::OsString;

/// An environment variable the tool reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Var {
    pub name: &'static str,
    /// What it does (or, for another tool's variable, why it is read).
    pub meaning: &'static str,
    /// Whether a change of it reruns the build script.
    pub watched: bool,
}

/// A value that is not UTF-8, where text was needed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name}={lossy:?} is not UTF-8")]
pub struct NotUnicode {
    pub name: &'static str,
    /// The value with each invalid sequence replaced.
    pub lossy: String,
}

impl Var {
    const fn new(name: &'static str, meaning: &'static str, watched: bool) -> Self {
        Self {
            name,
            meaning,
            watched,
        }
    }

    /// Its value where set: the one place the environment is read.
    #[allow(clippy::disallowed_methods)]
    pub fn os(&self) -> Option<OsString> {
        std::env::var_os(self.name)
    }

    /// Whether it is set (to anything, empty included).
    pub fn is_set(&self) -> bool {
        self.os().is_some()
    }

    /// Its value as text where set and not blank; a value that is not UTF-8 is an
    /// error (ignoring it would silently drop what the user asked for).
    pub fn text(&self) -> Result<Option<String>, NotUnicode> {
        match self.os().map(OsString::into_string) {
            None => Ok(None),
            Some(Ok(text)) => Ok(Some(text).filter(|t| !t.trim().is_empty())),
            Some(Err(value)) => Err(NotUnicode {
                name: self.name,
                lossy: value.to_string_lossy().into_owned(),
            }),
        }
    }

    /// Its value as text where set, not blank and UTF-8; otherwise `None`.
    pub fn text_or_none(&self) -> Option<String> {
        self.text().ok().flatten()
    }
}

/// Declares each variable as a constant (`NAME = "VARIABLE", watched, "meaning";`)
/// and [`ALL`], every one in the order declared.
macro_rules! vars {
    ($($(#[$doc:meta])* $name:ident = $var:literal, $watched:literal, $meaning:literal;)*) => {
        $(
            $(#[$doc])*
            #[doc = concat!("`", $var, "`: ", $meaning, ".")]
            pub const $name: Var = Var::new($var, $meaning, $watched);
        )*

        /// Every variable, the tool's own first.
        pub const ALL: &[Var] = &[$($name),*];
    };
}

// `true`: a change of it reruns the build script.
vars! {
    // The tuning knobs (`autotune_build::Settings`), each overriding build.rs's value.
    STRATEGY = "AUTOTUNE_STRATEGY", true,
        "which points the sweep times: grid, random or local";
    BUDGET = "AUTOTUNE_BUDGET", true,
        "points per key (`28`) or seconds for a kernel's whole search (`60s`)";
    DEVICES = "AUTOTUNE_DEVICES", true,
        "the CUDA devices to tune on: `0,1` or `all`";
    ARCH = "AUTOTUNE_ARCH", true,
        "the architectures to compile for, the first one the sweep's (`sm_90a,sm_100a`)";
    FORCE = "AUTOTUNE_FORCE", true,
        "kernels to retune although their entries are fresh (`gemm,rms_norm` or `all`)";
    ALLOW_SPILLS = "AUTOTUNE_ALLOW_SPILLS", true,
        "keep variants whose registers spill (1 or 0)";
    MIN_MARGIN = "AUTOTUNE_MIN_MARGIN", true,
        "the least relative win that replaces the incumbent (0.02)";
    REFINE = "AUTOTUNE_REFINE", true,
        "rounds of boundary refinement between sizes with different winners";
    TASK_TIMEOUT_S = "AUTOTUNE_TASK_TIMEOUT_S", true,
        "seconds a variant may go without a result before it is put out";
    SEED = "AUTOTUNE_SEED", true,
        "the seed of the random inputs";
    CHECK_SEEDS = "AUTOTUNE_CHECK_SEEDS", true,
        "draws of random inputs each variant is checked on at each size";
    TARGET_MS = "AUTOTUNE_TARGET_MS", true,
        "the time budget per variant and key, in ms";
    GRAPH = "AUTOTUNE_GRAPH", true,
        "time each launch as a CUDA-graph replay (1, the default, or 0; rotated inputs: their launches back to back in one graph)";
    FLUSH = "AUTOTUNE_FLUSH", true,
        "how L2 is evicted before each timed launch: `memset` (default) or `read`";
    DUEL_ROUNDS = "AUTOTUNE_DUEL_ROUNDS", true,
        "interleaved rounds of a challenger against the incumbent before it takes a key (60; 0: medians alone)";
    SHARD = "AUTOTUNE_SHARD", true,
        "tune only shard `i/N` of what is stale, into the tables folder's `shards/`";

    // The build step's other inputs.
    CHECK = "AUTOTUNE_CHECK", true,
        "`1`: look at the GPU and tables, tune nothing (`cargo autotune check`)";
    TABLES_DIR = "AUTOTUNE_TABLES_DIR", true,
        "the tables folder, over build.rs's (`cargo autotune judge` tunes candidates there)";
    NVCC_TIMEOUT_S = "AUTOTUNE_NVCC_TIMEOUT_S", true,
        "seconds one nvcc run may take (600)";
    NVCC_JOBS = "AUTOTUNE_NVCC_JOBS", true,
        "nvcc run at once (default: one per core; sccache-dist's build servers take more)";
    NVCC_WRAPPER = "AUTOTUNE_NVCC_WRAPPER", true,
        "a compiler cache to run nvcc through (sccache)";
    WORKER = "AUTOTUNE_WORKER", true,
        "set by the sweep: the build script runs as its worker for this kernel";
    WORKER_SUPERVISOR = "AUTOTUNE_WORKER_SUPERVISOR", false,
        "set by the sweep: the pid of the build that started the worker";
    REQUIRE_GPU = "AUTOTUNE_REQUIRE_GPU", false,
        "`1` on a GPU machine: a test that would skip for want of a GPU fails instead";
    PROGRESS = "AUTOTUNE_PROGRESS", false,
        "set by `cargo autotune tune`: the file the sweep reports its progress to";

    // Other tools' variables.
    NVCC = "NVCC", true,
        "the nvcc to use, which must work";
    CUDA_PATH = "CUDA_PATH", true,
        "a CUDA toolkit: its bin/nvcc";
    CUDA_HOME = "CUDA_HOME", true,
        "a CUDA toolkit: its bin/nvcc";
    CUDA_ROOT = "CUDA_ROOT", true,
        "a CUDA toolkit: its bin/nvcc";
    CUDA_TOOLKIT_ROOT_DIR = "CUDA_TOOLKIT_ROOT_DIR", true,
        "a CUDA toolkit: its bin/nvcc";
    NVCC_CCBIN = "NVCC_CCBIN", true,
        "nvcc's host compiler (read by nvcc)";
    NVCC_PREPEND_FLAGS = "NVCC_PREPEND_FLAGS", true,
        "flags nvcc adds (read by nvcc; part of the fingerprint)";
    NVCC_APPEND_FLAGS = "NVCC_APPEND_FLAGS", true,
        "flags nvcc adds (read by nvcc; part of the fingerprint)";
    RUSTC_WRAPPER = "RUSTC_WRAPPER", true,
        "sccache there caches nvcc too";
    PATH = "PATH", true,
        "where nvcc is looked for last";
    DOCS_RS = "DOCS_RS", true,
        "set by docs.rs: bake, probe nothing, say nothing";

    // Set by cargo for a build script or a cargo subcommand.
    OUT_DIR = "OUT_DIR", false,
        "where the generated dispatch goes";
    CARGO_PKG_NAME = "CARGO_PKG_NAME", false,
        "the crate's name";
    CARGO_PKG_VERSION = "CARGO_PKG_VERSION", false,
        "the crate's version";
    CARGO_MANIFEST_DIR = "CARGO_MANIFEST_DIR", false,
        "the crate's folder";
    CARGO_FEATURE_AUTOTUNE = "CARGO_FEATURE_AUTOTUNE", false,
        "the crate's `autotune` feature: tune what is stale";
    CARGO_TARGET_DIR = "CARGO_TARGET_DIR", false,
        "where `variants::compile_all` puts its cache";
    CARGO = "CARGO", false,
        "the cargo that runs `cargo autotune`";
}

/// The `cargo::rerun-if-env-changed` line of every watched variable.
pub fn rerun_lines() -> impl Iterator<Item = String> {
    ALL.iter()
        .filter(|var| var.watched)
        .map(|var| format!("cargo::rerun-if-env-changed={}", var.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_variable_is_declared_once_and_ours_are_prefixed() {
        let mut names: Vec<&str> = ALL.iter().map(|v| v.name).collect();
        names.sort_unstable();
        let count = names.len();
        names.dedup();
        assert_eq!(names.len(), count, "a variable is declared twice");
        let ours = ALL.iter().take_while(|v| v.name.starts_with("AUTOTUNE_"));
        assert_eq!(ours.count(), 25, "the tool's own come first");
        assert!(ALL.iter().all(|v| !v.meaning.is_empty()));
    }

    #[test]
    fn no_other_source_spells_a_variable_s_name() {
        // A name is typed here once: everything else says `vars::FORCE.name`.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut spelled = Vec::new();
        for krate in ["autotune-build", "autotune-table", "cargo-autotune"] {
            for entry in std::fs::read_dir(root.join(krate).join("src")).unwrap() {
                let path = entry.unwrap().path();
                if path.file_name().is_some_and(|n| n == "vars.rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                for (number, line) in text.lines().enumerate() {
                    // `env!("AUTOTUNE_BUILD_OPT_LEVEL")` is set at compile time by
                    // autotune-build's own build script, not read at run time.
                    if line.contains("\"AUTOTUNE_") && !line.contains("env!(\"AUTOTUNE_") {
                        spelled.push(format!("{}:{}", path.display(), number + 1));
                    }
                }
            }
        }
        assert!(spelled.is_empty(), "{spelled:#?}");
    }
}
