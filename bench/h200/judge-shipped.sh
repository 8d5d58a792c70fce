#!/usr/bin/env bash
# Issue 48 in one call, from binaries built here (when the device time left is too
# short for real cargo there, bench/h200/judge-retune.sh): the shipped table judged
# in the decode step, every baked GEMM variant timed as the step calls it, then the
# GEMM's sweep under cold inputs (the weights rotated through copies) until the
# call's end. The step's per-variant rows judge that sweep's medians too, without
# a rebuild.
#
#   here: bash bench/h200/judge-shipped.sh prepare
#   GPU:  carry [.gpu-bin/benches, .gpu-bin/root, .gpu-bin/gemm.rs,
#         .gpu-bin/autotune-kernels-build-script]
#         bash bench/h200/judge-shipped.sh run       (CALL_S: the call's seconds, 540)
#
# AUTOTUNE_GRAPH=1 reaches the sweep: the rotated launches timed back to back.
# Results in $OUT: decode-shipped.{txt,json}, cold-gemm.tgz (the cold sweep's
# tables so far, its live logs, its output), gpu.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
. bench/h200/common.sh

# The GEMM's part of the patch (its case's weights rotate), applied to this tree.
gemm_patch() {
  cold_patch_part src/gemm.rs | patch "$@" -p1
}

case "${1:-}" in
  prepare)
    set -e
    mkdir -p .gpu-bin/benches
    pwd > .gpu-bin/root
    cargo bench --no-run --bench decode_step --message-format=json 2>/dev/null \
      | cargo_executables | while read -r _ path; do cp "$path" .gpu-bin/benches/decode_step; done
    gemm_patch -s
    trap 'gemm_patch -s -R' EXIT
    cp src/gemm.rs .gpu-bin/gemm.rs
    cargo build --release
    script=$(ls -t target/release/build/autotune-kernels-*/build-script-build | head -n 1)
    cp "$script" .gpu-bin/autotune-kernels-build-script
    strip .gpu-bin/benches/decode_step .gpu-bin/autotune-kernels-build-script
    du -sh .gpu-bin/benches .gpu-bin/autotune-kernels-build-script
    ;;
  run)
    out=${OUT:-/tmp/out}
    mkdir -p "$out"
    export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu \
      --format=csv,noheader | tee "$out/gpu.txt"
    timeout "${DECODE_S:-240}" .gpu-bin/benches/decode_step --variants --out "$out/decode-shipped.json" \
      > "$out/decode-shipped.txt" 2>&1
    echo "decode step: exit $? at ${SECONDS}s"
    # The cold sweep of the GEMM, in this tree with the GEMM's patch (the patched
    # file carried: the machine may have no `patch`; the build script was compiled
    # from this tree at this path, and another checkout would be refused).
    cp .gpu-bin/gemm.rs src/gemm.rs || exit 1
    root=$(cat .gpu-bin/root)
    if [ "$root" != "$PWD" ] && [ ! -e "$root" ]; then
      mkdir -p "$(dirname "$root")" && ln -s "$PWD" "$root"
    fi
    cp -r kernels/tuning /tmp/cold-tables
    left=$((${CALL_S:-540} - SECONDS - 15))
    mkdir -p /tmp/cold-out
    (
      export CARGO_MANIFEST_DIR=$PWD CARGO_PKG_NAME=autotune-kernels CARGO_PKG_VERSION=0.1.0 \
        CARGO_CRATE_NAME=build_script_build OUT_DIR=/tmp/cold-out PROFILE=release OPT_LEVEL=3 \
        DEBUG=false TARGET=x86_64-unknown-linux-gnu HOST=x86_64-unknown-linux-gnu NUM_JOBS=16 \
        CARGO_FEATURE_AUTOTUNE=1 AUTOTUNE_FORCE=gemm AUTOTUNE_SEED=20261201 \
        AUTOTUNE_STRATEGY=local AUTOTUNE_BUDGET=36 AUTOTUNE_TABLES_DIR=/tmp/cold-tables
      timeout "$left" .gpu-bin/autotune-kernels-build-script > /tmp/cold-out/build.log 2>&1
      echo "cold sweep: exit $? at ${SECONDS}s"
    )
    tar czf "$out/cold-gemm.tgz" -C /tmp cold-tables cold-out/build.log \
      $(cd /tmp && ls -d cold-out/autotune/sweep 2>/dev/null)
    tail -n 60 "$out/decode-shipped.txt" | cut -c1-160
    grep -hE "^gemm@[^:]*: key" /tmp/cold-tables/*-report.txt | cut -c1-200
    ;;
  *)
    echo "usage: judge-shipped.sh prepare | run"
    exit 2
    ;;
esac
