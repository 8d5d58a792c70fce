#!/usr/bin/env bash
# The crate's kernels on the H200 (sessions 8 and 9), with real cargo
# (`../shared/gpu/pack-rust`), in the background, since the whole run takes longer
# than one call may:
#   . .gpu/setup.sh env && (setsid nohup bash bench/h200/tune-and-bench.sh MODE > /dev/null 2>&1 &)
# then poll `tail target/h200-run/run.log` with calls back to back and NO other tool
# call in between (the machine goes back 30 s after a call, and the job with it:
# docs/history/notes.md items 19 and 24); each poll can bring back target/h200-run/results.tgz
# (every log, bench file and table), written at each step. MODE:
#   bench  the committed tables as they are: the three benches (the Hopper one first:
#          every algo = 2 point beside cuBLAS, decode rows flushed and rotated), the
#          SASS of the baked Hopper images, the GPU tests, the example (~10 minutes);
#   tune   the same after retuning every kernel the build finds stale or forced
#          (local search, AUTOTUNE_BUDGET points per key, 36 unless given).
# BENCHES and TESTS (names, or 0 for none) and EXAMPLE=0 narrow what runs after that
# (all of it by default).
# Every call of the device tool copies this machine's working tree again, replacing
# tracked files under a running job: in session 9 that put the committed tables back
# under a running build, in session 10 a poll made the hopper_gemm test's nvcc find
# kernels/gemm.cu missing. So the job runs in a private copy of the tree
# (/tmp/tune-and-bench-tree, with its own target/), and writes its results, the tables
# among them (target/h200-run/tuning, AUTOTUNE_TABLES_DIR, which every cargo command
# below sees and bakes), to target/h200-run of the tree the polls read (ignored by git,
# so the copies leave it alone).
set -uo pipefail
if [ -z "${TUNE_AND_BENCH_RESULTS:-}" ]; then
  copy=/tmp/tune-and-bench-tree
  rm -rf "$copy" && mkdir -p "$copy" target
  tar --exclude=./target --exclude=./.gpu --exclude=./.git -cf - . | tar -xf - -C "$copy"
  TUNE_AND_BENCH_RESULTS=$PWD/target/h200-run exec bash "$copy/bench/h200/tune-and-bench.sh" "$@"
fi
cd "$(dirname "$0")/../.."
dir=$TUNE_AND_BENCH_RESULTS
rm -rf "$dir" && mkdir -p "$dir"
exec > "$dir/run.log" 2>&1
echo "running in $PWD (a copy), results in $dir"
export AUTOTUNE_SEED=${AUTOTUNE_SEED:-20261201}
export AUTOTUNE_TABLES_DIR=$dir/tuning
cp -r kernels/tuning "$AUTOTUNE_TABLES_DIR"
pack() { tar -czf "$dir.tgz" --exclude=results.tgz -C "$(dirname "$dir")" "$(basename "$dir")" && mv "$dir.tgz" "$dir/results.tgz"; }
step() { pack; echo "== $1 ($(date +%T))"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$dir/gpu.txt"
nvcc --version | tail -n 2 >> "$dir/gpu.txt"
cat "$dir/gpu.txt"
t0=$(date +%s)
case "${1:-}" in
  tune)
    step "tune (local search, ${AUTOTUNE_BUDGET:-36} points per key)"
    AUTOTUNE_STRATEGY=local AUTOTUNE_BUDGET=${AUTOTUNE_BUDGET:-36} \
      cargo build --release --features autotune 2>&1 | tee "$dir/tune.log" | grep -E "autotune:|^error" | cut -c1-1500
    echo "tuning build: $(( $(date +%s) - t0 )) s"
    tar -czf "$dir/tables.tgz" -C "$dir" tuning
    # The benches read the committed table for the sweep's own figures: the new one.
    cp "$AUTOTUNE_TABLES_DIR"/*.json kernels/tuning/
    # The report names its table: rendered for kernels/tuning, where it is committed
    # (the report test compares the two).
    cargo run -q --release -p cargo-autotune -- autotune report --tables kernels/tuning \
      > "$AUTOTUNE_TABLES_DIR/nvidia-h200-report.txt"
    ;;
  bench) ;;
  *) echo "usage: tune-and-bench.sh bench | tune" ; exit 2 ;;
esac
benches=${BENCHES:-gemm_hopper gemm topk}
[ "$benches" = 0 ] && benches=
for bench in $benches; do
  step "bench $bench"
  cargo bench --bench "$bench" -- --out "$dir/h200-${bench//_/-}.json" 2>&1 | tee "$dir/bench-$bench.log" | tail -n 40
done
step "SASS of the baked algo=2 images"
for f in $(find target \( -name "algo2_*.cubin" -o -name "algo2_*.fatbin" \) | sort -u); do
  echo "$f: $(cuobjdump -sass "$f" | grep -c HGMMA) HGMMA, $(cuobjdump -sass "$f" | grep -c UTMALDG) UTMALDG, $(cuobjdump -sass "$f" | grep -c HMMA) HMMA"
done > "$dir/sass.txt" 2>&1
head -n 20 "$dir/sass.txt"
step "GPU tests"
tests=${TESTS:-hopper_gemm topk_fused gpu}
[ "$tests" = 0 ] && tests=
for t in $tests; do
  cargo test --release --test $t -- --nocapture > "$dir/test-$t.log" 2>&1
  echo "test $t: exit $?"
  grep -E "^test |^test result|SKIPPED|FAILED|panicked" "$dir/test-$t.log" | cut -c1-300
done
if [ "${EXAMPLE:-1}" != 0 ]; then
  step "dispatch example"
  cargo run --release --example dispatch > "$dir/dispatch.log" 2>&1
  echo "dispatch example: exit $?"
fi
step "DONE in $(( $(date +%s) - t0 )) s"
pack
