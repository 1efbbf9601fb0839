// RUN: not dtfm-opt %s -split-input-file --dtfm-assign-devices="dp=2 pp=2" 2>&1 | FileCheck %s
// RUN: not dtfm-opt %S/Inputs/staged-3.mlir --dtfm-import-cluster=file=%S/Inputs/two.textproto --dtfm-assign-devices=algorithm=annealing 2>&1 | FileCheck %s --check-prefix=ALGO
// RUN: not dtfm-opt %S/Inputs/staged-3.mlir --dtfm-import-cluster=file=%S/Inputs/two.textproto --dtfm-assign-devices=micro-batches=0 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not dtfm-opt %S/Inputs/staged-3.mlir --dtfm-import-cluster=file=%S/Inputs/two.textproto --dtfm-assign-devices=micro-batches=2000000000 2>&1 | FileCheck %s --check-prefix=HUGE
// RUN: not dtfm-opt %S/Inputs/staged-3.mlir --dtfm-import-cluster=file=%S/Inputs/two.textproto --dtfm-assign-devices="dp=3 pp=1" 2>&1 | FileCheck %s --check-prefix=FACTOR

// COM: dtfm-assign-devices reports on the module (its cluster file), never
// COM: on an op.
// ALGO: two.textproto:0:0: error: dtfm-assign-devices: unknown algorithm 'annealing' (expected rank-order, random, kl, op-fence, genetic-paper, genetic or hetero)
// ZERO: two.textproto:0:0: error: dtfm-assign-devices: micro-batches must be in [1, 1000000], got 0
// HUGE: two.textproto:0:0: error: dtfm-assign-devices: micro-batches must be in [1, 1000000], got 2000000000
// FACTOR: two.textproto:0:0: error: dtfm-assign-devices: cluster 'two' has 2 devices, which is not dp 3 x pp 1

// CHECK: error: dtfm-assign-devices: no cluster in the module: run --dtfm-import-cluster=file=FILE first (or --dtfm-plan=cluster=FILE)
module {
  func.func @f() -> tensor<2x8xf32> {
    %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.layer = "l0"} : tensor<4x8xf32>
    %h = dtfm.matmul %x, %w {dtfm.layer = "l0"} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    %r = dtfm.relu %h {dtfm.layer = "l1"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    return %r : tensor<2x8xf32>
  }
}

// -----

// COM: Options that contradict the module's dtfm.shape (4 x 1).
// CHECK: quad.textproto:0:0: error: dtfm-assign-devices: dp/pp contradict the chosen shape (dtfm.shape: dp 4, pp 1)
module attributes {dtfm.shape = #dtfm.shape<cluster = "quad", global_batch = 8, dp = 4, pp = 1, micro_batch_size = 2, micro_batches = 1, devices_used = 4, iteration_s = 1.0, pipeline_s = 1.0, data_parallel_s = 0.0, devices = ["a", "b", "c", "d"], stages = [["a", "b", "c", "d"]], runners_up = [], idle = [], shapes_scored = 1>, dtfm.cluster = #dtfm.cluster<name = "quad", source = "quad.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "A", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "c", region = "B", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "d", region = "B", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 10.0, 20.0, 1.0, 0.0, 20.0, 10.0, 10.0, 20.0, 0.0, 1.0, 20.0, 10.0, 1.0, 0.0], bandwidth_gbps = [0.0, 8.0, 0.8, 0.8, 8.0, 0.0, 0.8, 0.8, 0.8, 0.8, 0.0, 8.0, 0.8, 0.8, 8.0, 0.0]>} {
  func.func @f() -> tensor<2x8xf32> {
    %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.layer = "l0"} : tensor<4x8xf32>
    %h = dtfm.matmul %x, %w {dtfm.layer = "l0"} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    %r = dtfm.relu %h {dtfm.layer = "l1"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    return %r : tensor<2x8xf32>
  }
}

// -----

// CHECK: quad.textproto:0:0: error: dtfm-assign-devices: dtfm.shape names device 'z', which cluster 'quad' lacks
module attributes {dtfm.shape = #dtfm.shape<cluster = "quad", global_batch = 4, dp = 2, pp = 2, micro_batch_size = 2, micro_batches = 1, devices_used = 4, iteration_s = 1.0, pipeline_s = 1.0, data_parallel_s = 0.0, devices = ["a", "b", "c", "z"], stages = [["a", "b"], ["c", "z"]], runners_up = [], idle = [], shapes_scored = 1>, dtfm.cluster = #dtfm.cluster<name = "quad", source = "quad.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "A", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "c", region = "B", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "d", region = "B", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 10.0, 20.0, 1.0, 0.0, 20.0, 10.0, 10.0, 20.0, 0.0, 1.0, 20.0, 10.0, 1.0, 0.0], bandwidth_gbps = [0.0, 8.0, 0.8, 0.8, 8.0, 0.0, 0.8, 0.8, 0.8, 0.8, 0.0, 8.0, 0.8, 0.8, 8.0, 0.0]>} {
  func.func @f() -> tensor<2x8xf32> {
    %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.layer = "l0"} : tensor<4x8xf32>
    %h = dtfm.matmul %x, %w {dtfm.layer = "l0"} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    %r = dtfm.relu %h {dtfm.layer = "l1"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    return %r : tensor<2x8xf32>
  }
}
