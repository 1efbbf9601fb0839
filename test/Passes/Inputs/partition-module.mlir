// Whole-module errors of --dtfm-partition-stages, in order.
// No cluster.
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

// Every split needs more than 100 B on some device (w alone: 4 * 128).
module attributes {dtfm.cluster = #dtfm.cluster<name = "tiny", source = "tiny.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 100.0>, <name = "b", region = "B", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 100.0>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @f() -> tensor<2x8xf32> {
    %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.layer = "l0"} : tensor<4x8xf32>
    %h = dtfm.matmul %x, %w {dtfm.layer = "l0"} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    %r = dtfm.relu %h {dtfm.layer = "l1"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    return %r : tensor<2x8xf32>
  }
}

// -----

// An assignment naming a device the cluster lacks.
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "pair", algorithm = "genetic", seed = 0, dp = 1, pp = 2, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a"], ["z"]]>, dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @f() -> tensor<2x8xf32> {
    %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.layer = "l0"} : tensor<4x8xf32>
    %h = dtfm.matmul %x, %w {dtfm.layer = "l0"} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    %r = dtfm.relu %h {dtfm.layer = "l1"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    return %r : tensor<2x8xf32>
  }
}

// -----

// hetero stage bounds that do not cover the two blocks.
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "pair", algorithm = "hetero", seed = 0, dp = 1, pp = 2, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a"], ["b"]], iteration_s = 1.0, stage_bounds = [0, 1, 3]>, dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @f() -> tensor<2x8xf32> {
    %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.layer = "l0"} : tensor<4x8xf32>
    %h = dtfm.matmul %x, %w {dtfm.layer = "l0"} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    %r = dtfm.relu %h {dtfm.layer = "l1"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    return %r : tensor<2x8xf32>
  }
}
