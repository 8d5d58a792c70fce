# Sourced by the scripts of bench/h200 that build here what the GPU machine runs.

# The root package's GPU test files.
GPU_TESTS=(gpu device_kernels cold_inputs hopper_gemm linear rmsnorm_reference topk_batched
  topk_fused topk_reference sweep_faults baked)

# The libtest arguments of the carried GPU test binary named $1: one test at a
# time, except sweep_faults, which has its own harness (none).
gpu_test_args() {
  [ "$1" = sweep_faults ] || echo --test-threads=1
}

# `name path` of each executable in cargo's JSON messages on stdin
# (`cargo build --message-format=json ... | cargo_executables`).
cargo_executables() {
  python3 -c '
import json, sys
for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    if message.get("reason") == "compiler-artifact" and message.get("executable"):
        print(message["target"]["name"], message["executable"])
'
}

# The GPU test files' release binaries (`cargo test --release --no-run`), each
# copied to $1/NAME and stripped.
gpu_test_binaries() {
  local dir=$1 args=() test name path
  mkdir -p "$dir"
  for test in "${GPU_TESTS[@]}"; do args+=(--test "$test"); done
  cargo test --release --no-run "${args[@]}" --message-format=json 2> /dev/null \
    | cargo_executables | while read -r name path; do
      cp "$path" "$dir/$name" && strip "$dir/$name"
    done
}
