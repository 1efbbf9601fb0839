// RUN: dtfm-opt %s -split-input-file -verify-diagnostics --dtfm-insert-compression=ratio=10
// RUN: not dtfm-opt %s -split-input-file --dtfm-insert-compression=ratio=1 2>&1 | FileCheck %s --check-prefix=RATIO
// RUN: not dtfm-opt %s -split-input-file --dtfm-insert-compression="ratio=10 dense-below=-1" 2>&1 | FileCheck %s --check-prefix=DENSE
// RUN: not dtfm-opt %s -split-input-file --dtfm-insert-compression=int8=fp8 2>&1 | FileCheck %s --check-prefix=WIRE
// RUN: not dtfm-opt %s -split-input-file --dtfm-insert-compression="ratio=0.5 int8=int8" 2>&1 | FileCheck %s --check-prefix=WIRE-RATIO
// WIRE: error: dtfm-insert-compression: unknown int8 'fp8' (expected none, int8 or auto)
// WIRE-RATIO: error: dtfm-insert-compression: ratio must be >= 1 and dense-below >= 0, got 5.000000e-01 and 0.000000e+00

// COM: Option errors have no op to point at.
// RATIO: error: dtfm-insert-compression: ratio must be > 1 and dense-below >= 0, got 1.000000e+00 and 0.000000e+00
// DENSE: error: dtfm-insert-compression: ratio must be > 1 and dense-below >= 0, got 1.000000e+01 and -1.000000e+00

// COM: A compressed send needs its recv (matched by tag) to rewrite.
func.func @no_recv() {
  %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<8x16xf32>
  // expected-error @+1 {{'dtfm.send' op has no recv with tag 0; run --dtfm-verify-plan}}
  dtfm.send %x {bandwidth_gbps = 1.0 : f64, bytes = 512 : i64, dtfm.stage = 0 : i64, latency_s = 0.0 : f64, peer = 1 : i64, tag = 0 : i64} : tensor<8x16xf32>
  return {dtfm.stage = 0 : i64}
}
