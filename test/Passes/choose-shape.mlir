// RUN: dtfm-opt %s -split-input-file --dtfm-choose-shape="global-batch=4 micro-batch-sizes=2" | FileCheck %s
// RUN: dtfm-opt %s -split-input-file --dtfm-choose-shape="global-batch=4 micro-batch-sizes=4" | FileCheck %s --check-prefix=MBS4

// COM: The model: x (micro-batch 2) times w: fwd 2*2*8*4 = 128 FLOPs, bwd
// COM: 256, so C = 384 FLOPs per micro-batch of 2 (768 for 4). The
// COM: predicted iteration (Hetero.h) with one stage is n_b * C / speed.

// COM: One device of 1 GFLOP/s, global batch 4 in micro-batches of 2:
// COM: n_b = 2, T = 2 * 384 / 1e9 = 7.68e-07 s; nothing else to choose,
// COM: and the plan meets the lower bound (bound_s: any plan's time).
// CHECK-LABEL: module attributes
// CHECK-SAME: dtfm.shape = #dtfm.shape<cluster = "one", global_batch = 4, dp = 1, pp = 1, micro_batch_size = 2, micro_batches = 2, devices_used = 1, iteration_s = 7.68e-07, pipeline_s = 7.68e-07, data_parallel_s = 0.0, devices = ["a"], stages = {{\[}}["a"]], runners_up = [], idle = [], shapes_scored = {{[0-9]+}}, bound_s = 7.68e-07>
// CHECK: dtfm.input "x" {dtfm.layer = "l0"} : tensor<2x4xf32>
// COM: Micro-batches of 4: the model is rebatched to 4 (one micro-batch,
// COM: T = 768 / 1e9, the same time).
// MBS4-LABEL: module attributes
// MBS4-SAME: dtfm.shape = #dtfm.shape<cluster = "one", global_batch = 4, dp = 1, pp = 1, micro_batch_size = 4, micro_batches = 1, devices_used = 1, iteration_s = 7.68e-07,
// MBS4: func.func @mlp() -> tensor<4x8xf32>
// MBS4-NEXT: dtfm.input "x" {dtfm.layer = "l0"} : tensor<4x4xf32>
// MBS4: dtfm.matmul {{.*}} : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
module attributes {dtfm.cluster = #dtfm.cluster<name = "one", source = "one.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0], bandwidth_gbps = [0.0]>} {
  func.func @mlp() -> tensor<2x8xf32> {
    %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.layer = "l0"} : tensor<4x8xf32>
    %h = dtfm.matmul %x, %w {dtfm.layer = "l0"} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    return %h : tensor<2x8xf32>
  }
}


// -----

// COM: A fast device a (1 GFLOP/s) and a slow one b (1 MFLOP/s) behind a
// COM: 1 ms, 1 Gbps link. a alone: 7.68e-07 s. The runner-up, dp = 2 (one
// COM: micro-batch each): b's C = 384 / 1e6 = 3.84e-04 s plus the gradient
// COM: sync of w (128 B, shard 64): 2 * (1e-3 + 8*64/1e9) = 2.001024e-03;
// COM: 0.002385024 s. b is left idle, with the reason.
// CHECK-LABEL: module attributes
// CHECK-SAME: dtfm.shape = #dtfm.shape<cluster = "fast-slow", global_batch = 4, dp = 1, pp = 1, micro_batch_size = 2, micro_batches = 2, devices_used = 1, iteration_s = 7.68e-07, pipeline_s = 7.68e-07, data_parallel_s = 0.0, devices = ["a"], stages = {{\[}}["a"]],
// CHECK-SAME: runners_up = [<dp = 2, pp = 1, micro_batch_size = 2, micro_batches = 1, devices_used = 2, iteration_s = 0.002385024{{[0-9]*}}>],
// CHECK-SAME: idle = [<devices = ["b"], reason = "region B: 1 Gbps and 1 ms at best to the devices in use, 1e+03x slower than the fastest in use; adding them costs 0.00238 s/iteration (0.002385 s vs 7.68e-07 s)">]
// COM: Micro-batches of 4 cannot be split over two pipelines: a alone.
// MBS4-LABEL: module attributes
// MBS4-SAME: dp = 1, pp = 1, micro_batch_size = 4, micro_batches = 1, devices_used = 1, iteration_s = 7.68e-07, {{.*}}devices = ["a"], {{.*}}runners_up = [], idle = [<devices = ["b"],

module attributes {dtfm.cluster = #dtfm.cluster<name = "fast-slow", source = "fast-slow.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+06, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 1.0, 1.0, 0.0]>} {
  func.func @mlp() -> tensor<2x8xf32> {
    %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.layer = "l0"} : tensor<4x8xf32>
    %h = dtfm.matmul %x, %w {dtfm.layer = "l0"} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    return %h : tensor<2x8xf32>
  }
}
