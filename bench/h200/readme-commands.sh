#!/usr/bin/env bash
# The README's two commands on the H200 (CUDA in /usr/local/cuda), timed, and a
# binary built on a machine without a GPU (carried in .bin/) run here.
#   . .gpu/setup.sh env && bash bench/h200/readme-commands.sh
set -uo pipefail
out=${OUT:-/tmp/autotune-out}
mkdir -p "$out"
# Tables retuned by retune.sh in the previous call on this machine, if any.
if [ -s target/retuned/tables.tgz ]; then tar -xzf target/retuned/tables.tgz && echo "using the retuned tables"; fi
t0=$(date +%s)
cargo test --workspace 2>&1 | tee "$out/test.log" | grep -E "^test result|SKIPPED|FAILED|panicked|passed|error\[" | cut -c1-300
rc=${PIPESTATUS[0]}
t1=$(date +%s)
echo "cargo test --workspace: exit $rc, $((t1 - t0)) s" | tee "$out/times.txt"
cargo run --release --example dispatch 2>&1 | tee "$out/dispatch.log" | tail -n 25
echo "cargo run --release --example dispatch: exit ${PIPESTATUS[0]}, $(( $(date +%s) - t1 )) s" | tee -a "$out/times.txt"
if [ -x .bin/dispatch ]; then
  echo "--- .bin/dispatch (built without a GPU, default arch list)" | tee "$out/gpuless.log"
  .bin/dispatch 2>&1 | tee -a "$out/gpuless.log" | tail -n 25
  echo "exit ${PIPESTATUS[0]}" | tee -a "$out/gpuless.log"
fi
