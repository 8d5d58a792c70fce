//! `cargo autotune` as a user runs it, against a copy of the tables crate's fixture
//! (an H200 table: a retune of the shipped one changes nothing here) and, for
//! `tune`, a small downstream crate (`tests/fixtures/scale`) built by real cargo.
//! No GPU needed: `tune` then builds, tunes nothing, and says so.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] functions
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use autotune_harness::{self as harness, trials};

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

fn report_and_compare_read_the_committed_table() {
    let dir = tables_copy("report");
    let out = cargo_autotune(&dir, &["report", "--kernel", "gemm"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    // Every shape's entry of the kernel asked for, cuBLAS among its variants.
    for shape in [
        "n=4096,k=4096",
        "n=14336,k=4096",
        "n=4096,k=14336",
        "n=8192,k=8192",
    ] {
        assert!(
            report.contains(&format!("gemm@{shape}: key `m`, 162 variants")),
            "{shape}: {report}"
        );
    }
    assert!(report.contains("vendor fallback: cuBLAS"), "{report}");
    assert!(!report.contains("rms_norm:"), "only the kernel asked for");

    let table = "tuning/nvidia-h200.json";
    let out = cargo_autotune(&dir, &["compare", table, table, "--kernel", "rms_norm"]);
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

fn context_writes_markdown_from_the_committed_table() {
    let dir = tables_copy("context");
    let out = cargo_autotune(&dir, &["context", "--kernel", "topk_indexer"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let context = text(&out.stdout);
    assert!(
        context.starts_with("# Tuning context: NVIDIA H200 (sm_90)"),
        "{context}"
    );
    assert!(context.contains("## `topk_indexer`"), "{context}");
    assert!(!context.contains("## `gemm`"), "only the kernel asked for");
    assert!(context.contains("| range | bakes |"), "{context}");
    let missing = cargo_autotune(&dir, &["context", "--tables", "/nonexistent"]);
    assert!(!missing.status.success());
}

/// `plot` writes each entry's plot as the tables crate renders it, under the name
/// it gives it.
fn plot_writes_the_committed_plots() {
    let dir = tables_copy("plot");
    let out_dir = dir.join("plots");
    let out = cargo_autotune(&dir, &["plot", "--out", out_dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = autotune_table::testing::fixture_table();
    let files = autotune_table::artifacts::plot_files(&table);
    assert!(files.len() >= 5, "{files:?}");
    for (entry, kernel) in &table.kernels {
        let name = &files[entry];
        let written = std::fs::read_to_string(out_dir.join(name)).unwrap();
        assert!(
            written == autotune_table::plot::render(entry, kernel, &table),
            "{name} is not the table's plot"
        );
    }
}

fn a_malformed_budget_stops_tune_before_cargo_runs() {
    let dir = tables_copy("budget");
    let out = cargo_autotune(&dir, &["tune", "--strategy", "local", "--budget", "6x"]);
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

/// `cargo autotune ARGS` in a fixture copy, built offline in a target folder the
/// fixture tests share.
fn in_fixture(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cargo-autotune"))
        .arg("autotune")
        .args(args)
        .current_dir(dir)
        .env(
            "CARGO_TARGET_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-target"),
        )
        .env("CARGO_NET_OFFLINE", "true")
        .output()
        .unwrap()
}

fn tune_without_a_gpu_says_so_before_it_builds() {
    let dir = fixture("tune-no-gpu");
    let started = std::time::Instant::now();
    let out = in_fixture(
        &dir,
        &[
            "tune",
            "--devices",
            "0",
            "--strategy",
            "local",
            "--budget",
            "30s",
        ],
    );
    let took = started.elapsed();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    // It could not tune what was asked: not a success, and it says why (it said
    // "every table is fresh" and exited 0, for a crate without a table at that).
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(!stdout.contains("fresh"), "{stdout}");
    assert!(
        stderr.contains("cargo autotune: nothing tuned: no CUDA driver"),
        "{stderr}"
    );
    // Before anything compiles (issue 49: it built for 2-3.5 minutes first).
    assert!(
        !stderr.contains("Compiling"),
        "cargo did not start: {stderr}"
    );
    assert!(
        took < std::time::Duration::from_secs(20),
        "said at once, not after a build ({took:?})"
    );

    // A kernel asked for by name: the same answer, as fast (whether the crate has
    // it is known only once the build has run its wrappers).
    let out = in_fixture(&dir, &["tune", "--kernel", "nosuch"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("nothing tuned: no CUDA driver"), "{stderr}");
    assert!(!stderr.contains("Compiling"), "{stderr}");

    // The judge tunes into a scratch copy of the tables; with nothing tuned there
    // is no verdict (exit 2, said), and the committed tables are untouched.
    std::fs::create_dir_all(dir.join("tuning")).unwrap();
    let out = in_fixture(&dir, &["judge", "--kernel", "scale"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the build could not tune `scale` (") && stderr.contains("no CUDA driver"),
        "{stderr}"
    );
    let out = in_fixture(&dir, &["judge", "--kernel", "nosuch"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no kernel `nosuch` in this crate; its kernels: scale"),
        "not the GPU's fault: {stderr}"
    );
    assert!(!dir.join("tuning").join("judge-journal.jsonl").exists());
}

/// An unknown kernel is an error that lists the kernels, in every command that
/// reads tables (they printed a header, or nothing, and exited 0).
fn an_unknown_kernel_is_an_error_that_lists_the_kernels() {
    let dir = tables_copy("unknown-kernel");
    let table = "tuning/nvidia-h200.json";
    for args in [
        &["report", "--kernel", "nosuch"][..],
        &["context", "--kernel", "nosuch"][..],
        &["compare", table, table, "--kernel", "nosuch"][..],
        &["judge", "--kernel", "nosuch", "--table", table][..],
        &[
            "simulate",
            "--table",
            table,
            "--kernel",
            "nosuch",
            "--strategy",
            "local",
            "--budget",
            "4",
        ][..],
    ] {
        let out = cargo_autotune(&dir, args);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stdout}\n{stderr}");
        assert!(
            stderr.contains("no kernel `nosuch`") && stderr.contains("rms_norm, topk_indexer"),
            "{args:?}: {stderr}"
        );
        assert!(stdout.is_empty(), "{args:?} printed: {stdout}");
    }
}

/// `init` on a crate fresh from `cargo new` adds exactly the quick start
/// (`examples/quickstart` is that crate, committed), prints what it did, and a
/// second run refuses and changes nothing.
fn init_adds_the_quick_start_to_a_fresh_crate() {
    // Outside this repository: `cargo new` inside a workspace joins it.
    let dir = std::env::temp_dir().join(format!("autotune-cli-init-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let made = Command::new(cargo)
        .args(["new", "--lib", "--vcs", "none", "quickstart"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", text(&made.stderr));
    let krate = dir.join("quickstart");
    let out = cargo_autotune(&krate, &["init"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    for line in [
        "added      [build-dependencies] autotune-build",
        "created    src/scale.rs",
    ] {
        assert!(stdout.contains(line), "{stdout}");
    }
    let quickstart = root().join("examples/quickstart");
    for file in [
        "build.rs",
        "src/scale.rs",
        "kernels/scale.cu",
        "tests/scale.rs",
        "tuning/.gitkeep",
    ] {
        assert_eq!(
            std::fs::read_to_string(krate.join(file)).unwrap(),
            std::fs::read_to_string(quickstart.join(file)).unwrap(),
            "{file} differs from examples/quickstart's"
        );
    }
    let manifest = std::fs::read_to_string(krate.join("Cargo.toml")).unwrap();
    assert_eq!(
        manifest,
        std::fs::read_to_string(quickstart.join("Cargo.toml")).unwrap(),
        "the manifest differs from examples/quickstart's"
    );
    let before = std::fs::read_to_string(krate.join("src/lib.rs")).unwrap();
    let again = cargo_autotune(&krate, &["init"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        text(&again.stderr).contains("not overwriting build.rs, src/scale.rs"),
        "{}",
        text(&again.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(krate.join("src/lib.rs")).unwrap(),
        before
    );
    assert_eq!(
        std::fs::read_to_string(krate.join("Cargo.toml")).unwrap(),
        manifest
    );
}

/// A table without candidate sources has nothing to judge: exit 2, said.
fn judge_needs_candidate_sources() {
    let dir = tables_copy("judge-candidates");
    let table = "tuning/nvidia-h200.json";
    let out = cargo_autotune(&dir, &["judge", "--kernel", "rms_norm", "--table", table]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("`rms_norm` has no candidate variants"),
        "{}",
        text(&out.stderr)
    );
}

/// A stale table whose GPU name mimics the build's old warning text ("tuned for
/// NVIDIA H200 on") made `check` pass when it searched that text; it decides from the
/// build's JSON summary now.
fn check_is_not_fooled_by_a_table_that_mimics_the_warning() {
    let dir = fixture("check-mimic");
    std::fs::create_dir_all(dir.join("tuning")).unwrap();
    std::fs::write(dir.join("tuning/mimic.json"), MIMIC).unwrap();
    let out = in_fixture(&dir, &["check"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("scale "))
        .unwrap_or_else(|| panic!("no line for `scale`:\n{stdout}"));
    assert!(line.contains("STALE"), "{line}");
    assert!(
        line.contains("tuning/mimic.json is stale for tuned for NVIDIA H200 on"),
        "{line}"
    );
}

/// A format-2 table for `scale` on a "GPU" named like the old warning, with a
/// fingerprint that matches nothing.
const MIMIC: &str = r#"{
  "format": 2,
  "gpu": { "name": "tuned for NVIDIA H200 on", "compute_capability": [9, 0], "sm_count": 132, "driver": "13.0", "l2_bytes": 62914560 },
  "kernels": { "scale": {
    "fingerprint": { "spec_sha256": "0", "wrapper_sha256": "1", "sources": ["kernels/scale.cu"], "sources_sha256": "2", "nvcc": "13.0.88", "flags": [], "crate_version": "x 0.1.0", "tuner_version": "0.1.0" },
    "tuned_on": "2026-11-30", "seed": 0, "key": "n", "default": "block=128", "fallback": null, "timing": "test", "min_margin": 0.01,
    "variants": [{ "name": "block=64", "values": [64], "role": "tuned", "resources": null, "rejected": null,
      "measurements": [{ "key": 1024, "median_us": 5.0, "p25_us": 4.9, "p75_us": 5.1, "min_us": 4.8, "repeats": 20, "error": 1e-7, "bytes": 8192, "flops": 1024 }] }],
    "sizes": [{ "key": 1024, "winner": "block=64", "winner_us": 5.0, "incumbent": "block=128", "incumbent_us": 6.0, "margin": 0.2, "noise": 0.01, "runner_up": null, "refinement": false }],
    "ranges": [{ "first": 0, "last": 18446744073709551615, "variant": "block=64" }],
    "seconds": { "compile": 0.0, "sweep": 0.0, "total": 0.0 }
  } }
}"#;

/// A scratch folder with `tuning/nvidia-h200.json`, a copy of the tables crate's
/// fixture.
fn tables_copy(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cli-tables")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("tuning")).unwrap();
    std::fs::copy(
        autotune_table::testing::FIXTURE_TABLE,
        dir.join("tuning/nvidia-h200.json"),
    )
    .unwrap();
    dir
}

/// Issue 36 items 10 and 12: `plot` wrote through a symlink in the plots folder,
/// `context --out` replaced a table with Markdown, `merge` into a folder left its
/// temporary file behind.
fn commands_write_no_table_no_symlink_target_and_no_leftovers() {
    let dir = tables_copy("writes");
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, "keep me").unwrap();
    let plots = dir.join("tuning/plots");
    std::fs::create_dir_all(&plots).unwrap();
    std::os::unix::fs::symlink(&victim, plots.join("nvidia-h200-rms_norm.svg")).unwrap();
    let out = cargo_autotune(&dir, &["plot"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("is a symlink"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");

    let table = dir.join("tuning/nvidia-h200.json");
    let before = std::fs::read(&table).unwrap();
    let out = cargo_autotune(&dir, &["context", "--out", "tuning/nvidia-h200.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("is inside the tables folder"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read(&table).unwrap(), before);

    let into = dir.join("a-folder");
    std::fs::create_dir_all(&into).unwrap();
    let out = cargo_autotune(&dir, &["merge", "a-folder", "tuning/nvidia-h200.json"]);
    assert_eq!(out.status.code(), Some(2));
    let leftovers: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// Item 13: `judge --tables target/autotune-judge` emptied its own input;
/// `judge --kernel all` retuned everything and gave no verdict.
fn judge_never_empties_its_input_and_takes_one_kernel() {
    let dir = tables_copy("judge-scratch");
    let scratch = dir.join("target/autotune-judge");
    std::fs::create_dir_all(&scratch).unwrap();
    std::fs::copy(
        dir.join("tuning/nvidia-h200.json"),
        scratch.join("nvidia-h200.json"),
    )
    .unwrap();
    std::fs::write(dir.join("Cargo.toml"), "[package]\nname = \"x\"\n").unwrap();
    let out = cargo_autotune(
        &dir,
        &[
            "judge",
            "--kernel",
            "rms_norm",
            "--tables",
            "target/autotune-judge",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("the judge's scratch folder"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        scratch.join("nvidia-h200.json").is_file(),
        "the input is still there"
    );
    let out = cargo_autotune(&dir, &["judge", "--kernel", "all"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("one kernel's candidate sources at a time"));
}

/// Item 15: `report` and `context` printed a table's escape sequences raw (clear
/// screen, terminal title, newline).
fn table_text_reaches_the_terminal_escaped() {
    let dir = tables_copy("escapes");
    let path = dir.join("tuning/nvidia-h200.json");
    let text_of = std::fs::read_to_string(&path).unwrap();
    let evil = text_of.replacen(
        "\"name\": \"NVIDIA H200\"",
        "\"name\": \"NVIDIA H200\\u001b[2J\\u001b]0;owned\\u0007\\u202e\"",
        1,
    );
    assert_ne!(evil, text_of);
    std::fs::write(&path, evil).unwrap();
    for args in [&["report"][..], &["context"][..]] {
        let out = cargo_autotune(&dir, args);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        assert!(
            !stdout.contains('\u{1b}') && !stdout.contains('\u{7}') && !stdout.contains('\u{202e}'),
            "{args:?} printed raw control characters"
        );
        assert!(stdout.contains("\\u{1b}[2J"), "{args:?}: shown escaped");
    }
}

/// Issue 49: a crate never tuned got `no tables in tuning` and no next step.
fn report_on_a_crate_never_tuned_says_what_to_run() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cli")
        .join("never-tuned");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("tuning")).unwrap();
    for args in [&["report"][..], &["report", "--tables", "tuning"][..]] {
        let out = cargo_autotune(&dir, args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(
                "this crate was never tuned; `cargo autotune tune` on a machine with a GPU"
            ),
            "{stderr}"
        );
    }
    std::fs::remove_dir_all(dir.join("tuning")).unwrap();
    let out = cargo_autotune(&dir, &["report"]);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("or make one with `cargo autotune tune`"),
        "{stderr}"
    );
}

fn main() -> std::process::ExitCode {
    harness::run_groups(&[
        (
            harness::Need::Nothing,
            trials![
                report_and_compare_read_the_committed_table,
                context_writes_markdown_from_the_committed_table,
                plot_writes_the_committed_plots,
                a_malformed_budget_stops_tune_before_cargo_runs,
                an_unknown_kernel_is_an_error_that_lists_the_kernels,
                init_adds_the_quick_start_to_a_fresh_crate,
                judge_needs_candidate_sources,
                check_is_not_fooled_by_a_table_that_mimics_the_warning,
                commands_write_no_table_no_symlink_target_and_no_leftovers,
                judge_never_empties_its_input_and_takes_one_kernel,
                table_text_reaches_the_terminal_escaped,
                report_on_a_crate_never_tuned_says_what_to_run,
            ],
        ),
        (
            harness::Need::NoCudaDriver,
            trials![tune_without_a_gpu_says_so_before_it_builds],
        ),
    ])
}
