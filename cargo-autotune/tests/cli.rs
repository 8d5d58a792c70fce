//! `cargo autotune` as a user runs it, against the committed H200 table and, for
//! `tune`, a small downstream crate (`tests/fixtures/scale`) built by real cargo.
//! No GPU needed: `tune` then builds, tunes nothing, and says so.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] functions

#[path = "../../tests/fixtures/skip.rs"]
mod skip;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// `cargo-autotune autotune ARGS` (as `cargo autotune ARGS` runs it) in `dir`.
fn cargo_autotune(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cargo-autotune"))
        .arg("autotune")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn report_and_compare_read_the_committed_table() {
    let out = cargo_autotune(root(), &["report", "--kernel", "gemm"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    assert!(report.contains("gemm: key `m`, 112 variants"), "{report}");
    assert!(!report.contains("rms_norm:"), "only the kernel asked for");

    let table = "kernels/tuning/nvidia-h200.json";
    let out = cargo_autotune(root(), &["compare", table, table, "--kernel", "rms_norm"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let compared = text(&out.stdout);
    let last = compared.lines().last().unwrap_or_default();
    let (same, of) = last
        .strip_prefix("picks agree at ")
        .and_then(|rest| rest.split_once(" keys"))
        .and_then(|(counts, _)| counts.split_once(" of "))
        .expect("a summary line");
    assert_eq!(same, of, "{compared}");
}

#[test]
fn plot_writes_the_committed_plots() {
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-plots");
    let _ = std::fs::remove_dir_all(&out_dir);
    let out = cargo_autotune(root(), &["plot", "--out", out_dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for kernel in ["gemm", "rms_norm", "topk_indexer", "topk_keep_all"] {
        let name = format!("nvidia-h200-{kernel}.svg");
        let written = std::fs::read_to_string(out_dir.join(&name)).unwrap();
        let committed =
            std::fs::read_to_string(root().join("kernels/tuning/plots").join(&name)).unwrap();
        assert!(
            written == committed,
            "{name} differs from the committed plot"
        );
    }
}

#[test]
fn a_malformed_budget_stops_tune_before_cargo_runs() {
    let out = cargo_autotune(root(), &["tune", "--strategy", "local", "--budget", "6x"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("budget `6x`"), "{stderr}");
    assert!(
        !stderr.contains("Compiling"),
        "cargo did not start: {stderr}"
    );
}

#[path = "../../tests/fixtures/copy.rs"]
mod copy;

/// A copy of the fixture crate in its own folder.
fn fixture(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cli")
        .join(name);
    copy::copy_scale(root(), &dir).unwrap();
    dir
}

#[test]
fn tune_without_a_gpu_builds_tunes_nothing_and_says_so() {
    if autotune_runtime::gpu::driver_present() {
        skip::skipped(
            std::thread::current().name().unwrap_or("test"),
            "this machine has a CUDA driver (tune would tune)",
        );
        return;
    }
    let dir = fixture("tune-no-gpu");
    let out = Command::new(env!("CARGO_BIN_EXE_cargo-autotune"))
        .args(["autotune", "tune", "--devices", "0", "--strategy", "local"])
        .args(["--budget", "30s"])
        .current_dir(&dir)
        .env(
            "CARGO_TARGET_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-target"),
        )
        .env("CARGO_NET_OFFLINE", "true")
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    // Cargo's lines come through, the build script's one warning among them.
    assert!(
        stderr.contains("feature `autotune` is on, but no CUDA driver"),
        "{stderr}"
    );
    assert!(stdout.contains("nothing was tuned"), "{stdout}");
}
