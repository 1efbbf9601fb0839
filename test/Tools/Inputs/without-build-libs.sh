#!/usr/bin/env bash
# Runs a command as on a GPU host that has none of the libraries dtfm is built
# with: in a private mount namespace, every shared library PROGRAM loads from
# this machine except glibc's and the CUDA ones (protobuf, Gloo, OpenBLAS, the
# C++ runtime, ...) is replaced by an empty file, in an empty environment.
# With --hide-cuda the CUDA toolkit's libraries are hidden too.
#
#   without-build-libs.sh [--hide-cuda] PROGRAM -- COMMAND...
set -euo pipefail
hide_cuda=0
if [ "$1" = --hide-cuda ]; then hide_cuda=1; shift; fi
program=$1
[ "$2" = -- ] || { echo "usage: $0 [--hide-cuda] PROGRAM -- COMMAND..." >&2; exit 64; }
shift 2

hidden=()
while read -r soname _ path _; do
  case "$soname" in
    ld-linux*|libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*) continue ;;
    libcuda.so.*|libcudart.so.*|libcublas*.so.*|libnccl.so.*) continue ;;
  esac
  hidden+=("$(readlink -f "$path")")
done < <(ldd "$program" | awk '$2 == "=>" && $3 != "not" { print $1, $2, $3 }')
cuda_dirs=()
if [ $hide_cuda -eq 1 ]; then
  for dir in /usr/local/cuda*/lib /usr/local/cuda*/lib64 /usr/local/cuda*/targets/x86_64-linux/lib; do
    [ -d "$dir" ] && cuda_dirs+=("$(readlink -f "$dir")")
  done
fi

exec unshare -m --propagation private bash -c '
  set -e
  empty=$(mktemp -d)
  for lib in '"${hidden[*]}"'; do mount --bind /dev/null "$lib"; done
  for dir in '"${cuda_dirs[*]-}"'; do mount --bind "$empty" "$dir"; done
  exec env -i PATH=/usr/bin:/bin HOME="${HOME:-/root}" "$@"' without-build-libs "$@"
