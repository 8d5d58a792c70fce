#!/usr/bin/env bash
# Retunes every shipped table on the H200 (after a table-format change) and the
# downstream example's, with a fixed seed; logs and the new tables go to $OUT.
# Run on the GPU machine with real cargo (../shared/gpu/pack-rust):
#   . .gpu/setup.sh env && bash bench/h200/retune.sh
set -uo pipefail
out=${OUT:-/tmp/autotune-out}
mkdir -p "$out"
export AUTOTUNE_SEED=${AUTOTUNE_SEED:-20261130}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
nvcc --version | tail -n 2 | tee -a "$out/gpu.txt"
# The old format's tables would be moved aside; start from none.
rm -f kernels/tuning/nvidia-h200.json examples/downstream/tuning/nvidia-h200.json
t0=$(date +%s)
cargo build --release --features autotune 2>&1 | tee "$out/tune.log" | grep -E "autotune:|error" | cut -c1-400
t1=$(date +%s)
(cd examples/downstream && cargo build --release --features autotune) 2>&1 | tee "$out/downstream.log" | grep -E "autotune:|error" | cut -c1-400
t2=$(date +%s)
echo "shipped kernels: $((t1 - t0)) s (release build included); downstream: $((t2 - t1)) s" | tee "$out/times.txt"
tar -czf "$out/tables.tgz" kernels/tuning examples/downstream/tuning
# Kept on this machine (target/ is ignored, so it survives the next call's fresh
# working tree) for readme-commands.sh.
rm -rf target/retuned && mkdir -p target/retuned && cp "$out/tables.tgz" target/retuned/
ls -la "$out"
