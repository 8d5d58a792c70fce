//! The build step where there is no GPU (CI): a downstream crate
//! (`tests/fixtures/scale`) built by real cargo bakes what it can and says so in
//! one cargo warning, and never fails for lack of a GPU or nvcc; tables it cannot
//! use are named, not used, and left as they were.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] functions

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use autotune_table::table::{
    FORMAT, Fingerprint, GpuRecord, KernelTable, Measurement, RangeRecord, Role, Seconds,
    TuningTable, VariantRecord,
};

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[path = "fixtures/copy.rs"]
mod copy;

/// A fresh copy of the fixture crate in its own folder.
fn fixture(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("build-faults")
        .join(name);
    copy::copy_scale(workspace(), &dir).unwrap();
    dir
}

/// `cargo build` of `dir` (a shared target folder, so dependencies build once).
fn build(dir: &Path, args: &[&str], no_nvcc: bool) -> Output {
    let mut command = build_command(dir, args);
    if no_nvcc {
        // A wrong NVCC is never replaced by another nvcc, so no nvcc is used.
        command.env("NVCC", "/nonexistent/nvcc");
    }
    command.output().unwrap()
}

/// The command [`build`] runs, for a caller to add to.
fn build_command(dir: &Path, args: &[&str]) -> Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .arg("build")
        .arg("--offline")
        .args(args)
        .current_dir(dir)
        .env(
            "CARGO_TARGET_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("build-faults-target"),
        )
        .env_remove("CARGO_FEATURE_AUTOTUNE");
    command
}

/// The one `autotune:` warning of the build, or a panic with the whole output.
fn warning(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the build failed:\n{stderr}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning: fixture-scale-") && l.contains("@0.1.0: autotune:"))
        .collect();
    assert_eq!(lines.len(), 1, "exactly one autotune warning:\n{stderr}");
    lines[0].to_string()
}

/// `NVCC` naming nothing is an error of its own (never a quiet fall back to another
/// nvcc), so this holds on a machine with CUDA installed too.
#[test]
fn without_nvcc_the_defaults_are_baked_with_one_warning() {
    let dir = fixture("no-nvcc");
    let line = warning(&build(&dir, &[], true));
    assert!(
        line.contains("NVCC=/nonexistent/nvcc names no nvcc that answers --version"),
        "{line}"
    );
    assert!(line.contains("load() will fail"), "{line}");
    assert!(line.contains("scale: defaults (block=128)"), "{line}");
}

#[test]
fn the_autotune_feature_without_a_gpu_tunes_nothing_and_still_builds() {
    let dir = fixture("feature-no-gpu");
    let line = warning(&build(&dir, &["--features", "autotune"], false));
    if autotune_runtime::gpu::driver_present() {
        autotune_build::skip("this machine has a CUDA driver");
        return;
    }
    assert!(line.contains("nothing tuned: no CUDA driver"), "{line}");
    assert!(line.contains("scale: defaults (block=128)"), "{line}");
}

#[test]
fn a_corrupt_table_is_named_not_used_and_left_alone() {
    let dir = fixture("corrupt");
    let table = dir.join("tuning/nvidia-h200.json");
    std::fs::create_dir_all(table.parent().unwrap()).unwrap();
    let text = "{ \"format\": 1, \"gpu\": ";
    std::fs::write(&table, text).unwrap();
    let line = warning(&build(&dir, &[], false));
    assert!(
        line.contains("tuning/nvidia-h200.json is unreadable (not JSON"),
        "{line}"
    );
    assert!(line.contains("; defaults (block=128)"), "{line}");
    assert_eq!(
        std::fs::read_to_string(&table).unwrap(),
        text,
        "the file is not touched"
    );
}

/// A table for `scale` that picks block=64 everywhere, under `fingerprint`.
fn table(fingerprint: Fingerprint) -> TuningTable {
    let variant = VariantRecord {
        name: "block=64".into(),
        values: vec![64],
        role: Role::Tuned,
        resources: None,
        compile_s: None,
        rejected: None,
        measurements: vec![Measurement {
            key: 1024,
            median_us: 5.0,
            p25_us: 4.9,
            p75_us: 5.1,
            min_us: 4.8,
            repeats: 20,
            error: 1e-7,
            bytes: 8192,
            flops: 1024,
            device: 0,
        }],
    };
    let kernel = KernelTable {
        fingerprint,
        tuned_on: "2026-11-30".into(),
        seed: 1,
        key: "n".into(),
        default: "block=128".into(),
        fallback: None,
        timing: "hand-made for a test".into(),
        min_margin: 0.01,
        variants: vec![variant],
        sizes: vec![],
        ranges: vec![RangeRecord {
            first: 0,
            last: u64::MAX,
            variant: "block=64".into(),
        }],
        above: None,
        seconds: Seconds {
            compile: 0.0,
            sweep: 0.0,
            total: 0.0,
            gpus: 1,
        },
    };
    TuningTable {
        format: FORMAT,
        gpu: GpuRecord {
            name: "NVIDIA H200".into(),
            compute_capability: [9, 0],
            sm_count: 132,
            driver: "13.0".into(),
            l2_bytes: 62_914_560,
            memory_bytes: 0,
            shared_per_block: 0,
        },
        kernels: [("scale".to_string(), kernel)].into(),
    }
}

