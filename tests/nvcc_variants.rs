//! Every point of every shipped kernel compiles with the real nvcc for the H200
//! (sm_90), without register spills: what the sweep would prune, CI sees first.
//! Reported ignored where nvcc is missing, unless AUTOTUNE_REQUIRE_NVCC=1.
//! The same public helper a downstream crate uses (`autotune_build::variants`).
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment

use autotune_harness::{self as harness, trials};

use autotune_kernels::{Gemm, Linear, RmsNorm, TopkIndexer, TopkKeepAll};
use autotune_runtime::{Kernel, KernelSpec};

fn compile_every_point(spec: &'static KernelSpec) {
    match autotune_build::variants::compile_all(spec, env!("CARGO_MANIFEST_DIR"), "sm_90") {
        Ok(report) => report.assert_clean(),
        Err(why) => panic!("{why}"),
    }
}

fn rms_norm_variants_compile_without_spills() {
    compile_every_point(const { &<RmsNorm as Kernel>::SPEC });
}

fn topk_indexer_variants_compile_without_spills() {
    compile_every_point(const { &<TopkIndexer as Kernel>::SPEC });
}

fn topk_keep_all_variants_compile_without_spills() {
    compile_every_point(const { &<TopkKeepAll as Kernel>::SPEC });
}

fn gemm_variants_compile_without_spills() {
    compile_every_point(const { &<Gemm as Kernel>::SPEC });
}

fn linear_variants_compile_without_spills() {
    compile_every_point(const { &<Linear as Kernel>::SPEC });
}

fn main() -> std::process::ExitCode {
    harness::run_groups(&[(
        harness::Need::Nvcc,
        trials![
            rms_norm_variants_compile_without_spills,
            topk_indexer_variants_compile_without_spills,
            topk_keep_all_variants_compile_without_spills,
            gemm_variants_compile_without_spills,
            linear_variants_compile_without_spills
        ],
    )])
}
