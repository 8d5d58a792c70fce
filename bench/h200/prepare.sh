#!/usr/bin/env bash
# Builds here (a machine with Rust and nvcc) what the GPU machine runs, into
# .gpu-bin/, for bench/h200/gpu-tests.sh and bench/h200/cold-retune.sh:
#
#   .gpu-bin/tests/NAME         the root package's GPU test binaries (release)
#   .gpu-bin/benches/decode_step
#                               the decode-step bench (the committed tables baked)
#   .gpu-bin/bench-gemm         the GEMM bench, for `cold-retune.sh bench`
#   .gpu-bin/root               this checkout's path (the binaries read the
#                               repository there; the device's copy is at the same
#                               path)
#
# Usage: bash bench/h200/prepare.sh   (then carry .gpu-bin; the retune's build
# script is built after `git apply bench/h200/cold-retune-rotating.patch`, as
# cold-retune.sh says, and added by hand)
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .gpu-bin
mkdir -p .gpu-bin/tests .gpu-bin/benches
pwd > .gpu-bin/root

. bench/h200/common.sh

gpu_test_binaries .gpu-bin/tests
cargo bench --no-run --bench decode_step --bench gemm --message-format=json 2> /dev/null \
  | cargo_executables | while read -r name path; do
  case "$name" in
    decode_step) cp "$path" .gpu-bin/benches/decode_step ;;
    gemm) cp "$path" .gpu-bin/bench-gemm ;;
  esac
done
ls -la .gpu-bin .gpu-bin/tests .gpu-bin/benches
du -sh .gpu-bin
