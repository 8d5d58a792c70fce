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

// The tuning knobs (`autotune_build::Settings`), each overriding build.rs's value.
pub const STRATEGY: Var = Var::new(
    "AUTOTUNE_STRATEGY",
    "which points the sweep times: grid, random or local",
    true,
);
pub const BUDGET: Var = Var::new(
    "AUTOTUNE_BUDGET",
    "points per key (`28`) or seconds for a kernel's whole search (`60s`)",
    true,
);
pub const DEVICES: Var = Var::new(
    "AUTOTUNE_DEVICES",
    "the CUDA devices to tune on: `0,1` or `all`",
    true,
);
pub const ARCH: Var = Var::new(
    "AUTOTUNE_ARCH",
    "the architectures to compile for, the first one the sweep's (`sm_90a,sm_100a`)",
    true,
);
pub const FORCE: Var = Var::new(
    "AUTOTUNE_FORCE",
    "kernels to retune although their entries are fresh (`gemm,rms_norm` or `all`)",
    true,
);
pub const ALLOW_SPILLS: Var = Var::new(
    "AUTOTUNE_ALLOW_SPILLS",
    "keep variants whose registers spill (1 or 0)",
    true,
);
pub const MIN_MARGIN: Var = Var::new(
    "AUTOTUNE_MIN_MARGIN",
    "the least relative win that replaces the incumbent (0.02)",
    true,
);
pub const REFINE: Var = Var::new(
    "AUTOTUNE_REFINE",
    "rounds of boundary refinement between sizes with different winners",
    true,
);
pub const TASK_TIMEOUT_S: Var = Var::new(
    "AUTOTUNE_TASK_TIMEOUT_S",
    "seconds a variant may go without a result before it is put out",
    true,
);
pub const SEED: Var = Var::new("AUTOTUNE_SEED", "the seed of the random inputs", true);
pub const CHECK_SEEDS: Var = Var::new(
    "AUTOTUNE_CHECK_SEEDS",
    "draws of random inputs each variant is checked on at each size",
    true,
);
pub const TARGET_MS: Var = Var::new(
    "AUTOTUNE_TARGET_MS",
    "the time budget per variant and key, in ms",
    true,
);
pub const GRAPH: Var = Var::new(
    "AUTOTUNE_GRAPH",
    "time each launch as a CUDA-graph replay (1 or 0)",
    true,
);

// The build step's other inputs.
pub const CHECK: Var = Var::new(
    "AUTOTUNE_CHECK",
    "`1`: look at the GPU and tables, tune nothing (`cargo autotune check`)",
    true,
);
pub const TABLES_DIR: Var = Var::new(
    "AUTOTUNE_TABLES_DIR",
    "the tables folder, over build.rs's (`cargo autotune judge` tunes candidates there)",
    true,
);
pub const NVCC_TIMEOUT_S: Var = Var::new(
    "AUTOTUNE_NVCC_TIMEOUT_S",
    "seconds one nvcc run may take (600)",
    true,
);
pub const NVCC_WRAPPER: Var = Var::new(
    "AUTOTUNE_NVCC_WRAPPER",
    "a compiler cache to run nvcc through (sccache)",
    true,
);
pub const WORKER: Var = Var::new(
    "AUTOTUNE_WORKER",
    "set by the sweep: the build script runs as its worker for this kernel",
    true,
);
pub const WORKER_SUPERVISOR: Var = Var::new(
    "AUTOTUNE_WORKER_SUPERVISOR",
    "set by the sweep: the pid of the build that started the worker",
    false,
);
pub const PROGRESS: Var = Var::new(
    "AUTOTUNE_PROGRESS",
    "set by `cargo autotune tune`: the file the sweep reports its progress to",
    false,
);

// Other tools' variables.
pub const NVCC: Var = Var::new("NVCC", "the nvcc to use, which must work", true);
pub const CUDA_PATH: Var = Var::new("CUDA_PATH", "a CUDA toolkit: its bin/nvcc", true);
pub const CUDA_HOME: Var = Var::new("CUDA_HOME", "a CUDA toolkit: its bin/nvcc", true);
pub const CUDA_ROOT: Var = Var::new("CUDA_ROOT", "a CUDA toolkit: its bin/nvcc", true);
pub const CUDA_TOOLKIT_ROOT_DIR: Var = Var::new(
    "CUDA_TOOLKIT_ROOT_DIR",
    "a CUDA toolkit: its bin/nvcc",
    true,
);
pub const NVCC_CCBIN: Var = Var::new("NVCC_CCBIN", "nvcc's host compiler (read by nvcc)", true);
pub const NVCC_PREPEND_FLAGS: Var = Var::new(
    "NVCC_PREPEND_FLAGS",
    "flags nvcc adds (read by nvcc; part of the fingerprint)",
    true,
);
pub const NVCC_APPEND_FLAGS: Var = Var::new(
    "NVCC_APPEND_FLAGS",
    "flags nvcc adds (read by nvcc; part of the fingerprint)",
    true,
);
pub const RUSTC_WRAPPER: Var = Var::new("RUSTC_WRAPPER", "sccache there caches nvcc too", true);
pub const PATH: Var = Var::new("PATH", "where nvcc is looked for last", true);
pub const DOCS_RS: Var = Var::new(
    "DOCS_RS",
    "set by docs.rs: bake, probe nothing, say nothing",
    true,
);

// Set by cargo for a build script or a cargo subcommand.
pub const OUT_DIR: Var = Var::new("OUT_DIR", "where the generated dispatch goes", false);
pub const CARGO_PKG_NAME: Var = Var::new("CARGO_PKG_NAME", "the crate's name", false);
pub const CARGO_PKG_VERSION: Var = Var::new("CARGO_PKG_VERSION", "the crate's version", false);
pub const CARGO_MANIFEST_DIR: Var = Var::new("CARGO_MANIFEST_DIR", "the crate's folder", false);
pub const CARGO_FEATURE_AUTOTUNE: Var = Var::new(
    "CARGO_FEATURE_AUTOTUNE",
    "the crate's `autotune` feature: tune what is stale",
    false,
);
pub const CARGO_TARGET_DIR: Var = Var::new(
    "CARGO_TARGET_DIR",
    "where `variants::compile_all` puts its cache",
    false,
);
pub const CARGO: Var = Var::new("CARGO", "the cargo that runs `cargo autotune`", false);

/// Every variable, the tool's own first.
pub const ALL: &[Var] = &[
    STRATEGY,
    BUDGET,
    DEVICES,
    ARCH,
    FORCE,
    ALLOW_SPILLS,
    MIN_MARGIN,
    REFINE,
    TASK_TIMEOUT_S,
    SEED,
    CHECK_SEEDS,
    TARGET_MS,
    GRAPH,
    CHECK,
    TABLES_DIR,
    NVCC_TIMEOUT_S,
    NVCC_WRAPPER,
    WORKER,
    WORKER_SUPERVISOR,
    PROGRESS,
    NVCC,
    CUDA_PATH,
    CUDA_HOME,
    CUDA_ROOT,
    CUDA_TOOLKIT_ROOT_DIR,
    NVCC_CCBIN,
    NVCC_PREPEND_FLAGS,
    NVCC_APPEND_FLAGS,
    RUSTC_WRAPPER,
    PATH,
    DOCS_RS,
    OUT_DIR,
    CARGO_PKG_NAME,
    CARGO_PKG_VERSION,
    CARGO_MANIFEST_DIR,
    CARGO_FEATURE_AUTOTUNE,
    CARGO_TARGET_DIR,
    CARGO,
];

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
        assert_eq!(ours.count(), 20, "the tool's own come first");
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
