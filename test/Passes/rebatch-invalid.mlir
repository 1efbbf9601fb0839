// RUN: not dtfm-opt %s -split-input-file --dtfm-rebatch=micro-batch-size=4 2>&1 | FileCheck %s
// RUN: not dtfm-opt %S/Inputs/no-loss.mlir --dtfm-rebatch=micro-batch-size=0 2>&1 | FileCheck %s --check-prefix=ZERO

// COM: dtfm-rebatch reports one line on the module (no op location), naming
// COM: the op at fault in the message.

// ZERO: error: dtfm-rebatch: the micro-batch size must be positive

// CHECK: error: dtfm-rebatch: the inputs disagree on the micro-batch size (2 and 3 at 'dtfm.label' at
func.func @disagree() -> tensor<3xi64> {
  %x = dtfm.input "x" : tensor<2x5xf32>
  %t = dtfm.label "t" : tensor<3xi64>
  return %t : tensor<3xi64>
}

// -----

// CHECK: error: dtfm-rebatch: the model has no dtfm.input or dtfm.label
func.func @no_inputs() -> tensor<4x5xf32> {
  %w = dtfm.param "w" init(zeros) : tensor<4x5xf32>
  return %w : tensor<4x5xf32>
}

// -----

// COM: Training graphs are refused (dtfm.backward present).
// CHECK: error: dtfm-rebatch: cannot change the micro-batch size from 2 to 4: the module is a training graph; rebatch before --dtfm-autodiff
func.func @trained() -> tensor<f32> {
  %x = dtfm.input "x" : tensor<2x3xf32>
  %w = dtfm.param "w" init(zeros) : tensor<2x3xf32>
  %y = dtfm.add %x, %w : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %t = dtfm.label "t" : tensor<2xi64>
  %loss = dtfm.cross_entropy %y, %t : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  %g = dtfm.backward "dtfm.cross_entropy"(%y, %t) {flops = 12 : i64, wrt = array<i64: 0>} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  return %loss : tensor<f32>
}

// -----

// CHECK: error: dtfm-rebatch: cannot change the micro-batch size from 2 to 4: 'dtfm.slice' at {{.*}} slices the batch dimension
func.func @slice_batch() -> tensor<1x3xf32> {
  %x = dtfm.input "x" : tensor<2x3xf32>
  %s = dtfm.slice %x {starts = array<i64: 1, 0>, ends = array<i64: 2, 3>, steps = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<1x3xf32>
  return %s : tensor<1x3xf32>
}

// -----

// COM: A transpose moves the batch to dimension 1: the re-verified module
// COM: fails, and the verifier's message is reported: x becomes 4x8, so the
// COM: transpose should give 8x4, while dimension 0 of its result (8) scaled
// COM: by 4/2 gives 16x2.
// CHECK: error: dtfm-rebatch: cannot change the micro-batch size from 2 to 4: 'dtfm.transpose' op expected result type 'tensor<8x4xf32>', found 'tensor<16x2xf32>'
func.func @moved() -> tensor<8x2xf32> {
  %x = dtfm.input "x" : tensor<2x8xf32>
  %t = dtfm.transpose %x {perm = array<i64: 1, 0>} : (tensor<2x8xf32>) -> tensor<8x2xf32>
  return %t : tensor<8x2xf32>
}
