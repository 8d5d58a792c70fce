#!/usr/bin/env bash
# Issue 33's measurements on the H200 in one call, from binaries built on a machine
# with Rust and nvcc (the GPU machine has neither Rust nor the network):
#
#   here:  bash bench/h200/issue33-gpu.sh prepare      (main's binaries into .gpu-bin/,
#                                                        the FlashInfer headers)
#   GPU:   run, carrying [".gpu-bin", "target/flashinfer/headers.tar.xz"]:
#            bash bench/h200/issue33-gpu.sh measure
#
# measure runs, each into $OUT (a table of each printed last):
#   1. the runtime's kernels on the GPU (tests/device_kernels.rs): the self-check
#      against the CPU, the device comparison against the host's verdicts at up to
#      4M outputs, an Input's draws, the flush by reading;
#   2. the decode probe (bench/h200/probe/decode_probe.cu, compiled there): every
#      decode configuration under a read flush, the best and cuBLAS also under a
#      memset and with B rotated, which says whether AUTOTUNE_FLUSH=read times decode
#      as a decode step runs (clean L2) before it becomes the sweep's default;
#   3. the GEMM bench (floor and copy-fraction columns, decode rows under both
#      flushes);
#   4. the top-k bench with the FlashInfer anchor (built there from the carried
#      headers: bench/flashinfer/build.sh), the pipeline and selections beside ours.
# The retune that follows (branch retune/gate-on-device, the shipped cases on the
# device gate) is bench/build-script-on-gpu.sh with AUTOTUNE_FORCE=all: see NOTES.md,
# item 37.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/out}
bin=.gpu-bin

case "${1:-}" in
  prepare)
    set -e
    mkdir -p "$bin"
    # The executable cargo builds for target NAME (its JSON messages on stdin).
    executable() {
      python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]:
        print(m["executable"])' "$1"
    }
    cargo test --release --test device_kernels --no-run --message-format=json 2>/dev/null |
      executable device_kernels | xargs -I{} cp {} "$bin/device_kernels"
    for bench in gemm topk; do
      cargo bench --bench "$bench" --no-run --message-format=json 2>/dev/null |
        executable "$bench" | xargs -I{} cp {} "$bin/bench-$bench"
    done
    [ -f target/flashinfer/headers.tar.xz ] || bash bench/flashinfer/build.sh headers
    du -ch "$bin"/* target/flashinfer/headers.tar.xz | tail -n 1
    ;;
  measure)
    mkdir -p "$out"
    export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
    export PATH=/usr/local/cuda/bin:$PATH
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
    echo "== 1. device kernels ($(date +%T))"
    "$bin/device_kernels" --test-threads=1 > "$out/device-kernels.txt" 2>&1
    echo "exit $?"; grep -E "^test |SKIPPED|panicked|result" "$out/device-kernels.txt" | cut -c1-300
    echo "== 2. decode probe ($(date +%T))"
    nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I kernels \
      bench/h200/probe/decode_probe.cu -lcublas -o /tmp/decode_probe &&
      timeout 400 /tmp/decode_probe > "$out/decode-probe.txt" 2> "$out/decode-configs.txt"
    echo "exit $?"
    echo "== 3. GEMM bench ($(date +%T))"
    timeout 300 "$bin/bench-gemm" --out "$out/h200-gemm.json" > "$out/bench-gemm.txt" 2>&1
    echo "exit $?"
    echo "== 4. top-k bench with FlashInfer ($(date +%T))"
    timeout 200 bash bench/flashinfer/build.sh > "$out/flashinfer-build.txt" 2>&1
    echo "anchor build exit $?"; tail -n 3 "$out/flashinfer-build.txt"
    FLASHINFER_ANCHOR=$PWD/target/flashinfer/libflashinfer_anchor.so \
      timeout 300 "$bin/bench-topk" --out "$out/h200-topk.json" > "$out/bench-topk.txt" 2>&1
    echo "exit $?"
    echo "== done ($(date +%T))"
    tail -n 30 "$out/decode-probe.txt"
    grep -A 12 "decode rows with L2 left clean" "$out/bench-gemm.txt"
    grep -A 9 "against FlashInfer" "$out/bench-topk.txt"
    ;;
  prepare-retune)
    # Branch retune/gate-on-device: its build script (tunes what is stale) and the
    # GPU tests to run on the new tables, into .gpu-bin/.
    set -e
    mkdir -p "$bin"
    cargo build --release
    cp "$(ls -t target/release/build/autotune-kernels-*/build-script-build | head -n 1)" \
      "$bin/autotune-kernels-build-script"
    (cd examples/library && cargo build --release)
    cp "$(ls -t examples/library/target/release/build/library-softmax-*/build-script-build | head -n 1)" \
      "$bin/library-softmax-build-script"
    du -ch "$bin"/* | tail -n 1
    ;;
  retune)
    # In the background (longer than a call): poll `tail /tmp/out-retune/*.log`.
    # The tables land in $OUT/retune.tgz and $OUT/library.tgz.
    AUTOTUNE_FORCE=all AUTOTUNE_SEED=20261201 AUTOTUNE_STRATEGY=local AUTOTUNE_BUDGET=36 \
      bash bench/build-script-on-gpu.sh . autotune-kernels kernels/tuning retune
    AUTOTUNE_SEED=20261201 bash bench/build-script-on-gpu.sh examples/library library-softmax tuning library
    ;;
  *)
    echo "usage: issue33-gpu.sh prepare | measure | prepare-retune | retune"
    exit 2
    ;;
esac
