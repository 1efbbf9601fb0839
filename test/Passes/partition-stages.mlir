// RUN: dtfm-opt %s -split-input-file --dtfm-partition-stages="state-bytes-per-param-byte=4" | FileCheck %s
// RUN: dtfm-opt %s -split-input-file --dtfm-partition-stages="micro-batches=2 state-bytes-per-param-byte=4" | FileCheck %s --check-prefix=MB2
// RUN: dtfm-opt %s -split-input-file --dtfm-partition-stages="schedule=gpipe micro-batches=2 state-bytes-per-param-byte=4" | FileCheck %s --check-prefix=GPIPE

// COM: Every case is the same four-block chain (blocks = runs of one
// COM: dtfm.layer), costed by the ops' cost interface (no dtfm.cost):
// COM:   l0: matmul 2x4 * 4x8: fwd 2*2*8*4 = 128, bwd 256 -> 384 FLOPs;
// COM:       param w 128 B; keeps x (32 B)
// COM:   l1: relu 2x8: fwd 16 + bwd 16 = 32 FLOPs; keeps 64 B
// COM:   l2: relu 2x8: 32 FLOPs; keeps 64 B
// COM:   l3: matmul 2x8 * 8x4: 384 FLOPs; param w2 128 B; keeps 64 B
// COM: Stage time = FLOPs / (efficiency * peak); memory = 4 (state bytes
// COM: per parameter byte) * params + in-flight micro-batches * kept bytes.
// COM: The dtfm.stages checks are loose (the attribute is being re-typed).

