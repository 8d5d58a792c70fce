#!/usr/bin/env bash
# Issue 48 on the GPU machine from binaries built here, in two trips (no Rust
# there, so no toolchain to send): the sweeps first, then the judge of the table
# they made, with binaries rebuilt here on it in between.
#
# Trip 1, the sweeps (binaries in .gpu-bin/sweeps: `prepare sweeps`):
#   the committed tables judged in the decode step (every baked variant too); the
#   retune of every kernel under cold inputs (the GEMM's case rotates its weights;
#   bench/h200/cold-retune-rotating.patch, compiled in, makes the indexers' cases
#   rotate their keys) into tables-A;
#   a second, independent sweep of the GEMM into tables-B (from tables-A); both
#   compared by `cargo autotune compare`.
# Trip 2, the judge (binaries in .gpu-bin/judge: `prepare judge`, after tables-A
# and the patch are in this tree): the decode step on the new table, the GEMM
# bench, FlashInfer's anchors (the fused one included) and the top-k bench, every
# GPU test required to run. The step runs twice: Llama-3-8B on `gemm`, then
# Llama-3.1-8B on `linear` (decode-linear).
#
#   here: bash bench/h200/judge-prebuilt.sh prepare sweeps|judge
#   GPU:  carry [.gpu-bin/TRIP] (judge: and target/flashinfer/headers.tar.xz)
#         bash bench/h200/judge-prebuilt.sh start TRIP     then, back to back,
#         bash bench/h200/judge-prebuilt.sh poll           until it prints "done"
#
# The tree and every binary of the judge exceed one call's 64 MiB: carry
# .gpu-bin/judge/{decode_step,gemm,topk,root}, then in the next call on the same
# machine the tests:
# carry [.gpu-bin/judge/tests], `GPU_BIN=.gpu-bin/judge bash bench/h200/gpu-tests.sh`.
#
# The trip runs in the background (setsid: it outlives the call that starts it,
# while the machine is held) from a copy of the tree in /tmp/w; each call brings
# back what is done so far in $OUT/judge.tgz, its steps last. AUTOTUNE_GRAPH
# (default 1 here: the rotated launches timed back to back in one graph, as the
# step runs them) reaches the sweeps. POLL_S: a call's seconds of waiting (540).
# SWEEP_PATCH="FILE ..." (prepare): only the patch's parts for src/FILE.rs compiled in
# (none: no part).
# AUTOTUNE_TABLES_DIR=DIR (prepare judge): the judge bakes the tables in DIR (a
# copy of kernels/tuning with a table fresh from the GPU), the tree untouched: a
# rebuild here in seconds while the machine runs the next call, then the judge.
# JUDGE=decode: the judge's decode step alone (prepare: only its binary).
# JUDGE=topk: the top-k bench with its anchors and the decode step (prepare: their
# binaries, and FlashInfer's anchor library where target/flashinfer has it built;
# carried, the bench runs first; STEP=0: the bench alone).
# WITH_GEMM_BENCH=1 (prepare sweeps): the GEMM bench too, run on an H200 last, after
# the sweeps (it needs only the GEMM's table, committed already).
# BIN=DIR: the trip's binaries from (prepare: into) .gpu-bin/DIR, not .gpu-bin/TRIP.
# SEED_TABLE=FILE: a table put among sweep A's tables first (a GPU with no
# committed table, whose other kernels' entries are fresh in FILE).
# SHARDS=N (start): sweep A as N shards on this one machine, one after the other,
# joined by `cargo autotune merge` (a budget that one sweep's end might not fit:
# the shards done come back).
# SWEEP_A: what sweep A forces (all); SWEEP_B: what sweep B forces again and
# compares (gemm; kernels comma-separated); SWEEP_B=0 leaves sweep B out (a GPU
# whose two sweeps were compared already, where the budget is for the judge).
# On an H200, trip 1 first runs the decode step built here from the tree as it is
# (its committed tables): the judge of the last retune, before this one's.
# STEP_BIN=DIR (prepare sweeps): the decode step and the GEMM bench copied from
# .gpu-bin/DIR, not built: for a change that stales a committed table (the step
# must judge the table as committed, built before the change).
# TESTS="linear ..." (prepare sweeps): those GPU test files too, run on the GPU
# after sweep A, before sweep B and the GEMM bench.
# THEN=sweeps|judge (start): that trip too, after this one, from the same BIN (one
# folder holding both trips' binaries: a machine of either kind runs its plan in
# one start).
# FIRST_TESTS="sweep_faults ..." (start): those GPU tests, carried in BIN/tests
# (TESTS= at prepare), run first, before the trip.
# REQUIRE_H200=1 (start): nothing runs on another GPU. STEP=0 (start): no decode
# step first (a budget for the sweeps alone); STEP=any: the step first on any GPU
# (a second run of a committed table's step, for its run-to-run spread).
# Where sweep A forces a kernel the committed table has, its new picks are
# compared with the committed ones (compare-committed-KERNEL).
set -uo pipefail
cd "$(dirname "$0")/../.."
. bench/h200/common.sh
W=/tmp/w
R=$W/res
out=${OUT:-/tmp/out}

