// Whole-module errors of --dtfm-insert-grad-sync, in order: no cluster, no
// assignment, no updates, an assignment naming an unknown device.
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "pair", algorithm = "genetic", seed = 0, dp = 2, pp = 1, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a", "b"]]>} {
  func.func @f() {
    %w = dtfm.param "w" init(zeros) {dtfm.stage = 0 : i64} : tensor<3xf32>
    %dw = dtfm.input "dw" {dtfm.stage = 0 : i64} : tensor<3xf32>
    %u = dtfm.adamw_update %w, %dw {dtfm.stage = 0 : i64, lr = 1.000000e-03 : f64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    return {dtfm.stage = 0 : i64}
  }
}

// -----

module attributes {dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @f() {
    %w = dtfm.param "w" init(zeros) {dtfm.stage = 0 : i64} : tensor<3xf32>
    %dw = dtfm.input "dw" {dtfm.stage = 0 : i64} : tensor<3xf32>
    %u = dtfm.adamw_update %w, %dw {dtfm.stage = 0 : i64, lr = 1.000000e-03 : f64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    return {dtfm.stage = 0 : i64}
  }
}

// -----

module attributes {dtfm.assignment = #dtfm.assignment<cluster = "pair", algorithm = "genetic", seed = 0, dp = 2, pp = 1, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a", "b"]]>, dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @no_updates() {
    return
  }
}

// -----

module attributes {dtfm.assignment = #dtfm.assignment<cluster = "pair", algorithm = "genetic", seed = 0, dp = 2, pp = 1, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a", "z"]]>, dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @f() {
    %w = dtfm.param "w" init(zeros) {dtfm.stage = 0 : i64} : tensor<3xf32>
    %dw = dtfm.input "dw" {dtfm.stage = 0 : i64} : tensor<3xf32>
    %u = dtfm.adamw_update %w, %dw {dtfm.stage = 0 : i64, lr = 1.000000e-03 : f64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    return {dtfm.stage = 0 : i64}
  }
}