#[test]
fn a_table_with_a_foreign_fingerprint_is_not_used() {
    let dir = fixture("stale");
    let path = dir.join("tuning/nvidia-h200.json");
    let foreign = Fingerprint {
        spec_sha256: "0".repeat(64),
        wrapper_sha256: "1".repeat(64),
        sources: vec!["kernels/scale.cu".into()],
        sources_sha256: "2".repeat(64),
        nvcc: "13.0.88".into(),
        flags: vec!["-O3".into(), "-std=c++17".into()],
        crate_version: "fixture-scale-stale 0.1.0".into(),
        tuner_version: env!("CARGO_PKG_VERSION").into(),
        vendor: None,
    };
    autotune_table::table::write_atomic(&path, &table(foreign)).unwrap();
    let before = std::fs::read(&path).unwrap();
    let line = warning(&build(&dir, &[], false));
    assert!(
        line.contains("tuning/nvidia-h200.json is stale for NVIDIA H200"),
        "{line}"
    );
    for reason in [
        "the #[autotune] spec changed",
        "the wrapper's Rust code changed",
        "the CUDA source or a header changed",
    ] {
        assert!(line.contains(reason), "{reason}: {line}");
    }
    assert!(line.contains("; defaults (block=128)"), "{line}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the table is not rewritten"
    );
}

/// Whether nvcc is on `PATH` for the tests that build with it; says SKIPPED
/// when not (CI sets `AUTOTUNE_REQUIRE_NVCC`, and then the build must find it).
fn nvcc_on_path() -> bool {
    if std::env::var_os("AUTOTUNE_REQUIRE_NVCC").is_some()
        || Command::new("nvcc").arg("--version").output().is_ok()
    {
        return true;
    }
    autotune_build::skip("no nvcc on PATH");
    false
}

