//! `cargo autotune fleet slurm|kubernetes|github --shards N`: the recipe that
//! spreads a tuning run over N GPU machines of one model on an existing scheduler
//! (a Slurm job array, a Kubernetes Indexed Job, a CI matrix), each machine tuning
//! its shard (`cargo autotune tune --shard i/N`), then one merge
//! (`cargo autotune merge`) joining the shards into the model's table.

use std::process::ExitCode;

use crate::args::{FleetArgs, Scheduler};
use crate::error::CliError;

const SLURM: &str = include_str!("../templates/fleet/slurm.sh");
const KUBERNETES: &str = include_str!("../templates/fleet/kubernetes.yaml");
const GITHUB: &str = include_str!("../templates/fleet/github.yml");

pub fn run(args: &FleetArgs) -> Result<ExitCode, CliError> {
    print!(
        "{}",
        render(args.scheduler, args.shards, &args.gpu, &args.table)?
    );
    Ok(ExitCode::SUCCESS)
}

/// The recipe for `scheduler`, over `shards` machines whose GPU the scheduler knows
/// as `gpu` (a Slurm GRES type, a node label's value, a runner label), merging into
/// `table`.
pub fn render(
    scheduler: Scheduler,
    shards: u32,
    gpu: &str,
    table: &str,
) -> Result<String, CliError> {
    if shards == 0 || shards > autotune_table::shard::MAX_SHARDS {
        return Err(CliError::Refused(format!(
            "--shards {shards}: from 1 to {}",
            autotune_table::shard::MAX_SHARDS
        )));
    }
    // Values land in shell and YAML text: plain names and paths only.
    for (what, value) in [("--gpu", gpu), ("--table", table)] {
        let plain = !value.is_empty()
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
        if !plain {
            return Err(CliError::Refused(format!(
                "{what} {value:?}: letters, digits and - _ . / only"
            )));
        }
    }
    let template = match scheduler {
        Scheduler::Slurm => SLURM,
        Scheduler::Kubernetes => KUBERNETES,
        Scheduler::Github => GITHUB,
    };
    let list: Vec<String> = (1..=shards).map(|i| i.to_string()).collect();
    Ok(template
        .replace("@SHARDS@", &shards.to_string())
        .replace("@SHARD_LIST@", &list.join(", "))
        .replace("@GPU@", gpu)
        .replace("@TABLE@", table))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::Value;

    fn yaml_documents(text: &str) -> Vec<Value> {
        serde_yaml_ng::Deserializer::from_str(text)
            .map(|doc| serde::Deserialize::deserialize(doc).expect("valid YAML"))
            .collect()
    }

    #[test]
    fn the_slurm_array_is_valid_bash_with_a_task_per_shard_and_a_merge_after() {
        for shards in [1, 2, 4] {
            let text = render(Scheduler::Slurm, shards, "h200", "tuning/nvidia-h200.json").unwrap();
            let dir = std::env::temp_dir().join(format!("autotune-fleet-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let script = dir.join(format!("slurm-{shards}.sh"));
            std::fs::write(&script, &text).unwrap();
            let syntax = std::process::Command::new("bash")
                .arg("-n")
                .arg(&script)
                .output()
                .expect("bash runs");
            assert!(
                syntax.status.success(),
                "{}",
                String::from_utf8_lossy(&syntax.stderr)
            );
            for needle in [
                format!("SHARDS={shards}\n"),
                "--array=\"1-${SHARDS}\" --gres=gpu:h200:1".to_string(),
                "--dependency=\"afterok:${job}\"".to_string(),
                "--shard \"${SLURM_ARRAY_TASK_ID}/${SHARDS}\"".to_string(),
                "TABLE=${TABLE:-tuning/nvidia-h200.json}".to_string(),
                "cargo autotune merge \"$TABLE\" \"$TABLE\"".to_string(),
            ] {
                assert!(text.contains(&needle), "{needle}:\n{text}");
            }
            assert!(!text.contains("@SHARDS@") && !text.contains("@GPU@"));
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    #[test]
    fn the_kubernetes_indexed_job_runs_a_pod_per_shard_then_the_merge() {
        for shards in [1, 3] {
            let text = render(
                Scheduler::Kubernetes,
                shards,
                "NVIDIA-H200",
                "tuning/nvidia-h200.json",
            )
            .unwrap();
            let docs = yaml_documents(&text);
            assert_eq!(docs.len(), 2);
            let (tune, merge) = (&docs[0], &docs[1]);
            assert_eq!(tune["kind"], "Job");
            assert_eq!(tune["spec"]["completionMode"], "Indexed");
            assert_eq!(tune["spec"]["completions"], shards);
            assert_eq!(tune["spec"]["parallelism"], shards);
            let pod = &tune["spec"]["template"]["spec"];
            assert_eq!(pod["nodeSelector"]["nvidia.com/gpu.product"], "NVIDIA-H200");
            let container = &pod["containers"][0];
            assert_eq!(container["resources"]["limits"]["nvidia.com/gpu"], 1);
            let command = container["args"][0].as_str().unwrap();
            assert_eq!(
                command,
                format!("cargo autotune tune --shard \"$((JOB_COMPLETION_INDEX + 1))/{shards}\"")
            );
            assert_eq!(merge["kind"], "Job");
            assert_eq!(merge["spec"]["suspend"], true);
            let merge_pod = &merge["spec"]["template"]["spec"];
            assert!(merge_pod["containers"][0]["resources"].is_null(), "no GPU");
            let merge_command = merge_pod["containers"][0]["args"][0].as_str().unwrap();
            assert!(merge_command.contains(&format!("*.shard-*-of-{shards}.json")));
            assert_eq!(
                merge_pod["containers"][0]["env"][0]["value"],
                "tuning/nvidia-h200.json"
            );
        }
    }

    #[test]
    fn the_ci_matrix_tunes_every_shard_of_each_model_then_merges_per_model() {
        let text = render(
            Scheduler::Github,
            3,
            "h200",
            "kernels/tuning/nvidia-h200.json",
        )
        .unwrap();
        let docs = yaml_documents(&text);
        let jobs = &docs[0]["jobs"];
        let matrix = &jobs["tune"]["strategy"]["matrix"];
        assert_eq!(matrix["shard"], serde_json::json!([1, 2, 3]));
        assert_eq!(matrix["gpu"], serde_json::json!(["h200"]));
        let steps = jobs["tune"]["steps"].as_array().unwrap();
        assert!(steps.iter().any(|s| {
            s["run"]
                .as_str()
                .is_some_and(|r| r == "cargo autotune tune --shard \"${{ matrix.shard }}/3\"")
        }));
        assert_eq!(jobs["merge"]["needs"], "tune");
        assert_eq!(
            jobs["merge"]["strategy"]["matrix"]["include"][0]["table"],
            "kernels/tuning/nvidia-h200.json"
        );
    }

    #[test]
    fn values_that_could_break_the_recipe_are_refused() {
        assert!(render(Scheduler::Slurm, 0, "h200", "t.json").is_err());
        assert!(render(Scheduler::Slurm, 2, "h200; rm -rf /", "t.json").is_err());
        assert!(render(Scheduler::Kubernetes, 2, "h200", "a\"b.json").is_err());
    }

    /// docs/fleet.md shows each recipe as this version renders it for two shards.
    #[test]
    fn the_documented_recipes_are_the_rendered_ones() {
        let doc = include_str!("../../docs/fleet.md");
        for (scheduler, gpu, table) in [
            (Scheduler::Slurm, "h200", "tuning/nvidia-h200.json"),
            (
                Scheduler::Kubernetes,
                "NVIDIA-H200",
                "tuning/nvidia-h200.json",
            ),
            (Scheduler::Github, "h200", "tuning/nvidia-h200.json"),
        ] {
            let text = render(scheduler, 2, gpu, table).unwrap();
            assert!(
                doc.contains(&text),
                "docs/fleet.md is stale for {scheduler:?}: \
                 `cargo autotune fleet ... --shards 2` renders:\n{text}"
            );
        }
    }
}
