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
