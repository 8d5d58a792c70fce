#!/usr/bin/env bash
# Builds the top-k bench's FlashInfer anchor (bench/flashinfer/anchor.cu) into
# target/flashinfer/libflashinfer_anchor.so, which `cargo bench --bench topk` loads.
#
#   bash bench/flashinfer/build.sh headers   # needs the network: the wheel's headers
#                                            # into target/flashinfer/headers.tar.xz
#   bash bench/flashinfer/build.sh           # needs nvcc and cuBLAS (CUDA in
#                                            # /usr/local/cuda or on PATH)
#
# The headers are FlashInfer's include/ and the CCCL it bundles, from the
# flashinfer-python wheel on PyPI (the GPU machine has no network: make the archive
# where there is one and carry it). Arch: sm_90a unless ANCHOR_ARCH says otherwise.
# ANCHOR_NVCC_FLAGS: more flags for nvcc (on a machine without the CUDA toolkit's
# cuBLAS, `-I` and `-L` of the nvidia-cublas wheel's include/ and lib/).
set -euo pipefail
cd "$(dirname "$0")/../.."

VERSION=0.7.4
DIR=target/flashinfer
ARCHIVE=$DIR/headers.tar.xz
HEADERS=$DIR/headers/flashinfer/data
mkdir -p "$DIR"

fetch_headers() {
  python3 -m pip download "flashinfer-python==$VERSION" --no-deps -d "$DIR/wheel" -q
  python3 - "$DIR/wheel/flashinfer_python-$VERSION-py3-none-any.whl" "$DIR/headers" <<'EOF'
import sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        if info.filename.startswith(("flashinfer/data/include/", "flashinfer/data/cccl/")):
            z.extract(info, out)
EOF
  tar -C "$DIR" -cJf "$ARCHIVE" headers
  echo "wrote $ARCHIVE ($(du -h "$ARCHIVE" | cut -f1)); carry it to the GPU machine"
}

if [ "${1:-}" = headers ]; then
  fetch_headers
  exit 0
fi

if [ ! -d "$HEADERS" ]; then
  if [ -f "$ARCHIVE" ]; then
    tar -C "$DIR" -xJf "$ARCHIVE"
  else
    fetch_headers
  fi
fi

NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
ARCH=${ANCHOR_ARCH:-sm_90a}
# FlashInfer's bundled CCCL first: its CUB has DeviceBatchedTopK, the toolkit's may not.
"$NVCC" -O3 -std=c++17 -shared -Xcompiler -fPIC \
  -gencode "arch=compute_${ARCH#sm_},code=$ARCH" \
  -I "$HEADERS/cccl/cub" -I "$HEADERS/cccl/libcudacxx/include" -I "$HEADERS/cccl/thrust" \
  -I "$HEADERS/include" \
  ${ANCHOR_NVCC_FLAGS:-} bench/flashinfer/anchor.cu -lcublas -o "$DIR/libflashinfer_anchor.so"
echo "built $DIR/libflashinfer_anchor.so (FlashInfer $VERSION, $ARCH)"
