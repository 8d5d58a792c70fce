#!/usr/bin/env bash
# Issue 48 on one GPU machine, with real cargo there: the shipped table judged in
# a decode step, the retune under cold inputs, the retuned table judged in the same
# step, a second sweep of the GEMM compared with the first, the GEMM bench on the
# retuned table, and every GPU test required to run. One run in the background
# (setsid: it outlives the call that starts it, while the machine is held), polled
# by calls back to back; each poll brings back what is done so far.
#
# Here: bash ../shared/gpu/pack-rust --sync examples/library/Cargo.toml
# GPU, back to back (the machine goes back 30 s after a call):
#   carry [.gpu/p1, .gpu/setup.sh]      bash .gpu/setup.sh part 3
#   carry [.gpu/p2, .gpu/setup.sh]      bash .gpu/setup.sh part 3
#   carry [.gpu/p3, .gpu/vendor.tar.xz, .gpu/setup.sh]
#       bash .gpu/setup.sh part 3 && . .gpu/setup.sh env && bash bench/h200/judge-retune.sh start
#   carry [.gpu/setup.sh]               bash bench/h200/judge-retune.sh poll   (until "done")
# (carry target/flashinfer/headers.tar.xz with the start too, from
# `bash bench/flashinfer/build.sh headers` here, for the top-k bench's anchors)
#
# Results: $OUT/judge.tgz (steps.txt, the step and bench files, both tables with
# their reports and sweep logs, the compare, the tests' outputs), a summary last.
# The retune: every kernel (AUTOTUNE_FORCE=all, seed 20261201, local search, 36
# points per key) with bench/h200/cold-retune-rotating.patch applied (the GEMM's
# weights and the indexers' keys rotated through copies: inputs cold); the second
# sweep: the GEMM's four shapes again (AUTOTUNE_FORCE=gemm) from the first's tables.
# PATCH_ONLY=src/gemm.rs RETUNE_FORCE=gemm: the GEMM alone; RETUNE_S: the first
# retune stopped after so many seconds (the entries it finished are kept).
# AUTOTUNE_GRAPH=1 (passed on to the sweeps): the rotated launches timed back to
# back in one graph, which the step's per-GEMM rows then judge against the
# default per-launch timing (bench/results/h100-session31: about 3 us apart).
set -uo pipefail
W=${JUDGE_DIR:-/tmp/w}
R=$W/res
out=${OUT:-/tmp/out}

. "$(dirname "$0")/common.sh"

# `name path` of each executable `cargo build $@` makes.
executables() {
  cargo build --release --message-format=json "$@" 2> "$R/cargo-$BASHPID.err" | cargo_executables
}

# Runs `$2...` as step `$1`, its output in $R/$1.txt; a line in steps.txt.
step() {
  local name=$1 start=$SECONDS
  shift
  echo "== $name $(date +%T)"
  "$@" > "$R/$name.txt" 2>&1
  local code=$?
  printf '%-16s exit %-3s %4ss  %s\n' "$name" "$code" "$((SECONDS - start))" \
    "$(tail -n 1 "$R/$name.txt" | cut -c1-150)" | tee -a "$R/steps.txt"
  return $code
}

# Builds the benches (and with `tests`, the GPU tests) of the tree in $PWD into
# $W/bin/$1/.
build() {
  local into=$W/bin/$1 args=(--bench decode_step --bench gemm)
  mkdir -p "$into"
  if [ "${2:-}" = tests ]; then
    args=()
    for test in "${GPU_TESTS[@]}"; do args+=(--test "$test"); done
  fi
  executables "${args[@]}" | while read -r name path; do cp "$path" "$into/$name"; done
  local code=$?
  ls "$into"
  tail -n 3 "$R"/cargo-*.err | grep -E "^error" -A 3
  return $code
}

# The retune's patch (PATCH_ONLY=src/gemm.rs: that file's part alone, so that on a
# GPU with a table only the GEMM's entries go stale).
apply_patch() {
  local file=bench/h200/cold-retune-rotating.patch
  if [ -n "${PATCH_ONLY:-}" ]; then
    cold_patch_part "$PATCH_ONLY" | patch -p1
  else
    patch -p1 -i "$file"
  fi
}

