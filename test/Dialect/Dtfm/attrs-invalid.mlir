// RUN: dtfm-opt %s -split-input-file -verify-diagnostics
// COM: One case per verifier rule of the dtfm attributes.

// expected-error @+1 {{dtfm.schedule: unknown kind 'interleaved' (expected 1f1b, zb-h1 or gpipe)}}
module attributes {dtfm.schedule = #dtfm.schedule<kind = "interleaved", micro_batches = 1, peak_in_flight = [1], stages = [<recv = [], compute = ["F0", "B0"], send = []>]>} {
}

// -----

// expected-error @+1 {{dtfm.schedule: micro_batches must be positive, got 0}}
module attributes {dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 0, peak_in_flight = [1], stages = [<recv = [], compute = [], send = []>]>} {
}

// -----

// expected-error @+1 {{dtfm.schedule: 1 stages but 2 peak_in_flight values (one per stage)}}
module attributes {dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 1, peak_in_flight = [1, 1], stages = [<recv = [], compute = ["F0", "B0"], send = []>]>} {
}

// -----

// expected-error @+1 {{dtfm.schedule: stage 1 recv: malformed item 'X2<0'}}
module attributes {dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 1, peak_in_flight = [1, 1], stages = [<recv = [], compute = ["F0"], send = ["F0>1"]>, <recv = ["F0<0", "X2<0"], compute = ["F0"], send = []>]>} {
}

// -----

// expected-error @+1 {{dtfm.schedule: stage 0 compute: malformed item 'F0>1'}}
module attributes {dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 1, peak_in_flight = [1], stages = [<recv = [], compute = ["F0>1"], send = []>]>} {
}

// -----

// expected-error @+1 {{dtfm.schedule: stage 0 send: malformed item 'F0<1'}}
module attributes {dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 1, peak_in_flight = [1, 1], stages = [<recv = [], compute = ["F0"], send = ["F0<1"]>, <recv = ["F0<0"], compute = ["F0"], send = []>]>} {
}

// -----

// COM: The peer stage must be one of the schedule's stages.
// expected-error @+1 {{dtfm.schedule: stage 0 send: malformed item 'F0>2'}}
module attributes {dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 1, peak_in_flight = [1, 1], stages = [<recv = [], compute = ["F0"], send = ["F0>2"]>, <recv = ["F0<0"], compute = ["F0"], send = []>]>} {
}

// -----

// expected-error @+1 {{dtfm.schedule must be a #dtfm.schedule attribute}}
module attributes {dtfm.schedule = {kind = "1f1b", micro_batches = 1 : i64}} {
}


// -----

// expected-error @+1 {{dtfm.cluster: 2 devices need 4 delay_ms and bandwidth_gbps values, got 3 and 4}}
module attributes {dtfm.cluster = #dtfm.cluster<name = "two", source = "two.textproto", devices = [<name = "a", region = "r", peak_flops = 1.0, efficiency = 1.0, memory_bytes = 0.0>, <name = "b", region = "r", peak_flops = 1.0, efficiency = 1.0, memory_bytes = 0.0>], delay_ms = [0.0, 1.0, 1.0], bandwidth_gbps = [0.0, 1.0, 1.0, 0.0]>} {
}

// -----

// expected-error @+1 {{dtfm.cluster: link_classes: class 2 is not between 0 and the device count}}
module attributes {dtfm.cluster = #dtfm.cluster<name = "two", source = "", devices = [<name = "a", region = "r", peak_flops = 1.0, efficiency = 1.0, memory_bytes = 0.0>, <name = "b", region = "r", peak_flops = 1.0, efficiency = 1.0, memory_bytes = 0.0>], link_classes = [0, 2], delay_ms = [1.0], bandwidth_gbps = [1.0]>} {
}

// -----

// expected-error @+1 {{dtfm.cluster: links by class need a class below C for each of the 2 devices and C x C links (C = 1), got 1 classes and 1 and 1 links}}
module attributes {dtfm.cluster = #dtfm.cluster<name = "two", source = "", devices = [<name = "a", region = "r", peak_flops = 1.0, efficiency = 1.0, memory_bytes = 0.0>, <name = "b", region = "r", peak_flops = 1.0, efficiency = 1.0, memory_bytes = 0.0>], link_classes = [0], delay_ms = [1.0], bandwidth_gbps = [1.0]>} {
}

