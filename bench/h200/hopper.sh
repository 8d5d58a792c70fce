#!/usr/bin/env bash
# The Hopper GEMM's first run on the H200 (issue 11): every point against cuBLAS,
# then timed against it. Output under target/hopper/ (ignored, so it survives the
# next call's fresh working tree on the same machine); poll `tail target/hopper/run.log`.
#   . .gpu/setup.sh env && setsid nohup bash bench/h200/hopper.sh > /dev/null 2>&1 &
set -uo pipefail
dir=$PWD/target/hopper
rm -rf "$dir" && mkdir -p "$dir"
exec > "$dir/run.log" 2>&1
date +%T
cargo test --release --test hopper_gemm -- --nocapture > "$dir/test.log" 2>&1
echo "hopper_gemm test: exit $?"
grep -E "points|matches|panicked|SKIPPED|test result" "$dir/test.log" | cut -c1-300
cargo bench --bench gemm_hopper -- --out "$dir/h200-gemm-hopper.json" 2>&1 | tee "$dir/bench.log" | tail -n 14
date +%T
echo DONE
