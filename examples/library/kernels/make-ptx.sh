#!/usr/bin/env sh
# The separate step that made kernels/softmax.ptx, as a library's own build would:
# the library's softmax compiled to PTX once (its default ROWS_PER_BLOCK = 1), for
# compute_80, which the driver compiles for any GPU from the A100 on when the
# module loads. `softmax_ptx` (src/softmax.rs) tunes its launch from this file
# alone; nothing recompiles it. Run from examples/library.
set -eu
nvcc -ptx -arch=compute_80 -O3 -std=c++17 kernels/softmax.cu -o kernels/softmax.ptx
