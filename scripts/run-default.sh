#!/usr/bin/env bash
# Sets up the machine, builds dtfm and runs its main job on the embedded
# default: import the GPT-3 1.3B preset, annotate its costs, print the cost
# table (per layer and totals; add --per-op to see every op).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/build.sh dtfm-opt dtfm-translate

BIN=${DTFM_BUILD_DIR:-build}/bin
per_op=false
[ "${1:-}" = "--per-op" ] && per_op=true
"$BIN/dtfm-translate" --import-gpt "${DTFM_MODEL:-gpt3-1.3b}" |
  "$BIN/dtfm-opt" --dtfm-annotate-costs \
    --dtfm-print-costs="per-op=$per_op" -o /dev/null
