//! Issue 50 (bad input, round three), the commands' side: each test reproduces a
//! hole found with a careless or hostile input, and fails without its fix.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] functions
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use autotune_table::table::TuningTable;

fn cargo_autotune(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cargo-autotune"))
        .arg("autotune")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A folder of this test with `tuning/nvidia-h200.json`, the tables crate's fixture
/// (a copy of an H200 table: a retune of the shipped one changes nothing here).
fn tables(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("hostile")
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

fn committed() -> TuningTable {
    autotune_table::testing::fixture_table()
}

/// Writes `table` as JSON at `path` without the validation a reader applies.
fn write_raw(path: &Path, table: &TuningTable) {
    std::fs::write(path, serde_json::to_string_pretty(table).unwrap()).unwrap();
}

/// Item 13: `report` exited 0 on a table it could not read.
#[test]
fn report_fails_on_an_unreadable_table() {
    let dir = tables("report");
    std::fs::write(dir.join("tuning/broken.json"), "{ \"format\": 2, ").unwrap();
    let out = cargo_autotune(&dir, &["report"]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        said(&out).contains("broken.json: unreadable"),
        "{}",
        said(&out)
    );
}

/// Two shards of a run over the committed table's entries, as `tune --shard i/2`
/// writes them (the first two entries to shard 1, the rest to shard 2).
fn shards(dir: &Path) -> [PathBuf; 2] {
    let whole = committed();
    let names: Vec<String> = whole.kernels.keys().cloned().collect();
    let digest = autotune_table::shard_join::work_digest(
        whole
            .kernels
            .iter()
            .map(|(n, k)| (n.as_str(), &k.fingerprint)),
    );
    let mut paths = Vec::new();
    for (index, mine) in [(1u32, &names[..2]), (2, &names[2..])] {
        let mut part = whole.clone();
        part.kernels.retain(|name, _| mine.contains(name));
        part.shard = Some(autotune_table::shard::ShardRecord {
            shard: autotune_table::shard::Shard { index, count: 2 },
            work: names.clone(),
            work_sha256: digest.clone(),
            entries: mine.to_vec(),
            host: format!("gpu-{index}"),
        });
        let path = dir.join(format!("tuning/shards/nvidia-h200.shard-{index}-of-2.json"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        write_raw(&path, &part);
        paths.push(path);
    }
    [paths[0].clone(), paths[1].clone()]
}

/// `cargo autotune merge` of two shards on top of the committed table, in `dir`.
fn merge_into_the_table(dir: &Path, first: &Path, second: &Path) -> Output {
    let table = "tuning/nvidia-h200.json";
    Command::new(env!("CARGO_BIN_EXE_cargo-autotune"))
        .args(["autotune", "merge", table, table])
        .arg(first)
        .arg(second)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Item 10: `merge` panicked on a crafted shard ("attempt to subtract with
/// overflow" for `"index": 0`, out of bounds for index 3 of 2, a 64 GiB allocation
/// for a count of 4294967295) and merged overlapping shards silently.
#[test]
fn merge_refuses_crafted_shards_without_panicking() {
    let dir = tables("shards");
    let [first, second] = shards(&dir);
    let table = dir.join("tuning/nvidia-h200.json");
    let before = std::fs::read(&table).unwrap();
    let merge = |second: &Path| {
        let args = [
            "merge",
            "tuning/nvidia-h200.json",
            "tuning/nvidia-h200.json",
        ];
        let mut command = Command::new(env!("CARGO_BIN_EXE_cargo-autotune"));
        command.arg("autotune").args(args).arg(&first).arg(second);
        command.current_dir(&dir).output().unwrap()
    };
    let fine = merge(&second);
    assert!(fine.status.success(), "{}", said(&fine));
    std::fs::write(&table, &before).unwrap();
    for (index, count) in [(0u32, 2u32), (3, 2), (1, 0), (2, u32::MAX)] {
        let mut crafted: TuningTable =
            serde_json::from_slice(&std::fs::read(&second).unwrap()).unwrap();
        crafted.shard.as_mut().unwrap().shard = autotune_table::shard::Shard { index, count };
        let path = dir.join(format!("crafted-{index}-{count}.json"));
        write_raw(&path, &crafted);
        let out = merge(&path);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{index}/{count}: {}",
            said(&out)
        );
        assert!(!said(&out).contains("panicked"), "{}", said(&out));
        assert_eq!(
            std::fs::read(&table).unwrap(),
            before,
            "the table is untouched"
        );
    }
    // Shard 2 claiming one of shard 1's entries too.
    let mut overlapping: TuningTable =
        serde_json::from_slice(&std::fs::read(&second).unwrap()).unwrap();
    let first_table: TuningTable = serde_json::from_slice(&std::fs::read(&first).unwrap()).unwrap();
    let (name, entry) = first_table.kernels.iter().next().unwrap();
    overlapping.kernels.insert(name.clone(), entry.clone());
    overlapping
        .shard
        .as_mut()
        .unwrap()
        .entries
        .push(name.clone());
    let path = dir.join("overlapping.json");
    write_raw(&path, &overlapping);
    let out = merge(&path);
    assert!(said(&out).contains("both tuned"), "{}", said(&out));
}

/// Item 11: `tuned_on "9999-12-31"` won a merge in either order; `2026-02-30` was
/// a date.
#[test]
fn a_table_from_the_future_or_an_impossible_day_is_unreadable() {
    let dir = tables("dates");
    for date in ["9999-12-31", "2026-02-30"] {
        let mut forged = committed();
        for kernel in forged.kernels.values_mut() {
            kernel.tuned_on = date.into();
        }
        let path = dir.join(format!("forged-{date}.json"));
        write_raw(&path, &forged);
        let out = cargo_autotune(
            &dir,
            &[
                "merge",
                "out.json",
                "tuning/nvidia-h200.json",
                path.to_str().unwrap(),
            ],
        );
        assert_eq!(out.status.code(), Some(2), "{date}: {}", said(&out));
        assert!(!dir.join("out.json").exists(), "{date}");
    }
}

/// Item 12: a table's GPU name (a shard's host) reached the terminal and the
/// merged report with its escape sequences (a terminal title, a clear screen).
#[test]
fn table_text_never_reaches_a_terminal_or_a_report_raw() {
    let dir = tables("escapes");
    let mut hostile = committed();
    hostile.gpu.name = "NVIDIA H200\u{1b}]0;pwned\u{7}\u{1b}[2J\u{2028}".into();
    write_raw(&dir.join("tuning/nvidia-h200.json"), &hostile);
    let kernel = hostile.kernels.keys().next().unwrap().clone();
    let out = cargo_autotune(
        &dir,
        &[
            "simulate",
            "--table",
            "tuning/nvidia-h200.json",
            "--kernel",
            &kernel,
            "--strategy",
            "random",
            "--budget",
            "4",
            "--runs",
            "2",
        ],
    );
    assert!(out.status.success(), "{}", said(&out));
    let printed = said(&out);
    assert!(
        !printed.contains('\u{1b}') && !printed.contains('\u{2028}'),
        "{printed:?}"
    );
    assert!(printed.contains("\\u{1b}]0;pwned"), "{printed}");

    let dir = tables("escapes-merge");
    let [first, second] = shards(&dir);
    let mut shard: TuningTable = serde_json::from_slice(&std::fs::read(&second).unwrap()).unwrap();
    shard.shard.as_mut().unwrap().host = "gpu-2\u{1b}[2J".into();
    write_raw(&second, &shard);
    let out = merge_into_the_table(&dir, &first, &second);
    assert!(out.status.success(), "{}", said(&out));
    let report = std::fs::read_to_string(dir.join("tuning/nvidia-h200-report.txt")).unwrap();
    assert!(!report.contains('\u{1b}'), "the report holds no escape");
    assert!(report.contains("gpu-2\\u{1b}[2J"), "{report}");
}

/// Item 8: `context --out tuning/judge-journal.jsonl` overwrote the judge's
/// history (exit 0); a `plots` folder that is a symlink was followed; a merge that
/// failed part-way had already replaced the table.
#[test]
fn nothing_the_tool_keeps_is_overwritten_and_a_merge_is_whole() {
    let dir = tables("context");
    let journal = dir.join("tuning/judge-journal.jsonl");
    std::fs::write(&journal, "{\"kept\": true}\n").unwrap();
    for out in ["tuning/judge-journal.jsonl", "tuning/logs/gemm.log"] {
        let run = cargo_autotune(&dir, &["context", "--out", out]);
        assert_eq!(run.status.code(), Some(2), "{out}: {}", said(&run));
        assert!(
            said(&run).contains("inside the tables folder"),
            "{}",
            said(&run)
        );
    }
    assert_eq!(
        std::fs::read_to_string(&journal).unwrap(),
        "{\"kept\": true}\n"
    );
    assert!(
        cargo_autotune(&dir, &["context", "--out", "context.md"])
            .status
            .success()
    );

    let dir = tables("plots-link");
    let [first, second] = shards(&dir);
    let elsewhere = dir.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, dir.join("tuning/plots")).unwrap();
    let table = dir.join("tuning/nvidia-h200.json");
    let before = std::fs::read(&table).unwrap();
    let out = merge_into_the_table(&dir, &first, &second);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(said(&out).contains("plots is a symlink"), "{}", said(&out));
    assert_eq!(
        std::fs::read(&table).unwrap(),
        before,
        "the table is untouched"
    );
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "nothing went through"
    );
    assert!(
        !dir.join("tuning/nvidia-h200-report.txt").exists(),
        "no report either"
    );
}

/// A fresh crate made by `cargo new` outside this repository (inside it, the new
/// crate would join the workspace).
fn new_crate(name: &str, package: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("autotune-hostile-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let made = Command::new(cargo)
        .args(["new", "--lib", "--vcs", "none", package])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", said(&made));
    dir.join(package)
}

/// Item 7: `init` wrote `Cargo.toml` in place and through symlinks (a dangling
/// `build.rs` link created a file outside the crate), and with `src/` read-only it
/// had already edited `Cargo.toml` and created `build.rs` before it failed, so that
/// a second run refused ("not overwriting build.rs").
#[test]
fn init_changes_all_or_nothing_and_never_through_a_link() {
    let krate = new_crate("init-link", "linked");
    let outside = krate.with_file_name("outside-build.rs");
    std::os::unix::fs::symlink(&outside, krate.join("build.rs")).unwrap();
    let manifest = std::fs::read(krate.join("Cargo.toml")).unwrap();
    let out = cargo_autotune(&krate, &["init"]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        said(&out).contains("not overwriting build.rs"),
        "{}",
        said(&out)
    );
    assert!(!outside.exists(), "nothing was created through the link");
    assert_eq!(std::fs::read(krate.join("Cargo.toml")).unwrap(), manifest);

    // src/ read-only (as root, permissions do not stop writes: a file stands in
    // for the folder `kernels/` that init must create).
    let krate = new_crate("init-blocked", "blocked");
    std::fs::write(krate.join("kernels"), "a file where a folder must go").unwrap();
    let manifest = std::fs::read(krate.join("Cargo.toml")).unwrap();
    for attempt in 0..2 {
        let out = cargo_autotune(&krate, &["init"]);
        assert_eq!(
            out.status.code(),
            Some(2),
            "attempt {attempt}: {}",
            said(&out)
        );
        assert!(!said(&out).contains("not overwriting"), "{}", said(&out));
        assert_eq!(std::fs::read(krate.join("Cargo.toml")).unwrap(), manifest);
        assert!(!krate.join("build.rs").exists() && !krate.join("src/scale.rs").exists());
    }
}

/// Item 7: in a workspace member, run as `cargo autotune init` from its folder, it
/// wrote a `[profile.release.build-override]` that cargo ignores, without a word.
#[test]
fn init_in_a_workspace_member_says_where_the_profile_goes() {
    let member = new_crate("init-member", "member");
    let workspace = member.parent().unwrap();
    std::fs::write(
        workspace.join("Cargo.toml"),
        "[workspace]\nmembers = [\"member\"]\nresolver = \"3\"\n",
    )
    .unwrap();
    let out = cargo_autotune(&member, &["init"]);
    assert!(out.status.success(), "{}", said(&out));
    let manifest = std::fs::read_to_string(member.join("Cargo.toml")).unwrap();
    assert!(!manifest.contains("build-override"), "{manifest}");
    assert!(
        said(&out).contains("this crate is a workspace member"),
        "{}",
        said(&out)
    );
}

/// Item 9: `judge` put its scratch folder under the current folder, not the
/// crate's: from `src/` it filled `src/target/autotune-judge` while the build read
/// the crate's tables.
#[test]
fn judge_keeps_its_scratch_tables_in_the_crate_folder() {
    let krate = new_crate("judge-root", "judged");
    std::fs::create_dir_all(krate.join("tuning")).unwrap();
    // The build it starts fails at once (no `autotune` feature): the folder is made
    // before that.
    let out = cargo_autotune(&krate.join("src"), &["judge", "--kernel", "scale"]);
    assert!(!out.status.success(), "{}", said(&out));
    assert!(
        krate.join("target/autotune-judge").is_dir(),
        "{}",
        said(&out)
    );
    assert!(!krate.join("src/target").exists(), "nothing under src/");
}