// COM: Two equal devices (1 GFLOP/s): the best split is [0, 2, 4] with
// COM: 416 FLOPs on each side (4.16e-07 s); [0, 1, 4] or [0, 3, 4] would
// COM: leave 448 on one side. Memory (1F1B, 1 micro-batch): stage 0
// COM: 4*128 + 32 + 64 = 608, stage 1 4*128 + 64 + 64 = 640.
// CHECK-LABEL: module attributes
// CHECK-SAME: dtfm.stages = {{.*}}bounds = [0, 2, 4]{{.*}}stage_seconds = [4.16e-07, 4.16e-07]{{.*}}memory_bytes = [608, 640]{{.*}}bottleneck_s = 4.16e-07
// CHECK: dtfm.input "x" {dtfm.layer = "l0", dtfm.stage = 0 : i64}
// CHECK-NEXT: dtfm.param "w" {{.*}}{dtfm.layer = "l0", dtfm.stage = 0 : i64}
// CHECK-NEXT: dtfm.matmul {{.*}}{dtfm.layer = "l0", dtfm.stage = 0 : i64}
// CHECK-NEXT: dtfm.relu {{.*}}{dtfm.layer = "l1", dtfm.stage = 0 : i64}
// CHECK-NEXT: dtfm.relu {{.*}}{dtfm.layer = "l2", dtfm.stage = 1 : i64}
// CHECK-NEXT: dtfm.param "w2" {{.*}}{dtfm.layer = "l3", dtfm.stage = 1 : i64}
// CHECK-NEXT: dtfm.matmul {{.*}}{dtfm.layer = "l3", dtfm.stage = 1 : i64}
// COM: The return (no cost) follows its operand's stage.
// CHECK-NEXT: return {dtfm.stage = 1 : i64}
// COM: 1F1B with 2 micro-batches keeps min(2, stages - s) in flight: 2 on
// COM: stage 0, 1 on stage 1: 512 + 2*96 = 704 and 512 + 128 = 640.
// MB2-LABEL: module attributes
// MB2-SAME: dtfm.stages = {{.*}}bounds = [0, 2, 4]{{.*}}memory_bytes = [704, 640]
// COM: GPipe keeps all 2 on both stages: 704 and 512 + 2*128 = 768.
// GPIPE-LABEL: module attributes
// GPIPE-SAME: dtfm.stages = {{.*}}bounds = [0, 2, 4]{{.*}}memory_bytes = [704, 768]
module attributes {dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @even() -> tensor<2x4xf32> {
    %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.layer = "l0"} : tensor<4x8xf32>
    %h = dtfm.matmul %x, %w {dtfm.layer = "l0"} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    %r1 = dtfm.relu %h {dtfm.layer = "l1"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %r2 = dtfm.relu %r1 {dtfm.layer = "l2"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %w2 = dtfm.param "w2" init(zeros) {dtfm.layer = "l3"} : tensor<8x4xf32>
    %y = dtfm.matmul %r2, %w2 {dtfm.layer = "l3"} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}

// -----

// COM: The roofline: device a moves only 1e8 bytes/s (ridge 10 FLOPs per
// COM: byte), so every op of the chain is memory-bound there and costs its
// COM: bytes moved (docs/CostModel.md's defaults: operands read, results
// COM: written; the backward also writes a gradient per float operand):
// COM:   l0: fwd 32 + 128 + 64 = 224 B, bwd 224 + 160 = 384 B -> 6.08e-06 s
// COM:   l1, l2: fwd 64 + 64 = 128 B, bwd 128 + 64 = 192 B -> 3.2e-06 s each
// COM: Device b (no bandwidth given) costs FLOPs only: 448 FLOPs for l1..l3.
// COM: So a gets only l0: [0, 1, 4] with 6.08e-06 s, not the even split
// COM: that FLOPs alone choose (first case).
// CHECK-LABEL: module attributes
// CHECK-SAME: dtfm.stages = {{.*}}bounds = [0, 1, 4]{{.*}}stage_seconds = [6.08e-06, 4.48e-07]{{.*}}bottleneck_s = 6.08e-06
module attributes {dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09, memory_bytes_per_second = 1.0e+08>, <name = "b", region = "B", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @memory_bound() -> tensor<2x4xf32> {
    %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.layer = "l0"} : tensor<4x8xf32>
    %h = dtfm.matmul %x, %w {dtfm.layer = "l0"} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    %r1 = dtfm.relu %h {dtfm.layer = "l1"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %r2 = dtfm.relu %r1 {dtfm.layer = "l2"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %w2 = dtfm.param "w2" init(zeros) {dtfm.layer = "l3"} : tensor<8x4xf32>
    %y = dtfm.matmul %r2, %w2 {dtfm.layer = "l3"} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}

// -----

// COM: Device b is 3x faster: [0, 1, 4] puts 384 FLOPs on a (3.84e-07 s)
// COM: and 448 on b (1.49e-07 s); the even split would take 4.16e-07 s.
// CHECK-LABEL: module attributes
// CHECK-SAME: dtfm.stages = {{.*}}bounds = [0, 1, 4]{{.*}}bottleneck_s = 3.84e-07
// CHECK: dtfm.relu {{.*}}{dtfm.layer = "l1", dtfm.stage = 1 : i64}
module attributes {dtfm.cluster = #dtfm.cluster<name = "fast", source = "fast.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 3.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @faster() -> tensor<2x4xf32> {
    %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.layer = "l0"} : tensor<4x8xf32>
    %h = dtfm.matmul %x, %w {dtfm.layer = "l0"} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    %r1 = dtfm.relu %h {dtfm.layer = "l1"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %r2 = dtfm.relu %r1 {dtfm.layer = "l2"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %w2 = dtfm.param "w2" init(zeros) {dtfm.layer = "l3"} : tensor<8x4xf32>
    %y = dtfm.matmul %r2, %w2 {dtfm.layer = "l3"} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}

// -----

// COM: Device a holds only 600 B: the even split needs 608 there, so the
// COM: partitioner takes [0, 1, 4] (a: 4*128 + 32 = 544 B; b: 4*128 +
// COM: 3*64 = 704 B) although it is slower (4.48e-07 s on b). With 2
// COM: micro-batches (either schedule) a needs 512 + 2*32 = 576: still fits.
// CHECK-LABEL: module attributes
// CHECK-SAME: dtfm.stages = {{.*}}bounds = [0, 1, 4]{{.*}}stage_seconds = [3.84e-07, 4.48e-07]{{.*}}memory_bytes = [544, 704]{{.*}}bottleneck_s = 4.48e-07
module attributes {dtfm.cluster = #dtfm.cluster<name = "small", source = "small.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 600.0>, <name = "b", region = "B", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @memory() -> tensor<2x4xf32> {
    %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.layer = "l0"} : tensor<4x8xf32>
    %h = dtfm.matmul %x, %w {dtfm.layer = "l0"} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    %r1 = dtfm.relu %h {dtfm.layer = "l1"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %r2 = dtfm.relu %r1 {dtfm.layer = "l2"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %w2 = dtfm.param "w2" init(zeros) {dtfm.layer = "l3"} : tensor<8x4xf32>
    %y = dtfm.matmul %r2, %w2 {dtfm.layer = "l3"} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}

// -----

// COM: With a dtfm.assignment, stage s runs on its group at the group's
// COM: slowest member: stage 0 = [a, b] runs at b's 0.5 GFLOP/s, stage 1 =
// COM: [c, d] at 1 GFLOP/s. [0, 1, 4]: 384 / 0.5e9 = 7.68e-07 s vs 448 /
// COM: 1e9; [0, 2, 4] would be 416 / 0.5e9 = 8.32e-07 s.
// CHECK-LABEL: module attributes
// CHECK-SAME: dtfm.stages = {{.*}}bounds = [0, 1, 4]{{.*}}bottleneck_s = 7.68e-07
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "quad", algorithm = "genetic", seed = 0, dp = 2, pp = 2, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a", "b"], ["c", "d"]]>, dtfm.cluster = #dtfm.cluster<name = "quad", source = "quad.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 0.5e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "c", region = "C", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "d", region = "D", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 10.0, 10.0, 0.0, 10.0, 10.0, 10.0, 10.0, 0.0, 10.0, 10.0, 10.0, 10.0, 0.0]>} {
  func.func @assigned() -> tensor<2x4xf32> {
    %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.layer = "l0"} : tensor<4x8xf32>
    %h = dtfm.matmul %x, %w {dtfm.layer = "l0"} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    %r1 = dtfm.relu %h {dtfm.layer = "l1"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %r2 = dtfm.relu %r1 {dtfm.layer = "l2"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %w2 = dtfm.param "w2" init(zeros) {dtfm.layer = "l3"} : tensor<8x4xf32>
    %y = dtfm.matmul %r2, %w2 {dtfm.layer = "l3"} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}

// -----

// COM: hetero's assignment carries stage_bounds: the pass keeps them
// COM: ([0, 3, 4]: 448 and 384 FLOPs) instead of partitioning.
// CHECK-LABEL: module attributes
// CHECK-SAME: dtfm.stages = {{.*}}bounds = [0, 3, 4]{{.*}}stage_seconds = [4.48e-07, 3.84e-07]
// CHECK: dtfm.relu {{.*}}{dtfm.layer = "l2", dtfm.stage = 0 : i64}
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "pair", algorithm = "hetero", seed = 0, dp = 1, pp = 2, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a"], ["b"]], iteration_s = 1.0, stage_bounds = [0, 3, 4]>, dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @bounds() -> tensor<2x4xf32> {
    %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.layer = "l0"} : tensor<4x8xf32>
    %h = dtfm.matmul %x, %w {dtfm.layer = "l0"} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    %r1 = dtfm.relu %h {dtfm.layer = "l1"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %r2 = dtfm.relu %r1 {dtfm.layer = "l2"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %w2 = dtfm.param "w2" init(zeros) {dtfm.layer = "l3"} : tensor<8x4xf32>
    %y = dtfm.matmul %r2, %w2 {dtfm.layer = "l3"} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}

// -----

// COM: A training graph: backward ops, accumulations and updates join the
// COM: block of their dtfm.layer (here l0's on stage 0, l1's on stage 1),
// COM: wherever they sit in the IR. Work: l0 = matmul 128 + its backward
// COM: (2 * 128 = 256) + AdamW (12 per element of w, 12*32 = 384) = 768
// COM: (the forward ops' own backward FLOPs are counted once, on the
// COM: dtfm.backward ops); l1 = loss (5*16 + 2*2 = 84) + its backward (2 per
// COM: logit = 32) = 116.
// CHECK-LABEL: module attributes
// CHECK-SAME: dtfm.stages = {{.*}}bounds = [0, 1, 2]{{.*}}stage_seconds = [7.68e-07, 1.16e-07]{{.*}}memory_bytes = [544, 64]
// CHECK: dtfm.cross_entropy {{.*}}dtfm.stage = 1 : i64
// CHECK-NEXT: dtfm.backward "dtfm.cross_entropy"{{.*}}dtfm.stage = 1 : i64
// CHECK-NEXT: dtfm.backward "dtfm.matmul"{{.*}}dtfm.stage = 0 : i64
// CHECK-NEXT: dtfm.adamw_update {{.*}}dtfm.stage = 0 : i64
// CHECK-NEXT: return {dtfm.stage = 1 : i64}
module attributes {dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @train() -> tensor<f32> {
    %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.layer = "l0"} : tensor<4x8xf32>
    %h = dtfm.matmul %x, %w {dtfm.layer = "l0"} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    %t = dtfm.label "t" {dtfm.layer = "l1"} : tensor<2xi64>
    %loss = dtfm.cross_entropy %h, %t {dtfm.layer = "l1"} : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<f32>
    %dh = dtfm.backward "dtfm.cross_entropy"(%h, %t) {dtfm.layer = "l1", flops = 32 : i64, wrt = array<i64: 0>} : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<2x8xf32>
    %dw = dtfm.backward "dtfm.matmul"(%x, %w, %dh) {dtfm.layer = "l0", flops = 256 : i64, wrt = array<i64: 1>} : (tensor<2x4xf32>, tensor<4x8xf32>, tensor<2x8xf32>) -> tensor<4x8xf32>
    %u = dtfm.adamw_update %w, %dw {dtfm.layer = "l0", lr = 1.000000e-03 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    return %loss : tensor<f32>
  }
}

// -----

// COM: A one-device cluster: one stage holds everything: 832 FLOPs
// COM: (8.32e-07 s) and 4*256 + 224 = 1248 B.
// CHECK-LABEL: module attributes
// CHECK-SAME: dtfm.stages = {{.*}}bounds = [0, 4]{{.*}}stage_seconds = [8.32e-07]{{.*}}memory_bytes = [1248]
// CHECK-NOT: dtfm.stage = 1
// CHECK: return {dtfm.stage = 0 : i64}
module attributes {dtfm.cluster = #dtfm.cluster<name = "one", source = "one.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0], bandwidth_gbps = [0.0]>} {
  func.func @one_device() -> tensor<2x4xf32> {
    %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.layer = "l0"} : tensor<4x8xf32>
    %h = dtfm.matmul %x, %w {dtfm.layer = "l0"} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    %r1 = dtfm.relu %h {dtfm.layer = "l1"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %r2 = dtfm.relu %r1 {dtfm.layer = "l2"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %w2 = dtfm.param "w2" init(zeros) {dtfm.layer = "l3"} : tensor<8x4xf32>
    %y = dtfm.matmul %r2, %w2 {dtfm.layer = "l3"} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}
