// RUN: dtfm-opt %s -split-input-file --dtfm-insert-send-recv | FileCheck %s

// COM: The normal case on a two-device cluster without an assignment:
// COM: stage s runs on the cluster's device s. A value made on stage 0 and
// COM: used on stage 1 gets a send right after its definition and a recv
// COM: right before its first use; bytes = 2*3*4 = 24; the link a-b has
// COM: delay 1 ms (latency_s = 1e-3) and 10 Gbps.
// CHECK-LABEL: func.func @two_stages
// CHECK-NEXT: %[[X:.*]] = dtfm.input "x" {dtfm.stage = 0 : i64}
// CHECK-NEXT: %[[R:.*]] = dtfm.relu %[[X]] {dtfm.stage = 0 : i64}
// CHECK-NEXT: dtfm.send %[[R]] {bandwidth_gbps = 1.000000e+01 : f64, bytes = 24 : i64, dtfm.stage = 0 : i64, latency_s = 1.000000e-03 : f64, peer = 1 : i64, tag = 0 : i64} : tensor<2x3xf32>
// CHECK-NEXT: %[[V:.*]] = dtfm.recv {bandwidth_gbps = 1.000000e+01 : f64, bytes = 24 : i64, dtfm.stage = 1 : i64, latency_s = 1.000000e-03 : f64, peer = 0 : i64, tag = 0 : i64} : tensor<2x3xf32>
// CHECK-NEXT: %[[G:.*]] = dtfm.gelu %[[V]] {dtfm.stage = 1 : i64}
// CHECK-NEXT: dtfm.add %[[G]], %[[V]] {dtfm.stage = 1 : i64}
// CHECK-NOT: dtfm.send
module attributes {dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @two_stages() -> tensor<2x3xf32> {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2x3xf32>
    %r = dtfm.relu %x {dtfm.stage = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    // COM: Two uses on stage 1: one pair, both uses read the received value.
    %g = dtfm.gelu %r {dtfm.stage = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %s = dtfm.add %g, %r {dtfm.stage = 1 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    return {dtfm.stage = 1 : i64} %s : tensor<2x3xf32>
  }
}

// -----

// COM: One stage: nothing crosses, nothing is inserted.
// CHECK-LABEL: func.func @one_stage
// CHECK-NEXT: dtfm.input
// CHECK-NEXT: dtfm.relu
// CHECK-NEXT: return
module attributes {dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @one_stage() -> tensor<2x3xf32> {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2x3xf32>
    %r = dtfm.relu %x {dtfm.stage = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return {dtfm.stage = 0 : i64} %r : tensor<2x3xf32>
  }
}

// -----

// COM: One value used on stages 1 and 2 (three devices a, b, c): one pair
// COM: per destination stage, in stage order, tags numbered in IR order;
// COM: each pair uses its own link (a-b: 1 ms, 10 Gbps; a-c: 2 ms, 1 Gbps).
// COM: The value made on stage 1 for stage 2 then gets tag 2.
// CHECK-LABEL: func.func @fan_out
// CHECK: %[[R:.*]] = dtfm.relu
// CHECK-NEXT: dtfm.send %[[R]] {bandwidth_gbps = 1.000000e+01 : f64, bytes = 24 : i64, dtfm.stage = 0 : i64, latency_s = 1.000000e-03 : f64, peer = 1 : i64, tag = 0 : i64}
// CHECK-NEXT: %[[V1:.*]] = dtfm.recv {bandwidth_gbps = 1.000000e+01 : f64, bytes = 24 : i64, dtfm.stage = 1 : i64, latency_s = 1.000000e-03 : f64, peer = 0 : i64, tag = 0 : i64}
// CHECK-NEXT: dtfm.send %[[R]] {bandwidth_gbps = 1.000000e+00 : f64, bytes = 24 : i64, dtfm.stage = 0 : i64, latency_s = 2.000000e-03 : f64, peer = 2 : i64, tag = 1 : i64}
// CHECK-NEXT: %[[G:.*]] = dtfm.gelu %[[V1]] {dtfm.stage = 1 : i64}
// CHECK-NEXT: dtfm.send %[[G]] {bandwidth_gbps = 1.000000e+01 : f64, bytes = 24 : i64, dtfm.stage = 1 : i64, latency_s = 1.000000e-03 : f64, peer = 2 : i64, tag = 2 : i64}
// CHECK-NEXT: %[[V2:.*]] = dtfm.recv {bandwidth_gbps = 1.000000e+00 : f64, bytes = 24 : i64, dtfm.stage = 2 : i64, latency_s = 2.000000e-03 : f64, peer = 0 : i64, tag = 1 : i64}
// CHECK-NEXT: %[[V3:.*]] = dtfm.recv {bandwidth_gbps = 1.000000e+01 : f64, bytes = 24 : i64, dtfm.stage = 2 : i64, latency_s = 1.000000e-03 : f64, peer = 1 : i64, tag = 2 : i64}
// CHECK-NEXT: dtfm.add %[[V2]], %[[V3]] {dtfm.stage = 2 : i64}
module attributes {dtfm.cluster = #dtfm.cluster<name = "tri", source = "tri.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "c", region = "C", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 2.0, 1.0, 0.0, 1.0, 2.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 1.0, 10.0, 0.0, 10.0, 1.0, 10.0, 0.0]>} {
  func.func @fan_out() -> tensor<2x3xf32> {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2x3xf32>
    %r = dtfm.relu %x {dtfm.stage = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %g = dtfm.gelu %r {dtfm.stage = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %s = dtfm.add %r, %g {dtfm.stage = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    return {dtfm.stage = 2 : i64} %s : tensor<2x3xf32>
  }
}

// -----

// COM: A parameter used on two stages (a tied weight) in a training graph:
// COM: the parameter and the gradient that returns for it move once per
// COM: iteration; the activation gradient does not. bytes: e 8x4 f32 = 128,
// COM: h 2x3x4 f32 = 96.
// CHECK-LABEL: func.func @tied
// CHECK: %[[E:.*]] = dtfm.param "e"
// CHECK-NEXT: dtfm.send %[[E]] {bandwidth_gbps = 1.000000e+01 : f64, bytes = 128 : i64, dtfm.once_per_iteration, dtfm.stage = 0 : i64, latency_s = 1.000000e-03 : f64, peer = 1 : i64, tag = 0 : i64}
// CHECK-NEXT: %[[H:.*]] = dtfm.embedding
// CHECK-NEXT: dtfm.send %[[H]] {bandwidth_gbps = 1.000000e+01 : f64, bytes = 96 : i64, dtfm.stage = 0 : i64, latency_s = 1.000000e-03 : f64, peer = 1 : i64, tag = 1 : i64}
// CHECK-NEXT: %[[ER:.*]] = dtfm.recv {bandwidth_gbps = 1.000000e+01 : f64, bytes = 128 : i64, dtfm.once_per_iteration, dtfm.stage = 1 : i64, latency_s = 1.000000e-03 : f64, peer = 0 : i64, tag = 0 : i64}
// CHECK-NEXT: %[[HR:.*]] = dtfm.recv {bandwidth_gbps = 1.000000e+01 : f64, bytes = 96 : i64, dtfm.stage = 1 : i64, latency_s = 1.000000e-03 : f64, peer = 0 : i64, tag = 1 : i64}
// CHECK-NEXT: dtfm.matmul %[[HR]], %[[ER]] transpose_rhs
// CHECK: %[[DM:.*]]:2 = dtfm.backward "dtfm.matmul"(%[[HR]], %[[ER]], %{{.*}})
// CHECK-NEXT: dtfm.send %[[DM]]#0 {bandwidth_gbps = 1.000000e+01 : f64, bytes = 96 : i64, dtfm.stage = 1 : i64, latency_s = 1.000000e-03 : f64, peer = 0 : i64, tag = 2 : i64}
// CHECK-NEXT: %[[DH:.*]] = dtfm.recv {bandwidth_gbps = 1.000000e+01 : f64, bytes = 96 : i64, dtfm.stage = 0 : i64, latency_s = 1.000000e-03 : f64, peer = 1 : i64, tag = 2 : i64}
// COM: The gradient of the received parameter returns once per iteration.
// CHECK-NEXT: dtfm.send %[[DM]]#1 {bandwidth_gbps = 1.000000e+01 : f64, bytes = 128 : i64, dtfm.once_per_iteration, dtfm.stage = 1 : i64, latency_s = 1.000000e-03 : f64, peer = 0 : i64, tag = 3 : i64}
// CHECK-NEXT: %[[DE:.*]] = dtfm.backward "dtfm.embedding"(%{{.*}}, %[[E]], %[[DH]])
// CHECK-NEXT: %[[DT:.*]] = dtfm.recv {bandwidth_gbps = 1.000000e+01 : f64, bytes = 128 : i64, dtfm.once_per_iteration, dtfm.stage = 0 : i64, latency_s = 1.000000e-03 : f64, peer = 1 : i64, tag = 3 : i64}
// CHECK-NEXT: dtfm.accumulate %[[DT]], %[[DE]]
// CHECK-NEXT: dtfm.adamw_update %[[E]],
module attributes {dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @tied() -> tensor<f32> {
    %ids = dtfm.input "ids" {dtfm.stage = 0 : i64} : tensor<2x3xi64>
    %e = dtfm.param "e" init(normal, 0.02) {dtfm.stage = 0 : i64} : tensor<8x4xf32>
    %h = dtfm.embedding %ids, %e {dtfm.stage = 0 : i64} : (tensor<2x3xi64>, tensor<8x4xf32>) -> tensor<2x3x4xf32>
    %logits = dtfm.matmul %h, %e transpose_rhs {dtfm.stage = 1 : i64} : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
    %t = dtfm.label "t" {dtfm.stage = 1 : i64} : tensor<2x3xi64>
    %loss = dtfm.cross_entropy %logits, %t {dtfm.stage = 1 : i64} : (tensor<2x3x8xf32>, tensor<2x3xi64>) -> tensor<f32>
    %dl = dtfm.backward "dtfm.cross_entropy"(%logits, %t) {dtfm.stage = 1 : i64, flops = 96 : i64, wrt = array<i64: 0>} : (tensor<2x3x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
    %dm:2 = dtfm.backward "dtfm.matmul"(%h, %e, %dl) {dtfm.forward_attrs = {transpose_rhs}, dtfm.stage = 1 : i64, flops = 768 : i64, wrt = array<i64: 0, 1>} : (tensor<2x3x4xf32>, tensor<8x4xf32>, tensor<2x3x8xf32>) -> (tensor<2x3x4xf32>, tensor<8x4xf32>)
    %de = dtfm.backward "dtfm.embedding"(%ids, %e, %dm#0) {dtfm.stage = 0 : i64, flops = 24 : i64, wrt = array<i64: 1>} : (tensor<2x3xi64>, tensor<8x4xf32>, tensor<2x3x4xf32>) -> tensor<8x4xf32>
    %sum = dtfm.accumulate %dm#1, %de {dtfm.stage = 0 : i64} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    %u = dtfm.adamw_update %e, %sum {dtfm.stage = 0 : i64, lr = 1.000000e-03 : f64} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    return {dtfm.stage = 1 : i64} %loss : tensor<f32>
  }
}

// -----

// COM: With a dtfm.assignment (dp = 2): stage 0 = [a, b], stage 1 = [c, d].
// COM: The pair's link is the slowest matched pair: a-c (1 ms, 10 Gbps)
// COM: and b-d (5 ms, 1 Gbps); for 24 bytes b-d takes longer.
// CHECK-LABEL: func.func @assigned
// CHECK: dtfm.send %{{.*}} {bandwidth_gbps = 1.000000e+00 : f64, bytes = 24 : i64, dtfm.stage = 0 : i64, latency_s = 5.000000e-03 : f64, peer = 1 : i64, tag = 0 : i64}
// CHECK: dtfm.recv {bandwidth_gbps = 1.000000e+00 : f64, bytes = 24 : i64, dtfm.stage = 1 : i64, latency_s = 5.000000e-03 : f64, peer = 0 : i64, tag = 0 : i64}
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "quad", algorithm = "genetic", seed = 0, dp = 2, pp = 2, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a", "b"], ["c", "d"]]>, dtfm.cluster = #dtfm.cluster<name = "quad", source = "quad.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "c", region = "C", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "d", region = "D", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 5.0, 1.0, 1.0, 0.0, 1.0, 1.0, 5.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 10.0, 10.0, 0.0, 10.0, 1.0, 10.0, 10.0, 0.0, 10.0, 10.0, 1.0, 10.0, 0.0]>} {
  func.func @assigned() -> tensor<2x3xf32> {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2x3xf32>
    %r = dtfm.relu %x {dtfm.stage = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return {dtfm.stage = 1 : i64} %r : tensor<2x3xf32>
  }
}
