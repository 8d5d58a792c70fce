//! The Kubernetes and GitHub recipes of `cargo autotune fleet` checked against
//! the real schemas, not only parsed as YAML (issue 51): `kubernetes-validate
//! --strict` (the Kubernetes API's own OpenAPI schemas, offline; PyPI) on the two
//! Jobs, and `check-jsonschema --builtin-schema vendor.github-workflows` (the
//! SchemaStore's workflow schema, vendored; PyPI) on the workflow. Each check is
//! shown to bite: a misspelt field fails it. `.ci/run` installs both; without them
//! the tests are reported ignored, unless `AUTOTUNE_REQUIRE_SCHEMAS=1` (CI).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] functions
#![allow(clippy::disallowed_methods)] // tests read and set up their own environment

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use autotune_harness::{self as harness, trials};

/// The validator `program`: the harness runs the test that asks only where it is.
fn validator(program: &str) -> PathBuf {
    harness::tools_dir(&[program])
        .map(|dir| dir.join(program))
        .expect("the harness runs this test only where the validator is")
}

/// `cargo autotune fleet SCHEDULER --shards N ...`, written to a file of its own.
fn rendered(scheduler: &str, shards: u32, gpu: &str, name: &str) -> PathBuf {
    let output = Command::new(env!("CARGO_BIN_EXE_cargo-autotune"))
        .args([
            "autotune",
            "fleet",
            scheduler,
            "--shards",
            &shards.to_string(),
        ])
        .args(["--gpu", gpu, "--table", "tuning/nvidia-h200.json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fleet-schemas");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, output.stdout).unwrap();
    path
}

fn run(program: &Path, args: &[&str], file: &Path) -> Output {
    Command::new(program).args(args).arg(file).output().unwrap()
}

fn said(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// `file` with `from` replaced by `to` (a field misspelt), beside it.
fn misspelt(file: &Path, from: &str, to: &str) -> PathBuf {
    let text = std::fs::read_to_string(file).unwrap();
    assert!(text.contains(from), "{from} in {}", file.display());
    let path = file.with_extension(format!(
        "misspelt.{}",
        file.extension().unwrap().to_string_lossy()
    ));
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    path
}

/// `scheduler`'s recipe for 1, 3 and 16 shards passes `program ARGS`, and one with
/// `from` misspelt as `to` fails it (the check bites).
fn passes_and_bites(
    program: &Path,
    args: &[&str],
    scheduler: &str,
    gpu: &str,
    from: &str,
    to: &str,
) {
    let extension = if scheduler == "kubernetes" {
        "yaml"
    } else {
        "yml"
    };
    for shards in [1, 3, 16] {
        let file = rendered(
            scheduler,
            shards,
            gpu,
            &format!("{scheduler}-{shards}.{extension}"),
        );
        let output = run(program, args, &file);
        assert!(
            output.status.success(),
            "{shards} shards: {}",
            said(&output)
        );
    }
    let file = rendered(scheduler, 2, gpu, &format!("{scheduler}.{extension}"));
    let output = run(program, args, &misspelt(&file, from, to));
    assert!(
        !output.status.success(),
        "the schema check bites: {}",
        said(&output)
    );
}

fn the_kubernetes_jobs_are_valid_against_the_api_schemas() {
    let validate = validator("kubernetes-validate");
    let args = ["--strict", "--quiet"];
    let field = "backoffLimitPerIndex:";
    passes_and_bites(
        &validate,
        &args,
        "kubernetes",
        "NVIDIA-H200",
        field,
        "backoffLimitPerIndexes:",
    );
}

fn the_github_workflow_is_valid_against_the_workflow_schema() {
    let check = validator("check-jsonschema");
    let args = ["--builtin-schema", "vendor.github-workflows"];
    let field = "runs-on: ubuntu-latest";
    passes_and_bites(
        &check,
        &args,
        "github",
        "h200",
        field,
        "run-on: ubuntu-latest",
    );
}

fn main() -> std::process::ExitCode {
    harness::run_groups(&[
        (
            harness::Need::Tools(&["kubernetes-validate"], "AUTOTUNE_REQUIRE_SCHEMAS"),
            trials![the_kubernetes_jobs_are_valid_against_the_api_schemas],
        ),
        (
            harness::Need::Tools(&["check-jsonschema"], "AUTOTUNE_REQUIRE_SCHEMAS"),
            trials![the_github_workflow_is_valid_against_the_workflow_schema],
        ),
    ])
}
