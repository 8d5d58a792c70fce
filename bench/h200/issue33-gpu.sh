#!/usr/bin/env bash
# Issue 33's work on the H200, from binaries built on a machine with Rust and nvcc
# (the GPU machine has neither Rust nor the network). What a call runs, it carries:
# files carried by one call are gone in the next, even on the same warm machine.
#
#   here:  bash bench/h200/issue33-gpu.sh prepare-retune   (the build scripts)
#          CUBLAS_ROOT=... bash bench/h200/issue33-gpu.sh prepare
#                                     (GPU tests, benches, decode probe, FlashInfer anchor)
#   GPU:   bash bench/h200/issue33-gpu.sh first      (carrying the two build scripts,
#            test-device_kernels, decode_probe and root from .gpu-bin/): the runtime's
#            kernels on the GPU, the decode probe under three flushes (memset, read,
#            B rotated), the flush chosen from it, then the retune in the background
#            under that flush, waited for until the call's end;
#          bash bench/h200/issue33-gpu.sh wait       (back to back, if the retune is
#            not done: its tables come back as $OUT/retune.tgz and $OUT/library.tgz);
#   here:  the tables into kernels/tuning and examples/library/tuning, the benches
#          built again (they bake the new tables);
#   GPU:   bash bench/h200/issue33-gpu.sh measure [tests] [probe] [gemm] [topk] [rmsnorm]
#            (carrying what each part runs): the GPU tests, the decode probe, the
#            benches (the top-k bench with the FlashInfer anchor), each into $OUT;
#          bash bench/h200/issue33-gpu.sh gate-share  (carrying the kernels' build
#            script): the gate's share of a sweep, into scratch tables;
#          bash bench/h200/issue33-gpu.sh final  (carrying the two build scripts,
#            the test-* binaries named in FINAL_TESTS from .gpu-bin/, and root): the
#            tests, then on an H200 only (FINAL_ANY_GPU=1: on any GPU, sweeping into
#            scratch tables instead) the retune of every kernel (memset flush) in the
#            background, waited for as in `first`.
# See docs/history/notes.md, items 37 and 38.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/out}
bin=.gpu-bin
gpu_tests="device_kernels rmsnorm_reference topk_batched gpu topk_fused hopper_gemm"
benches="gemm topk rmsnorm"

# The decode probe (bench/h200/probe/decode_probe.cu) into $1.
build_probe() {
  "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" -O3 -std=c++17 \
    -gencode=arch=compute_90a,code=sm_90a -I kernels bench/h200/probe/decode_probe.cu -lcublas -o "$1"
}

# The executable cargo builds for target NAME (its JSON messages on stdin).
executable() {
  python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]:
        print(m["executable"])' "$1"
}

# The test binaries read the kernels' sources at the path they were built in
# (env!("CARGO_MANIFEST_DIR"), written by `prepare` into .gpu-bin/root): where this
# checkout lies elsewhere, a link from there.
link_build_root() {
  local root
  root=$(cat "$bin/root" 2>/dev/null) || return 0
  if [ "$root" != "$PWD" ] && [ ! -e "$root" ]; then
    mkdir -p "$(dirname "$root")" && ln -s "$PWD" "$root"
  fi
}

# The flush whose decode timings are nearer those with B rotated (each launch finds
# its weights out of L2, as a decode step does): the mean over the probe's rows, for
# cuBLAS and ours, of |flushed - rotated| / rotated, read against memset. Prints
# `read` or `memset` (the means on stderr), nothing when the probe gave no rows.
choose_flush() {
  python3 - "$1" <<'EOF'
import math, sys
dev = {"memset": [], "read": []}
for line in open(sys.argv[1]):
    f = line.replace("/", " ").split()
    if len(f) < 9 or not f[0].isdigit():
        continue
    try:
        cub, ours = [float(x) for x in f[3:6]], [float(x) for x in f[6:9]]
    except ValueError:
        continue
    for memset, read, rotated in (cub, ours):
        if all(math.isfinite(x) for x in (memset, read, rotated)) and rotated > 0:
            dev["memset"].append(abs(memset - rotated) / rotated)
            dev["read"].append(abs(read - rotated) / rotated)
if dev["read"]:
    mean = {k: sum(v) / len(v) for k, v in dev.items()}
    print(f"mean |flushed - rotated| / rotated over {len(dev['read'])} timings: "
          f"read {mean['read']:.3f}, memset {mean['memset']:.3f}", file=sys.stderr)
    print("read" if mean["read"] < mean["memset"] else "memset")
EOF
}

