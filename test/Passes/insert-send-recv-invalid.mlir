// RUN: dtfm-opt %s -split-input-file -verify-diagnostics --dtfm-insert-send-recv
// RUN: not dtfm-opt %S/Inputs/staged-3.mlir --dtfm-insert-send-recv 2>&1 | FileCheck %s --check-prefix=NOFILE
// RUN: not dtfm-opt %S/Inputs/staged-3.mlir --dtfm-import-cluster=file=%S/Inputs/two.textproto --dtfm-insert-send-recv 2>&1 | FileCheck %s --check-prefix=DEVICES
// RUN: not dtfm-opt %S/Inputs/send-recv-assignment.mlir -split-input-file --dtfm-insert-send-recv 2>&1 | FileCheck %s --check-prefix=ASSIGN
// RUN: not dtfm-opt %S/Inputs/unstaged-input.mlir --dtfm-import-cluster=file=%dtfm_src_root/examples/clusters/local-8.textproto --dtfm-insert-send-recv 2>&1 | FileCheck %s --check-prefix=NOSTAGE
// RUN: not dtfm-opt %S/Inputs/unstaged-input.mlir --dtfm-insert-send-recv 2>&1 | FileCheck %s --check-prefix=NOCLUSTER
// COM: The send/recv verifiers' own diagnostics (bytes, link, peer).
// RUN: dtfm-opt %S/Inputs/send-recv-invalid.mlir -split-input-file -verify-diagnostics

// COM: Whole-module errors point at the cluster file (or the module), not
// COM: at an op.
// NOSTAGE: error: 'dtfm.input' op has no dtfm.stage; run --dtfm-partition-stages first
// NOCLUSTER: error: dtfm-insert-send-recv: no cluster in the module: run --dtfm-import-cluster=file=FILE first (or --dtfm-plan=cluster=FILE)
// NOFILE: staged-3.mlir:0:0: error: dtfm-insert-send-recv: no cluster in the module: run --dtfm-import-cluster=file=FILE first (or --dtfm-plan=cluster=FILE)
// DEVICES: two.textproto:0:0: error: dtfm-insert-send-recv: 3 stages but cluster 'two' has 2 devices
// ASSIGN: pair.textproto:0:0: error: dtfm-insert-send-recv: dtfm.assignment has fewer stages than the ops use (2)
// ASSIGN: pair.textproto:0:0: error: dtfm-insert-send-recv: dtfm.assignment names device "z", which cluster 'pair' does not have

module attributes {dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @unstaged() -> tensor<2x3xf32> {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2x3xf32>
    // expected-error @+1 {{'dtfm.relu' op has no dtfm.stage; run --dtfm-partition-stages first}}
    %r = dtfm.relu %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return {dtfm.stage = 0 : i64} %r : tensor<2x3xf32>
  }
}