/// The `include_bytes!` paths (the compiled images) of the plan the build generated
/// for `scale`, read through cargo's JSON messages.
fn baked_images(output: &Output) -> Vec<String> {
    assert!(
        output.status.success(),
        "the build failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let out_dir = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "build-script-executed")
        .find(|m| {
            m["package_id"]
                .as_str()
                .is_some_and(|p| p.contains("fixture-scale-"))
        })
        .and_then(|m| m["out_dir"].as_str().map(PathBuf::from))
        .expect("the fixture's build script ran");
    let generated = std::fs::read_to_string(out_dir.join("autotune/scale.rs")).unwrap();
    generated
        .split("include_bytes!(")
        .skip(1)
        .filter_map(|rest| rest.split('"').nth(1).map(str::to_string))
        .collect()
}

/// Reproduces the stale-header bug: a header that nvcc finds only through a `-I`
/// flag (`kernels/sub/scale.cu` includes `"factor.cuh"`, which lives in `kernels/`).
/// Editing it must rerun the build script and compile new images.
#[test]
fn a_header_found_through_an_include_flag_is_watched_and_compiled_in() {
    if !nvcc_on_path() {
        return;
    }
    let dir = fixture("include-flag");
    std::fs::create_dir_all(dir.join("kernels/sub")).unwrap();
    let kernel = std::fs::read_to_string(dir.join("kernels/scale.cu"))
        .unwrap()
        .replace("2.0f * x[i]", "FACTOR * x[i]");
    std::fs::write(
        dir.join("kernels/sub/scale.cu"),
        format!("#include \"factor.cuh\"\n{kernel}"),
    )
    .unwrap();
    std::fs::remove_file(dir.join("kernels/scale.cu")).unwrap();
    std::fs::write(dir.join("kernels/factor.cuh"), "#define FACTOR 2.0f\n").unwrap();
    let wrapper = std::fs::read_to_string(dir.join("src/scale.rs"))
        .unwrap()
        .replace(
            "source = \"kernels/scale.cu\",",
            "source = \"kernels/sub/scale.cu\",\n    flags = [\"-Ikernels\"],",
        );
    std::fs::write(dir.join("src/scale.rs"), wrapper).unwrap();
    let json = ["--message-format=json"];
    let first = baked_images(&build(&dir, &json, false));
    assert!(!first.is_empty(), "images were baked");
    let again = baked_images(&build(&dir, &json, false));
    assert_eq!(first, again, "nothing changed: the same images");
    std::fs::write(dir.join("kernels/factor.cuh"), "#define FACTOR 3.0f\n").unwrap();
    let edited = baked_images(&build(&dir, &json, false));
    assert!(
        first.iter().all(|image| !edited.contains(image)),
        "the edited header reached the compiled images: {first:?} vs {edited:?}"
    );
}

/// Reproduces a build that failed whole with `nvcc fatal : Unsupported gpu
/// architecture 'compute_60'`: a table for a GPU this nvcc cannot target is
/// skipped with a warning, and the build goes on.
#[test]
fn a_table_for_an_arch_nvcc_cannot_target_is_skipped() {
    if !nvcc_on_path() {
        return;
    }
    let dir = fixture("old-arch");
    let mut p100 = table(Fingerprint {
        spec_sha256: String::new(),
        wrapper_sha256: String::new(),
        sources: vec![],
        sources_sha256: String::new(),
        nvcc: "13.0.88".into(),
        flags: vec![],
        crate_version: String::new(),
        tuner_version: String::new(),
        vendor: None,
    });
    p100.gpu.name = "Tesla P100-SXM2-16GB".into();
    p100.gpu.compute_capability = [6, 0];
    autotune_table::table::write_atomic(&dir.join("tuning/tesla-p100.json"), &p100).unwrap();
    let line = warning(&build(&dir, &[], false));
    assert!(
        line.contains("tuning/tesla-p100.json is for Tesla P100-SXM2-16GB (sm_60), which nvcc"),
        "{line}"
    );
    assert!(line.contains("cannot target: skipped"), "{line}");
    assert!(line.contains("; defaults (block=128)"), "{line}");
}

/// The variables nvcc reads itself change the compiled images, so they must rerun
/// the build script and key the compile cache: before, `NVCC_APPEND_FLAGS` changed
/// binaries without cargo noticing.
#[test]
fn the_environment_nvcc_reads_reruns_the_build_and_recompiles() {
    if !nvcc_on_path() {
        return;
    }
    let dir = fixture("nvcc-environment");
    let json = ["--message-format=json"];
    let plain = baked_images(&build(&dir, &json, false));
    let mut appended = build_command(&dir, &json);
    appended.env("NVCC_APPEND_FLAGS", "-lineinfo");
    let appended = baked_images(&appended.output().unwrap());
    assert!(
        plain.iter().all(|image| !appended.contains(image)),
        "NVCC_APPEND_FLAGS reran the build and keyed new images: {plain:?} vs {appended:?}"
    );
    let mut host = build_command(&dir, &json);
    host.env("NVCC_CCBIN", "g++");
    let host = baked_images(&host.output().unwrap());
    assert!(
        plain.iter().all(|image| !host.contains(image)),
        "NVCC_CCBIN reran the build: {plain:?} vs {host:?}"
    );
}

/// Tables that try to bend the build: one whose error message carries a newline, a
/// cargo directive and a terminal escape; a second table for the same GPU model;
/// a kernel the crate does not have. The build says each in its one warning line,
/// uses none of them, and nothing reaches cargo as a directive.
#[test]
fn hostile_and_duplicate_tables_are_named_and_bend_nothing() {
    let dir = fixture("hostile");
    let mut stale = table(Fingerprint {
        spec_sha256: "0".repeat(64),
        wrapper_sha256: "1".repeat(64),
        sources: vec!["kernels/scale.cu".into()],
        sources_sha256: "2".repeat(64),
        nvcc: "13.0.88".into(),
        flags: vec![],
        crate_version: "x 0.1.0".into(),
        tuner_version: env!("CARGO_PKG_VERSION").into(),
        vendor: None,
    });
    let gone = stale.kernels["scale"].clone();
    stale.kernels.insert("removed_kernel".into(), gone);
    let tables = dir.join("tuning");
    autotune_table::table::write_atomic(&tables.join("nvidia-h200.json"), &stale).unwrap();
    autotune_table::table::write_atomic(&tables.join("h200-copy.json"), &stale).unwrap();
    let evil = serde_json::to_string(&stale).unwrap().replacen(
        "\"l2_bytes\"",
        "\"\\ncargo::warning=INJECTED\\u001b[2K\": 1, \"l2_bytes\"",
        1,
    );
    std::fs::write(tables.join("evil.json"), evil).unwrap();
    let output = build(&dir, &["--message-format=json-render-diagnostics"], false);
    let line = warning(&output);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.lines().any(|l| l.contains("@0.1.0: INJECTED")),
        "a table emitted a cargo directive:\n{stderr}"
    );
    assert!(
        !line.contains('\u{1b}'),
        "a terminal escape came through: {line:?}"
    );
    assert!(line.contains("tuning/evil.json is unreadable"), "{line}");
    // The whole account is the summary's notes (the warning is one short line).
    let notes = summary_notes(&output);
    assert!(
        notes.contains("\\u{a}cargo::warning=INJECTED") && !notes.contains('\u{1b}'),
        "the text is shown inline: {notes}"
    );
    assert!(
        notes.contains(
            "tuning/h200-copy.json is unreadable (another table here is for NVIDIA H200 too"
        ),
        "{notes}"
    );
    assert!(
        notes.contains(
            "tuning/nvidia-h200.json holds kernels this crate does not have: removed_kernel"
        ),
        "{notes}"
    );
    assert!(notes.contains("; defaults (block=128)"), "{notes}");
}