// -----

// expected-error @+1 {{dtfm.cluster: links by class need a class below C for each of the 2 devices and C x C links (C = 2), got 2 classes and 1 and 1 links}}
module attributes {dtfm.cluster = #dtfm.cluster<name = "two", source = "", devices = [<name = "a", region = "r", peak_flops = 1.0, efficiency = 1.0, memory_bytes = 0.0>, <name = "b", region = "s", peak_flops = 1.0, efficiency = 1.0, memory_bytes = 0.0>], link_classes = [0, 1], delay_ms = [1.0], bandwidth_gbps = [1.0]>} {
}

// -----

// COM: A class's links are checked as the devices' would be.
// expected-error @+1 {{dtfm.cluster: link a <-> b: bandwidth must be finite and > 0, got 0.000000 Gbps}}
module attributes {dtfm.cluster = #dtfm.cluster<name = "two", source = "", devices = [<name = "a", region = "r", peak_flops = 1.0, efficiency = 1.0, memory_bytes = 0.0>, <name = "b", region = "r", peak_flops = 1.0, efficiency = 1.0, memory_bytes = 0.0>], link_classes = [0, 0], delay_ms = [1.0], bandwidth_gbps = [0.0]>} {
}

// -----

// expected-error @+1 {{dtfm.cluster: cluster has no devices}}
module attributes {dtfm.cluster = #dtfm.cluster<name = "none", source = "", devices = [], delay_ms = [], bandwidth_gbps = []>} {
}

// -----

// COM: planner::Cluster::validate's checks, with its texts.
// expected-error @+1 {{dtfm.cluster: link a <-> b: bandwidth must be finite and > 0, got 0.000000 Gbps}}
module attributes {dtfm.cluster = #dtfm.cluster<name = "two", source = "two.textproto", devices = [<name = "a", region = "r", peak_flops = 1.0, efficiency = 1.0, memory_bytes = 0.0>, <name = "b", region = "r", peak_flops = 1.0, efficiency = 1.0, memory_bytes = 0.0>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 0.0, 0.0, 0.0]>} {
}

// -----

// expected-error @+1 {{dtfm.cluster: device a: expected peak_flops >= 0, 0 < efficiency <= 1, memory_bytes >= 0 and memory_bytes_per_second >= 0}}
module attributes {dtfm.cluster = #dtfm.cluster<name = "one", source = "", devices = [<name = "a", region = "r", peak_flops = 1.0, efficiency = 1.5, memory_bytes = 0.0>], delay_ms = [0.0], bandwidth_gbps = [0.0]>} {
}

// -----

// expected-error @+1 {{dtfm.cluster: device a: expected peak_flops >= 0, 0 < efficiency <= 1, memory_bytes >= 0 and memory_bytes_per_second >= 0}}
module attributes {dtfm.cluster = #dtfm.cluster<name = "one", source = "", devices = [<name = "a", region = "r", peak_flops = 1.0, efficiency = 1.0, memory_bytes = 0.0, memory_bytes_per_second = -1.0>], delay_ms = [0.0], bandwidth_gbps = [0.0]>} {
}

// -----

// expected-error @+1 {{dtfm.cluster must be a #dtfm.cluster attribute}}
module attributes {dtfm.cluster = "cluster.textproto"} {
}

// -----

// expected-error @+1 {{dtfm.shape: dp, pp, micro_batch_size and micro_batches must be positive, got 0, 1, 4, 2}}
module attributes {dtfm.shape = #dtfm.shape<cluster = "c", global_batch = 8, dp = 0, pp = 1, micro_batch_size = 4, micro_batches = 2, devices_used = 0, iteration_s = 1.0, pipeline_s = 1.0, data_parallel_s = 0.0, devices = [], stages = [[]], runners_up = [], idle = [], shapes_scored = 1>} {
}

// -----

// expected-error @+1 {{dtfm.shape: dp 2 x pp 1 != devices_used 1}}
module attributes {dtfm.shape = #dtfm.shape<cluster = "c", global_batch = 8, dp = 2, pp = 1, micro_batch_size = 2, micro_batches = 2, devices_used = 1, iteration_s = 1.0, pipeline_s = 1.0, data_parallel_s = 0.0, devices = ["a"], stages = [["a"]], runners_up = [], idle = [], shapes_scored = 1>} {
}

