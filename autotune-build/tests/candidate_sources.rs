//! Candidate sources (`source = [incumbent, candidate]`) with the real nvcc (CI
//! installs it; reported ignored without one unless `AUTOTUNE_REQUIRE_NVCC=1`):
//! every point is compiled from the source its `source` parameter names (each
//! source refuses to compile under the other's index), and an edit to the candidate
//! makes the kernel's entry stale, like an edit to the incumbent.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] functions
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment

use std::path::{Path, PathBuf};

use autotune_build::testing::KernelInputs;
use autotune_harness::{self as harness, trials};
use autotune_runtime::KernelSpec;

/// Two sources of kernel `k`, each compiling only as its own index, in a folder of
/// the test's own (tests run side by side).
fn crate_dir(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("candidate-sources")
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("kernels")).unwrap();
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let source = |index: u32, body: &str| {
        format!(
            "#if SOURCE != {index}\n#error compiled from the wrong source\n#endif\n\
             extern \"C\" __global__ void k(float* y) {{ {body} }}\n"
        )
    };
    std::fs::write(
        dir.join("kernels/k.cu"),
        source(0, "y[threadIdx.x] = BLOCK;"),
    )
    .unwrap();
    std::fs::write(
        dir.join("kernels/k_v2.cu"),
        source(1, "y[threadIdx.x] = 2 * BLOCK;"),
    )
    .unwrap();
    std::fs::write(dir.join("src/k.rs"), "pub fn k() {}\n").unwrap();
    dir
}

const SPEC: KernelSpec = KernelSpec::new("k", "src/k.rs", "kernels/k.cu", &["k"], "n", &[1024])
    .with_space(
        &["source", "block"],
        &[&[0, 64], &[0, 128], &[1, 64], &[1, 128]],
        &[0, 64],
    )
    .with_candidates(&["kernels/k_v2.cu"]);

fn each_point_compiles_from_its_own_source() {
    let dir = crate_dir("compile");
    let report = autotune_build::variants::compile_all(&SPEC, &dir, "sm_90")
        .expect("the harness runs this test only where nvcc is found");
    report.assert_clean();
    let names: Vec<&str> = report.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "source=0,block=64",
            "source=0,block=128",
            "source=1,block=64",
            "source=1,block=128"
        ]
    );
    // Each variant's nvcc time is measured, and kept for a cache hit.
    assert!(
        report.variants.iter().all(|v| v.seconds > 0.0),
        "{report:?}"
    );
    let again = autotune_build::variants::compile_all(&SPEC, &dir, "sm_90").unwrap();
    for (first, cached) in report.variants.iter().zip(&again.variants) {
        assert!((first.seconds - cached.seconds).abs() < 0.01, "{again:?}");
    }
}

/// Without nvcc: the include scanner's files (both sources) key the fingerprint.
fn an_edit_to_a_candidate_makes_the_entry_stale() {
    let dir = crate_dir("stale");
    let tuned = KernelInputs::gather(&SPEC, &dir, None, "k 0.1.0")
        .unwrap()
        .fingerprint(None)
        .unwrap();
    let inputs = KernelInputs::gather(&SPEC, &dir, None, "k 0.1.0").unwrap();
    assert!(inputs.differences(&tuned).is_empty());
    assert!(
        inputs
            .watched()
            .iter()
            .any(|f| f.ends_with("kernels/k_v2.cu")),
        "{:?}",
        inputs.watched()
    );
    std::fs::write(
        dir.join("kernels/k_v2.cu"),
        "#if SOURCE != 1\n#error\n#endif\nextern \"C\" __global__ void k(float* y) { y[0] = 3 * BLOCK; }\n",
    )
    .unwrap();
    assert_eq!(
        inputs.differences(&tuned),
        ["the CUDA source or a header changed"]
    );
}

fn main() -> std::process::ExitCode {
    harness::run_groups(&[
        (
            harness::Need::Nothing,
            trials![an_edit_to_a_candidate_makes_the_entry_stale],
        ),
        (
            harness::Need::Nvcc,
            trials![each_point_compiles_from_its_own_source],
        ),
    ])
}
