#!/usr/bin/env bash
# The H200 runs of issue 32's second part, one stage per device call:
#   bash bench/results/h200-issue32-ptx/run.sh kernels   # retunes what is stale (the top-k pair)
#   bash bench/results/h200-issue32-ptx/run.sh library   # tunes examples/library (softmax, its PTX twin, the library's launch)
#   bash bench/results/h200-issue32-ptx/run.sh tests     # the GPU tests against the new tables
# after `. .gpu/setup.sh env` (real cargo on the GPU machine); logs and tables go to $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv > "$OUT/gpu.txt" 2>&1
case "${1:-}" in
kernels)
  { time cargo build --release --features autotune; } > "$OUT/kernels-build.log" 2>&1
  echo "kernels build: $?"
  cp -r kernels/tuning "$OUT/kernels-tuning"
  grep -E "topk|tuned|stale" "$OUT/kernels-build.log" | tail -n 8
  ;;
library)
  cd examples/library || exit 1
  { time cargo build --release --features autotune; } > "$OUT/library-build.log" 2>&1
  echo "library build: $?"
  cp -r tuning "$OUT/library-tuning"
  cargo run --release > "$OUT/library-run.txt" 2>&1
  echo "library run: $?"
  grep -E "bought|tuned for" tuning/nvidia-h200-report.txt "$OUT/library-run.txt" | head -n 20
  ;;
tests)
  cargo test --release --test gpu --test baked > "$OUT/kernels-test.log" 2>&1
  echo "kernels tests: $?"
  (cd examples/library && cargo test --release) > "$OUT/library-test.log" 2>&1
  echo "library tests: $?"
  (cd examples/downstream && cargo test --release) > "$OUT/downstream-test.log" 2>&1
  echo "downstream tests: $?"
  grep -hE "test result|FAILED|panicked|SKIPPED" "$OUT"/*-test.log | sort | uniq -c
  ;;
*)
  echo "usage: run.sh kernels|library|tests" >&2
  exit 2
  ;;
esac
