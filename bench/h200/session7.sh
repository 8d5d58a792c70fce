#!/usr/bin/env bash
# Session 7 on the H200 (issue 11: the one-launch top-k indexer), with real cargo
# (`../shared/gpu/pack-rust`), in two calls of at most 10 minutes each:
#   . .gpu/setup.sh env && bash bench/h200/session7.sh tune
#       the stale top-k entries retuned (every other table is fresh and left as it
#       is), the tables kept in target/session7/ (ignored: it outlives the next
#       call's fresh working tree on this machine), then `cargo bench --bench topk`;
#   . .gpu/setup.sh env && bash bench/h200/session7.sh check
#       those tables restored, then every one-launch point on the GPU
#       (tests/topk_fused.rs), the GPU tests and the example, on them.
# Logs and results go to $OUT (the device tool's) and to target/session7/.
set -uo pipefail
dir=target/session7
out=${OUT:-$dir}
mkdir -p "$dir" "$out"
export AUTOTUNE_SEED=${AUTOTUNE_SEED:-20261201}
case "${1:?usage: session7.sh tune | check}" in
  tune)
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$out/gpu.txt"
    nvcc --version | tail -n 2 >> "$out/gpu.txt"
    cat "$out/gpu.txt"
    t0=$(date +%s)
    cargo build --release --features autotune 2>&1 | tee "$out/tune.log" | grep -E "autotune:|^error" | cut -c1-1500
    echo "tuning build: $(( $(date +%s) - t0 )) s"
    rm -rf "$dir/tuning" && cp -r kernels/tuning "$dir/tuning"
    tar -czf "$out/tables.tgz" kernels/tuning
    t1=$(date +%s)
    cargo bench --bench topk -- --out "$out/h200-topk.json" 2>&1 | tee "$out/bench-topk.log" | tail -n 12
    cp "$out/h200-topk.json" "$dir/"
    echo "bench topk: $(( $(date +%s) - t1 )) s"
    ;;
  check)
    [ -d "$dir/tuning" ] || { echo "no $dir/tuning: run 'tune' on this machine first" >&2; exit 3; }
    cp -r "$dir/tuning/." kernels/tuning/
    git status --short kernels/tuning | head -n 5
    t0=$(date +%s)
    cargo test --release --test topk_fused -- --nocapture 2>&1 | tee "$out/topk-fused-test.log" \
      | grep -E "compiled|^test |test result|SKIPPED|panicked" | cut -c1-400
    echo "topk_fused test: $(( $(date +%s) - t0 )) s"
    t1=$(date +%s)
    cargo test --release --test gpu 2>&1 | tee "$out/gpu-tests.log" \
      | grep -E "^test |^test result|SKIPPED|FAILED|panicked|error\[" | cut -c1-300
    echo "gpu tests: $(( $(date +%s) - t1 )) s"
    cargo run --release --example dispatch > "$out/dispatch.log" 2>&1
    echo "dispatch example: exit $?"
    grep -A12 "topk_indexer" "$out/dispatch.log" | head -n 14
    ;;
  *) echo "usage: session7.sh tune | check" >&2; exit 2 ;;
esac