# Runs `$2...` as step `$1`, its output in $R/$1.txt; a line in steps.txt.
step() {
  local name=$1 start=$SECONDS
  shift
  "$@" > "$R/$name.txt" 2>&1
  local code=$?
  printf '%-15s exit %-3s %4ss  %s\n' "$name" "$code" "$((SECONDS - start))" \
    "$(tail -n 1 "$R/$name.txt" | cut -c1-150)" >> "$R/steps.txt"
  return $code
}

# The kernels' build script as cargo runs it for `cargo build --release --features
# autotune`, tuning into tables folder $1 (forcing $2), its logs in $W/out-$3; $4,
# where given, the shard (`1/2`) it tunes.
sweep() {
  local tables=$1 force=$2 label=$3 shard=${4:-}
  mkdir -p "$W/out-$label"
  (
    if [ -n "$shard" ]; then export AUTOTUNE_SHARD=$shard; fi
    export CARGO_MANIFEST_DIR=$PWD CARGO_PKG_NAME=autotune-kernels CARGO_PKG_VERSION=0.1.0 \
      CARGO_CRATE_NAME=build_script_build OUT_DIR=$W/out-$label PROFILE=release OPT_LEVEL=3 \
      DEBUG=false TARGET=x86_64-unknown-linux-gnu HOST=x86_64-unknown-linux-gnu NUM_JOBS=16 \
      CARGO_FEATURE_AUTOTUNE=1 AUTOTUNE_FORCE=$force AUTOTUNE_SEED=20261201 \
      AUTOTUNE_STRATEGY=local AUTOTUNE_BUDGET=36 AUTOTUNE_TABLES_DIR=$tables \
      AUTOTUNE_GRAPH=${AUTOTUNE_GRAPH:-1} AUTOTUNE_PROGRESS=$R/progress-$label.jsonl
    "$W/bin/autotune-kernels-build-script"
  )
  local code=$?
  grep -hE "^[a-z_]+(@[^:]*)?: key|sweep by phase" "$tables"/*-report.txt | cut -c1-200
  return $code
}

# The decode step of both models (Llama-3-8B on `gemm`, Llama-3.1-8B on `linear`),
# every baked variant too: steps decode$1 and decode-linear$1.
decode_steps() {
  local suffix=${1:-}
  step "decode$suffix" "$W/bin/decode_step" --variants --out "$R/decode$suffix.json"
  step "decode-linear$suffix" "$W/bin/decode_step" --model llama-3.1-8b --variants \
    --out "$R/decode-linear$suffix.json"
}

sweeps() {
  local h200=0
  grep -q H200 "$R/gpu.txt" && h200=1
  if { [ "$h200" = 1 ] && [ "${STEP:-1}" = 1 ]; } || [ "${STEP:-1}" = any ]; then
    decode_steps -committed
  fi
  cp -r kernels/tuning "$W/tables-A"
  if [ -n "${SEED_TABLE:-}" ]; then cp "$SEED_TABLE" "$W/tables-A/"; fi
  local again=${SWEEP_B:-gemm} table kernel shards=${SHARDS:-1} i
  if [ "$shards" -gt 1 ]; then
    # Sweep A in shards, one after the other: each shard's table is written when it
    # ends (and brought back by the next poll), so a machine taken back part-way
    # keeps the shards done. Then joined as a fleet's are.
    for i in $(seq 1 "$shards"); do
      step "sweep-A$i" sweep "$W/tables-A" "${SWEEP_A:-all}" "A$i" "$i/$shards"
    done
    table=$(basename "$(ls "$W"/tables-A/shards/*.shard-1-of-"$shards".json)")
    table=${table%.shard-1-of-"$shards".json}.json
    local whole=()
    [ -f "$W/tables-A/$table" ] && whole=("$W/tables-A/$table")
    step merge-A "$W/bin/cargo-autotune" autotune merge "$W/tables-A/$table" "${whole[@]}" \
      "$W"/tables-A/shards/*-of-"$shards".json
  else
    step sweep-A sweep "$W/tables-A" "${SWEEP_A:-all}" A
    table=$(basename "$(ls -t "$W"/tables-A/nvidia-*.json | head -n 1)")
  fi
  if [ -f "kernels/tuning/$table" ] && [ "${SWEEP_A:-all}" != all ]; then
    for kernel in ${SWEEP_A//,/ }; do
      grep -q "\"$kernel[@\"]" "kernels/tuning/$table" || continue
      step "compare-committed-$kernel" "$W/bin/cargo-autotune" autotune compare \
        "kernels/tuning/$table" "$W/tables-A/$table" --kernel "$kernel"
    done
  fi
  if [ -d "$W/bin/tests" ]; then
    step gpu-tests bash -c "GPU_BIN=$W/bin OUT=$R/tests bash bench/h200/gpu-tests.sh"
  fi
  if [ "$again" != 0 ]; then
    cp -r "$W/tables-A" "$W/tables-B"
    step sweep-B sweep "$W/tables-B" "$again" B
    for kernel in ${again//,/ }; do
      step "compare-$kernel" "$W/bin/cargo-autotune" autotune compare "$W/tables-A/$table" \
        "$W/tables-B/$table" --kernel "$kernel"
    done
  fi
  if [ "$h200" = 1 ] && [ -x "$W/bin/gemm" ]; then step gemm "$W/bin/gemm" --out "$R/gemm.json"; fi
}

judge() {
  # JUDGE=topk: the top-k bench first, FlashInfer's anchor library carried (built
  # here), then the steps (a budget that may end part-way).
  if [ "${JUDGE:-all}" = topk ] && [ -f "$W/bin/libflashinfer_anchor.so" ]; then
    FLASHINFER_ANCHOR=$W/bin/libflashinfer_anchor.so step topk "$W/bin/topk" --out "$R/topk.json"
    # STEP=0: the bench alone (a table whose GEMM entries the step judged already).
    [ "${STEP:-1}" = 0 ] || decode_steps
    return
  fi
  # FlashInfer's anchors compile (CPU) while the step runs.
  bash bench/flashinfer/build.sh > "$R/anchor.txt" 2>&1 &
  local anchor=$!
  decode_steps
  # JUDGE=decode: the step alone (a budget too short for the benches).
  if [ "${JUDGE:-all}" = decode ]; then
    kill "$anchor" 2> /dev/null
    return
  fi
  wait "$anchor"
  echo "anchor exit $?" >> "$R/steps.txt"
  step topk "$W/bin/topk" --out "$R/topk.json"
  # JUDGE=topk without a carried anchor: the steps and the top-k bench alone.
  if [ "${JUDGE:-all}" = topk ]; then return; fi
  step gemm "$W/bin/gemm" --out "$R/gemm.json"
  if [ -d "$W/bin/tests" ]; then
    step gpu-tests bash -c "GPU_BIN=$W/bin OUT=$R/tests bash bench/h200/gpu-tests.sh"
  fi
}

# What is done so far into $OUT/judge.tgz; the steps printed.
bring_back() {
  mkdir -p "$out" "$R/live"
  local dir
  for dir in "$W"/out-*/autotune/sweep; do
    [ -d "$dir" ] || continue
    local label=${dir#"$W"/out-}
    mkdir -p "$R/live/${label%%/*}" && cp "$dir"/*.log "$R/live/${label%%/*}/" 2>/dev/null
  done
  tar czf "$out/judge.tgz" -C "$W" res $(cd "$W" && ls -d tables-A tables-B 2>/dev/null)
  cat "$R/steps.txt" 2>/dev/null
  tail -qn 1 "$R"/progress-*.jsonl 2>/dev/null | cut -c1-200
}

case "${1:-}:${2:-}" in
  prepare:sweeps)
    set -e
    bin=.gpu-bin/${BIN:-sweeps}
    rm -rf "$bin" && mkdir -p "$bin/src"
    pwd > "$bin/root"
    # Unpatched: the step bakes the shipped tables.
    if [ -n "${STEP_BIN:-}" ]; then
      cp ".gpu-bin/$STEP_BIN/decode_step" "$bin/"
      [ -f ".gpu-bin/$STEP_BIN/gemm" ] && cp ".gpu-bin/$STEP_BIN/gemm" "$bin/"
    else
      benches=(--bench decode_step)
      [ "${WITH_GEMM_BENCH:-0}" = 1 ] && benches+=(--bench gemm)
      cargo bench --no-run "${benches[@]}" --message-format=json 2> /dev/null \
        | cargo_executables | while read -r name path; do cp "$path" "$bin/$name"; done
    fi
    if [ -n "${TESTS:-}" ]; then
      GPU_TESTS=(${TESTS})
      gpu_test_binaries "$bin/tests"
    fi
    cargo build --release -p cargo-autotune
    cp target/release/cargo-autotune "$bin/"
    # The retune's build script, from the patched tree (the patched files carried:
    # the tables' fingerprints read them, and the machine may have no `patch`).
    # SWEEP_PATCH="topk topk_batched": those files' parts alone (the other entries
    # stay fresh).
    # SWEEP_PATCH=none: no part (the tree as it is).
    include=()
    for file in ${SWEEP_PATCH:-}; do include+=(--include="src/$file.rs"); done
    if [ "${SWEEP_PATCH:-}" != none ]; then
      git apply "${include[@]}" bench/h200/cold-retune-rotating.patch
      trap 'git apply -R "${include[@]}" bench/h200/cold-retune-rotating.patch' EXIT
    fi
    cp src/gemm.rs src/topk.rs src/topk_batched.rs "$bin/src/"
    cargo build --release
    cp "$(ls -t target/release/build/autotune-kernels-*/build-script-build | head -n 1)" \
      "$bin/autotune-kernels-build-script"
    strip "$bin/decode_step" "$bin/cargo-autotune" "$bin/autotune-kernels-build-script"
    [ -f "$bin/gemm" ] && strip "$bin/gemm"
    du -sh "$bin"
    ;;
  prepare:judge)
    set -e
    bin=.gpu-bin/${BIN:-judge}
    rm -rf "$bin" && mkdir -p "$bin"
    pwd > "$bin/root"
    # JUDGE=decode: the decode step alone (held on the sweeps' machine while it builds).
    # JUDGE=topk: the decode step and the top-k bench, with FlashInfer's anchor
    # library where it is built here (bench/flashinfer/build.sh, ANCHOR_NVCC_FLAGS).
    benches=(--bench decode_step)
    case "${JUDGE:-all}" in
      decode) ;;
      topk) benches+=(--bench topk) ;;
      *)
        gpu_test_binaries "$bin/tests"
        benches+=(--bench gemm --bench topk)
        ;;
    esac
    cargo bench --no-run "${benches[@]}" --message-format=json 2> /dev/null \
      | cargo_executables | while read -r name path; do cp "$path" "$bin/$name"; done
    strip "$bin"/decode_step
    [ -f "$bin/topk" ] && strip "$bin/topk"
    [ -f "$bin/gemm" ] && strip "$bin/gemm"
    if [ "${JUDGE:-all}" = topk ] && [ -f target/flashinfer/libflashinfer_anchor.so ]; then
      cp target/flashinfer/libflashinfer_anchor.so "$bin/"
    fi
    du -sh "$bin"
    ;;
  start:sweeps | start:judge)
    trip=$2
    rm -rf "$W" && mkdir -p "$R" "$W/tree" || exit 1
    # The tree without build outputs (the anchor's headers kept), the binaries apart.
    tar -cf - --exclude=./target --exclude='./examples/*/target' --exclude=./.gpu \
      --exclude=./.gpu-bin --exclude=./.venv-cuda . | tar -xf - -C "$W/tree" || exit 1
    if [ -f target/flashinfer/headers.tar.xz ]; then
      mkdir -p "$W/tree/target/flashinfer" && cp target/flashinfer/headers.tar.xz "$W/tree/target/flashinfer/"
    fi
    cp -r ".gpu-bin/${BIN:-$trip}" "$W/bin" || exit 1
    [ -d "$W/bin/src" ] && cp "$W"/bin/src/*.rs "$W/tree/src/"
    # The binaries read the tree at the path they were built at: that path is the
    # copy where it can be (a symlink), else the checkout itself serves.
    root=$(cat "$W/bin/root")
    if [ ! -e "$root" ]; then
      mkdir -p "$(dirname "$root")" && ln -s "$W/tree" "$root"
    elif [ "$(cd "$root" && pwd -P)" = "$(pwd -P)" ] && [ "$trip" = judge ]; then
      mkdir -p target/flashinfer && cp -n "$W/tree/target/flashinfer/headers.tar.xz" target/flashinfer/ 2>/dev/null
    fi
    setsid nohup bash "$W/tree/bench/h200/judge-prebuilt.sh" work "$trip" > "$W/run.log" 2>&1 < /dev/null &
    sleep 2
    exec bash "$0" poll
    ;;
  work:sweeps | work:judge)
    export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu \
      --format=csv,noheader > "$R/gpu.txt"
    cat "$R/gpu.txt" >> "$R/steps.txt"
    # REQUIRE_H200=1: nothing on another GPU (a table that is stale on the H200 is
    # retuned on an H200 only).
    if [ "${REQUIRE_H200:-0}" = 1 ] && ! grep -q H200 "$R/gpu.txt"; then
      echo "not an H200: nothing run" >> "$R/steps.txt"
      touch "$W/done"
      exit 0
    fi
    # FIRST_TESTS: those carried GPU tests before the trip (a budget that may end
    # part-way), each then left out of the trip's own run of the tests; run as
    # gpu-tests.sh runs them.
    for test in ${FIRST_TESTS:-}; do
      # shellcheck disable=SC2046 # no argument, or one
      step "test-$test" env AUTOTUNE_REQUIRE_GPU=1 AUTOTUNE_REQUIRE_NVCC=1 \
        timeout "${TEST_S:-300}" "$W/bin/tests/$test" $(gpu_test_args "$test")
      rm -f "$W/bin/tests/$test"
    done
    # The sweeps run in the patched copy (CARGO_MANIFEST_DIR); the judge's binaries
    # where they were built. THEN: the other trip after this one, on the same binaries.
    for trip in "$2" ${THEN:-}; do
      (
        if [ "$trip" = sweeps ]; then cd "$W/tree" || exit 1; else cd "$(cat "$W/bin/root")" || exit 1; fi
        "$trip"
      )
    done
    echo "done $(date +%T)" >> "$R/steps.txt"
    touch "$W/done"
    ;;
  poll:*)
    until [ -e "$W/done" ] || [ "$SECONDS" -ge "${POLL_S:-540}" ]; do sleep 5; done
    bring_back
    if [ -e "$W/done" ]; then echo done; else echo "still running ($(tail -n 1 "$W/run.log"))"; fi
    ;;
  *)
    echo "usage: judge-prebuilt.sh prepare sweeps|judge | start sweeps|judge | poll"
    exit 2
    ;;
esac
