// RUN: dtfm-opt %s -split-input-file --dtfm-rebatch=micro-batch-size=3 | FileCheck %s

// COM: The normal case: inputs, labels and everything computed from them
// COM: scale in dimension 0 (2 -> 3); parameters do not; a flatten that
// COM: merges the batch with the next dimension scales by 3/2 (4 -> 6);
// COM: the function's result type follows its returned value.
// CHECK-LABEL: func.func @mlp() -> tensor<6x5xf32>
// CHECK-NEXT: dtfm.input "x" : tensor<3x2x4xf32>
// CHECK-NEXT: dtfm.param "w" init(zeros) : tensor<4x5xf32>
// CHECK-NEXT: dtfm.matmul %{{.*}}, %{{.*}} : (tensor<3x2x4xf32>, tensor<4x5xf32>) -> tensor<3x2x5xf32>
// CHECK-NEXT: dtfm.label "t" : tensor<3x2xi64>
// CHECK-NEXT: dtfm.cross_entropy %{{.*}}, %{{.*}} : (tensor<3x2x5xf32>, tensor<3x2xi64>) -> tensor<f32>
// CHECK-NEXT: dtfm.flatten %{{.*}} {axis = 2 : i64} : (tensor<3x2x5xf32>) -> tensor<6x5xf32>
// CHECK-NEXT: return %{{.*}} : tensor<6x5xf32>
func.func @mlp() -> tensor<4x5xf32> {
  %x = dtfm.input "x" : tensor<2x2x4xf32>
  %w = dtfm.param "w" init(zeros) : tensor<4x5xf32>
  %y = dtfm.matmul %x, %w : (tensor<2x2x4xf32>, tensor<4x5xf32>) -> tensor<2x2x5xf32>
  %t = dtfm.label "t" : tensor<2x2xi64>
  %loss = dtfm.cross_entropy %y, %t : (tensor<2x2x5xf32>, tensor<2x2xi64>) -> tensor<f32>
  %f = dtfm.flatten %y {axis = 2 : i64} : (tensor<2x2x5xf32>) -> tensor<4x5xf32>
  return %f : tensor<4x5xf32>
}

// -----

// COM: Already at the requested size: nothing changes.
// CHECK-LABEL: func.func @same
// CHECK-NEXT: dtfm.input "x" : tensor<3x4xf32>
// CHECK-NEXT: dtfm.relu %{{.*}} : (tensor<3x4xf32>) -> tensor<3x4xf32>
func.func @same() -> tensor<3x4xf32> {
  %x = dtfm.input "x" : tensor<3x4xf32>
  %r = dtfm.relu %x : (tensor<3x4xf32>) -> tensor<3x4xf32>
  return %r : tensor<3x4xf32>
}

// -----

// COM: A slice that keeps the whole batch (and cuts another dimension)
// COM: scales with it: its end in dimension 0 follows the batch, 2 -> 3.
// CHECK-LABEL: func.func @whole_batch_slice
// CHECK-NEXT: dtfm.input "x" : tensor<3x4xf32>
// CHECK-NEXT: dtfm.slice %{{.*}} {ends = array<i64: 3, 2>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<3x4xf32>) -> tensor<3x2xf32>
func.func @whole_batch_slice() -> tensor<2x2xf32> {
  %x = dtfm.input "x" : tensor<2x4xf32>
  %s = dtfm.slice %x {starts = array<i64: 0, 0>, ends = array<i64: 2, 2>, steps = array<i64: 1, 1>} : (tensor<2x4xf32>) -> tensor<2x2xf32>
  return %s : tensor<2x2xf32>
}
