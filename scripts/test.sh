#!/usr/bin/env bash
# Sets up the machine, builds dtfm and runs every test (lit + FileCheck and the
# GoogleTest unit tests, through lit), then the sanitizer smoke: the runtime,
# importer and fuzz-seed tests and the unit tests under ASan + UBSan, and each
# fuzzer for 60 s (docs/Testing.md; DTFM_SANITIZE=0 leaves it out). Ends with
# "N passed, N failed"; exits non-zero when any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."

# How long each phase takes, printed before the summary (the 30-minute
# budget of a cold run on two cores: docs/Testing.md).
phases=""
phase_start=$SECONDS
phase_done() {
  phases="$phases${phases:+, }$1 $((SECONDS - phase_start)) s"
  phase_start=$SECONDS
}

scripts/setup.sh
phase_done setup
scripts/build.sh
phase_done build

BUILD_DIR=${DTFM_BUILD_DIR:-build}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
ninja -C "$BUILD_DIR" check-dtfm 2>&1 | tee "$log" || status=$?
phase_done tests

count() { sed -n "s/^ *$1 *: *\([0-9]*\).*/\1/p" "$log" | tail -n 1; }
passed=$(count Passed); failed=$(count Failed)
unsupported=$(count Unsupported); skipped=$(count Skipped)
passed=${passed:-0}; failed=${failed:-0}; unsupported=$(( ${unsupported:-0} + ${skipped:-0} ))
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
  failed=1 # the build or lit itself failed before counting tests
fi
summary="tests: $passed passed, $failed failed, $unsupported skipped"

if [ "${DTFM_SANITIZE:-1}" != 0 ]; then
  asan_status=0 fuzz_status=0
  scripts/sanitize.sh asan Runtime Target Fuzz 2>&1 | tee "$log" || asan_status=$?
  asan_passed=$(count Passed); asan_failed=$(count Failed)
  phase_done "ASan+UBSan build and tests"
  # Nothing else runs now: two targets at a time, one per core.
  DTFM_FUZZ_PARALLEL=${DTFM_FUZZ_PARALLEL:-2} \
    scripts/sanitize.sh fuzz "${DTFM_FUZZ_SECONDS:-60}" || fuzz_status=$?
  phase_done fuzzing
  summary="$summary; under ASan+UBSan: ${asan_passed:-0} passed, ${asan_failed:-0} failed"
  [ "$asan_status" -eq 0 ] || { summary="$summary (sanitizer run failed)"; status=1; }
  if [ "$fuzz_status" -eq 0 ]; then
    summary="$summary; fuzzers clean"
  else
    summary="$summary; a fuzzer failed"; status=1
  fi
fi
echo "test.sh: $phases"
echo "$summary"
exit "$status"
