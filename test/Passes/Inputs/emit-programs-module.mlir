// Whole-module errors of --dtfm-emit-stage-programs, in order.
// No cluster.
module attributes {dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 1, peak_in_flight = [1, 1], stages = [<recv = ["B0<1"], compute = ["F0", "B0"], send = ["F0>1"]>, <recv = ["F0<0"], compute = ["F0", "B0"], send = ["B0>0"]>]>} {
  func.func @m() {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2xf32>
    return {dtfm.stage = 0 : i64}
  }
}

// -----

// No schedule.
module attributes {dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "R0", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "R1", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @m() {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2xf32>
    return {dtfm.stage = 0 : i64}
  }
}

// -----

// Two model functions.
module attributes {dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "R0", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "R1", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>, dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 1, peak_in_flight = [1], stages = [<recv = [], compute = ["F0", "B0"], send = []>]>} {
  func.func @m1() {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2xf32>
    return {dtfm.stage = 0 : i64}
  }
  func.func @m2() {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2xf32>
    return {dtfm.stage = 0 : i64}
  }
}

// -----

// An assignment of one stage, a schedule of two.
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "pair", algorithm = "genetic", seed = 0, dp = 1, pp = 1, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a"]]>, dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "R0", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "R1", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>, dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 1, peak_in_flight = [1, 1], stages = [<recv = ["B0<1"], compute = ["F0", "B0"], send = ["F0>1"]>, <recv = ["F0<0"], compute = ["F0", "B0"], send = ["B0>0"]>]>} {
  func.func @m() {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2xf32>
    return {dtfm.stage = 0 : i64}
  }
}

// -----

// Two stages on a one-device cluster.
module attributes {dtfm.cluster = #dtfm.cluster<name = "single", source = "single.textproto", devices = [<name = "a", region = "R0", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0], bandwidth_gbps = [0.0]>, dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 1, peak_in_flight = [1, 1], stages = [<recv = ["B0<1"], compute = ["F0", "B0"], send = ["F0>1"]>, <recv = ["F0<0"], compute = ["F0", "B0"], send = ["B0>0"]>]>} {
  func.func @m() {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2xf32>
    return {dtfm.stage = 0 : i64}
  }
}

// -----

// Uneven replicas: three pipeline counts for a stage of two devices.
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "pair", algorithm = "genetic", seed = 0, dp = 2, pp = 1, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a", "b"]]>, dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "R0", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "R1", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>, dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 2, peak_in_flight = [1], stages = [<recv = [], compute = ["F0", "B0", "F1", "B1"], send = []>], pipeline_micro_batches = [2, 1, 1]>} {
  func.func @m() {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2xf32>
    return {dtfm.stage = 0 : i64}
  }
}
