// RUN: dtfm-opt %s -split-input-file | dtfm-opt -split-input-file | FileCheck %s
// RUN: dtfm-opt %s -split-input-file --mlir-print-op-generic | dtfm-opt -split-input-file | FileCheck %s
// COM: The typed planning state round-trips: parse -> print -> parse.

// CHECK-LABEL: module @one_f_one_b
// CHECK-SAME: dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 2, peak_in_flight = [2, 1], stages = [<recv = ["B0<1", "B1<1"], compute = ["F0", "F1", "B0", "B1"], send = ["F0>1", "F1>1"]>, <recv = ["F0<0", "F1<0"], compute = ["F0", "B0", "F1", "B1"], send = ["B0>0", "B1>0"]>]>
module @one_f_one_b attributes {dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 2, peak_in_flight = [2, 1], stages = [<recv = ["B0<1", "B1<1"], compute = ["F0", "F1", "B0", "B1"], send = ["F0>1", "F1>1"]>, <recv = ["F0<0", "F1<0"], compute = ["F0", "B0", "F1", "B1"], send = ["B0>0", "B1>0"]>]>} {
}

// -----

// COM: A stage may be spelled with its own mnemonic; it prints stripped.
// COM: Empty streams print as [].
// CHECK-LABEL: module @gpipe_one_stage
// CHECK-SAME: dtfm.schedule = #dtfm.schedule<kind = "gpipe", micro_batches = 1, peak_in_flight = [1], stages = [<recv = [], compute = ["F0", "B0"], send = []>]>
module @gpipe_one_stage attributes {dtfm.schedule = #dtfm.schedule<kind = "gpipe", micro_batches = 1, peak_in_flight = [1], stages = [#dtfm.streams<recv = [], compute = ["F0", "B0"], send = []>]>} {
}

// -----

// COM: A cluster: devices, then the n x n link matrices row-major. Doubles
// COM: print so that they read back exactly.
// CHECK-LABEL: module @two_devices
// CHECK-SAME: dtfm.cluster = #dtfm.cluster<name = "two", source = "two.textproto", devices = [<name = "a", region = "r0", peak_flops = 1.25e+14, efficiency = 0.5, memory_bytes = 1.6e+10>, <name = "b", region = "r1", peak_flops = 3.12e+14, efficiency = 1.0, memory_bytes = 0.0>], delay_ms = [0.0, 0.1, 0.1, 0.0], bandwidth_gbps = [0.0, 2.5, 2.5, 0.0]>
module @two_devices attributes {dtfm.cluster = #dtfm.cluster<name = "two", source = "two.textproto", devices = [#dtfm.device<name = "a", region = "r0", peak_flops = 1.25e+14, efficiency = 0.5, memory_bytes = 1.6e+10>, <name = "b", region = "r1", peak_flops = 3.12e+14, efficiency = 1.0, memory_bytes = 0.0>], delay_ms = [0.0, 0.1, 0.1, 0.0], bandwidth_gbps = [0.0, 2.5, 2.5, 0.0]>} {
}

// -----

// COM: A value that needs all 17 digits keeps them.
// CHECK-LABEL: module @exact_doubles
// CHECK-SAME: devices = [<name = "a", region = "r", peak_flops = 0.30000000000000004, efficiency = 0.1, memory_bytes = 1.0, memory_bytes_per_second = 1.555e+12>], delay_ms = [0.30000000000000004], bandwidth_gbps = [0.0]>
module @exact_doubles attributes {dtfm.cluster = #dtfm.cluster<name = "one", source = "", devices = [<name = "a", region = "r", peak_flops = 0.30000000000000004, efficiency = 0.1, memory_bytes = 1.0, memory_bytes_per_second = 1.555e12>], delay_ms = [0.30000000000000004], bandwidth_gbps = [0.0]>} {
}

// -----

