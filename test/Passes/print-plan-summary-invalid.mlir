// RUN: not dtfm-opt %s --dtfm-print-plan-summary 2>&1 | FileCheck %s

// COM: No dtfm.shape: one line on the module, no op to point at.
// CHECK: print-plan-summary-invalid.mlir:0:0: error: dtfm-print-plan-summary: the module has no dtfm.shape; plan with --dtfm-plan=...,global-batch=N or run --dtfm-choose-shape first
module {
}
