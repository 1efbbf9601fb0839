// COM: End-to-end test through the importer: inputs built by dtfm-translate --import-gpt and a chain of passes, so it also breaks when the importer or an earlier pass changes (the hand-written pass tests are in test/Passes).
// RUN: dtfm-opt %s --dtfm-autodiff | FileCheck %s
// RUN: dtfm-opt %s --dtfm-autodiff="optimizer=sgd lr=0.5 momentum=0.25 weight-decay=0" | FileCheck %s --check-prefix=SGD
// RUN: dtfm-opt %s --dtfm-autodiff --dtfm-annotate-costs --dtfm-print-costs="per-op=false" -o /dev/null | FileCheck %s --check-prefix=COSTS
// RUN: dtfm-translate --import-gpt tiny | dtfm-opt --dtfm-autodiff --verify-roundtrip | FileCheck %s --check-prefix=GPT

// COM: y = x W + b, tied: logits = y W2 and y also feeds a second use.
// CHECK-LABEL: func.func @mlp
func.func @mlp() -> tensor<f32> {
  // CHECK: %[[X:.*]] = dtfm.input "x"
  %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<2x4xf32>
  // CHECK: %[[W:.*]] = dtfm.param "w"
  %w = dtfm.param "w" init(normal, 0.1) {dtfm.layer = "l0"} : tensor<4x3xf32>
  // CHECK: %[[F:.*]] = dtfm.param "frozen"
  %f = dtfm.param "frozen" init(ones) frozen {dtfm.layer = "l0"} : tensor<3xf32>
  // CHECK: %[[Y:.*]] = dtfm.linear %[[X]], %[[W]], %[[F]]
  %y = dtfm.linear %x, %w, %f {dtfm.layer = "l0"} : (tensor<2x4xf32>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: %[[R:.*]] = dtfm.relu %[[Y]]
  %r = dtfm.relu %y {dtfm.layer = "l1"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: %[[S:.*]] = dtfm.add %[[R]], %[[Y]]
  %s = dtfm.add %r, %y {dtfm.layer = "l1"} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %t = dtfm.label "t" {dtfm.layer = "l1"} : tensor<2xi64>
  // CHECK: %[[L:.*]] = dtfm.cross_entropy %[[S]]
  %loss = dtfm.cross_entropy %s, %t {dtfm.layer = "l1"} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  // COM: Backward in reverse order; the loss has no incoming gradient.
  // CHECK: %[[DS:.*]] = dtfm.backward "dtfm.cross_entropy"(%[[S]], %{{.*}}) {dtfm.layer = "l1", flops = 12 : i64, wrt = array<i64: 0>}
  // CHECK: %[[DA:.*]]:2 = dtfm.backward "dtfm.add"(%[[R]], %[[Y]], %[[DS]]) {dtfm.layer = "l1", flops = 6 : i64, wrt = array<i64: 0, 1>}
  // CHECK: %[[DR:.*]] = dtfm.backward "dtfm.relu"(%[[Y]], %[[DA]]#0) {dtfm.layer = "l1", flops = 6 : i64, wrt = array<i64: 0>}
  // COM: y is used twice: its gradients are summed, in l1 where both come
  // COM: from (a stage boundary after l0 then carries one gradient).
  // CHECK: %[[DY:.*]] = dtfm.accumulate %[[DA]]#1, %[[DR]] {dtfm.layer = "l1"}
  // COM: Only W needs a gradient (x is an input, the bias is frozen).
  // CHECK: %[[DW:.*]] = dtfm.backward "dtfm.linear"(%[[X]], %[[W]], %[[F]], %[[DY]]) {dtfm.layer = "l0", flops = 102 : i64, wrt = array<i64: 1>} : {{.*}} -> tensor<4x3xf32>
  // COM: AdamW's other hyper-parameters are at their defaults (not printed).
  // CHECK: dtfm.adamw_update %[[W]], %[[DW]] {dtfm.layer = "l0", lr = 1.000000e-03 : f64}
  // CHECK-NOT: dtfm.adamw_update %[[F]]
  // CHECK: return %[[L]]
  return %loss : tensor<f32>
}

// SGD: dtfm.sgd_update {{.*}} {dtfm.layer = "l0", lr = 5.000000e-01 : f64, momentum = 2.500000e-01 : f64}

// COM: Each phase counted once. Forward: linear 2*2*3*4 (+0 bias: frozen
// COM: bias still adds 6) = 54, relu 6, add 6, loss 5*6 + 2*2 = 34 -> 100.
// COM: Backward: loss 12, add 6, relu 6, accumulate 6, linear 102 -> 132.
// COM: Optimizer: AdamW 12 per element of W (12 elements) -> 144.
// COSTS: forward FLOPs 100
// COSTS-NEXT: backward FLOPs 132
// COSTS-NEXT: optimizer FLOPs 144
// COSTS-NEXT: training FLOPs 376

// COM: The GPT: one backward op per differentiable forward op, an update per
// COM: trainable parameter, the embedding output summed in layer.0 (its two
// COM: users), the tied embedding's two gradients summed in its own layer.
// GPT: dtfm.accumulate %{{.*}}, %{{.*}} {dtfm.layer = "layer.0"} : (tensor<4x32x64xf32>, tensor<4x32x64xf32>) -> tensor<4x32x64xf32>
// GPT: dtfm.accumulate %{{.*}}, %{{.*}} {dtfm.layer = "embedding"} : (tensor<256x64xf32>, tensor<256x64xf32>) -> tensor<256x64xf32>
// GPT: dtfm.adamw_update
