#!/usr/bin/env bash
# The retune under issue 48's timing, and the GPU tests of issues 52 and 48, from
# binaries built on a machine with Rust and nvcc, carried in .gpu-bin/:
#
#   here: git apply bench/h200/cold-retune-rotating.patch (the indexers' cases name
#         their keys as cold inputs, as the GEMM's names its weights; the carried tree must
#         have it too, since the tables' fingerprints read its wrapper files), then
#         the kernels' build script of the tree to retune, as
#         .gpu-bin/autotune-kernels-build-script (cargo build --release;
#         target/release/build/autotune-kernels-*/build-script-build); the test
#         binaries .gpu-bin/test-{sweep_faults,cold_inputs,rmsnorm_reference}
#         (cargo test --release --test NAME --no-run); for `bench`, .gpu-bin/bench-gemm
#         (cargo bench --bench gemm --no-run, built WITHOUT the patch, so that it
#         bakes the committed tables); pwd > .gpu-bin/root
#   GPU:  bash bench/h200/cold-retune.sh all      the tests (NO_TESTS=1: none), then
#                                                 the retune until the call's end
#                                                 (CALL_S, 570 s; FORCE: what to
#                                                 force, default all)
#         bash bench/h200/cold-retune.sh resume   (back to back) the retune goes on:
#                                                 what is left, the entry it was in
#                                                 resumed from its journal
#         bash bench/h200/cold-retune.sh bench    the GEMM bench, into
#                                                 $OUT/bench-gemm.{txt,json}
#
# A run lives only as long as the call that started it: in sessions 28 and 29 a
# retune started in the background (and `disown`ed) stopped as its call ended, and
# the table, written once at its end, was lost with every entry it had finished.
# So each call runs the retune in the foreground, stops it before the call's end,
# and brings back what it has (retune.tgz: the tables so far, the live logs, the
# progress). The build script writes the table after each entry, and the next call
# (`resume`, no AUTOTUNE_FORCE) finds those entries fresh and sweeps the rest. The
# tables live in /tmp/retune-tables, the work in /tmp/tree: each call sends the
# working tree again. Calls must come back to back (the machine and its /tmp go
# back 30 s after a call).
#
# Tests: tests/sweep_faults.rs (the planted variants; MODE 12, right only where 1024
# divides the key, put out off the grid; the correct variant timed on rotated copies
# of its input, `buffers rotated`), tests/cold_inputs.rs (the rotation's copies),
# tests/rmsnorm_reference.rs (the GPU reference, the NUL-byte guard).
# Retune: every kernel (AUTOTUNE_FORCE=all, seed 20261201, local search, 36 points
# per key) with the timing of issue 48: inputs cold by rotation where a case names
# them (the GEMM's weights, the indexers' keys), a key given away only on 60
# interleaved rounds.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/out}
here=$PWD
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
# The work runs from a copy of the tree in /tmp, made by `all` (or by a `bench` on
# a fresh machine); the path the binaries were built at (.gpu-bin/root) points at
# it where it can (a symlink; where that path is this call's tree, it stays).
if [ "${1:-}" = all ] || [ ! -d /tmp/tree ]; then
  rm -rf /tmp/tree && cp -a . /tmp/tree || exit 1
fi
cd /tmp/tree || exit 1
root=$(cat .gpu-bin/root)
if [ "$root" != "$PWD" ] && [ ! -d "$root" ]; then
  mkdir -p "$(dirname "$root")" && rm -f "$root" && ln -s "$PWD" "$root"
fi

# One step of the retune, in the foreground, stopped CALL_S seconds into the call;
# $1: AUTOTUNE_FORCE for this step (`all` at the start, empty to go on).
retune_step() {
  local left=$((${CALL_S:-570} - SECONDS - 20))
  echo "== retune step (force: ${1:-none}; $left s; $(date +%T))"
  mkdir -p /tmp/retune-out
  if [ "$left" -gt 30 ]; then
    AUTOTUNE_FORCE=$1 AUTOTUNE_SEED=20261201 AUTOTUNE_STRATEGY=local AUTOTUNE_BUDGET=36 \
      AUTOTUNE_TABLES_DIR=/tmp/retune-tables AUTOTUNE_PROGRESS=/tmp/retune-out/progress.jsonl \
      OUT=/tmp/retune-out timeout "$left" \
      bash bench/build-script-on-gpu.sh . autotune-kernels kernels/tuning retune >> /tmp/retune-out/retune.txt 2>&1
    echo "exit $? ($(date +%T))"
  fi
  tail -n 4 /tmp/retune-out/retune.txt | cut -c1-300
  mkdir -p /tmp/retune-out/live && cp /tmp/autotune-kernels-out/autotune/sweep/*.log /tmp/retune-out/live/ 2>/dev/null
  ls -l --time-style=+%T /tmp/autotune-kernels-out/autotune/sweep/ 2>/dev/null | tail -n +2 | cut -c30-
  tar czf "$out/retune.tgz" -C /tmp retune-tables retune-out
  grep -hE "^[a-z_]+(@[^:]*)?: key|sweep by phase|checked off the grid" \
    /tmp/retune-tables/*-report.txt 2>/dev/null | cut -c1-230 | head -n 60
}

case "${1:-}" in
  all)
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee "$out/gpu.txt"
    # NO_TESTS=1: straight to the retune.
    if [ -z "${NO_TESTS:-}" ]; then
      echo "== sweep_faults ($(date +%T))"
      timeout "${SF_TIMEOUT:-240}" .gpu-bin/test-sweep_faults > "$out/sweep-faults.txt" 2>&1
      echo "exit $?"
      grep -E "SKIPPED|panicked|all passed|checked off the grid|buffers rotated|interleaved rounds" \
        "$out/sweep-faults.txt" | cut -c1-250 | tail -n 30
      for test in cold_inputs rmsnorm_reference; do
        echo "== $test ($(date +%T))"
        timeout 120 ".gpu-bin/test-$test" --test-threads=1 > "$out/$test.txt" 2>&1
        echo "exit $?"
        grep -E "^test |SKIPPED|panicked|test result" "$out/$test.txt" | cut -c1-250
      done
    fi
    [ -n "${NO_RETUNE:-}" ] && exit 0
    rm -rf /tmp/retune-out /tmp/build-script-runs /tmp/retune-tables /tmp/autotune-kernels-out
    cp -r kernels/tuning /tmp/retune-tables
    retune_step "${FORCE:-all}"
    ;;
  resume)
    [ -d /tmp/retune-tables ] || { echo "no retune on this machine to go on with (a fresh one?)"; exit 1; }
    retune_step ""
    ;;
  bench)
    echo "== bench gemm ($(date +%T))"
    timeout "${BENCH_S:-420}" "$here/.gpu-bin/bench-gemm" --out "$out/bench-gemm.json" > "$out/bench-gemm.txt" 2>&1
    echo "exit $? ($(date +%T))"
    grep -A 40 "^decode rows with L2 left clean" "$out/bench-gemm.txt" | cut -c1-200
    ;;
  *)
    echo "usage: cold-retune.sh all | resume | bench"
    exit 2
    ;;
esac
