#!/usr/bin/env bash
# Session 5's second trip on the H200 (two GPUs), in the background; poll
# `tail target/judge/run.log`. GPU 0: the judge on the downstream LayerNorm's
# candidate sources (issue 15's worked example). GPU 1, at the same time: the GPU
# tests and the planted-kernel sweep (graph timing included) and the dispatch
# example, on the committed tables.
#   . .gpu/setup.sh env && setsid nohup bash bench/h200/judge.sh > /dev/null 2>&1 &
set -uo pipefail
dir=$PWD/target/judge
rm -rf "$dir" && mkdir -p "$dir"
exec > "$dir/run.log" 2>&1
export AUTOTUNE_SEED=${AUTOTUNE_SEED:-20261130}
date +%T
cargo build --release -p cargo-autotune 2>&1 | tail -n 1
(
  export CUDA_VISIBLE_DEVICES=1
  t0=$(date +%s)
  cargo test --release --test gpu --test sweep_faults > "$dir/gpu-tests.log" 2>&1
  echo "gpu tests: exit $?, $(( $(date +%s) - t0 )) s"
  cargo run --release --example dispatch > "$dir/dispatch.log" 2>&1
  echo "dispatch example: exit $?"
) &
t0=$(date +%s)
CUDA_VISIBLE_DEVICES=0 target/release/cargo-autotune autotune judge --kernel layer_norm \
  --manifest-path examples/downstream/Cargo.toml > "$dir/judge.txt" 2> "$dir/judge-build.log"
echo "judge: exit $?, $(( $(date +%s) - t0 )) s"
cp examples/downstream/tuning/judge-journal.jsonl "$dir/" 2>/dev/null
cp -r examples/downstream/target/autotune-judge "$dir/scratch-tables"
target/release/cargo-autotune autotune judge --kernel layer_norm --json \
  --table examples/downstream/target/autotune-judge/nvidia-h200.json > "$dir/judge.json"
cat "$dir/judge.txt"
# The downstream example on the judged table (kept on this machine only).
cp examples/downstream/target/autotune-judge/nvidia-h200.json examples/downstream/tuning/
(cd examples/downstream && CUDA_VISIBLE_DEVICES=0 cargo run --release) > "$dir/downstream-run.log" 2>&1
echo "downstream example: exit $?"
wait
grep -E "^test result|SKIPPED|FAILED|panicked|: ok$" "$dir/gpu-tests.log" | cut -c1-200
tail -n 3 "$dir/dispatch.log"
tar -czf "$dir/judge-tables.tgz" -C "$dir" scratch-tables
date +%T
echo DONE
