// RUN: dtfm-opt %s --dtfm-insert-grad-sync="sync-every=4 sync-fragments=2" | FileCheck %s
// RUN: dtfm-opt %s --dtfm-insert-grad-sync="sync-every=4" | FileCheck %s --check-prefix=WHOLE
// RUN: not dtfm-opt %s --dtfm-insert-grad-sync="sync-every=4 sync-fragments=4" 2>&1 | FileCheck %s --check-prefix=LAYERS
// RUN: not dtfm-opt %s --dtfm-insert-grad-sync="sync-every=2 sync-fragments=3" 2>&1 | FileCheck %s --check-prefix=OVER-H
// RUN: not dtfm-opt %s --dtfm-insert-grad-sync="sync-fragments=2" 2>&1 | FileCheck %s --check-prefix=NO-EVERY

// COM: Local steps in fragments (Streaming DiLoCo): whole layers, strided in
// COM: IR order -- l0 (two parameters) in fragment 0, l1 in 1, l2 in 0 --
// COM: each sync recording its fragment and their count.
// CHECK-LABEL: func.func @three
// CHECK: dtfm.grad_sync {{.*}}dtfm.layer = "l0"{{.*}}dtfm.sync_every = 4 : i64, dtfm.sync_fragment = 0 : i64, dtfm.sync_fragments = 2 : i64
// CHECK: dtfm.grad_sync {{.*}}dtfm.layer = "l0"{{.*}}dtfm.sync_every = 4 : i64, dtfm.sync_fragment = 0 : i64, dtfm.sync_fragments = 2 : i64
// CHECK: dtfm.grad_sync {{.*}}dtfm.layer = "l1"{{.*}}dtfm.sync_every = 4 : i64, dtfm.sync_fragment = 1 : i64, dtfm.sync_fragments = 2 : i64
// CHECK: dtfm.grad_sync {{.*}}dtfm.layer = "l2"{{.*}}dtfm.sync_every = 4 : i64, dtfm.sync_fragment = 0 : i64, dtfm.sync_fragments = 2 : i64
// COM: One fragment (the default): nothing recorded, every H-th step.
// WHOLE-LABEL: func.func @three
// WHOLE-NOT: dtfm.sync_fragment
// LAYERS: error: dtfm-insert-grad-sync: sync-fragments=4 is more than the 3 layers holding parameters
// OVER-H: error: dtfm-insert-grad-sync: sync-fragments=3 is more than sync-every=2: each fragment needs a step of its own
// NO-EVERY: error: dtfm-insert-grad-sync: sync-fragments=2 exchanges local steps' parameters in fragments: it needs sync-every=H (H >= 1)
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "pair", algorithm = "genetic", seed = 0, dp = 2, pp = 1, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a", "b"]]>, dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @three() {
    %w0 = dtfm.param "w0" init(zeros) {dtfm.stage = 0 : i64} : tensor<4x3xf32>
    %b0 = dtfm.param "b0" init(zeros) {dtfm.stage = 0 : i64} : tensor<3xf32>
    %w1 = dtfm.param "w1" init(zeros) {dtfm.stage = 0 : i64} : tensor<3xf32>
    %w2 = dtfm.param "w2" init(zeros) {dtfm.stage = 0 : i64} : tensor<3xf32>
    %d0 = dtfm.input "d0" {dtfm.stage = 0 : i64} : tensor<4x3xf32>
    %e0 = dtfm.input "e0" {dtfm.stage = 0 : i64} : tensor<3xf32>
    %d1 = dtfm.input "d1" {dtfm.stage = 0 : i64} : tensor<3xf32>
    %d2 = dtfm.input "d2" {dtfm.stage = 0 : i64} : tensor<3xf32>
    %u0 = dtfm.sgd_update %w0, %d0 {dtfm.layer = "l0", dtfm.stage = 0 : i64, lr = 1.000000e-01 : f64, momentum = 0.0 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    %v0 = dtfm.sgd_update %b0, %e0 {dtfm.layer = "l0", dtfm.stage = 0 : i64, lr = 1.000000e-01 : f64, momentum = 0.0 : f64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %u1 = dtfm.sgd_update %w1, %d1 {dtfm.layer = "l1", dtfm.stage = 0 : i64, lr = 1.000000e-01 : f64, momentum = 0.0 : f64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %u2 = dtfm.sgd_update %w2, %d2 {dtfm.layer = "l2", dtfm.stage = 0 : i64, lr = 1.000000e-01 : f64, momentum = 0.0 : f64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    return {dtfm.stage = 0 : i64}
  }
}
