#!/usr/bin/env bash
# Session 6 on the H200 (issue 11), in the background (a call may run 10 minutes at
# most): every algo = 2 point of the GEMM against cuBLAS, the GEMM retuned with the
# Hopper kernel in its space (every other table is fresh and kept), the GEMM and
# Hopper benches, the GPU tests, the SASS of the baked Hopper variants, the example.
# Everything goes to target/session6/ (ignored, so it survives the next call's fresh
# working tree on this machine); poll `tail target/session6/run.log`.
# With TUNE=0, the committed table as it is (no tuning, no GEMM bench).
#   . .gpu/setup.sh env && setsid nohup bash bench/h200/session6.sh > /dev/null 2>&1 &
set -uo pipefail
dir=target/session6
rm -rf "$dir" && mkdir -p "$dir"
exec > "$dir/run.log" 2>&1
export AUTOTUNE_SEED=${AUTOTUNE_SEED:-20261201}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$dir/gpu.txt"
nvcc --version | tail -n 2 >> "$dir/gpu.txt"
cat "$dir/gpu.txt"
date +%T
t0=$(date +%s)
cargo test --release --test hopper_gemm -- --nocapture > "$dir/hopper-test.log" 2>&1
echo "hopper_gemm test: exit $? ($(( $(date +%s) - t0 )) s)"
grep -E "compiled in|matches|panicked|SKIPPED|test result" "$dir/hopper-test.log" | cut -c1-300
t1=$(date +%s)
if [ "${TUNE:-1}" = 1 ]; then
# Local search, 32 points per size of the GEMM's 137, on every GPU of the machine.
AUTOTUNE_DEVICES=all AUTOTUNE_STRATEGY=local AUTOTUNE_BUDGET=32 \
  cargo build --release --features autotune 2>&1 | tee "$dir/tune.log" | grep -E "autotune:|^error" | cut -c1-1200
t2=$(date +%s)
echo "tuning: $((t2 - t1)) s (release build included)"
tar -czf "$dir/tables.tgz" kernels/tuning
cargo bench --bench gemm -- --out "$dir/h200-gemm.json" 2>&1 | tee "$dir/bench-gemm.log" | tail -n 40
fi
t2=${t2:-$t1}
t3=$(date +%s)
echo "bench gemm: $((t3 - t2)) s"
cargo bench --bench gemm_hopper -- --out "$dir/h200-gemm-hopper.json" 2>&1 | tee "$dir/bench-hopper.log" | tail -n 14
t4=$(date +%s)
echo "bench gemm_hopper: $((t4 - t3)) s"
# The SASS of every baked GEMM image with algo=2: HGMMA instructions per image.
for f in $(find target -name "*algo_2_*.fatbin" | sort -u); do
  echo "$f: $(cuobjdump -sass "$f" | grep -c HGMMA) HGMMA, $(cuobjdump -sass "$f" | grep -c UTMALDG) UTMALDG, $(cuobjdump -sass "$f" | grep -c HMMA) HMMA"
done > "$dir/sass.txt" 2>&1
head -n 20 "$dir/sass.txt"
cargo test --release --test gpu 2>&1 | tee "$dir/gpu-tests.log" \
  | grep -E "^test |^test result|SKIPPED|FAILED|panicked|error\[" | cut -c1-300
echo "gpu tests: $(( $(date +%s) - t4 )) s"
cargo run --release --example dispatch > "$dir/dispatch.log" 2>&1; echo "dispatch example: exit $?"
tar -czf "$dir/all.tgz" -C target session6 --exclude all.tgz 2>/dev/null
date +%T
echo DONE
