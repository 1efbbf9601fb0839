// dtfm.assignment errors of --dtfm-insert-send-recv (no op location).

module attributes {dtfm.assignment = #dtfm.assignment<cluster = "pair", algorithm = "genetic", seed = 0, dp = 1, pp = 1, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a"]]>, dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @short() -> tensor<2x3xf32> {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2x3xf32>
    %r = dtfm.relu %x {dtfm.stage = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return {dtfm.stage = 1 : i64} %r : tensor<2x3xf32>
  }
}

// -----


module attributes {dtfm.assignment = #dtfm.assignment<cluster = "pair", algorithm = "genetic", seed = 0, dp = 1, pp = 2, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a"], ["z"]]>, dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @unknown_device() -> tensor<2x3xf32> {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2x3xf32>
    %r = dtfm.relu %x {dtfm.stage = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return {dtfm.stage = 1 : i64} %r : tensor<2x3xf32>
  }
}
