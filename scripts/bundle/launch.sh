#!/usr/bin/env bash
# The runtime bundle's launcher: every program of the bundle (dtfm-run,
# bench-cuda, DtfmCudaTests) is a link to this script, which prepares the
# host's environment (bundle-env.sh: glibc, the C++ runtime, the host's CUDA
# libraries), says on stderr which CUDA libraries it uses (DTFM_BUNDLE_QUIET=1
# silences that line), and runs libexec/<name>. Everything else the programs
# need is in lib/, found through their $ORIGIN rpath. Exits 2 when CUDA
# libraries are missing, 5 when the host's glibc is too old.
set -u
self=$(readlink -f "$0")
root=$(dirname "$(dirname "$self")")
name=$(basename "$0")
exe="$root/libexec/$name"
if [ "$name" = launch.sh ] || [ ! -x "$exe" ]; then
  echo "dtfm bundle: run one of its programs ($(ls "$root/libexec" | tr '\n' ' ')), not $name" >&2
  exit 127
fi
# shellcheck source=bundle-env.sh
. "$root/lib/bundle-env.sh" "$root"
dtfm_bundle_env "$root" "$name" || exit $?
if [ -n "$DTFM_BUNDLE_CUDA_NEEDS" ] && [ -z "${DTFM_BUNDLE_QUIET:-}" ]; then
  echo "$name: CUDA libraries: $(dtfm_cuda_summary)" >&2
fi
exec "$exe" "$@"