// -----

// expected-error @+1 {{dtfm.shape: 1 devices but devices_used 2}}
module attributes {dtfm.shape = #dtfm.shape<cluster = "c", global_batch = 8, dp = 2, pp = 1, micro_batch_size = 2, micro_batches = 2, devices_used = 2, iteration_s = 1.0, pipeline_s = 1.0, data_parallel_s = 0.0, devices = ["a"], stages = [["a", "a"]], runners_up = [], idle = [], shapes_scored = 1>} {
}

// -----

// expected-error @+1 {{dtfm.shape: dp 2 x micro_batch_size 2 x micro_batches 2 != global_batch 6}}
module attributes {dtfm.shape = #dtfm.shape<cluster = "c", global_batch = 6, dp = 2, pp = 1, micro_batch_size = 2, micro_batches = 2, devices_used = 2, iteration_s = 1.0, pipeline_s = 1.0, data_parallel_s = 0.0, devices = ["a", "b"], stages = [["a", "b"]], runners_up = [], idle = [], shapes_scored = 1>} {
}

// -----

// expected-error @+1 {{dtfm.shape: device 'a' is listed twice}}
module attributes {dtfm.shape = #dtfm.shape<cluster = "c", global_batch = 8, dp = 2, pp = 1, micro_batch_size = 2, micro_batches = 2, devices_used = 2, iteration_s = 1.0, pipeline_s = 1.0, data_parallel_s = 0.0, devices = ["a", "a"], stages = [["a", "a"]], runners_up = [], idle = [], shapes_scored = 1>} {
}

// -----

// expected-error @+1 {{dtfm.shape: bound_s -1 is not a time in seconds (>= 0)}}
module attributes {dtfm.shape = #dtfm.shape<cluster = "c", global_batch = 4, dp = 1, pp = 1, micro_batch_size = 2, micro_batches = 2, devices_used = 1, iteration_s = 1.0, pipeline_s = 1.0, data_parallel_s = 0.0, devices = ["a"], stages = [["a"]], runners_up = [], idle = [], shapes_scored = 1, bound_s = -1.0>} {
}

// -----

// expected-error @+1 {{dtfm.shape: unknown schedule 'zb-h2' (expected 1f1b, zb-h1 or gpipe)}}
module attributes {dtfm.shape = #dtfm.shape<cluster = "c", global_batch = 4, dp = 1, pp = 1, micro_batch_size = 2, micro_batches = 2, devices_used = 1, iteration_s = 1.0, pipeline_s = 1.0, data_parallel_s = 0.0, devices = ["a"], stages = [["a"]], runners_up = [], idle = [], shapes_scored = 1, schedule = "zb-h2">} {
}

// -----

// expected-error @+1 {{dtfm.shape: 1 stages but pp 2}}
module attributes {dtfm.shape = #dtfm.shape<cluster = "c", global_batch = 4, dp = 1, pp = 2, micro_batch_size = 2, micro_batches = 2, devices_used = 2, iteration_s = 1.0, pipeline_s = 1.0, data_parallel_s = 0.0, devices = ["a", "b"], stages = [["a", "b"]], runners_up = [], idle = [], shapes_scored = 1>} {
}

// -----

// expected-error @+1 {{dtfm.shape: stage 1 has 2 devices but dp 1}}
module attributes {dtfm.shape = #dtfm.shape<cluster = "c", global_batch = 4, dp = 1, pp = 2, micro_batch_size = 2, micro_batches = 2, devices_used = 2, iteration_s = 1.0, pipeline_s = 1.0, data_parallel_s = 0.0, devices = ["a", "b"], stages = [["a"], ["a", "b"]], runners_up = [], idle = [], shapes_scored = 1>} {
}

// -----

// expected-error @+1 {{dtfm.shape: stage 1 holds "c", not one of the shape's devices}}
module attributes {dtfm.shape = #dtfm.shape<cluster = "c", global_batch = 4, dp = 1, pp = 2, micro_batch_size = 2, micro_batches = 2, devices_used = 2, iteration_s = 1.0, pipeline_s = 1.0, data_parallel_s = 0.0, devices = ["a", "b"], stages = [["a"], ["c"]], runners_up = [], idle = [], shapes_scored = 1>} {
}

