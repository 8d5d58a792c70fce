//! The README is for users and its code is real: at most 12 KiB, no development
//! history, and every code block of the quick start is a file (or a whole part of
//! one) of `examples/quickstart`, which CI builds and tests against the packaged
//! crates. The changelog has a section for this version.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The fenced blocks of `text` whose info string starts with `lang`.
fn blocks<'a>(text: &'a str, lang: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        let Some(newline) = after.find('\n') else {
            break;
        };
        let info = &after[..newline];
        let body = &after[newline + 1..];
        let Some(end) = body.find("```") else { break };
        if info.split(',').next() == Some(lang) {
            out.push(&body[..end]);
        }
        rest = &body[end + 3..];
    }
    out
}

#[test]
fn the_readme_is_short_and_for_users() {
    let readme = read("README.md");
    assert!(
        readme.len() <= 12 * 1024,
        "README.md is {} bytes",
        readme.len()
    );
    for history in ["session", "NOTES item", "round of work", "issue "] {
        assert!(
            !readme.to_lowercase().contains(&history.to_lowercase()),
            "README.md tells history ({history:?}): move it to docs/history/notes.md or docs/"
        );
    }
    for prerequisite in [
        "Rust 1.95",
        "nvidia-cuda-nvcc==",
        "site-packages/nvidia/cu13/bin",
    ] {
        assert!(
            readme.contains(prerequisite),
            "no {prerequisite:?} in README.md"
        );
    }
}

/// Issue 49: the README's sample output was stale (four ranges tuned on
/// 2026-11-30, where the main job printed five from 2026-12-05). It is what dispatch
/// describes for the shipped RMSNorm with the committed table, as the main job
/// (`examples/dispatch.rs`) prints it with nvcc at build time.
#[test]
fn the_readme_sample_is_what_the_main_job_prints() {
    use autotune_kernels::RmsNorm;
    use autotune_runtime::Kernel;
    let readme = read("README.md");
    let sample = blocks(&readme, "text")
        .into_iter()
        .find(|b| b.starts_with("rms_norm: "))
        .expect("the README shows what a build baked");
    let printed = RmsNorm::baked().describe_plans(RmsNorm::SPEC.key);
    // Without nvcc the listing ends by saying so; the README shows a build with it.
    let printed: String = printed
        .lines()
        .filter(|line| !line.contains("not compiled"))
        .map(|line| format!("{line}\n"))
        .collect();
    assert_eq!(
        sample, printed,
        "README.md's sample differs from dispatch's listing"
    );
}

#[test]
fn every_code_block_of_the_readme_is_compiled_quick_start_code() {
    let readme = read("README.md");
    let quickstart = [
        "examples/quickstart/build.rs",
        "examples/quickstart/src/scale.rs",
        "examples/quickstart/tests/scale.rs",
    ]
    .map(read);
    let rust = blocks(&readme, "rust");
    assert!(
        rust.len() >= 3,
        "the quick start's build.rs, wrapper and test"
    );
    for block in rust {
        assert!(
            quickstart.iter().any(|file| file.contains(block)),
            "a Rust block of README.md is not in examples/quickstart (so not compiled):\n{block}"
        );
    }
    let manifest = read("examples/quickstart/Cargo.toml");
    for block in blocks(&readme, "toml") {
        assert!(
            manifest.contains(block),
            "a TOML block of README.md is not examples/quickstart/Cargo.toml's:\n{block}"
        );
    }
    let kernel = read("examples/quickstart/kernels/scale.cu");
    let cuda = blocks(&readme, "cuda");
    assert_eq!(
        cuda,
        [kernel.as_str()],
        "the CUDA block is the quick start's kernel"
    );
}

#[test]
fn the_changelog_has_this_version_and_migration_notes() {
    let changelog = read("CHANGELOG.md");
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        changelog.contains(&format!("\n## {version} ")),
        "CHANGELOG.md has no section for {version}"
    );
    assert!(changelog.contains("## Unreleased"), "no Unreleased section");
    assert!(
        changelog.contains("### Breaking changes and how to migrate"),
        "no migration notes"
    );
}
