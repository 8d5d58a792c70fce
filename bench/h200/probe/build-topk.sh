#!/usr/bin/env bash
# Builds bench/h200/probe/topk_probe.cu once per point into target/probe/ (nvcc from
# NVCC or PATH; the PyPI wheels' nvcc works here, the machine without a GPU).
#   bench/h200/probe/build-topk.sh "WARPS=8 STAGES=3" ...
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=target/probe && mkdir -p "$out"
nvcc=${NVCC:-nvcc}
# The PyPI wheels keep cudart in ../lib beside bin/.
lib=-L$(dirname "$(command -v "$nvcc")")/../lib
for point in "$@"; do
  name=$(echo "$point" | tr ' =' '_-')
  defines=$(for d in $point; do printf -- '-D%s ' "$d"; done)
  $nvcc -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 -DLAUNCHES=1 $defines -Xcompiler -pthread $lib \
    bench/h200/probe/topk_probe.cu -o "$out/probe-topk-$name" &
  while [ "$(jobs -r | wc -l)" -ge "${JOBS:-2}" ]; do sleep 0.5; done
done
wait
ls "$out"
