// RUN: dtfm-opt %s -split-input-file --dtfm-print-plan-summary | FileCheck %s

// COM: The dtfm.shape record printed as a table (times with 4 decimals),
// COM: then the module unchanged.

// COM: Two stages of two devices, two runner-ups, two idle groups, and a
// COM: search that ran out of budget.
// CHECK-LABEL: === dtfm plan shape ===
// CHECK-NEXT: cluster six, global batch 32 samples; 17 shapes scored (search budget reached)
// CHECK-NEXT: {{^}}           dp     pp     micro-batch  devices  iteration_s
// CHECK-NEXT: {{^}}chosen          2      2      4 x 4             4       1.2500
// CHECK-NEXT: {{^}}runner-up       1      4      8 x 4             4       1.5000
// CHECK-NEXT: {{^}}runner-up       4      1      2 x 4             4       2.0000
// CHECK-NEXT: predicted: pipeline 1.0000 s + gradient sync 0.2500 s
// CHECK-NEXT: stage  0: a b
// CHECK-NEXT: stage  1: c d
// CHECK-NEXT: idle: e -- too slow
// CHECK-NEXT: idle: f -- too far
// CHECK-NEXT: module attributes {dtfm.shape = #dtfm.shape<cluster = "six",
// CHECK-NEXT: func.func @m()
module attributes {dtfm.shape = #dtfm.shape<cluster = "six", global_batch = 32, dp = 2, pp = 2, micro_batch_size = 4, micro_batches = 4, devices_used = 4, iteration_s = 1.25, pipeline_s = 1.0, data_parallel_s = 0.25, devices = ["a", "b", "c", "d"], stages = [["a", "b"], ["c", "d"]], runners_up = [<dp = 1, pp = 4, micro_batch_size = 8, micro_batches = 4, devices_used = 4, iteration_s = 1.5>, <dp = 4, pp = 1, micro_batch_size = 2, micro_batches = 4, devices_used = 4, iteration_s = 2.0>], idle = [<devices = ["e"], reason = "too slow">, <devices = ["f"], reason = "too far">], shapes_scored = 17, budget_exhausted = true>} {
  func.func @m() {
    return
  }
}

// -----

// COM: One device, nothing else scored: no runner-ups, "idle: none", no
// COM: budget note.
// CHECK-LABEL: === dtfm plan shape ===
// CHECK-NEXT: cluster one, global batch 4 samples; 1 shapes scored{{$}}
// CHECK-NEXT: dp
// CHECK-NEXT: {{^}}chosen          1      1      2 x 2             1       0.5000
// CHECK-NEXT: predicted: pipeline 0.5000 s + gradient sync 0.0000 s
// CHECK-NEXT: stage  0: a
// CHECK-NEXT: idle: none
// CHECK-NEXT: module attributes
module attributes {dtfm.shape = #dtfm.shape<cluster = "one", global_batch = 4, dp = 1, pp = 1, micro_batch_size = 2, micro_batches = 2, devices_used = 1, iteration_s = 0.5, pipeline_s = 0.5, data_parallel_s = 0.0, devices = ["a"], stages = [["a"]], runners_up = [], idle = [], shapes_scored = 1>} {
}

// -----

// COM: With the lower bound on any plan (bound_s): the chosen plan against
// COM: it, 0.5 / 0.4 = 1.25x.
// CHECK-LABEL: === dtfm plan shape ===
// CHECK: predicted: pipeline 0.5000 s + gradient sync 0.0000 s
// CHECK-NEXT: lower bound: 0.4000 s for any plan of this model on this cluster; the chosen plan is within 1.25x of it
// CHECK-NEXT: stage  0: a
module attributes {dtfm.shape = #dtfm.shape<cluster = "one", global_batch = 4, dp = 1, pp = 1, micro_batch_size = 2, micro_batches = 2, devices_used = 1, iteration_s = 0.5, pipeline_s = 0.5, data_parallel_s = 0.0, devices = ["a"], stages = [["a"]], runners_up = [], idle = [], shapes_scored = 1, bound_s = 0.4>} {
}

// -----

