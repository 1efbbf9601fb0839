// RUN: dtfm-opt %s -split-input-file --dtfm-insert-grad-sync=sync-every=auto | FileCheck %s
// RUN: not dtfm-opt %S/Inputs/grad-sync-module.mlir -split-input-file --dtfm-insert-grad-sync=sync-every=auto 2>&1 | FileCheck %s --check-prefix=NOSHAPE

// COM: sync-every=auto takes local steps only where the synchronous
// COM: exchange left after the backward costs more than 10% of the shape's
// COM: pipeline time, and then the smallest H of 2, 5, 10, 20, 50, 100
// COM: whose 1/H of an exchange costs no more. The pair's one bucket takes
// COM: 0.002000048 s (2 * (1e-3 + 8 * 30 / 1e10)), all after the
// COM: backward (which does no work).

// COM: Pipeline 0.05 s: 0.002 s is 4% of it: synchronous.
// CHECK-LABEL: func.func @fast_enough
// CHECK-NOT: dtfm.sync_every
// CHECK: return
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "pair", algorithm = "genetic", seed = 0, dp = 2, pp = 1, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a", "b"]]>, dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>, dtfm.shape = #dtfm.shape<cluster = "pair", global_batch = 4, dp = 2, pp = 1, micro_batch_size = 2, micro_batches = 1, devices_used = 2, iteration_s = 5.000000e-02, pipeline_s = 5.000000e-02, data_parallel_s = 0.0, devices = ["a", "b"], stages = [["a", "b"]], runners_up = [], idle = [], shapes_scored = 1>} {
  func.func @fast_enough() {
    %w = dtfm.param "w" init(zeros) {dtfm.stage = 0 : i64} : tensor<4x3xf32>
    %b = dtfm.param "b" init(zeros) {dtfm.stage = 0 : i64} : tensor<3xf32>
    %dw = dtfm.input "dw" {dtfm.stage = 0 : i64} : tensor<4x3xf32>
    %db = dtfm.input "db" {dtfm.stage = 0 : i64} : tensor<3xf32>
    %uw = dtfm.adamw_update %w, %dw {dtfm.layer = "l0", dtfm.stage = 0 : i64, lr = 1.000000e-03 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    %ub = dtfm.sgd_update %b, %db {dtfm.layer = "l1", dtfm.stage = 0 : i64, lr = 1.000000e-01 : f64, momentum = 0.0 : f64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    return {dtfm.stage = 0 : i64}
  }
}

// -----

// COM: Pipeline 0.01 s: 10% is 0.001 s; H = 2 leaves 0.001000024 s, H = 5
// COM: 0.0004 s: local steps every 5.
// CHECK-LABEL: func.func @every_five
// CHECK: dtfm.grad_sync {{.*}}dtfm.sync_every = 5 : i64
// CHECK: dtfm.grad_sync {{.*}}dtfm.sync_every = 5 : i64
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "pair", algorithm = "genetic", seed = 0, dp = 2, pp = 1, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a", "b"]]>, dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>, dtfm.shape = #dtfm.shape<cluster = "pair", global_batch = 4, dp = 2, pp = 1, micro_batch_size = 2, micro_batches = 1, devices_used = 2, iteration_s = 1.000000e-02, pipeline_s = 1.000000e-02, data_parallel_s = 0.0, devices = ["a", "b"], stages = [["a", "b"]], runners_up = [], idle = [], shapes_scored = 1>} {
  func.func @every_five() {
    %w = dtfm.param "w" init(zeros) {dtfm.stage = 0 : i64} : tensor<4x3xf32>
    %b = dtfm.param "b" init(zeros) {dtfm.stage = 0 : i64} : tensor<3xf32>
    %dw = dtfm.input "dw" {dtfm.stage = 0 : i64} : tensor<4x3xf32>
    %db = dtfm.input "db" {dtfm.stage = 0 : i64} : tensor<3xf32>
    %uw = dtfm.adamw_update %w, %dw {dtfm.layer = "l0", dtfm.stage = 0 : i64, lr = 1.000000e-03 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    %ub = dtfm.sgd_update %b, %db {dtfm.layer = "l1", dtfm.stage = 0 : i64, lr = 1.000000e-01 : f64, momentum = 0.0 : f64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    return {dtfm.stage = 0 : i64}
  }
}

// -----

// COM: Pipeline 1 us: no H fits; the largest, 100.
// CHECK-LABEL: func.func @largest
// CHECK: dtfm.grad_sync {{.*}}dtfm.sync_every = 100 : i64
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "pair", algorithm = "genetic", seed = 0, dp = 2, pp = 1, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a", "b"]]>, dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>, dtfm.shape = #dtfm.shape<cluster = "pair", global_batch = 4, dp = 2, pp = 1, micro_batch_size = 2, micro_batches = 1, devices_used = 2, iteration_s = 1.000000e-06, pipeline_s = 1.000000e-06, data_parallel_s = 0.0, devices = ["a", "b"], stages = [["a", "b"]], runners_up = [], idle = [], shapes_scored = 1>} {
  func.func @largest() {
    %w = dtfm.param "w" init(zeros) {dtfm.stage = 0 : i64} : tensor<4x3xf32>
    %b = dtfm.param "b" init(zeros) {dtfm.stage = 0 : i64} : tensor<3xf32>
    %dw = dtfm.input "dw" {dtfm.stage = 0 : i64} : tensor<4x3xf32>
    %db = dtfm.input "db" {dtfm.stage = 0 : i64} : tensor<3xf32>
    %uw = dtfm.adamw_update %w, %dw {dtfm.layer = "l0", dtfm.stage = 0 : i64, lr = 1.000000e-03 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    %ub = dtfm.sgd_update %b, %db {dtfm.layer = "l1", dtfm.stage = 0 : i64, lr = 1.000000e-01 : f64, momentum = 0.0 : f64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    return {dtfm.stage = 0 : i64}
  }
}

// NOSHAPE: error: dtfm-insert-grad-sync: sync-every=auto needs the plan's shape: plan with global-batch=N (or run --dtfm-choose-shape first)
