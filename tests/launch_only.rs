//! A launch-only parameter is never compiled: the library-style softmax of
//! `examples/library` (its block size launch-only, `ROWS_PER_BLOCK` compiled in)
//! compiles once per value of the compile-time parameter, however many block sizes
//! each image is timed at; its PTX-only twin is never compiled at all, found
//! through a variable as cargo's `links` metadata would give it. nvcc is a script
//! here that counts its compiles and runs the real one. Reported ignored without
//! nvcc (unless AUTOTUNE_REQUIRE_NVCC=1). Its own test binary: it sets `NVCC` for
//! the whole process.
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use autotune_harness::{self as harness, trials};

#[path = "fixtures/library_softmax.rs"]
mod library_softmax;
#[path = "fixtures/toolkit.rs"]
mod toolkit;

use std::path::Path;

use autotune_runtime::KernelSpec;

/// The same kernel as PTX made by a separate step, under a `DEP_*` variable (what
/// a crate's build script gets from a dependency that declares `links`).
const PTX_SPEC: KernelSpec = KernelSpec::new(
    "softmax_ptx",
    "src/softmax.rs",
    "$DEP_SOFTMAX_PTX_DIR/softmax.ptx",
    &["softmax_rows"],
    "rows",
    &[1024],
)
.with_space(&["threads"], &[&[32], &[256], &[1024]], &[32])
.with_define_names(&[None]);

fn each_compile_time_point_is_compiled_once() {
    let nvcc = toolkit::nvcc();
    let dir = std::env::temp_dir().join(format!("autotune-launch-only-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Logs each compile (`-cubin`) it is asked for, then runs nvcc.
    let log = dir.join("compiles.log");
    toolkit::stand_in_nvcc(
        &dir,
        &format!(
            "#!/bin/sh\ncase \" $* \" in *\" -cubin \"*) echo \"$*\" >> '{}';; esac\nexec '{}' \"$@\"\n",
            log.display(),
            nvcc.display()
        ),
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/library");
    let report =
        autotune_build::variants::compile_all(&library_softmax::SPEC, &root, "sm_90").unwrap();
    report.assert_clean();
    assert_eq!(
        report.variants.len(),
        library_softmax::SPEC.points.len(),
        "every point has its variant"
    );
    let compiles = std::fs::read_to_string(&log).unwrap_or_default();
    let defines: Vec<&str> = compiles
        .lines()
        .map(|line| {
            line.split(' ')
                .find(|arg| arg.starts_with("-DROWS_PER_BLOCK="))
                .unwrap_or("none")
        })
        .collect();
    assert_eq!(
        defines.len(),
        3,
        "one nvcc compile per rows_per_block, not per point: {compiles}"
    );
    assert!(
        !compiles.contains("THREADS"),
        "a launch-only parameter reached nvcc: {compiles}"
    );
    // SAFETY: this test binary has one test, so no other thread reads the
    // environment while it is set.
    unsafe { std::env::set_var("DEP_SOFTMAX_PTX_DIR", root.join("kernels")) };
    let report = autotune_build::variants::compile_all(&PTX_SPEC, &root, "sm_90").unwrap();
    // Every point has its variant, with ptxas's resources read off the one image.
    report.assert_clean();
    assert_eq!(report.variants.len(), PTX_SPEC.points.len());
    assert_eq!(
        std::fs::read_to_string(&log).unwrap_or_default(),
        compiles,
        "nvcc compiled a precompiled image"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() -> std::process::ExitCode {
    harness::run_groups(&[(
        harness::Need::Nvcc,
        trials![each_compile_time_point_is_compiled_once],
    )])
}
