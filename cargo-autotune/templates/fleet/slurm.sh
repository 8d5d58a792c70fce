#!/usr/bin/env bash
# Tunes a crate's stale kernels on @SHARDS@ GPU nodes of one model as a Slurm job
# array, then joins the shards into the one table (rendered by
# `cargo autotune fleet slurm --shards @SHARDS@ --gpu @GPU@`).
#
# Run `bash tune-fleet.sh` from the crate's checkout on a file system every node
# sees: it submits the array (one task per shard, one GPU each) and the merge,
# which runs once every task has succeeded. Each task builds in its own target
# folder in the checkout (target/fleet/shard-<i>, FLEET_TARGET to move it), where
# its sweep keeps the journal: a task requeued after its node failed resumes there
# on any node. It writes tuning/shards/<gpu>.shard-<i>-of-@SHARDS@.json; the merge
# refuses to join while a shard is missing, and leaves the table as it was.
#SBATCH --job-name=autotune
#SBATCH --time=04:00:00
#SBATCH --requeue
set -euo pipefail

SHARDS=@SHARDS@
# The table the shards start from and the merge writes (the GPU model's file).
TABLE=${TABLE:-@TABLE@}
MANIFEST=${MANIFEST:-Cargo.toml}

if [ -z "${SLURM_JOB_ID:-}" ]; then
  job=$(sbatch --parsable --array="1-${SHARDS}" --gres=gpu:@GPU@:1 --export=ALL "$0" shard)
  sbatch --dependency="afterok:${job}" --export=ALL "$0" merge
  exit 0
fi

case "${1:-}" in
  shard)
    export CARGO_TARGET_DIR="${FLEET_TARGET:-$PWD/target/fleet}/shard-${SLURM_ARRAY_TASK_ID}"
    cargo autotune tune --manifest-path "$MANIFEST" --shard "${SLURM_ARRAY_TASK_ID}/${SHARDS}"
    ;;
  merge)
    shards=("$(dirname "$TABLE")"/shards/*.shard-*-of-"${SHARDS}".json)
    cargo autotune merge "$TABLE" "$TABLE" "${shards[@]}"
    ;;
  *)
    echo "usage: bash $0 (submits the shards and the merge)" >&2
    exit 2
    ;;
esac
