#!/usr/bin/env bash
# The root package's GPU tests on the GPU machine, every one required to run
# (issue 49: `AUTOTUNE_REQUIRE_GPU=1`, `AUTOTUNE_REQUIRE_NVCC=1`: a test that
# would be ignored for want of a GPU or nvcc fails instead), from release test
# binaries built on a machine with Rust and carried in .gpu-bin/tests/:
#
#   here: bash bench/h200/prepare.sh (cargo test --release --no-run for each GPU
#         test file, each executable copied to .gpu-bin/tests/NAME, stripped; the
#         decode-step bench to .gpu-bin/benches/); the binaries read the
#         repository at the path they were built at (the device's checkout is at
#         the same path).
#   GPU:  bash bench/h200/gpu-tests.sh    results in $OUT/NAME.txt, a table last
set -uo pipefail
cd "$(dirname "$0")/../.."
. bench/h200/common.sh
out=${OUT:-/tmp/out}
# Where the binaries are (GPU_BIN: another folder of the same layout).
bin=${GPU_BIN:-.gpu-bin}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export AUTOTUNE_REQUIRE_GPU=1 AUTOTUNE_REQUIRE_NVCC=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
summary=()
for test in "$bin"/tests/*; do
  name=$(basename "$test")
  start=$SECONDS
  # shellcheck disable=SC2046 # no argument, or one
  timeout "${TEST_S:-300}" "$test" $(gpu_test_args "$name") > "$out/$name.txt" 2>&1
  code=$?
  result=$(grep -E "^test result|all passed" "$out/$name.txt" | tail -n 1)
  summary+=("$(printf '%-18s exit %-3s %4ss  %s' "$name" "$code" "$((SECONDS - start))" "$result")")
done
# The decode step (benches/decode_step.rs), where its release binary was carried
# too (here: cargo bench --bench decode_step --no-run; copy the executable to
# .gpu-bin/benches/decode_step): the table's picks judged in a model's step.
if [ -x "$bin/benches/decode_step" ]; then
  start=$SECONDS
  timeout "${BENCH_S:-300}" "$bin/benches/decode_step" --out "$out/decode_step.json" \
    > "$out/decode_step.txt" 2>&1
  code=$?
  summary+=("$(printf '%-18s exit %-3s %4ss  %s' decode_step "$code" "$((SECONDS - start))" \
    "$(tail -n 1 "$out/decode_step.txt")")")
fi
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
