// RUN: dtfm-opt %s -split-input-file -verify-diagnostics --dtfm-partition-stages
// RUN: not dtfm-opt %S/Inputs/partition-module.mlir -split-input-file --dtfm-partition-stages 2>&1 | FileCheck %s
// RUN: not dtfm-opt %s -split-input-file --dtfm-partition-stages=stages=3 2>&1 | FileCheck %s --check-prefix=TOOMANY
// RUN: not dtfm-opt %s -split-input-file --dtfm-partition-stages=schedule=zb 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not dtfm-opt %s -split-input-file --dtfm-partition-stages=micro-batches=0 2>&1 | FileCheck %s --check-prefix=ZERO

// COM: Whole-module errors point at the cluster file (or the module).
// CHECK: partition-module.mlir:{{.*}}error: dtfm-partition-stages: no cluster in the module: run --dtfm-import-cluster=file=FILE first (or --dtfm-plan=cluster=FILE)
// COM: Memory: with 4 bytes of state per parameter byte, w alone needs
// COM: 512 B > 100 B wherever it goes; the most memory-balanced split
// COM: [0, 1, 2] puts 4*128 + 32 = 544 B on a.
// CHECK: tiny.textproto:0:0: error: dtfm-partition-stages: model does not fit: device a (stage 0) needs 6.08e-07 GB but has 1e-07 GB, even in the most memory-balanced split
// CHECK: pair.textproto:0:0: error: dtfm-partition-stages: dtfm.assignment names device "z", which cluster 'pair' does not have
// CHECK: pair.textproto:0:0: error: dtfm-partition-stages: dtfm.assignment's stage_bounds: stage bounds must rise strictly from 0 to 2 over 2 stages
// TOOMANY: pair.textproto:0:0: error: dtfm-partition-stages: 3 stages but cluster 'pair' has 2 devices
// SCHEDULE: pair.textproto:0:0: error: dtfm-partition-stages: unknown schedule 'zb' (expected 1f1b, zb-h1, gpipe or auto)
// ZERO: pair.textproto:0:0: error: dtfm-partition-stages: micro-batches must be in [1, 1000000], got 0

// COM: A training op whose dtfm.layer no forward op has cannot join a block.
module attributes {dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @orphan() -> tensor<f32> {
    %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<2x8xf32>
    %t = dtfm.label "t" {dtfm.layer = "l0"} : tensor<2xi64>
    %loss = dtfm.cross_entropy %x, %t {dtfm.layer = "l0"} : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<f32>
    // expected-error @+1 {{'dtfm.backward' op belongs to layer 'gone', which no forward op has}}
    %dx = dtfm.backward "dtfm.cross_entropy"(%x, %t) {dtfm.layer = "gone", flops = 32 : i64, wrt = array<i64: 0>} : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<2x8xf32>
    return %loss : tensor<f32>
  }
}

// -----

// COM: A layer whose ops resume after another layer's: stages are cut
// COM: between layers, so each must be one run.
module attributes {dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @split_layer() -> tensor<f32> {
    %x = dtfm.input "x" {dtfm.layer = "a"} : tensor<2x8xf32>
    %y = dtfm.relu %x {dtfm.layer = "b"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    // expected-error @+1 {{layer 'a' is not contiguous: its ops resume after layer 'b' (give each run its own dtfm.layer)}}
    %z = dtfm.relu %y {dtfm.layer = "a"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %t = dtfm.label "t" {dtfm.layer = "a"} : tensor<2xi64>
    %loss = dtfm.cross_entropy %z, %t {dtfm.layer = "a"} : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
