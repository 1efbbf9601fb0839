// RUN: not dtfm-opt %s -split-input-file --dtfm-choose-shape=global-batch=4 2>&1 | FileCheck %s
// RUN: not dtfm-opt %s -split-input-file --dtfm-choose-shape=global-batch=0 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not dtfm-opt %s -split-input-file --dtfm-choose-shape=global-batch=2000000000 2>&1 | FileCheck %s --check-prefix=HUGE
// RUN: not dtfm-opt %s -split-input-file --dtfm-choose-shape="global-batch=4 schedule=zb" 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not dtfm-opt %s -split-input-file --dtfm-choose-shape="global-batch=4 micro-batch-sizes=0" 2>&1 | FileCheck %s --check-prefix=SIZE

// COM: dtfm-choose-shape reports on the module (its cluster file).
// ZERO: error: dtfm-choose-shape: global-batch must be in [1, 1000000] samples, got 0
// HUGE: error: dtfm-choose-shape: global-batch must be in [1, 1000000] samples, got 2000000000
// SCHEDULE: one.textproto:0:0: error: dtfm-choose-shape: budget and state-bytes-per-param-byte must be >= 0 and schedule 1f1b, zb-h1, gpipe or auto
// SIZE: one.textproto:0:0: error: dtfm-choose-shape: micro-batch sizes must be positive, found 0

// CHECK: error: dtfm-choose-shape: no cluster in the module: run --dtfm-import-cluster=file=FILE first (or --dtfm-plan=cluster=FILE)
module {
  func.func @mlp() -> tensor<2x8xf32> {
    %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.layer = "l0"} : tensor<4x8xf32>
    %h = dtfm.matmul %x, %w {dtfm.layer = "l0"} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    return %h : tensor<2x8xf32>
  }
}


// -----

// COM: Default candidate sizes go from a quarter to four times the model's
// COM: (32): 8..128; none divides the global batch 4.
// CHECK: one.textproto:0:0: error: dtfm-choose-shape: no micro-batch size near the model's (32) divides global-batch 4
module attributes {dtfm.cluster = #dtfm.cluster<name = "one", source = "one.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0], bandwidth_gbps = [0.0]>} {
  func.func @big() -> tensor<32x8xf32> {
    %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<32x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.layer = "l0"} : tensor<4x8xf32>
    %h = dtfm.matmul %x, %w {dtfm.layer = "l0"} : (tensor<32x4xf32>, tensor<4x8xf32>) -> tensor<32x8xf32>
    return %h : tensor<32x8xf32>
  }
}

// -----

// COM: No dtfm.input or dtfm.label: no micro-batch size to start from.
// CHECK: one.textproto:0:0: error: dtfm-choose-shape: the model has no dtfm.input or dtfm.label
module attributes {dtfm.cluster = #dtfm.cluster<name = "one", source = "one.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0], bandwidth_gbps = [0.0]>} {
  func.func @no_input() -> tensor<4x8xf32> {
    %w = dtfm.param "w" init(zeros) {dtfm.layer = "l0"} : tensor<4x8xf32>
    return %w : tensor<4x8xf32>
  }
}