# A tuning build of the tree in $PWD into tables folder $1, forcing $2, stopped
# after $3 seconds where $3 is not 0 (the entries done by then are in the table).
retune() {
  AUTOTUNE_TABLES_DIR=$1 AUTOTUNE_FORCE=$2 AUTOTUNE_SEED=20261201 AUTOTUNE_STRATEGY=local \
    AUTOTUNE_BUDGET=36 AUTOTUNE_PROGRESS=$R/progress.jsonl \
    timeout "${3:-0}" cargo build --release --features autotune 2>&1
  local code=$?
  # A stopped build leaves no sweep behind on the GPU.
  pkill -f build-script-build && sleep 2
  local summary
  summary=$(ls -t "$CARGO_TARGET_DIR"/release/build/autotune-kernels-*/out/autotune/summary.json \
    2>/dev/null | head -n 1)
  [ -n "$summary" ] && cp "$summary" "$1/summary.json"
  grep -hE "^[a-z_]+(@[^:]*)?: key|sweep by phase" "$1"/*-report.txt | cut -c1-200
  return $code
}

# Every GPU test binary in $W/bin/tests, required to run (bench/h200/gpu-tests.sh);
# fails where any test did.
gpu_tests() {
  GPU_BIN=$W/bin OUT=$R/tests bash bench/h200/gpu-tests.sh
  ! grep -qE "exit [1-9]" "$R/tests/summary.txt"
}

work() {
  export CARGO_TARGET_DIR=$W/target CARGO_INCREMENTAL=0
  export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu \
    --format=csv,noheader > "$R/gpu.txt"
  cd "$W/tree" || return 1
  # The shipped table judged, on the GPU it was tuned for (elsewhere dispatch
  # would run the defaults).
  if grep -q H200 "$R/gpu.txt"; then
    step build-shipped build shipped
    step decode-shipped "$W/bin/shipped/decode_step" --out "$R/decode-shipped.json"
  fi
  # One checkout, patched in place: two checkouts of the crate sharing a target
  # folder is refused (the build script would be the other's).
  step patch apply_patch
  cp -r kernels/tuning "$W/tables-A"
  step retune-A retune "$W/tables-A" "${RETUNE_FORCE:-all}" "${RETUNE_S:-0}"
  export AUTOTUNE_TABLES_DIR=$W/tables-A
  step build-A build A
  step decode-A "$W/bin/A/decode_step" --out "$R/decode-A.json"
  unset AUTOTUNE_TABLES_DIR
  cp -r "$W/tables-A" "$W/tables-B"
  step retune-B retune "$W/tables-B" gemm
  step cli cargo build --release -p cargo-autotune
  local table
  table=$(basename "$(ls -t "$W"/tables-A/nvidia-*.json | head -n 1)")
  step compare "$CARGO_TARGET_DIR/release/cargo-autotune" autotune compare \
    "$W/tables-A/$table" "$W/tables-B/$table" --kernel gemm
  # The tests on the tree as it would be committed: the patch and the first
  # retune's tables.
  export AUTOTUNE_TABLES_DIR=$W/tables-A
  step build-tests build tests tests
  step gpu-tests gpu_tests
  step gemm-A "$W/bin/A/gemm" --out "$R/gemm-A.json"
  # The top-k bench (the first retune's tables) against FlashInfer's anchors, the
  # fused one included, where the headers were carried
  # (target/flashinfer/headers.tar.xz: `bash bench/flashinfer/build.sh headers` here).
  if [ -f target/flashinfer/headers.tar.xz ]; then
    step anchor bash bench/flashinfer/build.sh
    step topk cargo bench --bench topk -- --out "$R/topk.json"
  fi
  unset AUTOTUNE_TABLES_DIR
  cd "$W/tree/examples/library" || return 1
  step library-tests env CARGO_TARGET_DIR=$W/target-library AUTOTUNE_REQUIRE_GPU=1 \
    AUTOTUNE_REQUIRE_NVCC=1 cargo test --release --test gpu --test baked -- --test-threads=1
}

# What is done so far, into $OUT/judge.tgz, and the steps printed.
bring_back() {
  mkdir -p "$out"
  # The sweeps' live logs (the entry a cut run was in is in no table yet).
  local sweep
  for sweep in "$W"/target/release/build/autotune-kernels-*/out/autotune/sweep; do
    [ -d "$sweep" ] || continue
    mkdir -p "$R/live/$(basename "$(dirname "$(dirname "$(dirname "$sweep")")")")"
    cp "$sweep"/*.log "$R/live/$(basename "$(dirname "$(dirname "$(dirname "$sweep")")")")/" 2>/dev/null
  done
  tar czf "$out/judge.tgz" -C "$W" res $(cd "$W" && ls -d tables-A tables-B 2>/dev/null)
  cat "$R/steps.txt" 2>/dev/null
  tail -n 1 "$R/progress.jsonl" 2>/dev/null | cut -c1-300
}

case "${1:-}" in
  start)
    rm -rf "$W" && mkdir -p "$R" || exit 1
    # The tree without build outputs, toolchain parts or virtual environments.
    mkdir -p "$W/tree" && tar -cf - --exclude=./target --exclude='./examples/*/target' \
      --exclude=./.gpu --exclude=./.gpu-bin --exclude=./.venv-cuda . | tar -xf - -C "$W/tree" \
      || exit 1
    if [ -f target/flashinfer/headers.tar.xz ]; then
      mkdir -p "$W/tree/target/flashinfer" && cp target/flashinfer/headers.tar.xz "$W/tree/target/flashinfer/"
    fi
    setsid nohup bash "$W/tree/bench/h200/judge-retune.sh" work > "$W/run.log" 2>&1 < /dev/null &
    sleep 2
    exec bash "$0" poll
    ;;
  work)
    work
    echo "done $(date +%T)"
    touch "$W/done"
    ;;
  poll)
    # Waits for the run to end, at most POLL_S seconds (this call's share).
    until [ -e "$W/done" ] || [ "$SECONDS" -ge "${POLL_S:-560}" ]; do sleep 5; done
    bring_back
    if [ -e "$W/done" ]; then echo done; else echo "still running ($(tail -n 1 "$W/run.log"))"; fi
    ;;
  *)
    echo "usage: judge-retune.sh start | poll"
    exit 2
    ;;
esac
