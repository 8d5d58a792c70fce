//! Compiling every variant of a kernel without a GPU: what a crate's own test calls
//! so that CI (nvcc, no GPU) sees a point that does not compile or spills before a
//! tuning build on the GPU machine would prune it.
//!
//! ```ignore
//! // tests/variants.rs of a crate with #[autotune] wrappers
//! #[test]
//! fn every_variant_compiles() {
//!     let report = autotune_build::variants::compile_all(
//!         &<my_crate::SiluMul as autotune_runtime::Kernel>::SPEC,
//!         env!("CARGO_MANIFEST_DIR"),
//!         "sm_90",
//!     );
//!     match report {
//!         Ok(report) => report.assert_clean(),
//!         Err(no_nvcc) => autotune_build::skip(no_nvcc),
//!     }
//! }
//! ```

use std::path::{Path, PathBuf};

use autotune_runtime::KernelSpec;
use autotune_table::progress::Progress;
use autotune_table::resources::Resources;

use crate::fingerprint::flags_of;
use crate::nvcc::{self, Nvcc, NvccError, Target};
use crate::tuner::compile_jobs;

/// One variant's outcome: its ptxas resources, or why it did not compile.
#[derive(Debug, Clone)]
pub struct CompiledVariant {
    /// The point's name (`block=128,stages=2`, or `fallback:...`).
    pub name: String,
    pub result: Result<Resources, VariantFailure>,
    /// Seconds nvcc took (now, or when the cached image was made).
    pub seconds: f64,
}

/// Why a variant has no resources to show.
#[derive(Debug, Clone, thiserror::Error)]
pub enum VariantFailure {
    /// nvcc could not compile it (its log in the error).
    #[error("{0}")]
    Nvcc(std::sync::Arc<NvccError>),
    /// It compiled, but ptxas's `-v` report named no resources for it.
    #[error("ptxas reported no resources")]
    NoResources,
}

/// Every variant of one kernel, compiled for one architecture.
#[derive(Debug, Clone)]
pub struct VariantReport {
    pub kernel: &'static str,
    pub arch: String,
    pub variants: Vec<CompiledVariant>,
    /// Wall time of the whole batch (cached variants take none).
    pub seconds: f64,
}

impl VariantReport {
    /// Each variant that did not compile, or whose registers spill, in one line.
    pub fn failures(&self) -> Vec<String> {
        self.variants
            .iter()
            .filter_map(|v| match &v.result {
                Err(error) => Some(format!("{}: {error}", v.name)),
                Ok(resources) if resources.spills() => {
                    Some(format!("{}: spills ({resources:?})", v.name))
                }
                Ok(_) => None,
            })
            .collect()
    }

    /// Panics, naming every failure, unless every variant compiled without spills;
    /// prints each variant's registers and shared memory to stderr.
    #[allow(clippy::panic)] // a test helper: panicking is how it fails the test
    pub fn assert_clean(&self) {
        eprintln!(
            "{}: {} variants for {} in {:.1} s",
            self.kernel,
            self.variants.len(),
            self.arch,
            self.seconds
        );
        for variant in &self.variants {
            if let Ok(r) = &variant.result {
                eprintln!(
                    "  {:<40} {:>3} registers {:>6} B shared {:>4} B stack {:>6.1} s nvcc",
                    variant.name, r.registers, r.shared_bytes, r.stack_bytes, variant.seconds
                );
            }
        }
        let failures = self.failures();
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}

/// Compiles every point of `spec` (and its fallback's default) for `arch`
/// (`"sm_90"`) with the nvcc the build would use, caching outputs under the
/// target folder like the build does. `crate_root` is the crate's manifest folder
/// (`env!("CARGO_MANIFEST_DIR")`). `Err` when nvcc cannot be found or cannot list
/// what the source includes: a test then says it skipped.
pub fn compile_all(
    spec: &'static KernelSpec,
    crate_root: impl AsRef<Path>,
    arch: &str,
) -> Result<VariantReport, NvccError> {
    let root = crate_root.as_ref();
    let cache = cache_dir(root);
    let nvcc = Nvcc::find(&cache)?;
    let mut dependencies: Vec<PathBuf> = Vec::new();
    for (index, written) in spec.sources().enumerate() {
        // A precompiled image reads nothing else (nvcc is never run on it).
        if autotune_spec::image::is_image(written) {
            continue;
        }
        let source = autotune_spec::image::resolve_here(root, written)
            .unwrap_or_else(|_| root.join(written));
        let defines = spec.defines(&spec.default_for_source(index));
        let args = nvcc::source_args(&flags_of(spec), &defines, &source);
        // A source the scanner cannot read is nvcc's to report.
        let scanned = nvcc::scan(&source, &args, root).unwrap_or_default();
        for dep in nvcc.dependencies(&source, &args, root, &scanned)? {
            let dep = if dep.is_absolute() {
                dep
            } else {
                root.join(dep)
            };
            if !dependencies.contains(&dep) {
                dependencies.push(dep);
            }
        }
    }
    let jobs = compile_jobs(
        spec,
        root,
        &Target::Cubin(arch.to_string()),
        &[],
        &dependencies,
    );
    let batch: Vec<_> = jobs.iter().map(|point| point.job.clone()).collect();
    let (results, seconds) =
        crate::image::compile_all(Some(&nvcc), &batch, &cache, &Progress::silent(spec.name));
    let variants = jobs
        .iter()
        .zip(results)
        .map(|(point, result)| CompiledVariant {
            name: point.name.clone(),
            seconds: result.as_ref().map_or(0.0, |compiled| compiled.seconds),
            result: result
                .map_err(|e| VariantFailure::Nvcc(std::sync::Arc::new(e)))
                .and_then(|compiled| compiled.resources.ok_or(VariantFailure::NoResources)),
        })
        .collect();
    Ok(VariantReport {
        kernel: spec.name,
        arch: arch.to_string(),
        variants,
        seconds,
    })
}

/// `$CARGO_TARGET_DIR/autotune-images`, else `target/autotune-images` under
/// the crate.
fn cache_dir(root: &Path) -> PathBuf {
    autotune_table::vars::CARGO_TARGET_DIR
        .os()
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("autotune-images")
}
