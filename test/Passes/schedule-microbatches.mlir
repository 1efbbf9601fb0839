// RUN: dtfm-opt %s -split-input-file --dtfm-schedule-microbatches="schedule=1f1b micro-batches=2" | FileCheck %s
// RUN: dtfm-opt %s -split-input-file --dtfm-schedule-microbatches="schedule=gpipe micro-batches=2" | FileCheck %s --check-prefix=GPIPE

// COM: A two-stage training graph after --dtfm-insert-send-recv. Every op
// COM: gets its slot (recv / send / compute) and phase: a transfer takes the
// COM: phase of the value it moves (tag 1 carries a gradient: bwd on both
// COM: ends), updates are opt.
// COM: 1F1B, 2 stages x 2 micro-batches: stage 0 runs F0 F1 before its
// COM: first backward (2 in flight), stage 1 alternates (1 in flight).
// CHECK-LABEL: module attributes
// CHECK-SAME: dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 2, peak_in_flight = [2, 1], stages = [<recv = ["B0<1", "B1<1"], compute = ["F0", "F1", "B0", "B1"], send = ["F0>1", "F1>1"]>, <recv = ["F0<0", "F1<0"], compute = ["F0", "B0", "F1", "B1"], send = ["B0>0", "B1>0"]>]>
// CHECK: dtfm.input "x" {dtfm.phase = "fwd", dtfm.slot = "compute", dtfm.stage = 0 : i64}
// CHECK: dtfm.param "w" {{.*}}{dtfm.phase = "fwd", dtfm.slot = "compute", dtfm.stage = 0 : i64}
// CHECK: dtfm.matmul {{.*}}{dtfm.phase = "fwd", dtfm.slot = "compute", dtfm.stage = 0 : i64}
// CHECK: dtfm.send {{.*}}dtfm.phase = "fwd", dtfm.slot = "send", dtfm.stage = 0 : i64, {{.*}}tag = 0 : i64}
// CHECK: dtfm.recv {{.*}}dtfm.phase = "fwd", dtfm.slot = "recv", dtfm.stage = 1 : i64, {{.*}}tag = 0 : i64}
// CHECK: dtfm.cross_entropy {{.*}}{dtfm.phase = "fwd", dtfm.slot = "compute", dtfm.stage = 1 : i64}
// CHECK: dtfm.backward "dtfm.cross_entropy"{{.*}}dtfm.phase = "bwd", dtfm.slot = "compute", dtfm.stage = 1 : i64
// CHECK: dtfm.send {{.*}}dtfm.phase = "bwd", dtfm.slot = "send", dtfm.stage = 1 : i64, {{.*}}tag = 1 : i64}
// CHECK: dtfm.recv {{.*}}dtfm.phase = "bwd", dtfm.slot = "recv", dtfm.stage = 0 : i64, {{.*}}tag = 1 : i64}
// CHECK: dtfm.backward "dtfm.matmul"{{.*}}dtfm.phase = "bwd", dtfm.slot = "compute", dtfm.stage = 0 : i64
// CHECK: dtfm.adamw_update {{.*}}{dtfm.phase = "opt", dtfm.slot = "compute", dtfm.stage = 0 : i64, lr = 1.000000e-03 : f64}
// CHECK: return {dtfm.phase = "fwd", dtfm.slot = "compute", dtfm.stage = 1 : i64}
// COM: GPipe: all forwards, then the backwards in reverse; 2 in flight on
// COM: both stages.
// GPIPE-LABEL: module attributes
// GPIPE-SAME: dtfm.schedule = #dtfm.schedule<kind = "gpipe", micro_batches = 2, peak_in_flight = [2, 2], stages = [<recv = ["B1<1", "B0<1"], compute = ["F0", "F1", "B1", "B0"], send = ["F0>1", "F1>1"]>, <recv = ["F0<0", "F1<0"], compute = ["F0", "F1", "B1", "B0"], send = ["B1>0", "B0>0"]>]>
module {
  func.func @train() -> tensor<f32> {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.stage = 0 : i64} : tensor<4x3xf32>
    %y = dtfm.matmul %x, %w {dtfm.stage = 0 : i64} : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
    dtfm.send %y {bandwidth_gbps = 1.000000e+01 : f64, bytes = 24 : i64, dtfm.stage = 0 : i64, latency_s = 1.000000e-03 : f64, peer = 1 : i64, tag = 0 : i64} : tensor<2x3xf32>
    %yr = dtfm.recv {bandwidth_gbps = 1.000000e+01 : f64, bytes = 24 : i64, dtfm.stage = 1 : i64, latency_s = 1.000000e-03 : f64, peer = 0 : i64, tag = 0 : i64} : tensor<2x3xf32>
    %t = dtfm.label "t" {dtfm.stage = 1 : i64} : tensor<2xi64>
    %loss = dtfm.cross_entropy %yr, %t {dtfm.stage = 1 : i64} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    %dy = dtfm.backward "dtfm.cross_entropy"(%yr, %t) {dtfm.stage = 1 : i64, flops = 12 : i64, wrt = array<i64: 0>} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
    dtfm.send %dy {bandwidth_gbps = 1.000000e+01 : f64, bytes = 24 : i64, dtfm.stage = 1 : i64, latency_s = 1.000000e-03 : f64, peer = 0 : i64, tag = 1 : i64} : tensor<2x3xf32>
    %dyr = dtfm.recv {bandwidth_gbps = 1.000000e+01 : f64, bytes = 24 : i64, dtfm.stage = 0 : i64, latency_s = 1.000000e-03 : f64, peer = 1 : i64, tag = 1 : i64} : tensor<2x3xf32>
    %dw = dtfm.backward "dtfm.matmul"(%x, %w, %dyr) {dtfm.stage = 0 : i64, flops = 96 : i64, wrt = array<i64: 1>} : (tensor<2x4xf32>, tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
    %u = dtfm.adamw_update %w, %dw {dtfm.stage = 0 : i64, lr = 1.000000e-03 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    return {dtfm.stage = 1 : i64} %loss : tensor<f32>
  }
}

// -----

// COM: One stage: no transfers in the streams; the compute stream is the
// COM: forwards then the backwards (in order for 1F1B, reversed for GPipe).
// CHECK-LABEL: module attributes
// CHECK-SAME: dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 2, peak_in_flight = [1], stages = [<recv = [], compute = ["F0", "B0", "F1", "B1"], send = []>]>
// CHECK: dtfm.relu {{.*}}{dtfm.phase = "fwd", dtfm.slot = "compute", dtfm.stage = 0 : i64}
// GPIPE-LABEL: module attributes
// GPIPE-SAME: dtfm.schedule = #dtfm.schedule<kind = "gpipe", micro_batches = 2, peak_in_flight = [2], stages = [<recv = [], compute = ["F0", "F1", "B1", "B0"], send = []>]>
module {
  func.func @one_stage() -> tensor<2x3xf32> {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2x3xf32>
    %r = dtfm.relu %x {dtfm.stage = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return {dtfm.stage = 0 : i64} %r : tensor<2x3xf32>
  }
}

// -----

// COM: A forward value that only training ops read on arrival (here the
// COM: input x, read by a backward op on stage 1) moves in the backward
// COM: phase: the recv says so, and the send follows its pair's tag.
// CHECK-LABEL: module attributes
// CHECK: dtfm.send {{.*}}dtfm.phase = "bwd", dtfm.slot = "send", dtfm.stage = 0 : i64, {{.*}}tag = 0 : i64}
// CHECK: dtfm.recv {{.*}}dtfm.phase = "bwd", dtfm.slot = "recv", dtfm.stage = 1 : i64, {{.*}}tag = 0 : i64}
// CHECK: dtfm.backward "dtfm.matmul"{{.*}}dtfm.phase = "bwd", dtfm.slot = "compute", dtfm.stage = 1 : i64
// GPIPE-LABEL: module attributes
// GPIPE: dtfm.send {{.*}}dtfm.phase = "bwd", dtfm.slot = "send"
module {
  func.func @saved_input() -> tensor<4x3xf32> {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2x4xf32>
    dtfm.send %x {bandwidth_gbps = 1.000000e+01 : f64, bytes = 32 : i64, dtfm.stage = 0 : i64, latency_s = 1.000000e-03 : f64, peer = 1 : i64, tag = 0 : i64} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.stage = 1 : i64} : tensor<4x3xf32>
    %xr = dtfm.recv {bandwidth_gbps = 1.000000e+01 : f64, bytes = 32 : i64, dtfm.stage = 1 : i64, latency_s = 1.000000e-03 : f64, peer = 0 : i64, tag = 0 : i64} : tensor<2x4xf32>
    %dy = dtfm.input "dy" {dtfm.stage = 1 : i64} : tensor<2x3xf32>
    %dw = dtfm.backward "dtfm.matmul"(%xr, %w, %dy) {dtfm.stage = 1 : i64, flops = 96 : i64, wrt = array<i64: 1>} : (tensor<2x4xf32>, tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
    return {dtfm.stage = 1 : i64} %dw : tensor<4x3xf32>
  }
}

// -----

// COM: A module with a dtfm.shape: its micro_batches (3) wins over the
// COM: option (2).
// CHECK-LABEL: module attributes
// CHECK-SAME: dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 3, peak_in_flight = [1], stages = [<recv = [], compute = ["F0", "B0", "F1", "B1", "F2", "B2"], send = []>]>
// GPIPE-LABEL: module attributes
// GPIPE-SAME: dtfm.schedule = #dtfm.schedule<kind = "gpipe", micro_batches = 3, peak_in_flight = [3],
module attributes {dtfm.shape = #dtfm.shape<cluster = "pair", global_batch = 6, dp = 1, pp = 1, micro_batch_size = 2, micro_batches = 3, devices_used = 1, iteration_s = 1.0, pipeline_s = 1.0, data_parallel_s = 0.0, devices = ["a"], stages = [["a"]], runners_up = [], idle = [], shapes_scored = 1>} {
  func.func @shaped() -> tensor<2x3xf32> {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2x3xf32>
    return {dtfm.stage = 0 : i64} %x : tensor<2x3xf32>
  }
}

// -----

// COM: Uneven replicas: hetero gave pipeline 0 three of the four
// COM: micro-batches (2 per pipeline on average); the schedule is built for
// COM: the largest count and keeps every pipeline's.
// CHECK-LABEL: module attributes
// CHECK-SAME: dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 3, peak_in_flight = [1], stages = [<recv = [], compute = ["F0", "B0", "F1", "B1", "F2", "B2"], send = []>], pipeline_micro_batches = [3, 1]>
// GPIPE-LABEL: module attributes
// GPIPE-SAME: dtfm.schedule = #dtfm.schedule<kind = "gpipe", micro_batches = 3, peak_in_flight = [3], stages = [<recv = [], compute = ["F0", "F1", "F2", "B2", "B1", "B0"], send = []>], pipeline_micro_batches = [3, 1]>
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "mixed", algorithm = "hetero", seed = 0, dp = 2, pp = 1, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["fast", "slow"]], iteration_s = 1.0, stage_bounds = [0, 1], pipeline_micro_batches = [3, 1]>} {
  func.func @uneven() -> tensor<2x3xf32> {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2x3xf32>
    %r = dtfm.relu %x {dtfm.stage = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return {dtfm.stage = 0 : i64} %r : tensor<2x3xf32>
  }
}
