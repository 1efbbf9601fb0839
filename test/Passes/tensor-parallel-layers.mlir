// RUN: dtfm-opt %s -split-input-file --dtfm-tensor-parallel="layer-degrees=l0:2,l1:4" | FileCheck %s
// RUN: dtfm-opt %s -split-input-file --dtfm-tensor-parallel="degree=2 layer-degrees=l1:1" | FileCheck %s --check-prefix=DEFAULT
// RUN: dtfm-opt %s -split-input-file --dtfm-tensor-parallel="degree=2" | FileCheck %s --check-prefix=UNIFORM
// RUN: not dtfm-opt %s -split-input-file --dtfm-tensor-parallel="layer-degrees=l9:2" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not dtfm-opt %s -split-input-file --dtfm-tensor-parallel="layer-degrees=l0" 2>&1 | FileCheck %s --check-prefix=MALFORMED
// RUN: not dtfm-opt %s -split-input-file --dtfm-tensor-parallel="layer-degrees=l0:0" 2>&1 | FileCheck %s --check-prefix=MALFORMED
// RUN: not dtfm-opt %s -split-input-file --dtfm-tensor-parallel="layer-degrees=l0:3" 2>&1 | FileCheck %s --check-prefix=UNEVEN

// COM: A degree per layer (stages of different degrees): each MLP at its
// COM: layer's degree, and the module's dtfm.tensor_parallel 0 (several).
// COM: With degree=2 and l1 at 1, l1 stays whole. l1's block reads l0's
// COM: row-parallel result directly: its sum is what l1's columns read
// COM: (the rewrite once read the replaced value and crashed).

