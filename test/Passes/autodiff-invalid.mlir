// RUN: dtfm-opt %s -split-input-file -verify-diagnostics --dtfm-autodiff
// RUN: not dtfm-opt %s -split-input-file --dtfm-autodiff=optimizer=lamb 2>&1 | FileCheck %s --check-prefix=OPT
// RUN: not dtfm-opt %s -split-input-file --dtfm-autodiff=lr=0 2>&1 | FileCheck %s --check-prefix=LR
// RUN: not dtfm-opt %S/Inputs/no-loss.mlir --dtfm-autodiff 2>&1 | FileCheck %s --check-prefix=NOLOSS
// RUN: not dtfm-opt %s -split-input-file --dtfm-autodiff=lr-schedule=exponential 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not dtfm-opt %s -split-input-file --dtfm-autodiff="lr-schedule=cosine warmup-steps=10 total-steps=10" 2>&1 | FileCheck %s --check-prefix=TOTAL
// RUN: not dtfm-opt %s -split-input-file --dtfm-autodiff="lr-schedule=wsd total-steps=10" 2>&1 | FileCheck %s --check-prefix=WSD
// RUN: not dtfm-opt %s -split-input-file --dtfm-autodiff="lr-schedule=linear total-steps=10 min-lr=0.5 lr=0.1" 2>&1 | FileCheck %s --check-prefix=MIN
// RUN: not dtfm-opt %s -split-input-file --dtfm-autodiff="min-lr=1e-5" 2>&1 | FileCheck %s --check-prefix=CONST
// RUN: not dtfm-opt %s -split-input-file --dtfm-autodiff=warmup-steps=-3 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: not dtfm-opt %s -split-input-file --dtfm-autodiff=weight-decay=-0.1 2>&1 | FileCheck %s --check-prefix=DECAY
// RUN: not dtfm-opt %s -split-input-file --dtfm-autodiff=decay-params=biases 2>&1 | FileCheck %s --check-prefix=GROUPS
// RUN: not dtfm-opt %s -split-input-file --dtfm-autodiff=clip-grad-norm=-1 2>&1 | FileCheck %s --check-prefix=CLIP

// COM: Option errors and a module without a loss have no op to point at.
// OPT: error: dtfm-autodiff: unknown optimizer 'lamb' (expected adamw or sgd)
// LR: error: dtfm-autodiff: lr must be positive and finite, got 0
// KIND: error: dtfm-autodiff: unknown lr-schedule 'exponential' (expected constant, cosine, linear or wsd)
// TOTAL: error: dtfm-autodiff: lr-schedule=cosine needs total-steps greater than warmup-steps (10), got 10
// WSD: error: dtfm-autodiff: lr-schedule=wsd needs decay-steps in [1, total-steps - warmup-steps] = [1, 10], got 0
// MIN: error: dtfm-autodiff: min-lr must be in [0, lr] (lr 0.1), got 0.5
// CONST: error: dtfm-autodiff: min-lr needs a decaying lr-schedule (cosine, linear or wsd)
// NEG: error: dtfm-autodiff: warmup-steps must be in [0, 1e12], got -3
// DECAY: error: dtfm-autodiff: weight-decay must be >= 0 and finite, got -0.1{{$}}
// CLIP: error: dtfm-autodiff: clip-grad-norm must be >= 0 and finite (0: no clipping), got -1{{$}}
// GROUPS: error: dtfm-autodiff: unknown decay-params 'biases' (expected matrices, matrices-except-embeddings or all)
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
// expected-error @+1 {{dtfm-autodiff: function @twice already has its backward graph and optimizer updates; give the forward model (--dtfm-plan and --dtfm-autodiff take the same optimizer options)}}
func.func @twice() -> tensor<f32> {
  %x = dtfm.input "x" : tensor<2x3xf32>
  %w = dtfm.param "w" init(zeros) : tensor<2x3xf32>
  %y = dtfm.add %x, %w : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %t = dtfm.label "t" : tensor<2xi64>
  %loss = dtfm.cross_entropy %y, %t : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  %g = dtfm.backward "dtfm.cross_entropy"(%y, %t) {flops = 12 : i64, wrt = array<i64: 0>} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  return %loss : tensor<f32>
}
