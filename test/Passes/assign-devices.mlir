// RUN: dtfm-opt %s -split-input-file --dtfm-assign-devices="dp=2 pp=2 dp-bytes=1e7 pp-bytes=1e5 print-table=true" | FileCheck %s
// RUN: dtfm-opt %s -split-input-file --dtfm-assign-devices="dp=2 pp=2 dp-bytes=1e5 pp-bytes=1e7" | FileCheck %s --check-prefix=SWAP
// RUN: dtfm-opt %s -split-input-file --dtfm-assign-devices="dp=2 pp=2 micro-batches=3" | FileCheck %s --check-prefix=DERIVED
// RUN: dtfm-opt %s -split-input-file --dtfm-assign-devices | FileCheck %s --check-prefix=AUTO

// COM: Four devices: a, b in region A and c, d in region B. Inside a
// COM: region: 1 ms, 8 Gbps (1e9 B/s); a-c and b-d: 10 ms, 0.8 Gbps
// COM: (1e8 B/s); a-d and b-c: 20 ms, 0.8 Gbps. transfer(x, y, B) =
// COM: delay + B / rate. DATAP-COST of a group: its worst device's sum of
// COM: 2 * transfer(c_DP / D_DP) to the others; PIPELINEP-COST: 2 * the
// COM: bottleneck matching's transfer(c_PP) between the two stages.
// COM: The model: 4 layers, trainable w (4x8) and w2 (8x4), a frozen f.

