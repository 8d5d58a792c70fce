#!/usr/bin/env bash
# Builds bench/h200/probe/hopper_probe.cu once per point into target/probe/ (nvcc and
# cuBLAS from the environment: CUDA_HOME, or the PyPI wheels' folders).
#   bench/h200/probe/build.sh "BN=256 STAGES=4 BM=128 SPLIT=1" ...
# KERNEL=<file> builds another version of kernels/gemm_hopper.cu (its probes named
# probe-<TAG>-<point>, TAG=old unless given), to time it beside the working tree's.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=target/probe && mkdir -p "$out"
nvcc=${NVCC:-nvcc}
inc=${CUBLAS_INCLUDE:+-I$CUBLAS_INCLUDE}
lib=${CUBLAS_LIB:+-L$CUBLAS_LIB}
for point in "$@"; do
  name=$(echo "$point" | tr ' =' '_-')
  kernel=()
  if [ -n "${KERNEL:-}" ]; then kernel=(-DKERNEL="\"$(realpath "$KERNEL")\""); name="${TAG:-old}-$name"; fi
  defines=$(for d in $point; do printf -- '-D%s ' "$d"; done)
  $nvcc -O3 -std=c++17 -Xcompiler -Wno-deprecated-declarations -gencode=arch=compute_90a,code=sm_90a $defines -DPOINT="\"$point${KERNEL:+ (${TAG:-old})}\"" "${kernel[@]}" $inc $lib \
    bench/h200/probe/hopper_probe.cu -l:libcublas.so.13 -o "$out/probe-$name" &
  while [ "$(jobs -r | wc -l)" -ge "${JOBS:-2}" ]; do sleep 0.5; done
done
wait
ls "$out"
