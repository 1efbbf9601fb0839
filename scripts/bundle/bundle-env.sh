#!/usr/bin/env bash
# Sourced by the runtime bundle's launcher and gpu-check.sh: the environment
# the bundle's programs run in on this host.
#
# dtfm_bundle_env ROOT NAME: checks the host's glibc, decides whether the
# bundle's C++ runtime (lib/cxx) is needed, finds the host's CUDA libraries
# (find-cuda.sh) and prepends the folders to LD_LIBRARY_PATH. On failure it
# prints one line "NAME: what is wrong" on stderr and returns 2 (CUDA
# libraries missing) or 5 (glibc too old). Sets DTFM_BUNDLE_CXX (the C++
# runtime used: "host FILE" or "bundled").

# shellcheck source=/dev/null
. "$1/lib/bundle.env"
# shellcheck source=find-cuda.sh
. "$1/lib/find-cuda.sh"

# The libstdc++ the loader would take, or nothing.
dtfm_host_libstdcxx() {
  local dir IFS_SAVE=$IFS
  IFS=:
  for dir in ${LD_LIBRARY_PATH:-}; do
    [ -n "$dir" ] && [ -r "$dir/libstdc++.so.6" ] && { printf '%s\n' "$dir/libstdc++.so.6"; IFS=$IFS_SAVE; return; }
  done
  IFS=$IFS_SAVE
  local cached
  cached=$(ldconfig -p 2>/dev/null | awk '$1 == "libstdc++.so.6" && /x86-64/ { print $NF; exit }')
  [ -n "$cached" ] && [ -r "$cached" ] && { printf '%s\n' "$cached"; return; }
  for dir in /usr/lib/x86_64-linux-gnu /usr/lib64 /lib64 /usr/lib /lib; do
    [ -r "$dir/libstdc++.so.6" ] && { printf '%s\n' "$dir/libstdc++.so.6"; return; }
  done
}

# True when glibc version $1 is at least $2.
dtfm_version_at_least() {
  [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$2" ]
}

dtfm_bundle_env() {
  local root=$1 name=$2 needed=$DTFM_BUNDLE_GLIBC host_glibc="" cxx
  cxx=$(dtfm_host_libstdcxx)
  if [ -n "$cxx" ] && grep -q "GLIBCXX_$DTFM_BUNDLE_GLIBCXX" "$cxx" 2>/dev/null &&
     grep -q "CXXABI_$DTFM_BUNDLE_CXXABI" "$cxx" 2>/dev/null; then
    DTFM_BUNDLE_CXX="host $cxx"
  else
    DTFM_BUNDLE_CXX=bundled
    needed=$DTFM_BUNDLE_CXX_GLIBC
    export LD_LIBRARY_PATH="$root/lib/cxx${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  # The binaries were linked against the build machine's glibc: an older one
  # would fail with a loader message naming a symbol version.
  if host_glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null); then
    host_glibc=${host_glibc#glibc }
    if ! dtfm_version_at_least "$host_glibc" "$needed"; then
      echo "$name: this bundle needs glibc $needed or newer (built on $DTFM_BUNDLE_BUILT_ON; C++ runtime: $DTFM_BUNDLE_CXX); this host has $host_glibc" >&2
      return 5
    fi
  fi
  if [ -n "$DTFM_BUNDLE_CUDA_NEEDS" ]; then
    # shellcheck disable=SC2086 # a list of sonames
    if ! dtfm_find_cuda $DTFM_BUNDLE_CUDA_NEEDS; then
      echo "$name: $(dtfm_cuda_missing_message)" >&2
      return 2
    fi
    export LD_LIBRARY_PATH="$DTFM_CUDA_DIRS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  return 0
}