// COM: c_DP = 1e7, c_PP = 1e5: regions as groups. DATAP: 2 * (1e-3 +
// COM: 5e6 / 1e9) = 0.012; PIPELINEP: 2 * (1e-2 + 1e5 / 1e8) = 0.022;
// COM: total 0.034 (groups across regions: 0.12 + 0.0022).
// CHECK: === dtfm device assignment ===
// CHECK-NEXT: cluster quad, 4 devices, algorithm genetic, seed 0
// CHECK-NEXT: D_DP 2 x D_PP 2; c_DP 1e+07 B, c_PP 100000 B
// CHECK-NEXT: cost 0.034000 s = DATAP 0.012000 s + PIPELINEP 0.022000 s
// CHECK-NEXT: stage  0  DATAP  0.012000 s  a(A) b(A)
// CHECK-NEXT: stage  1  DATAP  0.012000 s  c(B) d(B)
// CHECK-LABEL: module attributes
// CHECK-SAME: dtfm.assignment = #dtfm.assignment<cluster = "quad", algorithm = "genetic", seed = 0, dp = 2, pp = 2, dp_bytes = 1.0e+07, pp_bytes = 100000.0, data_parallel_cost_s = 0.012, pipeline_cost_s = 0.022, total_cost_s = 0.034, stages = {{\[}}["a", "b"], ["c", "d"]]>
// COM: The pass only adds the module attribute.
// CHECK: dtfm.input "x" {dtfm.layer = "l0"} :
// COM: Volumes swapped: groups across the regions, matched a-c and b-d
// COM: (the fast pairs between stages a,c and b,d are a-b and c-d).
// COM: DATAP: 2 * (1e-2 + 5e4 / 1e8) = 0.021; PIPELINEP: 2 * (1e-3 + 1e7 /
// COM: 1e9) = 0.022; total 0.043 (regions as groups: 0.0021 + 0.22).
// SWAP-LABEL: module attributes
// SWAP-SAME: dp_bytes = 100000.0, pp_bytes = 1.0e+07, data_parallel_cost_s = 0.021, pipeline_cost_s = 0.022, total_cost_s = 0.043, stages = {{\[}}["a", "c"], ["b", "d"]]>
// COM: Volumes from the model: c_DP = 4 B x 64 trainable parameters (f is
// COM: frozen) / D_PP 2 = 128; c_PP = 64 B (the mean of the three 2x8 f32
// COM: values crossing a layer boundary) x 3 micro-batches = 192. Across
// COM: regions: DATAP 2 * (1e-2 + 64 / 1e8) = 0.02000128, PIPELINEP 2 *
// COM: (1e-3 + 192 / 1e9) = 0.002000384; total 0.022001664 beats regions
// COM: as groups (0.002000128 + 0.02000384 = 0.022003968).
// DERIVED-LABEL: module attributes
// DERIVED-SAME: dp_bytes = 128.0, pp_bytes = 192.0, data_parallel_cost_s = 0.02000128, pipeline_cost_s = 0.002000384, total_cost_s = 0.022001664, stages = {{\[}}["a", "c"], ["b", "d"]]>
// COM: dp = pp = 0: every factorisation is searched. 2 x 2 (c_PP 64 B):
// COM: 0.002000128 + 0.02000128 = 0.022001408 (both groupings tie); 4 x 1:
// COM: a's DATAP 0.002000128 + 0.02000128 + 0.04000128 = 0.062; 1 x 4: 2 *
// COM: the path a-b-d-c = 2 * 0.012000768 = 0.024001536. 2 x 2 wins.
// AUTO-LABEL: module attributes
// AUTO-SAME: dp = 2, pp = 2, dp_bytes = 128.0, pp_bytes = 64.0, {{.*}}total_cost_s = 0.022001408,
module attributes {dtfm.cluster = #dtfm.cluster<name = "quad", source = "quad.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "A", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "c", region = "B", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "d", region = "B", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 10.0, 20.0, 1.0, 0.0, 20.0, 10.0, 10.0, 20.0, 0.0, 1.0, 20.0, 10.0, 1.0, 0.0], bandwidth_gbps = [0.0, 8.0, 0.8, 0.8, 8.0, 0.0, 0.8, 0.8, 0.8, 0.8, 0.0, 8.0, 0.8, 0.8, 8.0, 0.0]>} {
  func.func @chain() -> tensor<2x4xf32> {
    %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.layer = "l0"} : tensor<4x8xf32>
    %h = dtfm.matmul %x, %w {dtfm.layer = "l0"} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    %r1 = dtfm.relu %h {dtfm.layer = "l1"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %f = dtfm.param "f" init(zeros) frozen {dtfm.layer = "l2"} : tensor<2x8xf32>
    %r2 = dtfm.add %r1, %f {dtfm.layer = "l2"} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %w2 = dtfm.param "w2" init(zeros) {dtfm.layer = "l3"} : tensor<8x4xf32>
    %y = dtfm.matmul %r2, %w2 {dtfm.layer = "l3"} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}

// -----

// COM: A dtfm.shape (from --dtfm-choose-shape) chose a, b, c, d of five
// COM: devices and 2 x 2: the search runs on those four only (e, although
// COM: well connected, stays idle) with the shape's D_DP x D_PP, also when
// COM: the options give none. Same links as above, so the same costs.
// CHECK: cluster quint, 4 devices, algorithm genetic, seed 0
// CHECK: cost 0.034000 s = DATAP 0.012000 s + PIPELINEP 0.022000 s
// CHECK-LABEL: module attributes
// CHECK-SAME: dtfm.assignment = #dtfm.assignment<cluster = "quint", {{.*}}total_cost_s = 0.034, stages = {{\[}}["a", "b"], ["c", "d"]]>
// AUTO-LABEL: module attributes
// AUTO-SAME: dtfm.assignment = #dtfm.assignment<cluster = "quint", algorithm = "genetic", seed = 0, dp = 2, pp = 2, dp_bytes = 128.0, pp_bytes = 64.0, {{.*}}total_cost_s = 0.022001408, stages = {{\[}}[{{"[a-d]", "[a-d]"}}], [{{"[a-d]", "[a-d]"}}]]>
module attributes {dtfm.shape = #dtfm.shape<cluster = "quint", global_batch = 4, dp = 2, pp = 2, micro_batch_size = 2, micro_batches = 1, devices_used = 4, iteration_s = 1.0, pipeline_s = 1.0, data_parallel_s = 0.0, devices = ["a", "b", "c", "d"], stages = [["a", "b"], ["c", "d"]], runners_up = [], idle = [<devices = ["e"], reason = "hand-written">], shapes_scored = 1>, dtfm.cluster = #dtfm.cluster<name = "quint", source = "quint.textproto", devices = [<name = "e", region = "E", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "a", region = "A", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "A", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "c", region = "B", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "d", region = "B", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.0, 1.0, 10.0, 20.0, 0.5, 1.0, 0.0, 20.0, 10.0, 0.5, 10.0, 20.0, 0.0, 1.0, 0.5, 20.0, 10.0, 1.0, 0.0], bandwidth_gbps = [0.0, 8.0, 8.0, 8.0, 8.0, 8.0, 0.0, 8.0, 0.8, 0.8, 8.0, 8.0, 0.0, 0.8, 0.8, 8.0, 0.8, 0.8, 0.0, 8.0, 8.0, 0.8, 0.8, 8.0, 0.0]>} {
  func.func @chain() -> tensor<2x4xf32> {
    %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.layer = "l0"} : tensor<4x8xf32>
    %h = dtfm.matmul %x, %w {dtfm.layer = "l0"} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    %r1 = dtfm.relu %h {dtfm.layer = "l1"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %f = dtfm.param "f" init(zeros) frozen {dtfm.layer = "l2"} : tensor<2x8xf32>
    %r2 = dtfm.add %r1, %f {dtfm.layer = "l2"} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %w2 = dtfm.param "w2" init(zeros) {dtfm.layer = "l3"} : tensor<8x4xf32>
    %y = dtfm.matmul %r2, %w2 {dtfm.layer = "l3"} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}