// -----

// COM: A runner-up verifies as it is parsed; the shape then fails to parse.
// expected-error @+2 {{dtfm.shape runner-up: dp 2 x pp 2 != devices_used 2}}
// expected-error @+1 {{failed to parse Dtfm_ShapeAttr parameter 'runners_up' which is to be a `::llvm::ArrayRef<::mlir::dtfm::ShapeChoiceAttr>`}}
module attributes {dtfm.shape = #dtfm.shape<cluster = "c", global_batch = 4, dp = 1, pp = 1, micro_batch_size = 2, micro_batches = 2, devices_used = 1, iteration_s = 1.0, pipeline_s = 1.0, data_parallel_s = 0.0, devices = ["a"], stages = [["a"]], runners_up = [<dp = 2, pp = 2, micro_batch_size = 1, micro_batches = 2, devices_used = 2, iteration_s = 2.0>], idle = [], shapes_scored = 2>} {
}

// -----

// expected-error @+1 {{dtfm.shape must be a #dtfm.shape attribute}}
module attributes {dtfm.shape = {dp = 1 : i64}} {
}

// -----

// expected-error @+1 {{dtfm.assignment: dp and pp must be positive, got 1 and 0}}
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "c", algorithm = "genetic", seed = 0, dp = 1, pp = 0, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = []>} {
}

// -----

// expected-error @+1 {{dtfm.assignment: 1 stages but pp 2}}
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "c", algorithm = "genetic", seed = 0, dp = 1, pp = 2, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a"]]>} {
}

// -----

// expected-error @+1 {{dtfm.assignment: stage 1 has 1 devices but dp 2}}
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "c", algorithm = "genetic", seed = 0, dp = 2, pp = 2, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a", "b"], ["c"]]>} {
}

// -----

// expected-error @+1 {{dtfm.assignment: stage 0 holds 1 : i64, not a device name}}
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "c", algorithm = "genetic", seed = 0, dp = 1, pp = 1, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [[1]]>} {
}

// -----

// expected-error @+1 {{dtfm.assignment: 2 stage bounds but pp 2 needs 3}}
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "c", algorithm = "genetic", seed = 0, dp = 1, pp = 2, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a"], ["b"]], iteration_s = 1.0, stage_bounds = [0, 12]>} {
}

// -----

// expected-error @+1 {{dtfm.assignment must be a #dtfm.assignment attribute}}
module attributes {dtfm.assignment = {dp = 1 : i64}} {
}

// -----

// expected-error @+1 {{dtfm.cost: saved_bytes must be non-negative, got -8}}
module attributes {dtfm.cost = #dtfm.cost<fwd_flops = 0, bwd_flops = 0, saved_bytes = -8, param_bytes = 0, result_bytes = []>} {
}

// -----

// expected-error @+1 {{dtfm.cost: result_bytes must be non-negative, got -1}}
module attributes {dtfm.cost = #dtfm.cost<fwd_flops = 0, bwd_flops = 0, saved_bytes = 0, param_bytes = 0, result_bytes = [4, -1]>} {
}

// -----

// expected-error @+1 {{dtfm.cost: bwd_bytes must be non-negative, got -2}}
module attributes {dtfm.cost = #dtfm.cost<fwd_flops = 0, bwd_flops = 0, saved_bytes = 0, param_bytes = 0, result_bytes = [], fwd_bytes = 4, bwd_bytes = -2>} {
}

// -----

// expected-error @+1 {{dtfm.cost must be a #dtfm.cost attribute}}
module attributes {dtfm.cost = {fwd_flops = 0 : i64}} {
}

// -----

// expected-error @+1 {{dtfm.stages: bounds must start at 0 and hold at least 2 values}}
module attributes {dtfm.stages = #dtfm.stages<bounds = [1, 2], stage_seconds = [0.0], memory_bytes = [0], bottleneck_s = 0.0>} {
}

// -----

// expected-error @+1 {{dtfm.stages: bounds must not decrease, got 3 then 2}}
module attributes {dtfm.stages = #dtfm.stages<bounds = [0, 3, 2], stage_seconds = [0.0, 0.0], memory_bytes = [0, 0], bottleneck_s = 0.0>} {
}

// -----

