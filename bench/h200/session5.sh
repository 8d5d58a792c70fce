#!/usr/bin/env bash
# Session 5 on the H200, in the background (a call may run 10 minutes at most):
# tunes what the format change left untuned (the GEMM per (N, K) shape with cuBLAS
# as its fallback, the downstream layer_norm per hidden size; every other entry is
# fresh and kept), then the GEMM bench, the GPU tests, the planted-kernel sweep and
# both examples. Everything goes to target/session5/ (ignored, so it survives the
# next call's fresh working tree on this machine); poll `tail target/session5/run.log`.
#   . .gpu/setup.sh env && setsid nohup bash bench/h200/session5.sh > /dev/null 2>&1 &
set -uo pipefail
dir=target/session5
rm -rf "$dir" && mkdir -p "$dir"
exec > "$dir/run.log" 2>&1
export AUTOTUNE_SEED=${AUTOTUNE_SEED:-20261130}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$dir/gpu.txt"
nvcc --version | tail -n 2 >> "$dir/gpu.txt"
cat "$dir/gpu.txt"
date +%T
t0=$(date +%s)
# Local search, 32 of the GEMM's 112 points per size (session 2: picks within 0.16%
# of the full grid's), on every GPU of the machine.
AUTOTUNE_STRATEGY=local AUTOTUNE_BUDGET=32 cargo build --release --features autotune 2>&1 \
  | tee "$dir/tune.log" | grep -E "autotune:|^error" | cut -c1-900
t1=$(date +%s)
(cd examples/downstream && cargo build --release --features autotune) 2>&1 \
  | tee "$dir/downstream.log" | grep -E "autotune:|^error" | cut -c1-600
t2=$(date +%s)
echo "tuning: shipped $((t1 - t0)) s (release build included), downstream $((t2 - t1)) s"
tar -czf "$dir/tables.tgz" kernels/tuning examples/downstream/tuning
cargo bench --bench gemm -- --out "$dir/h200-gemm.json" 2>&1 | tee "$dir/bench-gemm.log" | tail -n 48
echo "bench: $(( $(date +%s) - t2 )) s"
t3=$(date +%s)
cargo test --release --test gpu --test sweep_faults 2>&1 | tee "$dir/gpu-tests.log" \
  | grep -E "^test |^test result|SKIPPED|FAILED|panicked|passed|rejected|error\[" | cut -c1-300
echo "gpu tests: $(( $(date +%s) - t3 )) s"
cargo run --release --example dispatch > "$dir/dispatch.log" 2>&1; echo "dispatch example: exit $?"
(cd examples/downstream && cargo run --release) > "$dir/downstream-run.log" 2>&1; echo "downstream example: exit $?"
tail -n 30 "$dir/downstream-run.log"
date +%T
echo DONE
