#!/usr/bin/env bash
# Sets up the machine, builds dtfm and runs every test (lit + FileCheck and the
# GoogleTest unit tests, through lit). Ends with "N passed, N failed"; exits
# non-zero when any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/build.sh

BUILD_DIR=${DTFM_BUILD_DIR:-build}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
ninja -C "$BUILD_DIR" check-dtfm 2>&1 | tee "$log" || status=$?

count() { sed -n "s/^ *$1 *: *\([0-9]*\).*/\1/p" "$log" | tail -n 1; }
passed=$(count Passed); failed=$(count Failed)
unsupported=$(count Unsupported); skipped=$(count Skipped)
passed=${passed:-0}; failed=${failed:-0}; unsupported=$(( ${unsupported:-0} + ${skipped:-0} ))
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
  failed=1 # the build or lit itself failed before counting tests
fi
echo "tests: $passed passed, $failed failed, $unsupported skipped"
exit "$status"
