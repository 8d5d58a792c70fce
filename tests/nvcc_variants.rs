//! Every point of every shipped kernel compiles with the real nvcc for the H200
//! (sm_90), without register spills: what the sweep would prune, CI sees first.
//! Skips (and says so) where nvcc is missing, unless AUTOTUNE_REQUIRE_NVCC=1.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] functions

#[path = "fixtures/skip.rs"]
mod skip;

use autotune_build::nvcc::{Nvcc, Target};
use autotune_build::tune::compile_jobs;
use autotune_kernels::{RmsNorm, TopkIndexer, TopkKeepAll};
use autotune_runtime::{Kernel, KernelSpec};
use autotune_table::progress::Progress;

fn nvcc() -> Option<Nvcc> {
    let cache = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("nvcc-variants");
    match Nvcc::find(&cache) {
        Ok(nvcc) => Some(nvcc),
        Err(why) if std::env::var_os("AUTOTUNE_REQUIRE_NVCC").is_some() => {
            panic!("AUTOTUNE_REQUIRE_NVCC is set but {why}")
        }
        Err(why) => {
            skip::skipped(&why.to_string());
            None
        }
    }
}

fn compile_every_point(spec: &'static KernelSpec) {
    let Some(nvcc) = nvcc() else { return };
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let cache = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("nvcc-variants");
    let jobs = compile_jobs(spec, root, &Target::Cubin("sm_90".into()), &[], &[]);
    let batch: Vec<_> = jobs.iter().map(|p| p.job.clone()).collect();
    let (results, seconds) = nvcc.compile_all(&batch, &cache, &Progress::silent("test"));
    eprintln!("{}: {} variants in {seconds:.1} s", spec.name, batch.len());
    let mut failures = Vec::new();
    for (point, result) in jobs.iter().zip(results) {
        let name = &point.name;
        match result {
            Err(error) => failures.push(format!("{name}: {error}")),
            Ok(compiled) => {
                let resources = compiled
                    .resources
                    .unwrap_or_else(|| panic!("{name}: no ptxas report"));
                eprintln!(
                    "  {name:<32} {:>3} registers {:>6} B shared {:>4} B stack",
                    resources.registers, resources.shared_bytes, resources.stack_bytes
                );
                if resources.spills() {
                    failures.push(format!("{name}: spills {resources:?}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn rms_norm_variants_compile_without_spills() {
    compile_every_point(const { &<RmsNorm as Kernel>::SPEC });
}

#[test]
fn topk_indexer_variants_compile_without_spills() {
    compile_every_point(const { &<TopkIndexer as Kernel>::SPEC });
}

#[test]
fn topk_keep_all_variants_compile_without_spills() {
    compile_every_point(const { &<TopkKeepAll as Kernel>::SPEC });
}

#[test]
fn gemm_variants_compile_without_spills() {
    compile_every_point(const { &<autotune_kernels::Gemm as Kernel>::SPEC });
}
