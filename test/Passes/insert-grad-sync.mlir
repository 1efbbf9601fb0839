// RUN: dtfm-opt %s -split-input-file --dtfm-insert-grad-sync | FileCheck %s
// RUN: dtfm-opt %s -split-input-file --dtfm-insert-grad-sync=sync=ps | FileCheck %s --check-prefix=PS

// COM: One stage on a two-device group (a-b: 1 ms, 10 Gbps): each update
// COM: reads its gradient through a dtfm.grad_sync over the group, which
// COM: copies the update's stage and layer. Per link, 2 * transfer(shard)
// COM: with shard = bytes / dp and transfer = latency + 8 * shard / bw.
// COM: w: 48 B, shard 24: 2 * (1e-3 + 8*24/1e10) = 0.0020000384 s.
// COM: b: 12 B, shard 6: 2 * (1e-3 + 8*6/1e10) = 0.0020000096 s.
// COM: (printed as the nearest doubles)
// COM: The bucket (60 B, shard 30): 2 * (1e-3 + 8*30/1e10) = 0.002000048 s
// COM: on both. With two devices the ring (2(n-1) * link/2) equals the
// COM: parameter server, and auto keeps the parameter server.
// CHECK-LABEL: func.func @pair
// CHECK: %[[DW:.*]] = dtfm.input "dw"
// CHECK: %[[DB:.*]] = dtfm.input "db"
// CHECK-NEXT: %[[SW:.*]] = dtfm.grad_sync %[[DW]] {algorithm = "ps", bytes = 48 : i64, dtfm.bucket_seconds = 0.0020000479999999999 : f64, dtfm.layer = "l0", dtfm.stage = 0 : i64, group = ["a", "b"], seconds = 0.0020000384000000001 : f64} : (tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: dtfm.adamw_update %{{.*}}, %[[SW]] {dtfm.layer = "l0", dtfm.stage = 0 : i64
// CHECK-NEXT: %[[SB:.*]] = dtfm.grad_sync %[[DB]] {algorithm = "ps", bytes = 12 : i64, dtfm.bucket_seconds = 0.0020000479999999999 : f64, dtfm.layer = "l1", dtfm.stage = 0 : i64, group = ["a", "b"], seconds = 0.0020000095999999998 : f64} : (tensor<3xf32>) -> tensor<3xf32>
// CHECK-NEXT: dtfm.sgd_update %{{.*}}, %[[SB]]
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "pair", algorithm = "genetic", seed = 0, dp = 2, pp = 1, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a", "b"]]>, dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @pair() {
    %w = dtfm.param "w" init(zeros) {dtfm.stage = 0 : i64} : tensor<4x3xf32>
    %b = dtfm.param "b" init(zeros) {dtfm.stage = 0 : i64} : tensor<3xf32>
    %dw = dtfm.input "dw" {dtfm.stage = 0 : i64} : tensor<4x3xf32>
    %db = dtfm.input "db" {dtfm.stage = 0 : i64} : tensor<3xf32>
    %uw = dtfm.adamw_update %w, %dw {dtfm.layer = "l0", dtfm.stage = 0 : i64, lr = 1.000000e-03 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    %ub = dtfm.sgd_update %b, %db {dtfm.layer = "l1", dtfm.stage = 0 : i64, lr = 1.000000e-01 : f64, momentum = 0.0 : f64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    return {dtfm.stage = 0 : i64}
  }
}

// -----

// COM: Groups of one device (dp = 1, two stages) need no sync.
// CHECK-LABEL: func.func @no_dp
// CHECK-NOT: dtfm.grad_sync
// CHECK: return
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "pair", algorithm = "genetic", seed = 0, dp = 1, pp = 2, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a"], ["b"]]>, dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @no_dp() {
    %w = dtfm.param "w" init(zeros) {dtfm.stage = 1 : i64} : tensor<4x3xf32>
    %dw = dtfm.input "dw" {dtfm.stage = 1 : i64} : tensor<4x3xf32>
    %uw = dtfm.adamw_update %w, %dw {dtfm.stage = 1 : i64, lr = 1.000000e-03 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    return {dtfm.stage = 1 : i64}
  }
}

// -----