// COM: With gradient syncs (--dtfm-insert-grad-sync), one line per
// COM: data-parallel stage. Stage 0's backward: relu of 262144 elements,
// COM: 262144 FLOPs at 1e6 FLOP/s = 0.262144 s. Two 1 MiB buckets of
// COM: 0.0028388608 s each (pair link: 1 ms, 10 Gbps), complete at half
// COM: the backward (0.131072 s) and at its end: the first is done long
// COM: before the backward ends, the second leaves 0.0028388608 s after
// COM: it. As one 2 MiB bucket: 2 * (1e-3 + 8 * 1048576 / 1e10) =
// COM: 0.0036777216 s, all after the backward.
// CHECK-LABEL: === dtfm plan shape ===
// CHECK: idle: none
// CHECK-NEXT: gradient sync stage 0: 2 devices, ps, 2.1 MB in 2 buckets: 0.0028 s after the last backward (one bucket: 0.0037 s)
// CHECK-NEXT: module attributes
module attributes {dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+06, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+06, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>, dtfm.shape = #dtfm.shape<cluster = "pair", global_batch = 4, dp = 2, pp = 1, micro_batch_size = 2, micro_batches = 1, devices_used = 2, iteration_s = 0.5, pipeline_s = 0.5, data_parallel_s = 0.0, devices = ["a", "b"], stages = [["a", "b"]], runners_up = [], idle = [], shapes_scored = 1>} {
  func.func @m() {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<262144xf32>
    %g = dtfm.relu %x {dtfm.stage = 0 : i64} : (tensor<262144xf32>) -> tensor<262144xf32>
    %s0 = dtfm.grad_sync %x {algorithm = "ps", bytes = 1048576 : i64, dtfm.bucket = 0 : i64, dtfm.bucket_ready = 5.000000e-01 : f64, dtfm.bucket_seconds = 0.0028388608 : f64, dtfm.stage = 0 : i64, group = ["a", "b"], seconds = 0.0028388608 : f64} : (tensor<262144xf32>) -> tensor<262144xf32>
    %s1 = dtfm.grad_sync %g {algorithm = "ps", bytes = 1048576 : i64, dtfm.bucket = 1 : i64, dtfm.bucket_ready = 1.000000e+00 : f64, dtfm.bucket_seconds = 0.0028388608 : f64, dtfm.stage = 0 : i64, group = ["a", "b"], seconds = 0.0028388608 : f64} : (tensor<262144xf32>) -> tensor<262144xf32>
    return
  }
}

// -----

// COM: Local steps every 4 (dtfm.sync_every): the same 2 MiB exchanged as
// COM: parameters every 4 steps, 0.0036777216 s each (2 * (1e-3 + 8 *
// COM: 1048576 / 1e10)), a quarter of it a step on average.
// CHECK-LABEL: === dtfm plan shape ===
// CHECK: idle: none
// CHECK-NEXT: gradient sync stage 0: 2 devices, ps, 2.1 MB of parameters every 4 steps: 0.0037 s each, 0.0009 s a step on average
// CHECK-NEXT: module attributes
module attributes {dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+06, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+06, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>, dtfm.shape = #dtfm.shape<cluster = "pair", global_batch = 4, dp = 2, pp = 1, micro_batch_size = 2, micro_batches = 1, devices_used = 2, iteration_s = 0.5, pipeline_s = 0.5, data_parallel_s = 0.0, devices = ["a", "b"], stages = [["a", "b"]], runners_up = [], idle = [], shapes_scored = 1>} {
  func.func @m() {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<262144xf32>
    %g = dtfm.relu %x {dtfm.stage = 0 : i64} : (tensor<262144xf32>) -> tensor<262144xf32>
    %s0 = dtfm.grad_sync %x {algorithm = "ps", bytes = 1048576 : i64, dtfm.bucket = 0 : i64, dtfm.bucket_ready = 1.000000e+00 : f64, dtfm.bucket_seconds = 0.0036777216 : f64, dtfm.stage = 0 : i64, dtfm.sync_every = 4 : i64, group = ["a", "b"], seconds = 0.0028388608 : f64} : (tensor<262144xf32>) -> tensor<262144xf32>
    %s1 = dtfm.grad_sync %g {algorithm = "ps", bytes = 1048576 : i64, dtfm.bucket = 0 : i64, dtfm.bucket_ready = 1.000000e+00 : f64, dtfm.bucket_seconds = 0.0036777216 : f64, dtfm.stage = 0 : i64, dtfm.sync_every = 4 : i64, group = ["a", "b"], seconds = 0.0028388608 : f64} : (tensor<262144xf32>) -> tensor<262144xf32>
    return
  }
}

// -----

// COM: Top-k with R = 100 (dtfm.compression = "topk"): the 2 MiB of f32
// COM: gradients keep 5243 of 524288 values, 4 + 8 * 5243 = 41948 B, sent
// COM: once around a ring of two: 1e-3 + 8 * 41948 / 1e10 = 0.0010335584 s.
// CHECK-LABEL: === dtfm plan shape ===
// CHECK: idle: none
// CHECK-NEXT: gradient sync stage 0: 2 devices, ps topk:100 after 20 dense steps, 2.1 MB in 1 bucket: 0.0010 s after the last backward (one bucket: 0.0010 s)
// CHECK-NEXT: module attributes
module attributes {dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+06, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+06, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>, dtfm.shape = #dtfm.shape<cluster = "pair", global_batch = 4, dp = 2, pp = 1, micro_batch_size = 2, micro_batches = 1, devices_used = 2, iteration_s = 0.5, pipeline_s = 0.5, data_parallel_s = 0.0, devices = ["a", "b"], stages = [["a", "b"]], runners_up = [], idle = [], shapes_scored = 1>} {
  func.func @m() {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<524288xf32>
    %s0 = dtfm.grad_sync %x {algorithm = "ps", bytes = 2097152 : i64, dtfm.bucket = 0 : i64, dtfm.bucket_ready = 1.000000e+00 : f64, dtfm.bucket_seconds = 0.0010335584 : f64, dtfm.compression = "topk", dtfm.stage = 0 : i64, dtfm.topk_ratio = 1.000000e+02 : f64, dtfm.topk_warmup = 20 : i64, group = ["a", "b"], seconds = 0.0010335584 : f64} : (tensor<524288xf32>) -> tensor<524288xf32>
    return
  }
}
