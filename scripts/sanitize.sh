#!/usr/bin/env bash
# Sanitizer builds and fuzzing (docs/Testing.md). Each mode configures its
# own build folder once with clang-19 (the LLVM of MLIR) and builds only what
# it runs; sanitizer reports go to files, so that one from a worker, from a
# command a test expects to fail, or from a leak at exit is never missed.
#
#   scripts/sanitize.sh asan [lit paths...]  ASan + UBSan (build-asan): the lit
#       tests under the paths given (test/ relative; all when none) and the
#       unit tests; CI runs it on the runtime and importer tests.
#   scripts/sanitize.sh tsan [lit paths...]  TSan (build-tsan): the transport's
#       and job token's unit tests (rendezvous store and its gate, collectives)
#       and the lit tests under the
#       paths given (default Runtime: workers with their receive / compute /
#       send threads, launcher, checkpoints).
#   scripts/sanitize.sh fuzz SECONDS [target...]  the libFuzzer targets
#       (build-asan, with ASan + UBSan) for SECONDS each on their seed corpus
#       (fuzz/make-seeds.sh); prints one row per target (runs, coverage,
#       corpus, result) and keeps any crashing input under build-asan/fuzz.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
jobs=${DTFM_JOBS:-$(nproc)}

mode=${1:-}
[ $# -gt 0 ] && shift
case "$mode" in
  asan|fuzz) build=build-asan sanitizer="Address;Undefined" coverage=ON ;;
  tsan) build=build-tsan sanitizer="Thread" coverage=OFF ;;
  *) echo "usage: $0 asan [lit paths...] | tsan [lit paths...] | fuzz SECONDS [target...]" >&2
     exit 2 ;;
esac

if [ ! -f "$build/build.ninja" ]; then
  # -O1: the sanitizers' usual level, and half the compile time of -O3 on
  # two cores. CUDA stays out: nvcc does not take these flags.
  cmake -G Ninja -S . -B "$build" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
    -DLLVM_USE_SANITIZER="$sanitizer" -DLLVM_USE_SANITIZE_COVERAGE=$coverage \
    -DDTFM_ENABLE_CUDA=OFF \
    -DMLIR_DIR=/usr/lib/llvm-19/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-19/build/utils/lit/lit.py > /dev/null
fi

reports="$src/$build/sanitizer-reports"
rm -rf "$reports" && mkdir -p "$reports"
symbolizer=/usr/lib/llvm-19/bin/llvm-symbolizer
export ASAN_SYMBOLIZER_PATH=$symbolizer UBSAN_SYMBOLIZER_PATH=$symbolizer \
  TSAN_SYMBOLIZER_PATH=$symbolizer
