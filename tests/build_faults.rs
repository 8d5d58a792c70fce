//! The build step where there is no GPU (CI): a downstream crate
//! (`tests/fixtures/scale`) built by real cargo bakes what it can and says so in
//! one cargo warning, and never fails for lack of a GPU or nvcc; tables it cannot
//! use are named, not used, and left as they were.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] functions
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment

use autotune_harness::{self as harness, trials};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use autotune_table::table::{
    Fingerprint, KernelTable, KeyRange, Measurement, Role, Seconds, TuningTable, VariantRecord,
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
fn without_nvcc_the_defaults_are_baked_with_one_warning() {
    let dir = fixture("no-nvcc");
    let line = warning(&build(&dir, &[], true));
    assert!(
        line.contains("NVCC=/nonexistent/nvcc names no nvcc that answers --version"),
        "{line}"
    );
    assert!(line.contains("load() will fail"), "{line}");
    // Why the defaults (issue 49: it said `defaults (...)` and nothing more).
    assert!(
        line.contains("scale: defaults (block=128): no table yet"),
        "{line}"
    );
}

fn the_autotune_feature_without_a_gpu_tunes_nothing_and_still_builds() {
    let dir = fixture("feature-no-gpu");
    let line = warning(&build(&dir, &["--features", "autotune"], false));
    assert!(line.contains("nothing tuned: no CUDA driver"), "{line}");
    assert!(line.contains("scale: defaults (block=128)"), "{line}");
}

fn a_corrupt_table_is_named_not_used_and_left_alone() {
    let dir = fixture("corrupt");
    let table = dir.join("tuning/nvidia-h200.json");
    std::fs::create_dir_all(table.parent().unwrap()).unwrap();
    let text = "{ \"format\": 1, \"gpu\": ";
    std::fs::write(&table, text).unwrap();
    let output = build(&dir, &["--message-format=json-render-diagnostics"], false);
    let line = warning(&output);
    assert!(
        line.contains("tuning/nvidia-h200.json is unreadable (not JSON"),
        "{line}"
    );
    // The rest of the account, whole (the line is cut where nvcc is missing too).
    let notes = summary_notes(&output);
    assert!(notes.contains("; defaults (block=128)"), "{notes}");
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
            checked_once: false,
            buffers: 0,
        }],
    };
    let kernel = KernelTable {
        fingerprint,
        tuned_on: "2026-11-30".into(),
        seed: 1,
        key: "n".into(),
        default: "block=128".into(),
        fallback: None,
        check: None,
        tuned_by: None,
        timing: "hand-made for a test".into(),
        min_margin: 0.01,
        variants: vec![variant],
        sizes: vec![autotune_table::table::SizeRecord {
            key: 1024,
            winner: "block=64".into(),
            winner_us: 5.0,
            incumbent: "block=128".into(),
            incumbent_us: 6.0,
            margin: 0.2,
            noise: 0.01,
            runner_up: None,
            refinement: false,
            duel: None,
            confirmation: None,
        }],
        ranges: vec![KeyRange {
            first: 0,
            last: u64::MAX,
            choice: "block=64".into(),
        }],
        above: None,
        off_grid: None,
        clocks: None,
        vendor_plan: Vec::new(),
        vendor_sizes: Vec::new(),
        seconds: Seconds {
            compile: 0.0,
            sweep: 0.0,
            total: 0.0,
            gpus: 1,
            phases: None,
        },
    };
    autotune_table::testing::table([("scale", kernel)])
}

/// A fingerprint that matches nothing the fixture `package` builds.
fn foreign(package: &str) -> Fingerprint {
    Fingerprint {
        spec_sha256: "0".repeat(64),
        wrapper_sha256: "1".repeat(64),
        sources: vec!["kernels/scale.cu".into()],
        sources_sha256: "2".repeat(64),
        nvcc: "13.0.88".into(),
        flags: vec!["-O3".into(), "-std=c++17".into()],
        crate_version: format!("{package} 0.1.0"),
        tuner_version: env!("CARGO_PKG_VERSION").into(),
        vendor: None,
    }
}

