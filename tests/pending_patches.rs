//! The patches kept under `bench/h200` for a GPU trip (a change that waits for the
//! H200 to retune what it stales, or that a sweep compiles in) still apply to the
//! tree: one that no longer applies is refreshed when its files change, not found
//! broken on the GPU machine. Reported ignored where git or the repository's work
//! tree is absent (a packaged crate).
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

fn every_patch_for_a_gpu_trip_applies_to_the_tree() {
    let found = patches();
    assert!(!found.is_empty(), "bench/h200 holds the trips' patches");
    for patch in found {
        let out = git(&["apply".as_ref(), "--check".as_ref(), patch.as_os_str()]).unwrap();
        assert!(
            out.status.success(),
            "{} no longer applies: {}",
            patch.display(),
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