// expected-error @+1 {{dtfm.stages: 2 stages need 2 stage_seconds and memory_bytes values, got 1 and 2}}
module attributes {dtfm.stages = #dtfm.stages<bounds = [0, 1, 2], stage_seconds = [0.0], memory_bytes = [0, 0], bottleneck_s = 0.0>} {
}

// -----

// expected-error @+1 {{dtfm.stages: stage 1 has a negative time or memory}}
module attributes {dtfm.stages = #dtfm.stages<bounds = [0, 1, 2], stage_seconds = [0.0, 0.0], memory_bytes = [0, -1], bottleneck_s = 0.0>} {
}

// -----

// expected-error @+1 {{dtfm.stages: bottleneck_s must be non-negative}}
module attributes {dtfm.stages = #dtfm.stages<bounds = [0, 1], stage_seconds = [0.0], memory_bytes = [0], bottleneck_s = -1.0>} {
}

// -----

// expected-error @+1 {{dtfm.stages must be a #dtfm.stages attribute}}
module attributes {dtfm.stages = {bounds = array<i64: 0, 1>}} {
}

// -----

// expected-error @+1 {{dtfm.param_shard 'wte': expected 0 <= begin <= end and bytes >= 0, got [8, 4) and 64 bytes}}
module attributes {dtfm.param_shards = [#dtfm.param_shard<name = "wte", begin = 8, end = 4, bytes = 64>]} {
}

// -----

// expected-error @+1 {{dtfm.param_shards must be an array of #dtfm.param_shard attributes}}
module attributes {dtfm.param_shards = [{name = "wte", begin = 0 : i64, end = 4 : i64, bytes = 16 : i64}]} {
}

// -----

// expected-error @+1 {{dtfm.peers must be a #dtfm.peers attribute}}
module attributes {dtfm.peers = {prev = "a", next = "b"}} {
}

// -----

// expected-error @+1 {{dtfm.streams must be a #dtfm.streams attribute}}
module attributes {dtfm.streams = {recv = [], compute = ["F0"], send = []}} {
}

// -----

// expected-error @+1 {{dtfm.assignment: pipeline_micro_batches needs dp (2) positive counts, got 1}}
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "c", algorithm = "hetero", seed = 0, dp = 2, pp = 1, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a", "b"]], iteration_s = 1.0, stage_bounds = [0, 2], pipeline_micro_batches = [4]>} {
}

// -----

// expected-error @+1 {{dtfm.assignment: pipeline_micro_batches needs dp (2) positive counts, got 2}}
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "c", algorithm = "hetero", seed = 0, dp = 2, pp = 1, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a", "b"]], iteration_s = 1.0, stage_bounds = [0, 2], pipeline_micro_batches = [4, 0]>} {
}

// -----

// expected-error @+1 {{dtfm.schedule: pipeline_micro_batches must be positive with micro_batches (2) the largest}}
module attributes {dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 2, peak_in_flight = [1], stages = [<recv = [], compute = ["F0", "B0", "F1", "B1"], send = []>], pipeline_micro_batches = [3, 1]>} {
}

// -----

// COM: A candidate verifies as it is parsed; the list then fails to parse.
// expected-error @+2 {{dtfm.candidate_plan 'kl': needs iteration_s or error, not both}}
// expected-error @+1 {{failed to parse Dtfm_CandidatesAttr parameter 'plans' which is to be a `::llvm::ArrayRef<::mlir::dtfm::CandidatePlanAttr>`}}
module attributes {dtfm.candidates = #dtfm.candidates<chosen = "hetero", plans = [<algorithm = "hetero", iteration_s = 1.0>, <algorithm = "kl">]>} {
}

// -----

// COM: A candidate verifies as it is parsed; the list then fails to parse.
// expected-error @+2 {{dtfm.candidate_plan 'kl': needs iteration_s or error, not both}}
// expected-error @+1 {{failed to parse Dtfm_CandidatesAttr parameter 'plans' which is to be a `::llvm::ArrayRef<::mlir::dtfm::CandidatePlanAttr>`}}
module attributes {dtfm.candidates = #dtfm.candidates<chosen = "hetero", plans = [<algorithm = "hetero", iteration_s = 1.0>, <algorithm = "kl", iteration_s = 2.0, error = "x">]>} {
}

