#!/usr/bin/env bash
# Installs every Debian package dtfm needs to build and test. Idempotent: packages
# already present are skipped, and apt is only updated when something is missing.
set -euo pipefail

packages=(
  # build
  cmake ninja-build ccache g++ pkg-config
  # the runtime bundle (scripts/bundle-runtime.sh) sets its programs' rpaths
  patchelf
  # sanitizer builds and libFuzzer (scripts/sanitize.sh): the LLVM of MLIR
  clang-19 libclang-rt-19-dev
  # MLIR / LLVM 19 (lit lives in llvm-19-dev, FileCheck in llvm-19-tools)
  llvm-19-dev libmlir-19-dev mlir-19-tools llvm-19-tools
  # unit tests
  libgtest-dev libgmock-dev
  # formats, transport and compute (used by the planner, importer and runtime)
  libprotobuf-dev protobuf-compiler libonnx-dev libonnx-testdata libgloo-dev libhiredis-dev libopenblas-dev
  # numerical oracle and model export in tests; torchaudio's models in
  # bench/onnx_sweep.py
  python3-torch python3-torchvision python3-onnx python3-torchaudio
  # headless rendering of the plan report in tests (PIL reads the screenshot)
  chromium python3-pil
  # launch tests: a real single-node SLURM (srun), a Redis rendezvous store,
  # and network namespaces (ip)
  slurm-wlm munge redis-server iproute2
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
