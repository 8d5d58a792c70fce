//! Every variant of `silu_mul` and of `layer_norm` compiles for the H200 (sm_90) without register
//! spills: the check a crate runs in CI, where there is nvcc but no GPU. Skips (and
//! says so) without nvcc.

use autotune_runtime::Kernel;
use downstream_swiglu::layernorm::LayerNorm;
use downstream_swiglu::swiglu::SiluMul;

#[test]
fn every_silu_mul_variant_compiles_without_spills() {
    match autotune_build::variants::compile_all(&SiluMul::SPEC, env!("CARGO_MANIFEST_DIR"), "sm_90")
    {
        Ok(report) => report.assert_clean(),
        Err(no_nvcc) => autotune_build::skip(no_nvcc),
    }
}

#[test]
fn every_layer_norm_variant_compiles_without_spills() {
    match autotune_build::variants::compile_all(
        &LayerNorm::SPEC,
        env!("CARGO_MANIFEST_DIR"),
        "sm_90",
    ) {
        Ok(report) => report.assert_clean(),
        Err(no_nvcc) => autotune_build::skip(no_nvcc),
    }
}
