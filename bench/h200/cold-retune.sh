#!/usr/bin/env bash
# The retune under issue 48's timing, and the GPU tests of issues 52 and 48, from
# binaries built on a machine with Rust and nvcc, carried in .gpu-bin/:
#
#   here: git apply bench/h200/cold-retune-rotating.patch (the shipped cases name their
#         cold inputs: the GEMM's weights, the indexers' keys; the carried tree must
#         have it too, since the tables' fingerprints read its wrapper files), then
#         the kernels' build script of the tree to retune, as
#         .gpu-bin/autotune-kernels-build-script (cargo build --release;
#         target/release/build/autotune-kernels-*/build-script-build); the test
#         binaries .gpu-bin/test-{sweep_faults,cold_inputs,rmsnorm_reference}
#         (cargo test --release --test NAME --no-run); pwd > .gpu-bin/root
#   GPU:  bash bench/h200/cold-retune.sh all    tests, then the retune in the
#                                               background, waited for until the
#                                               call's end
#         SHARDS=4 bash bench/h200/cold-retune.sh all   the same in 4 shards, in turn
#         bash bench/h200/cold-retune.sh wait   (back to back) the rest of the wait;
#                                               each call brings back the sweep's
#                                               live logs and progress so far
#
# The retune writes its tables to /tmp/retune-tables, not into the tree: each call
# sends the working tree again, and files a run wrote there did not survive the
# next call (session 28, on an H100: the logs of the entries done were gone, and
# the journal stopped the minute the second call began).
#
# Tests: tests/sweep_faults.rs (the planted variants; MODE 12, right only where 1024
# divides the key, put out off the grid; the correct variant timed on rotated copies
# of its input, `buffers rotated`), tests/cold_inputs.rs (the rotation's copies),
# tests/rmsnorm_reference.rs (the GPU reference, the NUL-byte guard).
# Retune: every kernel (AUTOTUNE_FORCE=all, seed 20261201, local search, 36 points
# per key) with the timing of issue 48: inputs cold by rotation where a case names
# them (the GEMM's weights, the indexers' keys), a key given away only on 60
# interleaved rounds. The tables come back in $OUT/retune.tgz.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/out}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
# `all` runs from a copy of the tree in /tmp: the next call sends the working tree
# again, which in session 28 (the first kernels swept by 05:13, the last journal
# line at 05:16, the second call at 05:17) stopped the run that was using it.
# The path the binaries were built at (.gpu-bin/root) then points at that copy.
if [ "${1:-}" = all ]; then
  rm -rf /tmp/tree && cp -a . /tmp/tree && cd /tmp/tree || exit 1
  root=$(cat .gpu-bin/root)
  if [ "$root" != "$PWD" ]; then
    mkdir -p "$(dirname "$root")" && rm -f "$root" && ln -s "$PWD" "$root"
  fi
fi

wait_for_retune() {
  local deadline=$((SECONDS + ${1:-300}))
  while [ ! -f /tmp/retune-out/done ] && [ "$SECONDS" -lt "$deadline" ]; do sleep 5; done
  cp /tmp/retune-out/retune.txt /tmp/retune-out/progress.jsonl /tmp/retune-out/tables-after-*.tgz "$out/" 2>/dev/null
  mkdir -p "$out/live" && cp /tmp/autotune-kernels-out/autotune/sweep/*.log "$out/live/" 2>/dev/null
  ls -l --time-style=+%T /tmp/autotune-kernels-out/autotune/sweep/ 2>/dev/null | tail -n +2 | cut -c30-
  ps -eo pid,etime,pcpu,args | grep -E "build-script|worker" | grep -v grep | cut -c1-160
  if [ -f /tmp/retune-out/done ]; then
    cp /tmp/retune-out/*.tgz "$out/" 2>/dev/null
    echo "retune done ($(date +%T))"; tail -n 6 /tmp/retune-out/retune.txt | cut -c1-300
    grep -hE "^[a-z_]+(@[^:]*)?: key|sweep by phase|checked off the grid|challenger vs incumbent" \
      /tmp/retune-tables/*-report.txt | cut -c1-230 | head -n 80
  else
    echo "retune still running ($(date +%T)):"
    for log in "$out"/live/*.log; do [ -f "$log" ] && { echo "-- $log"; tail -n 3 "$log" | cut -c1-200; }; done
  fi
}

case "${1:-}" in
  all)
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee "$out/gpu.txt"
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
    [ -n "${NO_RETUNE:-}" ] && exit 0
    echo "== retune ($(date +%T))"
    rm -rf /tmp/retune-out /tmp/build-script-runs /tmp/retune-tables && mkdir -p /tmp/retune-out
    cp -r kernels/tuning /tmp/retune-tables
    # SHARDS=N: the run in N shards one after another (AUTOTUNE_SHARD=i/N), each
    # shard's table written when it ends (/tmp/retune-tables/shards/), so that a
    # run cut short by the device budget still brings back what it finished; the
    # shards are joined here with `cargo autotune merge` (docs/fleet.md).
    (
      for shard in $(seq 1 "${SHARDS:-1}"); do
        [ "${SHARDS:-1}" -gt 1 ] && export AUTOTUNE_SHARD="$shard/$SHARDS"
        AUTOTUNE_FORCE=${FORCE:-all} AUTOTUNE_SEED=20261201 AUTOTUNE_STRATEGY=local AUTOTUNE_BUDGET=36 \
          AUTOTUNE_TABLES_DIR=/tmp/retune-tables AUTOTUNE_PROGRESS=/tmp/retune-out/progress.jsonl \
          OUT=/tmp/retune-out bash bench/build-script-on-gpu.sh . autotune-kernels kernels/tuning "retune-$shard"
        tar czf /tmp/retune-out/tables-after-shard-$shard.tgz -C /tmp retune-tables
      done
      touch /tmp/retune-out/done
    ) > /tmp/retune-out/retune.txt 2>&1 < /dev/null &
    disown
    wait_for_retune $((${CALL_S:-570} - SECONDS))
    ;;
  wait)
    wait_for_retune "${WAIT_S:-540}"
    ;;
  *)
    echo "usage: cold-retune.sh all | wait"
    exit 2
    ;;
esac