// -----

// COM: A candidate verifies as it is parsed; the list then fails to parse.
// expected-error @+2 {{dtfm.candidate_plan 'kl': iteration_s must be positive and finite, got nan}}
// expected-error @+1 {{failed to parse Dtfm_CandidatesAttr parameter 'plans' which is to be a `::llvm::ArrayRef<::mlir::dtfm::CandidatePlanAttr>`}}
module attributes {dtfm.candidates = #dtfm.candidates<chosen = "hetero", plans = [<algorithm = "hetero", iteration_s = 1.0>, <algorithm = "kl", iteration_s = 0x7FF8000000000000>]>} {
}

// -----

// COM: A candidate verifies as it is parsed; the list then fails to parse.
// expected-error @+2 {{dtfm.candidate_plan: algorithm must not be empty}}
// expected-error @+1 {{failed to parse Dtfm_CandidatesAttr parameter 'plans' which is to be a `::llvm::ArrayRef<::mlir::dtfm::CandidatePlanAttr>`}}
module attributes {dtfm.candidates = #dtfm.candidates<chosen = "hetero", plans = [<algorithm = "", iteration_s = 1.0>]>} {
}

// -----

// expected-error @+1 {{dtfm.candidates: algorithm 'hetero' is listed twice}}
module attributes {dtfm.candidates = #dtfm.candidates<chosen = "hetero", plans = [<algorithm = "hetero", iteration_s = 1.0>, <algorithm = "hetero", iteration_s = 2.0>]>} {
}

// -----

// expected-error @+1 {{dtfm.candidates: chosen 'kl' is not a simulated candidate}}
module attributes {dtfm.candidates = #dtfm.candidates<chosen = "kl", plans = [<algorithm = "hetero", iteration_s = 1.0>, <algorithm = "kl", error = "no layout">]>} {
}

// -----

// expected-error @+1 {{dtfm.candidates: chosen 'hetero' (2.000000e+00 s) is slower than another (1.000000e+00 s)}}
module attributes {dtfm.candidates = #dtfm.candidates<chosen = "hetero", plans = [<algorithm = "hetero", iteration_s = 2.0>, <algorithm = "kl", iteration_s = 1.0>]>} {
}

// -----

// COM: same_as names a candidate listed earlier, of the same time.
// expected-error @+1 {{dtfm.candidates: 'kl' is the same as 'op-fence', which is not an earlier candidate of the same time}}
module attributes {dtfm.candidates = #dtfm.candidates<chosen = "hetero", plans = [<algorithm = "hetero", iteration_s = 1.0>, <algorithm = "kl", iteration_s = 2.0, same_as = "op-fence">, <algorithm = "op-fence", iteration_s = 2.0>]>} {
}

// -----

// expected-error @+1 {{dtfm.candidates: 'kl' is the same as 'rank-order', which is not an earlier candidate of the same time}}
module attributes {dtfm.candidates = #dtfm.candidates<chosen = "hetero", plans = [<algorithm = "hetero", iteration_s = 1.0>, <algorithm = "rank-order", iteration_s = 2.0>, <algorithm = "kl", iteration_s = 3.0, same_as = "rank-order">]>} {
}

// -----

// COM: A candidate verifies as it is parsed; the list then fails to parse.
// expected-error @+2 {{dtfm.candidate_plan 'kl': same_as needs the shared iteration_s}}
// expected-error @+1 {{failed to parse Dtfm_CandidatesAttr parameter 'plans' which is to be a `::llvm::ArrayRef<::mlir::dtfm::CandidatePlanAttr>`}}
module attributes {dtfm.candidates = #dtfm.candidates<chosen = "hetero", plans = [<algorithm = "hetero", iteration_s = 1.0>, <algorithm = "kl", error = "x", same_as = "hetero">]>} {
}

// -----

// expected-error @+1 {{dtfm.candidates: search_budget_s must be positive and finite, got -1.000000e+00}}
module attributes {dtfm.candidates = #dtfm.candidates<chosen = "hetero", plans = [<algorithm = "hetero", iteration_s = 1.0>], search_budget_s = -1.0>} {
}

// -----

// expected-error @+1 {{dtfm.candidates must be a #dtfm.candidates attribute}}
module attributes {dtfm.candidates = "hetero"} {
}
