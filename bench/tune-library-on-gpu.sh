#!/usr/bin/env bash
# Runs examples/library's build script (built here with `cargo build --release` and
# carried as .gpu-bin/library-build-script) the way cargo runs it for
# `cargo build --release --features autotune`, on a GPU machine without Rust: it
# tunes what is stale (the PTX-only pair), rewrites tuning/ and bakes into $OUT_DIR.
set -uo pipefail
root=$(pwd)
out=${OUT:-/tmp/out}
mkdir -p "$out" /tmp/library-out
cd examples/library || exit 1
export CARGO_MANIFEST_DIR="$PWD" CARGO_PKG_NAME=library-softmax CARGO_PKG_VERSION=0.1.0 \
  CARGO_CRATE_NAME=build_script_build OUT_DIR=/tmp/library-out PROFILE=release OPT_LEVEL=3 \
  DEBUG=false TARGET=x86_64-unknown-linux-gnu HOST=x86_64-unknown-linux-gnu NUM_JOBS=16 \
  CARGO_FEATURE_AUTOTUNE=1 CARGO_TARGET_DIR=/tmp/library-target \
  AUTOTUNE_ARCH="${AUTOTUNE_ARCH:-}" PATH="/usr/local/cuda/bin:$PATH"
[ -n "$AUTOTUNE_ARCH" ] || unset AUTOTUNE_ARCH
{ time "$root/.gpu-bin/library-build-script"; } > "$out/library-build.log" 2> "$out/library-build.stderr"
echo "build script: $?"
cp -r tuning "$out/library-tuning"
grep -E "warning=|error" "$out/library-build.log" | cut -c1-400 | tail -n 4
tail -n 5 "$out/library-build.stderr"