case "${1:-}" in
  prepare)
    # The GPU tests and the benches (release) into .gpu-bin/, the FlashInfer headers;
    # with CUBLAS_ROOT (a folder with cuBLAS's include/ and lib/, e.g. the
    # nvidia-cublas wheel's nvidia/cu13), also the decode probe and the FlashInfer
    # anchor, which are otherwise compiled on the GPU machine.
    set -e
    mkdir -p "$bin"
    for test in $gpu_tests; do
      cargo test --release --test "$test" --no-run --message-format=json 2>/dev/null |
        executable "$test" | xargs -I{} cp {} "$bin/test-$test"
    done
    for bench in $benches; do
      cargo bench --bench "$bench" --no-run --message-format=json 2>/dev/null |
        executable "$bench" | xargs -I{} cp {} "$bin/bench-$bench"
    done
    pwd > "$bin/root"
    [ -f target/flashinfer/headers.tar.xz ] || bash bench/flashinfer/build.sh headers
    if [ -n "${CUBLAS_ROOT:-}" ]; then
      mkdir -p target/cublas-link
      ln -sf "$CUBLAS_ROOT"/lib/libcublas.so.* target/cublas-link/libcublas.so
      # nvcc from the PyPI wheels keeps the CUDA runtime's libraries beside its bin/.
      cuda_lib=$(dirname "$(command -v nvcc)")/../lib
      export NVCC_APPEND_FLAGS="-I$CUBLAS_ROOT/include -L$PWD/target/cublas-link -L$cuda_lib -Xlinker -rpath-link=$CUBLAS_ROOT/lib"
      build_probe "$bin/decode_probe"
      bash bench/flashinfer/build.sh
      cp target/flashinfer/libflashinfer_anchor.so "$bin/"
    fi
    du -ch "$bin"/* target/flashinfer/headers.tar.xz | tail -n 1
    ;;
  measure)
    # On the GPU, after `prepare`: each part named (all by default) into $OUT, its
    # table printed last. tests: the GPU tests; probe: the decode probe; gemm, topk,
    # rmsnorm: the benches (topk with the FlashInfer anchor).
    mkdir -p "$out"
    export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
    export PATH=/usr/local/cuda/bin:$PATH
    link_build_root
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
    shift
    parts=${*:-tests probe gemm topk rmsnorm}
    for part in $parts; do
      echo "== $part ($(date +%T))"
      case $part in
        tests)
          for test in $gpu_tests; do
            [ -x "$bin/test-$test" ] || continue
            timeout 300 "$bin/test-$test" --test-threads=1 > "$out/test-$test.txt" 2>&1
            echo "$test: exit $?"
            grep -E "SKIPPED|panicked|test result" "$out/test-$test.txt" | cut -c1-300
          done
          ;;
        probe)
          [ -x "$bin/decode_probe" ] || build_probe "$bin/decode_probe"
          timeout 300 "$bin/decode_probe" > "$out/decode-probe.txt" 2> "$out/decode-configs.txt"
          echo "exit $?"
          ;;
        topk)
          anchor=$bin/libflashinfer_anchor.so
          if [ ! -f "$anchor" ]; then
            timeout 200 bash bench/flashinfer/build.sh > "$out/flashinfer-build.txt" 2>&1
            echo "anchor build exit $?"; tail -n 3 "$out/flashinfer-build.txt"
            anchor=target/flashinfer/libflashinfer_anchor.so
          fi
          FLASHINFER_ANCHOR=$PWD/$anchor timeout 270 "$bin/bench-topk" --out "$out/h200-topk.json" \
            > "$out/bench-topk.txt" 2>&1
          echo "exit $?"
          ;;
        *)
          timeout 270 "$bin/bench-$part" --out "$out/h200-$part.json" > "$out/bench-$part.txt" 2>&1
          echo "exit $?"
          ;;
      esac
    done
    echo "== done ($(date +%T))"
    [ -f "$out/decode-probe.txt" ] && tail -n 30 "$out/decode-probe.txt"
    [ -f "$out/bench-gemm.txt" ] && grep -A 12 "decode rows with L2 left clean" "$out/bench-gemm.txt"
    [ -f "$out/bench-topk.txt" ] && grep -A 9 "against FlashInfer" "$out/bench-topk.txt"
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
    touch "$out/done"
    ;;
  first)
    # One call on the H200 before the retune (binaries from `prepare-retune` and
    # `prepare`): the runtime's kernels on the GPU, the decode probe under the three
    # flushes, the flush the retune takes (the one whose decode timings are nearer
    # the rotated ones: see choose_flush above), then the retune started in the
    # background and waited for (`wait` collects it if the call ends first).
    mkdir -p "$out"
    export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
    export PATH=/usr/local/cuda/bin:$PATH
    link_build_root
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
    echo "$gpu" | tee "$out/gpu.txt"
    echo "== device kernels ($(date +%T))"
    "$bin/test-device_kernels" --test-threads=1 > "$out/device-kernels.txt" 2>&1
    echo "exit $?"; grep -E "^test |panicked|result" "$out/device-kernels.txt" | cut -c1-300
    echo "== decode probe ($(date +%T))"
    [ -x "$bin/decode_probe" ] || build_probe "$bin/decode_probe"
    timeout 180 "$bin/decode_probe" > "$out/decode-probe.txt" 2> "$out/decode-configs.txt"
    echo "exit $?"
    cat "$out/decode-probe.txt"
    flush=$(choose_flush "$out/decode-probe.txt")
    echo "flush for the retune: ${flush:-none chosen}" | tee "$out/flush.txt"
    case "$gpu" in
      *H200*)
        [ -n "$flush" ] || flush=memset
        rm -rf /tmp/retune-out /tmp/build-script-runs && mkdir -p /tmp/retune-out
        OUT=/tmp/retune-out AUTOTUNE_FLUSH=$flush setsid nohup bash "$0" retune \
          > /tmp/retune-out/retune.txt 2>&1 < /dev/null &
        echo "retune started ($(date +%T)), AUTOTUNE_FLUSH=$flush"
        WAIT_S=$((${CALL_S:-560} - SECONDS)) bash "$0" wait
        ;;
      *)
        # The tables are the H200's: elsewhere, the GPU tests instead.
        echo "not an H200 ($gpu): no retune; the GPU tests"
        bash "$0" measure tests
        ;;
    esac
    ;;
  final)
    # Sessions 23-24: the gate checked in full only where a variant can still win,
    # the RMSNorm reference and the top-k scores on the GPU; the tests of the GPU's
    # references (on any GPU), then on an H200 the retune of everything (the
    # wrappers changed: every entry is stale) and wait.
    mkdir -p "$out"
    export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
    export PATH=/usr/local/cuda/bin:$PATH
    link_build_root
    gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)
    echo "$gpu" | tee "$out/gpu.txt"
    for test in ${FINAL_TESTS:-rmsnorm_reference topk_reference device_kernels sweep_faults}; do
      [ -x "$bin/test-$test" ] || continue
      timeout 150 "$bin/test-$test" --test-threads=1 > "$out/test-$test.txt" 2>&1
      echo "$test: exit $?"; grep -E "^test |SKIPPED|panicked|result|: ok$|all passed|must be" "$out/test-$test.txt" | cut -c1-300
    done
    case "$gpu" in
      *H200*)
        rm -rf /tmp/retune-out /tmp/build-script-runs && mkdir -p /tmp/retune-out
        OUT=/tmp/retune-out AUTOTUNE_FLUSH=memset setsid nohup bash "$0" retune \
          > /tmp/retune-out/retune.txt 2>&1 < /dev/null &
        echo "retune started ($(date +%T))"
        WAIT_S=$((${CALL_S:-560} - SECONDS)) bash "$0" wait
        ;;
      *)
        [ -n "${FINAL_ANY_GPU:-}" ] || { echo "not an H200: no retune"; exit 0; }
        # The tables are the H200's: elsewhere, the gate's share of a sweep of every
        # kernel into scratch tables (this GPU's own table, new to them).
        echo "not an H200 ($gpu): no retune; every kernel swept into scratch tables"
        rm -rf /tmp/scratch-tables && cp -r kernels/tuning /tmp/scratch-tables
        AUTOTUNE_TABLES_DIR=/tmp/scratch-tables AUTOTUNE_SEED=20261201 AUTOTUNE_STRATEGY=local \
          AUTOTUNE_BUDGET=36 timeout $((${CALL_S:-560} - SECONDS)) \
          bash bench/build-script-on-gpu.sh . autotune-kernels kernels/tuning gate-share
        for report in /tmp/scratch-tables/*-report.txt; do
          case $report in *nvidia-h200-report.txt) continue ;; esac
          grep -hE "^[a-z_]+(@[^:]*)?: key|sweep by phase" "$report" | cut -c1-220
        done
        cp -r /tmp/scratch-tables "$out/scratch-tables"
        ;;
    esac
    ;;
  wait)
    # Until the background retune ends or WAIT_S seconds pass; then its archives and
    # log into $OUT.
    mkdir -p "$out"
    deadline=$((SECONDS + ${WAIT_S:-520}))
    while [ ! -f /tmp/retune-out/done ] && [ "$SECONDS" -lt "$deadline" ]; do sleep 5; done
    cp /tmp/retune-out/retune.txt "$out/" 2>/dev/null
    grep -hE "sweep by phase|took" /tmp/build-script-runs/*/build.log 2>/dev/null | tail -n 12 | cut -c1-250
    if [ -f /tmp/retune-out/done ]; then
      cp /tmp/retune-out/*.tgz "$out/"
      echo "retune done ($(date +%T))"; tail -n 12 /tmp/retune-out/retune.txt
      grep -hE "^[a-z_]+(@[^:]*)?: key|sweep by phase" \
        /tmp/build-script-runs/retune/tables/*-report.txt | cut -c1-220
    else
      echo "retune still running ($(date +%T))"; tail -n 3 /tmp/build-script-runs/*/build.log | cut -c1-250
    fi
    ;;
  gate-share)
    # The gate's share of a sweep, measured without touching the committed tables:
    # the kernels named (AUTOTUNE_FORCE, default gemm and rms_norm) swept again as the
    # retune sweeps them, into a scratch copy of kernels/tuning; their report's
    # `sweep by phase` lines printed, the scratch tables in $OUT/gate-share.tgz.
    # Elsewhere than on the H200 every entry would be new to the scratch table (a
    # sweep of everything): not worth the device time this is run with.
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
    case "$gpu" in *H200*) ;; *) echo "not an H200 ($gpu): nothing run"; exit 0 ;; esac
    rm -rf /tmp/scratch-tables && cp -r kernels/tuning /tmp/scratch-tables
    AUTOTUNE_TABLES_DIR=/tmp/scratch-tables AUTOTUNE_FORCE=${AUTOTUNE_FORCE:-gemm,rms_norm} \
      AUTOTUNE_SEED=20261201 AUTOTUNE_STRATEGY=local AUTOTUNE_BUDGET=36 \
      bash bench/build-script-on-gpu.sh . autotune-kernels kernels/tuning gate-share
    grep -E "^[a-z_]+(@[^:]*)?: key|sweep by phase" /tmp/scratch-tables/*-report.txt | cut -c1-220
    ;;
  *)
    echo "usage: issue33-gpu.sh prepare | prepare-retune | first | final | wait | measure | gate-share"
    exit 2
    ;;
esac
