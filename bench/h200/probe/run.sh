#!/usr/bin/env bash
# Runs what bench/h200/probe/build.sh built (carried as target/probe) on the GPU
# machine: the fatbin choice, then every probe on the shapes given (default below).
set -uo pipefail
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
p=target/probe
if [ -x $p/fatbin_choice ]; then (cd $p && ./fatbin_choice a_first.fatbin plain_first.fatbin a_only.fatbin); fi
shapes=${SHAPES:-"4096 4096 4096  8192 8192 8192  1 4096 4096  16 4096 4096  64 4096 4096  1 14336 4096  16 14336 4096  64 14336 4096  256 4096 4096  1000 1096 1048  3 200 72"}
for probe in $p/probe-*; do
  timeout 120 "$probe" $shapes || echo "$probe: exit $?"
done
