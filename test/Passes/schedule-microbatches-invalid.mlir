// RUN: dtfm-opt %s -split-input-file -verify-diagnostics --dtfm-schedule-microbatches
// RUN: not dtfm-opt %s -split-input-file --dtfm-schedule-microbatches=schedule=interleaved 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not dtfm-opt %s -split-input-file --dtfm-schedule-microbatches=micro-batches=0 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not dtfm-opt %s -split-input-file --dtfm-schedule-microbatches=micro-batches=2000000000 2>&1 | FileCheck %s --check-prefix=HUGE

// COM: Option errors have no op to point at.
// BAD: error: dtfm-schedule-microbatches: unknown schedule 'interleaved' (expected 1f1b, zb-h1, gpipe or auto)
// ZERO: error: dtfm-schedule-microbatches: micro-batches must be in [1, 1000000], got 0
// HUGE: error: dtfm-schedule-microbatches: micro-batches must be in [1, 1000000], got 2000000000

func.func @unstaged() -> tensor<2x3xf32> {
  %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2x3xf32>
  // expected-error @+1 {{'dtfm.relu' op has no dtfm.stage; run --dtfm-partition-stages first}}
  %r = dtfm.relu %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return {dtfm.stage = 0 : i64} %r : tensor<2x3xf32>
}
