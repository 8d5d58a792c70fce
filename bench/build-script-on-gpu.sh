#!/usr/bin/env bash
# Runs a crate's build script the way cargo runs it for
# `cargo build --release --features autotune`, on a GPU machine without Rust: it
# tunes what is stale (or what AUTOTUNE_FORCE names), rewrites the tables folder
# and bakes into a scratch OUT_DIR. The AUTOTUNE_* variables of the caller reach the
# build script (AUTOTUNE_SHARD=1/2 runs a shard, AUTOTUNE_TABLES_DIR=... tunes into
# scratch tables).
#
#   bash bench/build-script-on-gpu.sh DIR PACKAGE TABLES [LABEL]
#
# DIR: the crate (`.`, `examples/library`); PACKAGE: its package name; TABLES: its
# tables folder inside DIR (`kernels/tuning`, `tuning`). The build script is built
# here with `cargo build --release` and carried as .gpu-bin/PACKAGE-build-script
# (target/release/build/PACKAGE-*/build-script-build). The log and a copy of the
# tables folder land in $OUT/LABEL.tgz (LABEL: PACKAGE).
set -uo pipefail
root=$(pwd)
dir=$1 package=$2 tables=$3 label=${4:-$2}
out=${OUT:-/tmp/out}
keep=/tmp/build-script-runs/$label
mkdir -p "$out" "$keep" "/tmp/$package-out"
cd "$dir" || exit 1
export CARGO_MANIFEST_DIR="$PWD" CARGO_PKG_NAME="$package" CARGO_PKG_VERSION=0.1.0 \
  CARGO_CRATE_NAME=build_script_build OUT_DIR="/tmp/$package-out" PROFILE=release OPT_LEVEL=3 \
  DEBUG=false TARGET=x86_64-unknown-linux-gnu HOST=x86_64-unknown-linux-gnu NUM_JOBS=16 \
  CARGO_FEATURE_AUTOTUNE=1 CARGO_TARGET_DIR="/tmp/$package-target" \
  AUTOTUNE_ARCH="${AUTOTUNE_ARCH:-}" PATH="/usr/local/cuda/bin:$PATH" \
  LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
[ -n "$AUTOTUNE_ARCH" ] || unset AUTOTUNE_ARCH
{ time "$root/.gpu-bin/$package-build-script"; } > "$keep/build.log" 2> "$keep/build.stderr"
echo "$label: build script exit $?"
cp -r "${AUTOTUNE_TABLES_DIR:-$tables}" "$keep/tables"
tar czf "$out/$label.tgz" -C /tmp/build-script-runs "$label"
grep -E "warning=|error" "$keep/build.log" | cut -c1-400 | tail -n 4
tail -n 4 "$keep/build.stderr"
