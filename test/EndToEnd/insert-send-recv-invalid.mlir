// COM: End-to-end test: a whole model (not a small hand-written case) through a chain of passes or the --dtfm-plan pipeline (the hand-written pass tests are in test/Passes).
// RUN: not dtfm-opt %s --dtfm-import-cluster=file=%dtfm_src_root/examples/clusters/local-8.textproto --dtfm-insert-send-recv 2>&1 | FileCheck %s --check-prefix=NOSTAGE
// NOSTAGE: error: 'dtfm.input' op has no dtfm.stage; run --dtfm-partition-stages first
// RUN: not dtfm-opt %s --dtfm-insert-send-recv 2>&1 | FileCheck %s --check-prefix=NOFILE
// NOFILE: error: dtfm-insert-send-recv: no cluster in the module: run --dtfm-import-cluster=file=FILE first (or --dtfm-plan=cluster=FILE)
// RUN: dtfm-opt %S/../Passes/Inputs/send-recv-invalid.mlir -split-input-file -verify-diagnostics

func.func @unstaged() {
  %x = dtfm.input "x" : tensor<2xf32>
  return
}
