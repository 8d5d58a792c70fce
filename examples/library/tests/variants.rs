//! Every variant compiles for the H200 (sm_90) without register spills, in CI
//! (nvcc, no GPU): the PTX-only kernel's image is assembled by ptxas once, to read
//! its resources. Skips, and says so, without nvcc.

use autotune_runtime::Kernel;
use library_softmax::softmax::{Softmax, SoftmaxLibrary};
use library_softmax::softmax_ptx::{SoftmaxPtx, SoftmaxPtxLibrary};

#[test]
fn every_softmax_variant_compiles_without_spills() {
    for spec in [
        &Softmax::SPEC,
        &SoftmaxLibrary::SPEC,
        &SoftmaxPtx::SPEC,
        &SoftmaxPtxLibrary::SPEC,
    ] {
        match autotune_build::variants::compile_all(spec, env!("CARGO_MANIFEST_DIR"), "sm_90") {
            Ok(report) => report.assert_clean(),
            Err(no_nvcc) => return autotune_build::skip(no_nvcc),
        }
    }
}
