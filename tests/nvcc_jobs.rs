//! `AUTOTUNE_NVCC_JOBS` sets how many nvcc run at once: at 1, no two compiles of a
//! kernel's images overlap (nvcc is a script here that notes when one starts while
//! another runs), and a value that is not a count is refused. Reported ignored
//! without nvcc (unless AUTOTUNE_REQUIRE_NVCC=1). Its own test binary: it sets
//! variables for the whole process.
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment
#![allow(clippy::unwrap_used)] // test helpers outside test functions

use autotune_harness::{self as harness, trials};

#[path = "fixtures/library_softmax.rs"]
mod library_softmax;
#[path = "fixtures/toolkit.rs"]
mod toolkit;

use std::path::Path;

fn nvcc_jobs_bounds_the_compiles_at_once() {
    let nvcc = toolkit::nvcc();
    let dir = std::env::temp_dir().join(format!("autotune-nvcc-jobs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Holds a lock folder while it compiles (`-cubin`): a compile that finds it
    // taken notes an overlap.
    let (log, lock) = (dir.join("compiles.log"), dir.join("busy"));
    toolkit::stand_in_nvcc(
        &dir,
        &format!(
            "#!/bin/sh\ncase \" $* \" in *\" -cubin \"*) ;; *) exec '{nvcc}' \"$@\";; esac\n\
             if mkdir '{lock}' 2>/dev/null; then echo compile >> '{log}'; \
             else echo overlap >> '{log}'; fi\n\
             sleep 0.3\n'{nvcc}' \"$@\"\nstatus=$?\nrmdir '{lock}' 2>/dev/null\nexit $status\n",
            nvcc = nvcc.display(),
            lock = lock.display(),
            log = log.display()
        ),
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/library");
    // SAFETY: this test binary has one test, so no other thread reads the
    // environment while it is set.
    unsafe { std::env::set_var("AUTOTUNE_NVCC_JOBS", "0") };
    let refused =
        autotune_build::variants::compile_all(&library_softmax::SPEC, &root, "sm_90").unwrap_err();
    assert!(
        refused.to_string().contains("AUTOTUNE_NVCC_JOBS=\"0\""),
        "{refused}"
    );
    // SAFETY: as above.
    unsafe { std::env::set_var("AUTOTUNE_NVCC_JOBS", "1") };
    let report =
        autotune_build::variants::compile_all(&library_softmax::SPEC, &root, "sm_90").unwrap();
    report.assert_clean();
    let compiles = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        compiles.lines().collect::<Vec<_>>(),
        ["compile", "compile", "compile"],
        "one nvcc at a time, each of the three images once"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() -> std::process::ExitCode {
    harness::run_groups(&[(
        harness::Need::Nvcc,
        trials![nvcc_jobs_bounds_the_compiles_at_once],
    )])
}