# One thread for OpenBLAS: its own pool is not instrumented.
export OPENBLAS_NUM_THREADS=1
# allow_user_poisoning=0: LLVM's BumpPtrAllocator poisons its slabs when
# inlined into our (instrumented) code, and Debian's libMLIR.so, built
# without ASan, then writes into them without unpoisoning: false reports.
asan_common="allow_user_poisoning=0:detect_leaks=1"
check_reports() {
  if [ -n "$(ls -A "$reports")" ]; then
    echo "sanitize: reports in $reports:" >&2
    head -n 40 "$reports"/* >&2
    exit 1
  fi
  echo "sanitize: no sanitizer reports"
}

lit=/usr/lib/llvm-19/build/utils/lit/lit.py
case "$mode" in
  asan)
    targets=(dtfm-opt dtfm-translate dtfm-run dtfm-data bench-data DtfmUnitTests
      dtfm-cluster-fuzzer dtfm-plan-fuzzer dtfm-checkpoint-fuzzer
      dtfm-weights-fuzzer dtfm-mlir-fuzzer dtfm-onnx-fuzzer)
    # The benches only for the tests that run them (test/Tools).
    if [ $# -eq 0 ] || printf '%s\n' "$@" | grep -q '^Tools'; then
      targets+=(bench-hetero bench-paper bench-scheduler bench-shape)
    fi
    ninja -C "$build" -j "$jobs" "${targets[@]}"
    echo "sanitize: built in $SECONDS s"
    # One log_path for both (UBSan's would override ASan's anyway).
    export ASAN_OPTIONS="$asan_common:log_path=$reports/report:strict_string_checks=1:detect_stack_use_after_return=1"
    export UBSAN_OPTIONS="log_path=$reports/report:print_stacktrace=1"
    paths=()
    for p in "$@"; do paths+=("$build/test/$p"); done
    [ ${#paths[@]} -eq 0 ] && paths=("$build/test")
    status=0
    "$lit" -sv "${paths[@]}" "$build/test/Unit" || status=$?
    check_reports
    exit "$status"
    ;;
  tsan)
    ninja -C "$build" -j "$jobs" dtfm-opt dtfm-translate dtfm-run dtfm-data bench-data \
      DtfmUnitTests
    export TSAN_OPTIONS="log_path=$reports/report:halt_on_error=0:second_deadlock_stack=1:suppressions=$src/scripts/tsan-suppressions.txt"
    status=0
    DTFM_SOURCE_DIR="$src" "$build/unittests/DtfmUnitTests" \
      --gtest_filter='TransportTest*:JobAuth*' --gtest_brief=1 || status=$?
    paths=()
    for p in "$@"; do paths+=("$build/test/$p"); done
    [ ${#paths[@]} -eq 0 ] && paths=("$build/test/Runtime")
    "$lit" -sv "${paths[@]}" || status=$?
    check_reports
    exit "$status"
    ;;
  fuzz)
    seconds=${1:?fuzz needs SECONDS}; shift
    targets=("$@")
    [ ${#targets[@]} -eq 0 ] && targets=(cluster plan checkpoint weights mlir onnx)
    fuzzers=(); for t in "${targets[@]}"; do fuzzers+=("dtfm-$t-fuzzer"); done
    ninja -C "$build" -j "$jobs" dtfm-opt dtfm-translate dtfm-run "${fuzzers[@]}"
    work="$src/$build/fuzz-runs" # (build-asan/fuzz is the targets' build folder)
    mkdir -p "$work"
    # The seeds come from the sanitized tools; leaks there are not the
    # fuzzers' business (asan mode checks them).
    ASAN_OPTIONS=allow_user_poisoning=0:detect_leaks=0 fuzz/make-seeds.sh "$build/bin" "$work/seeds" > /dev/null
    export ASAN_OPTIONS="$asan_common"
    export UBSAN_OPTIONS="print_stacktrace=1"
    # -timeout: an input that takes 25 s is a hang; -rss_limit_mb: 2 GiB is
    # an out-of-memory; both count as failures. DTFM_FUZZ_PARALLEL targets
    # run at once (default 1: CI's two cores are shared).
    run_target() {
      local t=$1
      mkdir -p "$work/corpus-$t" "$work/crashes-$t"
      if "$build/bin/dtfm-$t-fuzzer" "$work/corpus-$t" "$work/seeds/$t" \
          -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 \
          -max_len=1048576 -print_final_stats=1 \
          -artifact_prefix="$work/crashes-$t/" > "$work/$t.log" 2>&1; then
        echo clean > "$work/$t.result"
      else
        echo FAILED > "$work/$t.result"
      fi
    }
    running=0
    for t in "${targets[@]}"; do
      rm -f "$work/$t.result"
      run_target "$t" &
      running=$((running + 1))
      if [ "$running" -ge "${DTFM_FUZZ_PARALLEL:-1}" ]; then
        wait -n || true
        running=$((running - 1))
      fi
    done
    wait || true
    printf '%-11s %10s %8s %8s %8s  %s\n' target runs cov ft corpus result
    failed=0
    for t in "${targets[@]}"; do
      log="$work/$t.log"
      result=$(cat "$work/$t.result" 2>/dev/null || echo FAILED)
      runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
      cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
      ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
      size=$(find "$work/corpus-$t" -type f | wc -l)
      printf '%-11s %10s %8s %8s %8s  %s\n' "$t" "${runs:-0}" "${cov:-0}" \
        "${ft:-0}" "$size" "$result"
      if [ "$result" != clean ]; then
        failed=1
        grep -m1 -E "ERROR|runtime error|deadly signal|timeout|out-of-memory" "$log" >&2 || true
        echo "  log: $log; input: $(ls "$work/crashes-$t" | head -1)" >&2
      fi
    done
    exit "$failed"
    ;;
esac