// CHECK: module attributes {dtfm.tensor_parallel = 0 : i64}
// CHECK-LABEL: func.func @two_layers
// CHECK: dtfm.param "l0.w1" {{.*}} {dtfm.layer = "l0", dtfm.tp_shard = array<i64: 1, 2>} : tensor<8x16xf32>
// CHECK: dtfm.tp_all_reduce {{.*}} {degree = 2 : i64, dtfm.layer = "l0"}
// CHECK: dtfm.param "l1.w1" {{.*}} {dtfm.layer = "l1", dtfm.tp_shard = array<i64: 1, 4>} : tensor<8x8xf32>
// CHECK: dtfm.tp_all_reduce {{.*}} {degree = 4 : i64, dtfm.layer = "l1"}
// DEFAULT: module attributes {dtfm.tensor_parallel = 0 : i64}
// DEFAULT: dtfm.param "l0.w1" {{.*}} {dtfm.layer = "l0", dtfm.tp_shard = array<i64: 1, 2>} : tensor<8x16xf32>
// DEFAULT: dtfm.param "l1.w1" init(normal, 2.000000e-02) {dtfm.layer = "l1"} : tensor<8x32xf32>
// DEFAULT-NOT: degree = 4
// UNIFORM: module attributes {dtfm.tensor_parallel = 2 : i64}
// UNIFORM: %[[S:.*]] = dtfm.tp_all_reduce %{{.*}} {degree = 2 : i64, dtfm.layer = "l0"}
// UNIFORM-NEXT: dtfm.param "l1.w1"
// UNIFORM-NEXT: dtfm.tp_all_reduce %[[S]] {degree = 2 : i64, dtfm.layer = "l1", in_backward}
// UNKNOWN: error: dtfm-tensor-parallel: layer-degrees: the model has no layer 'l9'
// MALFORMED: error: dtfm-tensor-parallel: layer-degrees: expected LAYER:DEGREE with a degree >= 1, got 'l0{{(:0)?}}'
// UNEVEN: error: dtfm-tensor-parallel: degree 3 does not divide the 32 columns of 'dtfm.linear' in layer 'l0'
func.func @two_layers() -> tensor<f32> {
  %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<3x8xf32>
  %w1 = dtfm.param "l0.w1" init(normal, 0.02) {dtfm.layer = "l0"} : tensor<8x32xf32>
  %h = dtfm.linear %x, %w1 {dtfm.layer = "l0"} : (tensor<3x8xf32>, tensor<8x32xf32>) -> tensor<3x32xf32>
  %g = dtfm.gelu %h {dtfm.layer = "l0"} : (tensor<3x32xf32>) -> tensor<3x32xf32>
  %w2 = dtfm.param "l0.w2" init(normal, 0.02) {dtfm.layer = "l0"} : tensor<32x8xf32>
  %y = dtfm.linear %g, %w2 {dtfm.layer = "l0"} : (tensor<3x32xf32>, tensor<32x8xf32>) -> tensor<3x8xf32>
  %v1 = dtfm.param "l1.w1" init(normal, 0.02) {dtfm.layer = "l1"} : tensor<8x32xf32>
  %h1 = dtfm.linear %y, %v1 {dtfm.layer = "l1"} : (tensor<3x8xf32>, tensor<8x32xf32>) -> tensor<3x32xf32>
  %g1 = dtfm.gelu %h1 {dtfm.layer = "l1"} : (tensor<3x32xf32>) -> tensor<3x32xf32>
  %v2 = dtfm.param "l1.w2" init(normal, 0.02) {dtfm.layer = "l1"} : tensor<32x8xf32>
  %y1 = dtfm.linear %g1, %v2 {dtfm.layer = "l1"} : (tensor<3x32xf32>, tensor<32x8xf32>) -> tensor<3x8xf32>
  %l = dtfm.reduce_mean %y1 {axes = array<i64: 0, 1>, dtfm.layer = "l1"} : (tensor<3x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// COM: A tied table read by layers of different degrees (the embedding's
// COM: stage at 2, the head's at 4) stays whole; the loss is not split.
// COM: Only degree 2 is used: it is the module's.

// CHECK: module attributes {dtfm.tensor_parallel = 2 : i64}
// CHECK-LABEL: func.func @tied_across_degrees
// CHECK: dtfm.param "wte" init(normal, 2.000000e-02) {dtfm.layer = "l0"} : tensor<16x4xf32>
// CHECK-NOT: vocab_shard
// DEFAULT-LABEL: func.func @tied_across_degrees
// DEFAULT: dtfm.param "wte" init(normal, 2.000000e-02) {dtfm.layer = "l0"} : tensor<16x4xf32>
// DEFAULT-NOT: vocab_shard
func.func @tied_across_degrees() -> tensor<f32> {
  %tokens = dtfm.input "tokens" {dtfm.layer = "l0"} : tensor<2x3xi64>
  %wte = dtfm.param "wte" init(normal, 0.02) {dtfm.layer = "l0"} : tensor<16x4xf32>
  %e = dtfm.embedding %tokens, %wte {dtfm.layer = "l0"} : (tensor<2x3xi64>, tensor<16x4xf32>) -> tensor<2x3x4xf32>
  %w1 = dtfm.param "l0.w1" init(normal, 0.02) {dtfm.layer = "l0"} : tensor<4x32xf32>
  %h = dtfm.linear %e, %w1 {dtfm.layer = "l0"} : (tensor<2x3x4xf32>, tensor<4x32xf32>) -> tensor<2x3x32xf32>
  %g = dtfm.gelu %h {dtfm.layer = "l0"} : (tensor<2x3x32xf32>) -> tensor<2x3x32xf32>
  %w2 = dtfm.param "l0.w2" init(normal, 0.02) {dtfm.layer = "l0"} : tensor<32x4xf32>
  %y = dtfm.linear %g, %w2 {dtfm.layer = "l0"} : (tensor<2x3x32xf32>, tensor<32x4xf32>) -> tensor<2x3x4xf32>
  %logits = dtfm.matmul %y, %wte transpose_rhs {dtfm.layer = "l1"} : (tensor<2x3x4xf32>, tensor<16x4xf32>) -> tensor<2x3x16xf32>
  %labels = dtfm.label "labels" {dtfm.layer = "l1"} : tensor<2x3xi64>
  %loss = dtfm.cross_entropy %logits, %labels {dtfm.layer = "l1"} : (tensor<2x3x16xf32>, tensor<2x3xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
