// RUN: dtfm-opt %s -split-input-file -verify-diagnostics
// COM: One case per verifier rule of the dtfm attributes.

// expected-error @+1 {{dtfm.schedule: unknown kind 'interleaved' (expected 1f1b or gpipe)}}
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

// expected-error @+1 {{dtfm.cluster: cluster has no devices}}
module attributes {dtfm.cluster = #dtfm.cluster<name = "none", source = "", devices = [], delay_ms = [], bandwidth_gbps = []>} {
}

// -----

// COM: planner::Cluster::validate's checks, with its texts.
// expected-error @+1 {{dtfm.cluster: link a <-> b: bandwidth must be finite and > 0, got 0.000000 Gbps}}
module attributes {dtfm.cluster = #dtfm.cluster<name = "two", source = "two.textproto", devices = [<name = "a", region = "r", peak_flops = 1.0, efficiency = 1.0, memory_bytes = 0.0>, <name = "b", region = "r", peak_flops = 1.0, efficiency = 1.0, memory_bytes = 0.0>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 0.0, 0.0, 0.0]>} {
}

// -----

// expected-error @+1 {{dtfm.cluster: device a: expected peak_flops >= 0, 0 < efficiency <= 1 and memory_bytes >= 0}}
module attributes {dtfm.cluster = #dtfm.cluster<name = "one", source = "", devices = [<name = "a", region = "r", peak_flops = 1.0, efficiency = 1.5, memory_bytes = 0.0>], delay_ms = [0.0], bandwidth_gbps = [0.0]>} {
}

// -----

// expected-error @+1 {{dtfm.cluster must be a #dtfm.cluster attribute}}
module attributes {dtfm.cluster = "cluster.textproto"} {
}