// COM: A plan shape: runners-up and idle groups print stripped of their
// COM: mnemonics; budget_exhausted prints only when true.
// CHECK-LABEL: module @shape
// CHECK-SAME: dtfm.shape = #dtfm.shape<cluster = "far", global_batch = 32, dp = 2, pp = 2, micro_batch_size = 2, micro_batches = 8, devices_used = 4, iteration_s = 0.0051948038400000006, pipeline_s = 0.004, data_parallel_s = 0.0012, devices = ["a", "b", "c", "d"], stages = {{\[\["a", "b"\], \["c", "d"\]\]}}, runners_up = [<dp = 4, pp = 1, micro_batch_size = 4, micro_batches = 2, devices_used = 4, iteration_s = 0.0056>], idle = [<devices = ["far0"], reason = "region away">], shapes_scored = 25>
module @shape attributes {dtfm.shape = #dtfm.shape<cluster = "far", global_batch = 32, dp = 2, pp = 2, micro_batch_size = 2, micro_batches = 8, devices_used = 4, iteration_s = 0.0051948038400000006, pipeline_s = 0.004, data_parallel_s = 0.0012, devices = ["a", "b", "c", "d"], stages = [["a", "b"], ["c", "d"]], runners_up = [#dtfm.shape_choice<dp = 4, pp = 1, micro_batch_size = 4, micro_batches = 2, devices_used = 4, iteration_s = 0.0056>], idle = [#dtfm.idle_devices<devices = ["far0"], reason = "region away">], shapes_scored = 25, budget_exhausted = false>} {
}

// -----

// CHECK-LABEL: module @shape_budget
// CHECK-SAME: dtfm.shape = #dtfm.shape<cluster = "one", global_batch = 4, dp = 1, pp = 1, micro_batch_size = 4, micro_batches = 1, devices_used = 1, iteration_s = 1.0, pipeline_s = 1.0, data_parallel_s = 0.0, devices = ["a"], stages = {{\[\["a"\]\]}}, runners_up = [], idle = [], shapes_scored = 1, budget_exhausted = true>
module @shape_budget attributes {dtfm.shape = #dtfm.shape<cluster = "one", global_batch = 4, dp = 1, pp = 1, micro_batch_size = 4, micro_batches = 1, devices_used = 1, iteration_s = 1.0, pipeline_s = 1.0, data_parallel_s = 0.0, devices = ["a"], stages = [["a"]], runners_up = [], idle = [], shapes_scored = 1, budget_exhausted = true>} {
}

// -----

// COM: An assignment; iteration_s and stage_bounds (hetero's) print only
// COM: when present.
// CHECK-LABEL: module @assignment
// CHECK-SAME: dtfm.assignment = #dtfm.assignment<cluster = "two-regions", algorithm = "genetic", seed = 0, dp = 2, pp = 2, dp_bytes = 1.0e+06, pp_bytes = 1.0e+08, data_parallel_cost_s = 0.10800000000000001, pipeline_cost_s = 0.162, total_cost_s = 0.27, stages = {{\[\["a0", "b1"\], \["a1", "b0"\]\]}}>
module @assignment attributes {dtfm.assignment = #dtfm.assignment<cluster = "two-regions", algorithm = "genetic", seed = 0, dp = 2, pp = 2, dp_bytes = 1.0e+06, pp_bytes = 1.0e+08, data_parallel_cost_s = 0.10800000000000001, pipeline_cost_s = 0.162, total_cost_s = 0.27, stages = [["a0", "b1"], ["a1", "b0"]]>} {
}

// -----

// CHECK-LABEL: module @hetero_assignment
// CHECK-SAME: dtfm.assignment = #dtfm.assignment<cluster = "mixed-4", algorithm = "hetero", seed = 0, dp = 1, pp = 2, dp_bytes = 518400.0, pp_bytes = 131072.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0012291456, total_cost_s = 0.0012291456, stages = {{\[\["fast0"\], \["slow0"\]\]}}, iteration_s = 0.0017461600160000002, stage_bounds = [0, 5, 12]>
module @hetero_assignment attributes {dtfm.assignment = #dtfm.assignment<stage_bounds = [0, 5, 12], iteration_s = 0.0017461600160000002, cluster = "mixed-4", algorithm = "hetero", seed = 0, dp = 1, pp = 2, dp_bytes = 518400.0, pp_bytes = 131072.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0012291456, total_cost_s = 0.0012291456, stages = [["fast0"], ["slow0"]]>} {
}

// -----

