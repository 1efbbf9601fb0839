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

