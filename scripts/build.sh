#!/usr/bin/env bash
# Configures (once) and builds dtfm in ./build with ninja and ccache.
# Usage: scripts/build.sh [extra ninja targets...]
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${DTFM_BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -G Ninja -S . -B "$BUILD_DIR" \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py
fi
# Two cores: ninja's default of cores+2 jobs would swap on the MLIR headers.
ninja -C "$BUILD_DIR" -j "${DTFM_JOBS:-$(nproc)}" "$@"