// COM: Uneven replicas: hetero's micro-batches per pipeline, and the
// COM: schedule of the largest with every pipeline's count.
// CHECK-LABEL: module @uneven
// CHECK-SAME: dtfm.assignment = #dtfm.assignment<cluster = "mixed", algorithm = "hetero", seed = 0, dp = 2, pp = 1, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = {{\[\["fast", "slow"\]\]}}, iteration_s = 1.0, stage_bounds = [0, 4], pipeline_micro_batches = [3, 1]>
// CHECK-SAME: dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 3, peak_in_flight = [1], stages = [<recv = [], compute = ["F0", "B0", "F1", "B1", "F2", "B2"], send = []>], pipeline_micro_batches = [3, 1]>
module @uneven attributes {dtfm.assignment = #dtfm.assignment<cluster = "mixed", algorithm = "hetero", seed = 0, dp = 2, pp = 1, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["fast", "slow"]], iteration_s = 1.0, stage_bounds = [0, 4], pipeline_micro_batches = [3, 1]>, dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 3, peak_in_flight = [1], stages = [<recv = [], compute = ["F0", "B0", "F1", "B1", "F2", "B2"], send = []>], pipeline_micro_batches = [3, 1]>} {
}

// -----

// COM: An op's cost, its stage bounds, and a device program's peers, streams
// COM: and parameter shards.
// CHECK-LABEL: module @planned
// CHECK-SAME: dtfm.stages = #dtfm.stages<bounds = [0, 2, 2, 5], stage_seconds = [0.5, 0.0, 1.0e-07], memory_bytes = [1024, 0, 512], bottleneck_s = 0.5>
// CHECK: func.func @gpu1()
// CHECK-SAME: dtfm.param_shards = [#dtfm.param_shard<name = "wte", begin = 0, end = 8192, bytes = 65536>]
// CHECK-SAME: dtfm.peers = #dtfm.peers<prev = "gpu0", next = "">
// CHECK-SAME: dtfm.streams = #dtfm.streams<recv = ["F0<0"], compute = ["F0", "B0"], send = ["B0>0"]>
// CHECK: dtfm.input "x" {dtfm.cost = #dtfm.cost<fwd_flops = 96, bwd_flops = 192, saved_bytes = 128, param_bytes = 0, result_bytes = [64]>}
module @planned attributes {dtfm.stages = #dtfm.stages<bounds = [0, 2, 2, 5], stage_seconds = [0.5, 0.0, 1.0e-07], memory_bytes = [1024, 0, 512], bottleneck_s = 0.5>} {
  func.func @gpu1() attributes {dtfm.param_shards = [#dtfm.param_shard<name = "wte", begin = 0, end = 8192, bytes = 65536>], dtfm.peers = #dtfm.peers<prev = "gpu0", next = "">, dtfm.streams = #dtfm.streams<recv = ["F0<0"], compute = ["F0", "B0"], send = ["B0>0"]>} {
    %x = dtfm.input "x" {dtfm.cost = #dtfm.cost<fwd_flops = 96, bwd_flops = 192, saved_bytes = 128, param_bytes = 0, result_bytes = [64]>} : tensor<16xf32>
    return
  }
}

// -----

// CHECK-LABEL: module @candidates
// CHECK-SAME: dtfm.candidates = #dtfm.candidates<chosen = "genetic", plans = [<algorithm = "hetero", iteration_s = 30.745>, <algorithm = "genetic", iteration_s = 30.708>, <algorithm = "kl", error = "no device layout fits">]>
module @candidates attributes {dtfm.candidates = #dtfm.candidates<chosen = "genetic", plans = [#dtfm.candidate_plan<algorithm = "hetero", iteration_s = 30.745>, #dtfm.candidate_plan<algorithm = "genetic", iteration_s = 30.708>, #dtfm.candidate_plan<algorithm = "kl", error = "no device layout fits">]>} {
}

// -----

// COM: A candidate whose assignment repeated an earlier one's, and the
// COM: later candidates' search budget.
// CHECK-LABEL: module @candidates_twin
// CHECK-SAME: dtfm.candidates = #dtfm.candidates<chosen = "hetero", plans = [<algorithm = "hetero", iteration_s = 2.5>, <algorithm = "rank-order", iteration_s = 3.0>, <algorithm = "op-fence", iteration_s = 3.0, same_as = "rank-order">], search_budget_s = 0.5>
module @candidates_twin attributes {dtfm.candidates = #dtfm.candidates<chosen = "hetero", plans = [<algorithm = "hetero", iteration_s = 2.5>, <algorithm = "rank-order", iteration_s = 3.0>, <algorithm = "op-fence", iteration_s = 3.0, same_as = "rank-order">], search_budget_s = 0.5>} {
}
