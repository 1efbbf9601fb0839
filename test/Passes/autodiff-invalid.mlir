// RUN: dtfm-opt %s -split-input-file -verify-diagnostics --dtfm-autodiff
// RUN: not dtfm-opt %s -split-input-file --dtfm-autodiff=optimizer=lamb 2>&1 | FileCheck %s --check-prefix=OPT
// RUN: not dtfm-opt %s -split-input-file --dtfm-autodiff=lr=0 2>&1 | FileCheck %s --check-prefix=LR
// RUN: not dtfm-opt %S/Inputs/no-loss.mlir --dtfm-autodiff 2>&1 | FileCheck %s --check-prefix=NOLOSS

// COM: Option errors and a module without a loss have no op to point at.
// OPT: error: dtfm-autodiff: unknown optimizer 'lamb' (expected adamw or sgd)
// LR: error: dtfm-autodiff: lr must be positive, got 0
// NOLOSS: no-loss.mlir:0:0: error: dtfm-autodiff: no function has a loss (dtfm.cross_entropy); nothing to differentiate

func.func @two_losses() -> tensor<f32> {
  %x = dtfm.input "x" : tensor<2x3xf32>
  %t = dtfm.label "t" : tensor<2xi64>
  %a = dtfm.cross_entropy %x, %t : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  // expected-error @+1 {{'dtfm.cross_entropy' op is a second loss; dtfm-autodiff expects one dtfm.cross_entropy per function}}
  %b = dtfm.cross_entropy %x, %t : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  return %a : tensor<f32>
}

// -----

// COM: Running the pass twice: the function already has dtfm.backward ops.
// expected-error @+1 {{'func.func' op already has a backward graph}}
func.func @twice() -> tensor<f32> {
  %x = dtfm.input "x" : tensor<2x3xf32>
  %w = dtfm.param "w" init(zeros) : tensor<2x3xf32>
  %y = dtfm.add %x, %w : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %t = dtfm.label "t" : tensor<2xi64>
  %loss = dtfm.cross_entropy %y, %t : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  %g = dtfm.backward "dtfm.cross_entropy"(%y, %t) {flops = 12 : i64, wrt = array<i64: 0>} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  return %loss : tensor<f32>
}