// COM: Four devices in a ring of fast links (a-b-c-d-a: 0.1 ms, 10 Gbps)
// COM: with slow diagonals (a-c, b-d: 10 ms, 1 Gbps). w: 48 B, dp = 4,
// COM: shard 12 B. Fast link: 2 * (1e-4 + 8*12/1e10) = 2.000192e-4 s; slow:
// COM: 2 * (1e-2 + 8*12/1e9) = 0.020000192 s.
// COM: Ring: 2 (n-1) * slowest link / 2 = 3 * 2.000192e-4 = 6.000576e-4 s.
// COM: Parameter server: worst device's sum = 2 fast + 1 slow = 0.0204002304 s.
// COM: Auto picks the ring; sync=ps forces the parameter server.
// CHECK-LABEL: func.func @ring
// CHECK: dtfm.grad_sync %{{.*}} {algorithm = "ring", bytes = 48 : i64, dtfm.bucket_seconds = 6.0005759999999997E-4 : f64, dtfm.stage = 0 : i64, group = ["a", "b", "c", "d"], seconds = 6.0005759999999997E-4 : f64}
// PS-LABEL: func.func @ring
// PS: dtfm.grad_sync %{{.*}} {algorithm = "ps", bytes = 48 : i64, dtfm.bucket_seconds = 0.0204002304 : f64, dtfm.stage = 0 : i64, group = ["a", "b", "c", "d"], seconds = 0.0204002304 : f64}
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "ring", algorithm = "genetic", seed = 0, dp = 4, pp = 1, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a", "b", "c", "d"]]>, dtfm.cluster = #dtfm.cluster<name = "ring", source = "ring.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "c", region = "C", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "d", region = "D", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 0.1, 10.0, 0.1, 0.1, 0.0, 0.1, 10.0, 10.0, 0.1, 0.0, 0.1, 0.1, 10.0, 0.1, 0.0], bandwidth_gbps = [0.0, 10.0, 1.0, 10.0, 10.0, 0.0, 10.0, 1.0, 1.0, 10.0, 0.0, 10.0, 10.0, 1.0, 10.0, 0.0]>} {
  func.func @ring() {
    %w = dtfm.param "w" init(zeros) {dtfm.stage = 0 : i64} : tensor<4x3xf32>
    %dw = dtfm.input "dw" {dtfm.stage = 0 : i64} : tensor<4x3xf32>
    %uw = dtfm.adamw_update %w, %dw {dtfm.stage = 0 : i64, lr = 1.000000e-03 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    return {dtfm.stage = 0 : i64}
  }
}

// -----

// COM: Two stages of two devices each: each stage's updates sync over its
// COM: own group; both groups' links are fast: 2 * (1e-4 + 8*24/1e10) =
// COM: 2.000384e-4 s.
// CHECK-LABEL: func.func @two_stages
// CHECK: dtfm.grad_sync {{.*}}{algorithm = "ps", bytes = 48 : i64, dtfm.bucket_seconds = 2.0003840000000001E-4 : f64, dtfm.stage = 0 : i64, group = ["a", "b"], seconds = 2.0003840000000001E-4 : f64}
// CHECK: dtfm.grad_sync {{.*}}{algorithm = "ps", bytes = 48 : i64, dtfm.bucket_seconds = 2.0003840000000001E-4 : f64, dtfm.stage = 1 : i64, group = ["c", "d"], seconds = 2.0003840000000001E-4 : f64}
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "ring", algorithm = "genetic", seed = 0, dp = 2, pp = 2, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a", "b"], ["c", "d"]]>, dtfm.cluster = #dtfm.cluster<name = "ring", source = "ring.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "c", region = "C", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "d", region = "D", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 0.1, 10.0, 0.1, 0.1, 0.0, 0.1, 10.0, 10.0, 0.1, 0.0, 0.1, 0.1, 10.0, 0.1, 0.0], bandwidth_gbps = [0.0, 10.0, 1.0, 10.0, 10.0, 0.0, 10.0, 1.0, 1.0, 10.0, 0.0, 10.0, 10.0, 1.0, 10.0, 0.0]>} {
  func.func @two_stages() {
    %w = dtfm.param "w" init(zeros) {dtfm.stage = 0 : i64} : tensor<4x3xf32>
    %dw = dtfm.input "dw" {dtfm.stage = 0 : i64} : tensor<4x3xf32>
    %uw = dtfm.adamw_update %w, %dw {dtfm.stage = 0 : i64, lr = 1.000000e-03 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    %v = dtfm.param "v" init(zeros) {dtfm.stage = 1 : i64} : tensor<4x3xf32>
    %dv = dtfm.input "dv" {dtfm.stage = 1 : i64} : tensor<4x3xf32>
    %uv = dtfm.adamw_update %v, %dv {dtfm.stage = 1 : i64, lr = 1.000000e-03 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    return {dtfm.stage = 1 : i64}
  }
}
