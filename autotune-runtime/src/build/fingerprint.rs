//! What a kernel's tuning depends on, hashed: sources, attribute, compiler, flags,
//! versions (the GPU is recorded by the table file itself).

use std::path::{Path, PathBuf};

use autotune_spec::source::SourceSet;
use sha2::{Digest, Sha256};

use super::error::BuildError;
use super::nvcc::{BASE_FLAGS, hex};
use super::table::Fingerprint;
use crate::KernelSpec;

/// The kernel and its fallback, as the specs whose sources and attributes count.
fn specs(spec: &'static KernelSpec) -> Vec<&'static KernelSpec> {
    let mut all = vec![spec];
    if let Some(fallback) = spec.fallback {
        all.push(fallback);
    }
    all
}

/// The files whose change must rerun the build script: each CUDA source with the
/// local headers it includes, and each wrapper file.
pub fn watched_files(spec: &'static KernelSpec, root: &Path) -> Result<Vec<PathBuf>, BuildError> {
    let mut files = Vec::new();
    for spec in specs(spec) {
        let source = root.join(spec.source);
        let set =
            SourceSet::load(&source).map_err(BuildError::io("cannot read CUDA source", &source))?;
        files.extend(set.files.into_iter().map(|f| f.path));
        files.push(root.join(spec.wrapper_file));
    }
    files.sort();
    files.dedup();
    Ok(files)
}

/// The fingerprint of `spec` as the crate stands now. `nvcc` is the version of the
/// nvcc found, if any.
pub fn current(
    spec: &'static KernelSpec,
    root: &Path,
    nvcc: Option<&str>,
    crate_version: &str,
) -> Result<Fingerprint, BuildError> {
    let mut sources = Sha256::new();
    let mut attribute = Sha256::new();
    for file in watched_files(spec, root)? {
        let text = std::fs::read(&file).map_err(BuildError::io("cannot read", &file))?;
        sources.update(&text);
        sources.update([0]);
    }
    for spec in specs(spec) {
        attribute.update(spec.name.as_bytes());
        attribute.update([0]);
        attribute.update(spec.attribute.as_bytes());
        attribute.update([0]);
    }
    Ok(Fingerprint {
        source_sha256: hex(&sources.finalize()),
        attribute_sha256: hex(&attribute.finalize()),
        nvcc: nvcc.unwrap_or("unknown").to_string(),
        flags: flags(spec),
        crate_version: crate_version.to_string(),
        runtime_version: env!("CARGO_PKG_VERSION").to_string(),
    })
}

/// The nvcc flags of `spec` besides its defines and target.
pub fn flags(spec: &KernelSpec) -> Vec<String> {
    BASE_FLAGS
        .iter()
        .map(|f| f.to_string())
        .chain(spec.flags.iter().map(|f| f.to_string()))
        .collect()
}

/// `table` against `current`, ignoring the nvcc version when none was found here
/// (nothing can be compiled then anyway, and the plan is still valid data).
pub fn differences(table: &Fingerprint, current: &Fingerprint) -> Vec<String> {
    let mut current = current.clone();
    if current.nvcc == "unknown" {
        current.nvcc = table.nvcc.clone();
    }
    table.differences(&current)
}
