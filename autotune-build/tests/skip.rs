//! A skip reaches the terminal under libtest's output capture: the test binary
//! runs itself as a scripted child (one ignored test that only skips), without
//! `--nocapture`, and the parent reads what the child's harness let through.
//! A skip written with `eprintln!` is captured and shows nowhere.

use std::process::Command;

/// The scripted child: run only by [`a_skip_shows_under_output_capture`].
#[test]
#[ignore = "the scripted child of a_skip_shows_under_output_capture"]
fn scripted_child_that_skips() {
    eprintln!("captured: libtest shows this only for a failing test");
    autotune_build::skip("no GPU in this scripted child");
}

#[test]
fn a_skip_shows_under_output_capture() {
    let Ok(exe) = std::env::current_exe() else {
        panic!("the test binary's own path");
    };
    let output = Command::new(exe)
        .args(["scripted_child_that_skips", "--exact", "--ignored"])
        .env_remove("RUST_TEST_NOCAPTURE")
        .output();
    let Ok(output) = output else {
        panic!("the test binary runs itself");
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("1 passed"),
        "the child ran its one test:\n{stdout}"
    );
    assert!(
        stderr.contains("SKIPPED scripted_child_that_skips: no GPU in this scripted child"),
        "the skip is on the terminal:\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        !stderr.contains("captured:") && !stdout.contains("captured:"),
        "eprintln! is captured (the reason for the helper):\n{stdout}\n{stderr}"
    );
}

/// The scripted child of [`a_gpu_skip_fails_where_a_gpu_is_required`].
#[test]
#[ignore = "the scripted child of a_gpu_skip_fails_where_a_gpu_is_required"]
fn scripted_child_without_a_gpu() {
    autotune_build::skip_without_gpu("no CUDA driver in this scripted child");
}

/// `AUTOTUNE_REQUIRE_GPU=1` (the GPU machine's full run) turns a skip for want of
/// a GPU into a failure; without it, the same test skips and says so.
#[test]
fn a_gpu_skip_fails_where_a_gpu_is_required() {
    let Ok(exe) = std::env::current_exe() else {
        panic!("the test binary's own path");
    };
    let run = |required: Option<&str>| {
        let mut command = Command::new(&exe);
        command.args(["scripted_child_without_a_gpu", "--exact", "--ignored"]);
        match required {
            Some(value) => command.env("AUTOTUNE_REQUIRE_GPU", value),
            None => command.env_remove("AUTOTUNE_REQUIRE_GPU"),
        };
        let Ok(output) = command.output() else {
            panic!("the test binary runs itself");
        };
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (passed, stderr) = run(None);
    assert!(
        passed && stderr.contains("SKIPPED scripted_child_without_a_gpu: no GPU (no CUDA driver"),
        "{stderr}"
    );
    let (passed, _) = run(Some("0"));
    assert!(passed, "0 requires nothing");
    let (passed, stdout_err) = run(Some("1"));
    assert!(
        !passed,
        "required, a missing GPU fails the test: {stdout_err}"
    );
}
