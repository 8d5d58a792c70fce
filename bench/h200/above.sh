#!/usr/bin/env bash
# Retunes the downstream example's silu_mul on the H200 with `above = measure`
# (its sizes top out at 64m: the probe times the top's pick at 128m), then prints
# the plan. Logs and the table go to $OUT.
#   . .gpu/setup.sh env && bash bench/h200/above.sh
set -uo pipefail
out=${OUT:-/tmp/autotune-out}
mkdir -p "$out"
export AUTOTUNE_SEED=${AUTOTUNE_SEED:-20261130}
cd examples/downstream
t0=$(date +%s)
AUTOTUNE_FORCE=silu_mul cargo build --release --features autotune 2>&1 | tee "$out/build.log" | grep -E "autotune:|error" | cut -c1-300
echo "downstream retune with the probe: $(( $(date +%s) - t0 )) s" | tee "$out/times.txt"
cargo run --release 2>&1 | tee "$out/run.log" | tail -n 20
cp -r tuning "$out/"
