//! One compile per image (issue 49): an image is named by what nvcc sees, so a
//! second wrapper of the same source and flags (another kernel name, another
//! variant label), or another profile's build sharing the target folder's cache,
//! takes the first one's image and nvcc does not run again; a different define is
//! another image. Needs nvcc (reported ignored without it, unless
//! `AUTOTUNE_REQUIRE_NVCC=1`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a failure is the test's
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment

mod support;

use std::path::Path;

use autotune_build::testing::{CompileJob, Nvcc, Target};
use autotune_harness::{self as harness, trials};
use autotune_table::progress::Progress;

fn a_second_wrapper_of_the_same_source_takes_the_first_ones_image() {
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("image-cache");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let nvcc = Nvcc::find(&work).expect("the harness runs this test only where nvcc is found");
    let source = work.join("k.cu");
    std::fs::write(
        &source,
        "extern \"C\" __global__ void __launch_bounds__(BLOCK) k(float* y) {\n\
         y[blockIdx.x * BLOCK + threadIdx.x] *= 2.0f;\n}\n",
    )
    .unwrap();
    let cache = work.join("autotune-images");
    let job = |kernel: &str, block: u32| CompileJob {
        kernel: kernel.into(),
        label: format!("{kernel}-block{block}"),
        ..support::block_job(&source, block, Target::Cubin("sm_90".into()), &work)
    };
    let compile = |job: CompileJob| {
        let (mut results, _) = nvcc.compile_all(&[job], &cache, &Progress::silent("k"));
        results.remove(0).unwrap()
    };
    let first = compile(job("softmax", 128));
    assert!(!first.cached, "the first wrapper compiles");
    let second = compile(job("softmax_library", 128));
    assert!(
        second.cached,
        "the second wrapper's image is the first one's"
    );
    assert_eq!(second.binary, first.binary);
    assert_eq!(
        second.resources.map(|r| r.registers),
        first.resources.map(|r| r.registers),
        "with ptxas's report"
    );
    let other = compile(job("softmax_library", 256));
    assert!(!other.cached, "another define is another image");
    assert_ne!(other.binary, first.binary);
}

fn main() -> std::process::ExitCode {
    harness::run_groups(&[(
        harness::Need::Nvcc,
        trials![a_second_wrapper_of_the_same_source_takes_the_first_ones_image],
    )])
}
