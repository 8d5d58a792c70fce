#!/usr/bin/env bash
# Issue 31 on the H200 (real cargo, `. .gpu/setup.sh env` first):
# 1. a fresh copy with NVCC set to a wrapper script that logs and execs
#    /usr/local/cuda/bin/nvcc finds the committed tables fresh: the tuning build
#    bakes them and tunes nothing (the table files are unchanged);
# 2. the main job on the GPU;
# 3. a release tuning build of the downstream crate's `silu_mul` with its
#    build-override (opt-level 3) and without (opt-level 0), timed.
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out" /tmp/nvcc-wrap
cat > /tmp/nvcc-wrap/nvcc <<'SH'
#!/bin/sh
echo "$@" >> /tmp/nvcc-wrap/calls.log
exec /usr/local/cuda/bin/nvcc "$@"
SH
chmod +x /tmp/nvcc-wrap/nvcc
sha256sum kernels/tuning/*.json > /tmp/tables.before
start=$(date +%s)
NVCC=/tmp/nvcc-wrap/nvcc cargo build --release --features autotune 2>&1 | tee "$out/wrapper-build.log" | grep -E "autotune|error|Finished"
echo "wrapper build: $(( $(date +%s) - start )) s, nvcc calls through the wrapper: $(wc -l < /tmp/nvcc-wrap/calls.log)"
if sha256sum -c --quiet /tmp/tables.before; then echo "tables unchanged: nothing tuned"; else echo "TABLES CHANGED"; fi
NVCC=/tmp/nvcc-wrap/nvcc cargo run --release --example dispatch 2>&1 | tail -n 25 > "$out/dispatch.log"
tail -n 6 "$out/dispatch.log"
cd examples/downstream
for level in 3 0; do
  start=$(date +%s)
  CARGO_PROFILE_RELEASE_BUILD_OVERRIDE_OPT_LEVEL=$level AUTOTUNE_FORCE=silu_mul \
    cargo build --release --features autotune 2>&1 | tee "$out/downstream-opt$level.log" | grep -E "autotune:|error" | cut -c1-300
  python3 -c "import json;k=json.load(open('tuning/nvidia-h200.json'))['kernels']['silu_mul'];print('opt-level $level: silu_mul seconds', k['seconds'])"
  echo "opt-level $level: whole build $(( $(date +%s) - start )) s"
  cp tuning/nvidia-h200.json "$out/downstream-opt$level.json"
done