fn a_table_with_a_foreign_fingerprint_is_not_used() {
    let dir = fixture("stale");
    let path = dir.join("tuning/nvidia-h200.json");
    autotune_table::table::write_atomic(&path, &table(foreign("fixture-scale-stale"))).unwrap();
    let before = std::fs::read(&path).unwrap();
    let output = build(&dir, &["--message-format=json-render-diagnostics"], false);
    let line = warning(&output);
    assert!(
        line.contains("tuning/nvidia-h200.json is stale for NVIDIA H200"),
        "{line}"
    );
    // Every reason, in the whole account (the line is cut where nvcc is missing too).
    let notes = summary_notes(&output);
    for reason in [
        "the #[autotune] spec changed",
        "the wrapper's Rust code changed",
        "the CUDA source or a header changed",
    ] {
        assert!(notes.contains(reason), "{reason}: {notes}");
    }
    assert!(notes.contains("; defaults (block=128)"), "{notes}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the table is not rewritten"
    );
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
fn a_header_found_through_an_include_flag_is_watched_and_compiled_in() {
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
fn a_table_for_an_arch_nvcc_cannot_target_is_skipped() {
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
fn the_environment_nvcc_reads_reruns_the_build_and_recompiles() {
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
    // The whole account is the summary's notes (the warning is one short line).
    let notes = summary_notes(&output);
    assert!(notes.contains("tuning/evil.json is unreadable"), "{notes}");
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

/// The build summary's whole account (its notes, then each kernel's account), one
/// a line, from the build's JSON messages.
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
    summary
        .notes
        .iter()
        .map(ToString::to_string)
        .chain(summary.kernels.iter().map(|k| k.account()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Issue 10: without a tables folder, every build reran the build script and
/// recompiled the crate (the folder was watched through its parent, the crate's
/// root, whose target/ changes with every build). A file appearing in the root
/// stands for that target/ here (the test's target folder is shared, elsewhere).
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
fn a_release_tuning_build_with_an_unoptimised_build_script_says_so() {
    let dir = fixture("unoptimised");
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(!manifest.contains("build-override"), "{manifest}");
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

// Issue 36: no committed file, path or variable can hang, break or redirect a build.

/// `command`'s output, or a panic once it has run `seconds` (it is killed).
fn within(mut command: Command, seconds: u64) -> Output {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Drained as it comes, so that a full pipe never stalls cargo.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed().as_secs() >= seconds {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = stderr.join().unwrap_or_default();
            panic!(
                "the build hung ({seconds} s):\n{}",
                String::from_utf8_lossy(&stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

/// The build script's recorded instructions (`OUT_DIR/../output`), through
/// cargo's JSON messages.
fn instructions(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let out_dir = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "build-script-executed")
        .filter_map(|m| m["out_dir"].as_str().map(PathBuf::from))
        .find(|dir| dir.join("autotune/summary.json").is_file())
        .expect("a build script wrote its summary");
    std::fs::read_to_string(out_dir.parent().unwrap().join("output")).unwrap()
}

/// Item 1: a right-to-left override in a table's GPU name, or in the name of a
/// file in the tables folder, reached a comment of the generated code, which rustc
/// refuses (`text_direction_codepoint_in_comment`, deny by default).
fn direction_changing_characters_in_a_table_do_not_break_the_crate() {
    let dir = fixture("bidi");
    let mut stale = table(foreign("fixture-scale-bidi"));
    stale.gpu.name = "NVIDIA \u{202e}002H".into();
    autotune_table::table::write_atomic(&dir.join("tuning/nvidia-h200.json"), &stale).unwrap();
    std::fs::write(dir.join("tuning/evil\u{202e}nosj.json"), "{}").unwrap();
    let line = warning(&build(&dir, &[], true));
    assert!(!line.contains('\u{202e}'), "{line}");
    assert!(line.contains("\\u{202e}"), "shown escaped: {line}");
}

/// Item 2: `nvcc --version` ran without a timeout, so an `NVCC` that hangs hung
/// the build.
fn an_nvcc_that_hangs_does_not_hang_the_build() {
    let dir = fixture("hanging-nvcc");
    let script = dir.join("hanging-nvcc");
    std::fs::write(&script, "#!/bin/sh\nsleep 600\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut command = build_command(&dir, &[]);
    command
        .env("NVCC", &script)
        .env("AUTOTUNE_NVCC_TIMEOUT_S", "2");
    let line = warning(&within(command, 120));
    assert!(
        line.contains("names no nvcc that answers --version"),
        "{line}"
    );
}

/// Item 3: a committed symlink to a FIFO, or a table whose recorded sources name a
/// FIFO, `/dev/zero` or a file outside the crate, hung the build, read without end,
/// or read any file on the machine.
fn tables_and_their_sources_are_read_only_as_regular_files_inside_the_crate() {
    let dir = fixture("fifo");
    let fifo = dir.join("kernels/pipe.cuh");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    std::os::unix::fs::symlink(&fifo, dir.join("tuning-link.json")).unwrap();
    std::fs::create_dir_all(dir.join("tuning")).unwrap();
    std::fs::rename(dir.join("tuning-link.json"), dir.join("tuning/link.json")).unwrap();
    for (name, sources) in [
        (
            "nvidia-h200.json",
            vec!["kernels/scale.cu".to_string(), "kernels/pipe.cuh".into()],
        ),
        ("nvidia-a100.json", vec!["/dev/zero".to_string()]),
        (
            "nvidia-l4.json",
            vec!["../../../../../../etc/hostname".to_string()],
        ),
    ] {
        let mut entry = table(foreign("fixture-scale-fifo"));
        entry.gpu.name = name.trim_end_matches(".json").into();
        entry.kernels.get_mut("scale").unwrap().fingerprint.sources = sources;
        autotune_table::table::write_atomic(&dir.join("tuning").join(name), &entry).unwrap();
    }
    let mut command = build_command(&dir, &["--message-format=json-render-diagnostics"]);
    command.env("NVCC", "/nonexistent/nvcc");
    let output = within(command, 120);
    let line = warning(&output);
    let notes = summary_notes(&output);
    // The symlink (shown by what it resolves to) is named, not waited on.
    autotune_table::testing::assert_contains(
        &notes,
        &[
            "pipe.cuh is unreadable (",
            "link.json: not a regular file",
            "kernels/pipe.cuh: not a regular file",
            "/dev/zero",
            "outside the crate: \"../../../../../../etc/hostname\"",
        ],
    );
    assert!(line.contains("scale: "), "{line}");
}

/// Items 4 and 5: `AUTOTUNE_TABLES_DIR=/` made cargo scan the whole file system at
/// every later build; a tables folder whose name holds a newline injected a cargo
/// instruction.
fn only_folders_inside_the_crate_are_watched_and_no_name_injects_an_instruction() {
    let dir = fixture("watched");
    let mut command = build_command(&dir, &["--message-format=json-render-diagnostics"]);
    command
        .env("NVCC", "/nonexistent/nvcc")
        .env("AUTOTUNE_TABLES_DIR", "/");
    let output = within(command, 120);
    let _ = warning(&output);
    let recorded = instructions(&output);
    assert!(
        !recorded.lines().any(|l| l == "cargo::rerun-if-changed=/"),
        "{recorded}"
    );

    let evil = "tuning\ncargo::warning=INJECTED";
    std::fs::create_dir_all(dir.join(evil)).unwrap();
    let mut command = build_command(&dir, &["--message-format=json-render-diagnostics"]);
    command
        .env("NVCC", "/nonexistent/nvcc")
        .env("AUTOTUNE_TABLES_DIR", evil);
    let output = within(command, 120);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("@0.1.0: INJECTED"), "{stderr}");
    let recorded = instructions(&output);
    assert!(
        !recorded
            .lines()
            .any(|l| l.starts_with("cargo::warning=INJECTED")),
        "{recorded}"
    );
}

/// Item 6: `AUTOTUNE_WORKER` in the environment made the build script exit 0 at
/// once; the crate then failed to compile, and stayed broken after the variable was
/// unset.
fn a_stray_worker_variable_is_ignored_and_said() {
    let dir = fixture("stray-worker");
    let mut command = build_command(&dir, &[]);
    command
        .env("NVCC", "/nonexistent/nvcc")
        .env("AUTOTUNE_WORKER", "scale");
    let line = warning(&within(command, 300));
    assert!(line.contains("AUTOTUNE_WORKER is set but"), "{line}");
    let line = warning(&build(&dir, &[], true));
    assert!(
        !line.contains("AUTOTUNE_WORKER"),
        "rebuilt once unset: {line}"
    );
}

/// Item 7: a tables folder that is a file, missing or blank, and a variable that
/// is not UTF-8, were ignored without a word.
fn a_bad_tables_folder_or_variable_is_named() {
    let dir = fixture("bad-folder");
    std::fs::write(dir.join("a-file"), "").unwrap();
    for (value, said) in [
        ("a-file", "AUTOTUNE_TABLES_DIR=a-file is a file"),
        (
            "no/such/folder",
            "AUTOTUNE_TABLES_DIR=no/such/folder does not exist",
        ),
        (" ", "AUTOTUNE_TABLES_DIR=\" \" names no folder"),
    ] {
        let mut command = build_command(&dir, &[]);
        command
            .env("NVCC", "/nonexistent/nvcc")
            .env("AUTOTUNE_TABLES_DIR", value);
        let line = warning(&command.output().unwrap());
        assert!(line.contains(said), "{value:?}: {line}");
    }
    use std::os::unix::ffi::OsStrExt;
    let mut command = build_command(&dir, &[]);
    command.env("NVCC", "/nonexistent/nvcc").env(
        "AUTOTUNE_MIN_MARGIN",
        std::ffi::OsStr::from_bytes(b"0.0\xff"),
    );
    let line = warning(&command.output().unwrap());
    assert!(line.contains("AUTOTUNE_MIN_MARGIN"), "{line}");
    assert!(line.contains("is not UTF-8"), "{line}");
}

/// Item 17: an nvcc that exits 0 without writing its output gave "cannot write
/// ...cubin: No such file or directory".
fn an_nvcc_that_writes_nothing_is_named() {
    let dir = fixture("silent-nvcc");
    let script = dir.join("silent-nvcc");
    std::fs::write(
        &script,
        "#!/bin/sh\ncase \"$1\" in --version) echo 'Cuda compilation tools, release 13.0, V13.0.88';; \
         --list-gpu-code) echo 'sm_80 sm_90';; esac\nexit 0\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut command = build_command(&dir, &[]);
    command.env("NVCC", &script).env("AUTOTUNE_ARCH", "sm_90");
    let output = within(command, 120);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("nvcc exited 0 but wrote no"), "{stderr}");
    assert!(!stderr.contains("No such file or directory"), "{stderr}");
}

/// Item 16: `AUTOTUNE_ARCH` reached nvcc unchecked and `AUTOTUNE_FORCE` names were
/// never checked.
fn arch_and_force_variables_are_checked() {
    let dir = fixture("arch-force");
    let mut command = build_command(&dir, &["--features", "autotune"]);
    command
        .env("NVCC", "/nonexistent/nvcc")
        .env("AUTOTUNE_FORCE", "nosuch");
    let line = warning(&command.output().unwrap());
    assert!(
        line.contains("AUTOTUNE_FORCE names no kernel of this crate: nosuch (its kernels: scale)"),
        "{line}"
    );
    let mut command = build_command(&dir, &["--features", "autotune"]);
    command
        .env("NVCC", "/nonexistent/nvcc")
        .env("AUTOTUNE_ARCH", "sm_90 -o /tmp/x");
    let output = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "a tuning build refuses it: {stderr}"
    );
    assert!(stderr.contains("AUTOTUNE_ARCH"), "{stderr}");
    let line = warning(
        &build_command(&dir, &[])
            .env("NVCC", "/nonexistent/nvcc")
            .env("AUTOTUNE_ARCH", "sm_90 -o /tmp/x")
            .output()
            .unwrap(),
    );
    assert!(
        line.contains("AUTOTUNE_ARCH") && line.contains("ignored"),
        "{line}"
    );
}

/// Two checkouts of one crate sharing a target folder share its build script (cargo
/// names it by package name and version); one whose wrapper differs but is older
/// than the other's build got the other's kernels baked, silently. Now it is refused,
/// with what to do.
fn a_build_script_compiled_from_another_checkout_is_refused() {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("build-faults-checkouts");
    let (a, b) = (root.join("a").join("same"), root.join("b").join("same"));
    copy::copy_scale(workspace(), &a).unwrap();
    copy::copy_scale(workspace(), &b).unwrap();
    let wrapper = b.join("src/scale.rs");
    let text = std::fs::read_to_string(&wrapper).unwrap();
    std::fs::write(
        &wrapper,
        text.replace("default = (block = 128)", "default = (block = 256)"),
    )
    .unwrap();
    // Every file of `b` older than `a`'s build, as a checkout made earlier.
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_600_000_000);
    for file in [
        "build.rs",
        "Cargo.toml",
        "src/lib.rs",
        "src/scale.rs",
        "kernels/scale.cu",
    ] {
        std::fs::File::options()
            .write(true)
            .open(b.join(file))
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    let target = root.join("target");
    let build = |dir: &Path| {
        build_command(dir, &[])
            .env("CARGO_TARGET_DIR", &target)
            .env("NVCC", "/nonexistent/nvcc")
            .output()
            .unwrap()
    };
    let first = build(&a);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    // A kernel source changed in `b`: cargo reruns the (shared) build script there.
    std::fs::write(
        b.join("kernels/scale.cu"),
        std::fs::read_to_string(b.join("kernels/scale.cu")).unwrap() + "\n",
    )
    .unwrap();
    let second = build(&b);
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "b baked a's kernels:\n{stderr}");
    assert!(
        stderr.contains("whose src/scale.rs differs from")
            && stderr.contains("cargo clean -p fixture-scale-same"),
        "{stderr}"
    );
}

/// Issue 52: the define-collision scan read `min(n, BLOCK * ITEMS)` as a
/// declaration of `ITEMS` (type `BLOCK*`) and refused a correct kernel. Everyday
/// uses (a call's arguments, an array size, a template argument, a comment) build.
fn a_kernel_that_uses_its_defines_in_expressions_builds() {
    let dir = fixture("expressions");
    std::fs::write(
        dir.join("kernels/scale.cu"),
        "// y = 2 * x over n floats: BLOCK threads a block, ITEMS elements a thread.\n\
         #ifndef BLOCK\n#define BLOCK 128\n#endif\n\
         template <unsigned N> __device__ __forceinline__ unsigned tile() { return N; }\n\
         extern \"C\" __global__ void __launch_bounds__(BLOCK) scale(const float* x, float* y, unsigned n) {\n\
             __shared__ float staged[BLOCK * ITEMS];\n\
             const unsigned first = blockIdx.x * tile<BLOCK * ITEMS>();\n\
             const unsigned end = min(n - first, BLOCK * ITEMS);\n\
             for (unsigned i = threadIdx.x; i < end; i += BLOCK) staged[i] = x[first + i];\n\
             for (unsigned i = threadIdx.x; i < end; i += BLOCK) y[first + i] = 2.0f * staged[i];\n\
         }\n",
    )
    .unwrap();
    let wrapper = std::fs::read_to_string(dir.join("src/scale.rs"))
        .unwrap()
        .replace(
            "block = [64, 128, 256],\n    default = (block = 128),",
            "block = [64, 128, 256],\n    items = [1, 2],\n    default = (block = 128, items = 1),",
        )
        .replace(
            "count.div_ceil(block)",
            "count.div_ceil(block * variant.params().items)",
        );
    assert!(
        wrapper.contains("items = [1, 2]"),
        "the fixture changed shape"
    );
    std::fs::write(dir.join("src/scale.rs"), wrapper).unwrap();
    let output = build(&dir, &["--message-format=json"], false);
    let images = baked_images(&output);
    assert!(!images.is_empty(), "images were baked");
}

/// Issue 52: `NVCC` naming a symlink to nvcc in another folder (what
/// `update-alternatives` or a distribution makes) failed the build with
/// "cuda_runtime.h: No such file or directory": nvcc finds its toolkit from the
/// folder it is called from. The link is resolved: the build compiles, and the
/// images are the very ones a direct call bakes (the same identity, so committed
/// tables stay fresh; the fingerprint's side is in autotune-build's tests).
fn nvcc_through_a_symlink_in_another_folder_compiles_the_same_images() {
    let real = Command::new("sh")
        .args(["-c", "command -v nvcc"])
        .output()
        .unwrap();
    let real = PathBuf::from(String::from_utf8_lossy(&real.stdout).trim())
        .canonicalize()
        .unwrap();
    let dir = fixture("nvcc-symlink");
    let json = ["--message-format=json"];
    let mut direct = build_command(&dir, &json);
    direct.env("NVCC", &real);
    let direct = baked_images(&direct.output().unwrap());
    assert!(!direct.is_empty(), "images were baked");
    let link = dir.join("alternatives/nvcc");
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let mut linked = build_command(&dir, &json);
    linked.env("NVCC", &link);
    let linked = baked_images(&linked.output().unwrap());
    assert_eq!(direct, linked, "the same images through the link");
}

/// Issue 50, items 1 and 3: the macro read kernel sources with plain reads: a FIFO
/// as the wrapper's source hung `cargo build` (rustc blocked in open), a link to
/// `/dev/zero` ate memory, and an image far past the fingerprint's cap was copied
/// and embedded. Each is now refused at the attribute, at once.
fn the_macro_reads_sources_as_regular_files_of_bounded_size() {
    let dir = fixture("macro-reads");
    let source = dir.join("kernels/scale.cu");
    let kernel = std::fs::read_to_string(&source).unwrap();
    for (what, make) in [("fifo", "mkfifo"), ("zero", "ln -s /dev/zero")] {
        std::fs::remove_file(&source).unwrap();
        let made = Command::new("sh")
            .arg("-c")
            .arg(format!("{make} {}", source.display()))
            .status()
            .unwrap();
        assert!(made.success(), "{what}");
        let mut command = build_command(&dir, &[]);
        command.env("NVCC", "/nonexistent/nvcc");
        let output = within(command, 120);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{what}: the build fails");
        assert!(stderr.contains("not a regular file"), "{what}:\n{stderr}");
    }
    // An image past the cap: refused, never copied into the build.
    std::fs::remove_file(&source).unwrap();
    std::fs::write(&source, &kernel).unwrap();
    let big = dir.join("kernels/scale.ptx");
    let file = std::fs::File::create(&big).unwrap();
    file.set_len(autotune_spec::guarded::read::MAX_SOURCE_BYTES + 1)
        .unwrap();
    let wrapper = std::fs::read_to_string(dir.join("src/scale.rs"))
        .unwrap()
        .replace(
            "source = \"kernels/scale.cu\",",
            "source = \"kernels/scale.ptx\",",
        );
    std::fs::write(dir.join("src/scale.rs"), wrapper).unwrap();
    let output = within(build_command(&dir, &[]), 120);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("more than the 67108864 allowed"),
        "{stderr}"
    );
}

/// Issue 50, item 2: a symlink inside the crate to a file outside it, named in a
/// table's recorded sources, was read (`read(3, "root:x:0:0:...")`).
fn a_link_inside_the_crate_to_a_file_outside_is_not_read() {
    let dir = fixture("plink");
    std::os::unix::fs::symlink("/etc/hostname", dir.join("kernels/plink")).unwrap();
    let mut entry = table(foreign("fixture-scale-plink"));
    entry.kernels.get_mut("scale").unwrap().fingerprint.sources =
        vec!["kernels/scale.cu".into(), "kernels/plink".into()];
    let path = dir.join("tuning/nvidia-h200.json");
    autotune_table::table::write_atomic(&path, &entry).unwrap();
    let mut command = build_command(&dir, &["--message-format=json-render-diagnostics"]);
    command.env("NVCC", "/nonexistent/nvcc");
    let output = within(command, 120);
    let _ = warning(&output);
    let notes = summary_notes(&output);
    assert!(
        notes.contains("outside the crate: \"kernels/plink\""),
        "{notes}"
    );
}

/// Issue 50, item 4: a stand-in nvcc that answers `--version` and exits, leaving a
/// child that holds its stdout, hung the build without limit (the pipes were read
/// with no deadline); a question that timed out was remembered as an empty answer.
fn an_nvcc_whose_child_holds_its_pipes_does_not_hang_the_build() {
    let dir = fixture("nvcc-child");
    let script = dir.join("lingering-nvcc");
    std::fs::write(
        &script,
        "#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n(sleep 600) &\nexit 0\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut command = build_command(&dir, &["--message-format=json-render-diagnostics"]);
    command
        .env("NVCC", &script)
        .env("AUTOTUNE_NVCC_TIMEOUT_S", "2");
    let output = within(command, 120);
    let line = warning(&output);
    assert!(
        line.contains("names no nvcc that answers --version"),
        "{line}"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let remembered = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|m| m["out_dir"].as_str().map(PathBuf::from))
        // The image cache of the target folder (`<target>/<profile>/build/<pkg>/out`),
        // one identity file per nvcc, the nvcc's path on its first line.
        .filter_map(|out| std::fs::read_dir(out.ancestors().nth(4)?.join("autotune-images")).ok())
        .flat_map(|entries| entries.filter_map(Result::ok))
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with("nvcc-identity")
        })
        .any(|entry| {
            std::fs::read_to_string(entry.path())
                .is_ok_and(|text| text.contains(&*script.to_string_lossy()))
        });
    assert!(!remembered, "an unanswered question is not remembered");
}

/// Issue 50, item 5: `AUTOTUNE_ARCH` of `sm_9999`, `""` or `","` was accepted
/// silently, and a bad `AUTOTUNE_NVCC_TIMEOUT_S` (0, -1, abc) turned compilation
/// off as if there were no nvcc. A tuning build refuses each; another build says
/// the value is ignored and compiles with the default.
fn arch_and_nvcc_timeout_values_are_refused_not_taken_as_nothing() {
    let dir = fixture("arch-values");
    for arch in ["sm_9999", "", ","] {
        let mut command = build_command(&dir, &["--features", "autotune"]);
        command
            .env("NVCC", "/nonexistent/nvcc")
            .env("AUTOTUNE_ARCH", arch);
        let output = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{arch:?}: {stderr}");
        assert!(stderr.contains("AUTOTUNE_ARCH"), "{arch:?}: {stderr}");
    }
    for timeout in ["0", "-1", "abc"] {
        let mut command = build_command(&dir, &["--message-format=json-render-diagnostics"]);
        command.env("AUTOTUNE_NVCC_TIMEOUT_S", timeout);
        let output = command.output().unwrap();
        let line = warning(&output);
        assert!(
            line.contains("AUTOTUNE_NVCC_TIMEOUT_S") && line.contains("ignored"),
            "{timeout}: {line}"
        );
        assert!(
            !line.contains("no binaries"),
            "{timeout}: compiled all the same: {line}"
        );
        let mut tuning = build_command(&dir, &["--features", "autotune"]);
        tuning.env("AUTOTUNE_NVCC_TIMEOUT_S", timeout);
        let refused = tuning.output().unwrap();
        assert!(
            !refused.status.success(),
            "{timeout}: a tuning build refuses it"
        );
    }
}

fn main() -> std::process::ExitCode {
    harness::run_groups(&[
        (
            harness::Need::Nothing,
            trials![
                without_nvcc_the_defaults_are_baked_with_one_warning,
                a_corrupt_table_is_named_not_used_and_left_alone,
                a_table_with_a_foreign_fingerprint_is_not_used,
                hostile_and_duplicate_tables_are_named_and_bend_nothing,
                a_missing_tables_folder_does_not_rerun_every_build,
                the_warning_is_one_short_line_that_gives_each_reason_once,
                a_case_without_the_key_field_is_an_error_at_the_key,
                direction_changing_characters_in_a_table_do_not_break_the_crate,
                an_nvcc_that_hangs_does_not_hang_the_build,
                tables_and_their_sources_are_read_only_as_regular_files_inside_the_crate,
                only_folders_inside_the_crate_are_watched_and_no_name_injects_an_instruction,
                a_stray_worker_variable_is_ignored_and_said,
                a_bad_tables_folder_or_variable_is_named,
                an_nvcc_that_writes_nothing_is_named,
                arch_and_force_variables_are_checked,
                a_build_script_compiled_from_another_checkout_is_refused,
                the_macro_reads_sources_as_regular_files_of_bounded_size,
                a_link_inside_the_crate_to_a_file_outside_is_not_read,
                an_nvcc_whose_child_holds_its_pipes_does_not_hang_the_build
            ],
        ),
        (
            harness::Need::Nvcc,
            trials![
                a_header_found_through_an_include_flag_is_watched_and_compiled_in,
                a_table_for_an_arch_nvcc_cannot_target_is_skipped,
                the_environment_nvcc_reads_reruns_the_build_and_recompiles,
                a_release_tuning_build_with_an_unoptimised_build_script_says_so,
                a_kernel_that_uses_its_defines_in_expressions_builds,
                nvcc_through_a_symlink_in_another_folder_compiles_the_same_images,
                arch_and_nvcc_timeout_values_are_refused_not_taken_as_nothing
            ],
        ),
        (
            harness::Need::NoCudaDriver,
            trials![the_autotune_feature_without_a_gpu_tunes_nothing_and_still_builds],
        ),
    ])
}
