#!/usr/bin/env bash
# Session 4 on the H200, in the background (a call may run 10 minutes at most; this
# runs longer): the planted-kernel sweep and the GPU tests first, then the retune.
# Everything goes to target/session4/ (ignored, so it survives the next call's
# fresh working tree on this machine); poll with `tail target/session4/run.log`.
#   . .gpu/setup.sh env && nohup bash bench/h200/session4.sh > /dev/null 2>&1 &
set -uo pipefail
dir=target/session4
mkdir -p "$dir"
exec > "$dir/run.log" 2>&1
date +%T
t0=$(date +%s)
cargo test --release --test sweep_faults --test gpu 2>&1 | tee "$dir/gpu-tests.log" | grep -E "^test result|SKIPPED|FAILED|panicked|passed|rejected|error\[" | cut -c1-300
echo "gpu tests: exit ${PIPESTATUS[0]}, $(( $(date +%s) - t0 )) s"
OUT=$dir/retune bash bench/h200/retune.sh
date +%T
echo DONE