/// The build summary's notes (its whole account), one a line, from the build's
/// JSON messages.
fn summary_notes(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let out_dir = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "build-script-executed")
        .filter_map(|m| m["out_dir"].as_str().map(PathBuf::from))
        .find(|dir| dir.join("autotune/summary.json").is_file())
        .expect("a build script wrote its summary");
    let summary =
        autotune_table::summary::BuildSummary::read(&out_dir.join("autotune/summary.json"))
            .unwrap();
    summary.notes.join("\n")
}

/// Issue 10: without a tables folder, every build reran the build script and
/// recompiled the crate (the folder was watched through its parent, the crate's
/// root, whose target/ changes with every build). A file appearing in the root
/// stands for that target/ here (the test's target folder is shared, elsewhere).
#[test]
fn a_missing_tables_folder_does_not_rerun_every_build() {
    let dir = fixture("no-tables");
    let _ = std::fs::remove_dir_all(dir.join("tuning"));
    let first = build(&dir, &[], true);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    std::fs::write(dir.join("notes.txt"), "anything the crate root gets").unwrap();
    let second = build(&dir, &["-v"], true);
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{stderr}");
    let reran: Vec<&str> = stderr
        .lines()
        .filter(|l| {
            l.contains("Running") && l.contains("fixture-scale") && l.contains("build-script-build")
        })
        .collect();
    assert!(reran.is_empty(), "the build script ran again:\n{stderr}");
}

/// The one warning is short: at most 200 characters after `autotune: `, with the
/// missing-nvcc reason once, also in a tuning build (which also lacks a GPU here).
#[test]
fn the_warning_is_one_short_line_that_gives_each_reason_once() {
    let dir = fixture("short-warning");
    for args in [&[][..], &["--features", "autotune"][..]] {
        let line = warning(&build(&dir, args, true));
        let text = line
            .split_once("autotune: ")
            .map_or(line.as_str(), |(_, text)| text);
        assert!(
            text.chars().count() <= 200,
            "{} characters: {text}",
            text.chars().count()
        );
        assert_eq!(
            text.matches("names no nvcc").count(),
            1,
            "the nvcc reason once: {text}"
        );
        assert!(text.contains("load() will fail"), "{text}");
        assert!(text.contains("scale: defaults (block=128)"), "{text}");
    }
}

/// A release tuning build whose build script is compiled without optimisation
/// (no `[profile.release.build-override]`, as in a downstream crate that copied
/// an older quick start) says so, with the fix. `cfg!(debug_assertions)` is off
/// in release, so only the build script's real optimisation level tells.
#[test]
fn a_release_tuning_build_with_an_unoptimised_build_script_says_so() {
    let dir = fixture("unoptimised");
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(!manifest.contains("build-override"), "{manifest}");
    if !nvcc_on_path() {
        return;
    }
    let line = warning(&build(
        &dir,
        &["--release", "--features", "autotune"],
        false,
    ));
    assert!(
        line.contains("build script unoptimised")
            && line.contains("[profile.release.build-override] opt-level = 3"),
        "{line}"
    );
}

/// A case that lacks the field the key is read from is a compile error at the
/// key in the attribute (`key = n`), not at some argument of the signature.
#[test]
fn a_case_without_the_key_field_is_an_error_at_the_key() {
    let dir = fixture("no-key-field");
    let wrapper = dir.join("src/scale.rs");
    let text = std::fs::read_to_string(&wrapper).unwrap();
    let renamed = text
        .replace("    n: usize,\n    host", "    count: usize,\n    host")
        .replace(", n, host:", ", count: n, host:")
        .replace("self.n as u64", "self.count as u64");
    assert_ne!(renamed, text, "the fixture's case has a field `n`");
    std::fs::write(&wrapper, &renamed).unwrap();
    let output = build(&dir, &[], true);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    let key_line = renamed
        .lines()
        .position(|l| l.trim_start().starts_with("key = n"))
        .map(|i| i + 1)
        .unwrap();
    assert!(
        stderr.contains("no field `n`") && stderr.contains(&format!("src/scale.rs:{key_line}:")),
        "the error points at `key = n` (line {key_line}):\n{stderr}"
    );
}
