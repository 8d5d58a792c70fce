//! The patches kept under `bench/h200` for a GPU trip (a change that waits for the
//! H200 to retune what it stales, or that a sweep compiles in) still apply to the
//! tree: one that no longer applies is refreshed when its files change, not found
//! broken on the GPU machine. A patch whose header says it applies on top of
//! another (`Applies on top of: bench/h200/<base>.patch`) is checked after that one,
//! in a scratch index. Reported ignored where git or the repository's work tree is
//! absent (a packaged crate).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] functions
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use autotune_harness::{self as harness, trials};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `git -C <crate root> args...`, run to its end.
fn git(args: &[&OsStr]) -> std::io::Result<Output> {
    Command::new("git")
        .arg("-C")
        .arg(root())
        .args(args)
        .output()
}

/// Why git cannot check the patches here, if it cannot.
fn no_work_tree() -> Option<&'static str> {
    match git(&["rev-parse".as_ref(), "--is-inside-work-tree".as_ref()]) {
        Ok(out) if out.status.success() => None,
        Ok(_) => Some("the crate is not in a git work tree"),
        Err(_) => Some("git is not on PATH"),
    }
}

fn patches() -> Vec<PathBuf> {
    let dir = root().join("bench/h200");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "patch"))
        .collect();
    found.sort();
    found
}

/// What a patch's header says it applies on top of (`Applies on top of:
/// bench/h200/<base>.patch`): none for a patch of the tree as it is.
fn base_of(patch: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(patch).unwrap();
    let header = text.split("\ndiff --git ").next().unwrap_or_default();
    let (_, after) = header.split_once("Applies on top of:")?;
    let base = after.split_whitespace().next()?;
    Some(root().join(base))
}

/// `git apply --cached` of `patches` in turn, into a scratch index read from HEAD
/// (the work tree untouched): the last with `--check`.
fn apply_in_turn(patches: &[PathBuf]) -> Output {
    let index = std::env::temp_dir().join(format!(
        "autotune-pending-patches-{}-{}.index",
        std::process::id(),
        patches.len()
    ));
    let with_index = |args: &[&OsStr]| {
        Command::new("git")
            .arg("-C")
            .arg(root())
            .args(args)
            .env("GIT_INDEX_FILE", &index)
            .output()
            .unwrap()
    };
    let read = with_index(&["read-tree".as_ref(), "HEAD".as_ref()]);
    assert!(
        read.status.success(),
        "{}",
        String::from_utf8_lossy(&read.stderr)
    );
    let (last, before) = patches.split_last().unwrap();
    for patch in before {
        let out = with_index(&["apply".as_ref(), "--cached".as_ref(), patch.as_os_str()]);
        if !out.status.success() {
            let _ = std::fs::remove_file(&index);
            return out;
        }
    }
    let out = with_index(&[
        "apply".as_ref(),
        "--cached".as_ref(),
        "--check".as_ref(),
        last.as_os_str(),
    ]);
    let _ = std::fs::remove_file(&index);
    out
}

fn every_patch_for_a_gpu_trip_applies_to_the_tree() {
    let found = patches();
    assert!(!found.is_empty(), "bench/h200 holds the trips' patches");
    for patch in &found {
        // The patches it applies on top of, first.
        let mut chain = vec![patch.clone()];
        while let Some(base) = base_of(chain.last().unwrap()) {
            assert!(
                found.contains(&base) && !chain.contains(&base),
                "{} applies on top of {}, which is not a patch of bench/h200 (or is a cycle)",
                patch.display(),
                base.display()
            );
            chain.push(base);
        }
        chain.reverse();
        let out = if chain.len() == 1 {
            git(&["apply".as_ref(), "--check".as_ref(), patch.as_os_str()]).unwrap()
        } else {
            apply_in_turn(&chain)
        };
        assert!(
            out.status.success(),
            "{} no longer applies{}: {}",
            patch.display(),
            if chain.len() > 1 {
                " on top of the patches it names"
            } else {
                ""
            },
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn main() -> std::process::ExitCode {
    harness::run_groups(&[(
        harness::Need::Checked(no_work_tree(), None),
        trials![every_patch_for_a_gpu_trip_applies_to_the_tree],
    )])
}
