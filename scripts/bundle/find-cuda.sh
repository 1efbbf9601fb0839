#!/usr/bin/env bash
# Finds the host's CUDA libraries for the runtime bundle (scripts/bundle-runtime.sh).
#
# The bundle carries everything its binaries need except the CUDA runtime,
# cuBLASLt, NCCL and the driver: those must match the host's driver, so they
# are taken from the host. Sourced by the bundle's launcher (lib/launch.sh);
# run directly, it prints where each library comes from:
#
#   find-cuda.sh SONAME...     e.g. find-cuda.sh libcudart.so.13 libnccl.so.2
#
# Each SONAME is looked for, first match wins, in:
#   1. DTFM_CUDA_LIBS            folders the user names (colon-separated)
#   2. LD_LIBRARY_PATH
#   3. CUDA toolkits             $CUDA_HOME, $CUDA_PATH, then DTFM_TOOLKIT_ROOTS
#                                (default /usr/local/cuda /usr/local/cuda-* /opt/cuda,
#                                newest version first): lib64, lib, targets/x86_64-linux/lib
#   4. Python environments       nvidia/*/lib and nvidia/*/lib64 under each site-packages
#                                of DTFM_PYTHON_SITES (default: asked of python3 on PATH,
#                                /usr/bin/python3, $VIRTUAL_ENV and $CONDA_PREFIX)
#   5. system folders            DTFM_SYSTEM_LIB_DIRS (default /usr/lib/x86_64-linux-gnu
#                                /usr/lib64 /lib64 /usr/lib /lib)
# Exit status (run directly): 0 when every library was found, 2 when any is
# missing (one line naming them and where they were looked for).

# Candidate folders, one "folder<TAB>source" per line, in search order.
dtfm_cuda_candidates() {
  local dir root site py
  local IFS_SAVE=$IFS
  IFS=:
  for dir in ${DTFM_CUDA_LIBS:-}; do
    [ -n "$dir" ] && printf '%s\tDTFM_CUDA_LIBS\n' "$dir"
  done
  for dir in ${LD_LIBRARY_PATH:-}; do
    [ -n "$dir" ] && printf '%s\tLD_LIBRARY_PATH\n' "$dir"
  done
  IFS=$IFS_SAVE

  local roots=()
  [ -n "${CUDA_HOME:-}" ] && roots+=("$CUDA_HOME")
  [ -n "${CUDA_PATH:-}" ] && roots+=("$CUDA_PATH")
  if [ -n "${DTFM_TOOLKIT_ROOTS+set}" ]; then
    # shellcheck disable=SC2206 # the user's list, split on blanks and globbed
    roots+=($DTFM_TOOLKIT_ROOTS)
  else
    roots+=(/usr/local/cuda)
    # Versioned toolkits, newest first.
    while IFS= read -r root; do
      [ -n "$root" ] && roots+=("$root")
    done < <(ls -d /usr/local/cuda-* 2>/dev/null | sort -rV)
    roots+=(/opt/cuda)
  fi
  for root in "${roots[@]}"; do
    for dir in "$root/lib64" "$root/lib" "$root/targets/x86_64-linux/lib"; do
      printf '%s\ttoolkit %s\n' "$dir" "$root"
    done
  done

  local sites=()
  if [ -n "${DTFM_PYTHON_SITES+set}" ]; then
    # shellcheck disable=SC2206
    sites=($DTFM_PYTHON_SITES)
  else
    local pythons=(python3 /usr/bin/python3)
    [ -n "${VIRTUAL_ENV:-}" ] && pythons=("$VIRTUAL_ENV/bin/python3" "${pythons[@]}")
    [ -n "${CONDA_PREFIX:-}" ] && pythons=("$CONDA_PREFIX/bin/python3" "${pythons[@]}")
    for py in "${pythons[@]}"; do
      command -v "$py" >/dev/null 2>&1 || continue
      while IFS= read -r site; do
        [ -n "$site" ] && sites+=("$site")
      done < <(timeout 10 "$py" -c 'import site
for s in site.getsitepackages() + [site.getusersitepackages()]: print(s)' 2>/dev/null)
    done
  fi
  for site in "${sites[@]}"; do
    for dir in "$site"/nvidia/*/lib "$site"/nvidia/*/lib64; do
      [ -d "$dir" ] && printf '%s\tpython %s\n' "$dir" "$site"
    done
  done

  # shellcheck disable=SC2206
  local system=(${DTFM_SYSTEM_LIB_DIRS-/usr/lib/x86_64-linux-gnu /usr/lib64 /lib64 /usr/lib /lib})
  for dir in "${system[@]}"; do
    printf '%s\tsystem\n' "$dir"
  done
}

# dtfm_find_cuda SONAME... : sets DTFM_CUDA_FOUND (one "soname<TAB>folder<TAB>
# source" line per library found), DTFM_CUDA_MISSING (space-separated sonames)
# and DTFM_CUDA_DIRS (the folders found, colon-separated, in search order).
dtfm_find_cuda() {
  DTFM_CUDA_FOUND=""
  DTFM_CUDA_MISSING=""
  DTFM_CUDA_DIRS=""
  local candidates soname dir source hit
  candidates=$(dtfm_cuda_candidates)
  for soname in "$@"; do
    hit=""
    while IFS=$'\t' read -r dir source; do
      if [ -n "$dir" ] && [ -f "$dir/$soname" ] && [ -r "$dir/$soname" ]; then
        hit="$dir"
        DTFM_CUDA_FOUND+="$soname"$'\t'"$dir"$'\t'"$source"$'\n'
        case ":$DTFM_CUDA_DIRS:" in
          *":$dir:"*) ;;
          *) DTFM_CUDA_DIRS="${DTFM_CUDA_DIRS:+$DTFM_CUDA_DIRS:}$dir" ;;
        esac
        break
      fi
    done <<<"$candidates"
    [ -z "$hit" ] && DTFM_CUDA_MISSING="${DTFM_CUDA_MISSING:+$DTFM_CUDA_MISSING }$soname"
  done
  [ -z "$DTFM_CUDA_MISSING" ]
}

# One line saying which libraries are used ("libcudart.so.13 from DIR (source), ...").
dtfm_cuda_summary() {
  local soname dir source out=""
  while IFS=$'\t' read -r soname dir source; do
    [ -n "$soname" ] && out="${out:+$out, }$soname from $dir ($source)"
  done <<<"$DTFM_CUDA_FOUND"
  printf '%s\n' "$out"
}

# One line naming what is missing and where it was looked for.
dtfm_cuda_missing_message() {
  printf 'missing CUDA libraries: %s (looked in DTFM_CUDA_LIBS, LD_LIBRARY_PATH, CUDA toolkits under $CUDA_HOME, $CUDA_PATH, /usr/local/cuda*, /opt/cuda, nvidia/*/lib of Python site-packages, and system folders); install the CUDA toolkit or the nvidia-* Python wheels, or set DTFM_CUDA_LIBS to the folders that hold them\n' "$DTFM_CUDA_MISSING"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -u
  if [ $# -eq 0 ]; then
    echo "usage: find-cuda.sh SONAME..." >&2
    exit 64
  fi
  if dtfm_find_cuda "$@"; then
    while IFS=$'\t' read -r soname dir source; do
      [ -n "$soname" ] && printf '%s\t%s\t%s\n' "$soname" "$dir" "$source"
    done <<<"$DTFM_CUDA_FOUND"
    exit 0
  fi
  echo "find-cuda.sh: $(dtfm_cuda_missing_message)" >&2
  exit 2
fi
