// RUN: dtfm-opt %s -split-input-file --dtfm-autodiff | FileCheck %s
// RUN: dtfm-opt %s -split-input-file --dtfm-autodiff="optimizer=sgd lr=0.5 momentum=0.25 weight-decay=0" | FileCheck %s --check-prefix=SGD
// RUN: dtfm-opt %s -split-input-file --dtfm-autodiff="lr=2e-3 beta2=0.95 epsilon=1e-6 weight-decay=0.1 decay-params=all lr-schedule=cosine warmup-steps=10 total-steps=100 min-lr=1e-4" | FileCheck %s --check-prefix=SCHED
// RUN: dtfm-opt %s -split-input-file --dtfm-autodiff="optimizer=sgd lr=0.1 lr-schedule=wsd total-steps=100 decay-steps=20" | FileCheck %s --check-prefix=WSD
// RUN: dtfm-opt %s -split-input-file --dtfm-autodiff="decay-params=matrices-except-embeddings" | FileCheck %s --check-prefix=EMB

// COM: The normal case: x -> linear(W, b) -> loss. Backward ops in reverse
// COM: forward order, each tagged with its forward op's layer; then one
// COM: update per trainable parameter, in parameter order.
// COM: Backward FLOPs (DtfmOps.td): cross_entropy 2 per logit = 2*2*3 = 12;
// COM: linear 4*R*K*N + R*N = 4*2*4*3 + 2*3 = 102.
// CHECK-LABEL: func.func @linear
// CHECK: %[[X:.*]] = dtfm.input "x"
// CHECK: %[[W:.*]] = dtfm.param "w"
// CHECK: %[[B:.*]] = dtfm.param "b"
// CHECK: %[[Y:.*]] = dtfm.linear %[[X]], %[[W]], %[[B]]
// CHECK: %[[T:.*]] = dtfm.label "t"
// CHECK: %[[L:.*]] = dtfm.cross_entropy %[[Y]], %[[T]]
// CHECK-NEXT: %[[DY:.*]] = dtfm.backward "dtfm.cross_entropy"(%[[Y]], %[[T]]) {dtfm.layer = "head", flops = 12 : i64, wrt = array<i64: 0>} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
// COM: x is an input: only W and b (operands 1 and 2) get gradients.
// CHECK-NEXT: %[[DL:.*]]:2 = dtfm.backward "dtfm.linear"(%[[X]], %[[W]], %[[B]], %[[DY]]) {dtfm.layer = "l0", flops = 102 : i64, wrt = array<i64: 1, 2>} : (tensor<2x4xf32>, tensor<4x3xf32>, tensor<3xf32>, tensor<2x3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>)
// COM: AdamW at its defaults prints only lr; the bias (rank 1) is left out
// COM: of weight decay (decay-params=matrices).
// CHECK-NEXT: dtfm.adamw_update %[[W]], %[[DL]]#0 {dtfm.layer = "l0", lr = 1.000000e-03 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: dtfm.adamw_update %[[B]], %[[DL]]#1 {dtfm.layer = "l0", lr = 1.000000e-03 : f64, weight_decay = 0.000000e+00 : f64}
// CHECK-NEXT: return %[[L]]
// SGD-LABEL: func.func @linear
// SGD: dtfm.sgd_update %{{.*}}, %{{.*}} {dtfm.layer = "l0", lr = 5.000000e-01 : f64, momentum = 2.500000e-01 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
// SGD-NEXT: dtfm.sgd_update %{{.*}}, %{{.*}} {dtfm.layer = "l0", lr = 5.000000e-01 : f64, momentum = 2.500000e-01 : f64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
// SGD-NOT: adamw_update
// SCHED-LABEL: func.func @linear
// SCHED: dtfm.adamw_update {{.*}} {beta2 = 0.94999999999999996 : f64, dtfm.layer = "l0", epsilon = 9.9999999999999995E-7 : f64, lr = 2.000000e-03 : f64, lr_schedule = "cosine", min_lr = 1.000000e-04 : f64, total_steps = 100 : i64, warmup_steps = 10 : i64, weight_decay = 1.000000e-01 : f64} : (tensor<4x3xf32>
// SCHED-NEXT: dtfm.adamw_update {{.*}} {beta2 = 0.94999999999999996 : f64, dtfm.layer = "l0", epsilon = 9.9999999999999995E-7 : f64, lr = 2.000000e-03 : f64, lr_schedule = "cosine", min_lr = 1.000000e-04 : f64, total_steps = 100 : i64, warmup_steps = 10 : i64, weight_decay = 1.000000e-01 : f64} : (tensor<3xf32>
// WSD-LABEL: func.func @linear
// WSD: dtfm.sgd_update {{.*}} {decay_steps = 20 : i64, dtfm.layer = "l0", lr = 1.000000e-01 : f64, lr_schedule = "wsd", momentum = 9.000000e-01 : f64, total_steps = 100 : i64, weight_decay = 1.000000e-02 : f64} : (tensor<4x3xf32>
// WSD-NEXT: dtfm.sgd_update {{.*}} {decay_steps = 20 : i64, dtfm.layer = "l0", lr = 1.000000e-01 : f64, lr_schedule = "wsd", momentum = 9.000000e-01 : f64, total_steps = 100 : i64} : (tensor<3xf32>
func.func @linear() -> tensor<f32> {
  %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<2x4xf32>
  %w = dtfm.param "w" init(normal, 0.1) {dtfm.layer = "l0"} : tensor<4x3xf32>
  %b = dtfm.param "b" init(zeros) {dtfm.layer = "l0"} : tensor<3xf32>
  %y = dtfm.linear %x, %w, %b {dtfm.layer = "l0"} : (tensor<2x4xf32>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %t = dtfm.label "t" {dtfm.layer = "head"} : tensor<2xi64>
  %loss = dtfm.cross_entropy %y, %t {dtfm.layer = "head"} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// COM: A value used twice (y feeds relu and add): its two gradients are
// COM: summed by one dtfm.accumulate, in the layer both contributions come
// COM: from (l1), not in y's own layer (l0).
// CHECK-LABEL: func.func @two_uses
// CHECK: %[[Y:.*]] = dtfm.matmul
// CHECK: %[[R:.*]] = dtfm.relu %[[Y]]
// CHECK: %[[S:.*]] = dtfm.add %[[R]], %[[Y]]
// CHECK: %[[DS:.*]] = dtfm.backward "dtfm.cross_entropy"(%[[S]],
// COM: add: backward numel = 6; relu: 1 per element = 6.
// CHECK-NEXT: %[[DA:.*]]:2 = dtfm.backward "dtfm.add"(%[[R]], %[[Y]], %[[DS]]) {dtfm.layer = "l1", flops = 6 : i64, wrt = array<i64: 0, 1>}
// CHECK-NEXT: %[[DR:.*]] = dtfm.backward "dtfm.relu"(%[[Y]], %[[DA]]#0) {dtfm.layer = "l1", flops = 6 : i64, wrt = array<i64: 0>}
// CHECK-NEXT: %[[DY:.*]] = dtfm.accumulate %[[DA]]#1, %[[DR]] {dtfm.layer = "l1"} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// COM: matmul backward = 2 * forward = 2 * (2*2*3*4) = 96.
// CHECK-NEXT: dtfm.backward "dtfm.matmul"(%{{.*}}, %{{.*}}, %[[DY]]) {dtfm.layer = "l0", flops = 96 : i64, wrt = array<i64: 1>}
// CHECK-NEXT: dtfm.adamw_update
// CHECK-NOT: dtfm.accumulate
func.func @two_uses() -> tensor<f32> {
  %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<2x4xf32>
  %w = dtfm.param "w" init(normal, 0.1) {dtfm.layer = "l0"} : tensor<4x3xf32>
  %y = dtfm.matmul %x, %w {dtfm.layer = "l0"} : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %r = dtfm.relu %y {dtfm.layer = "l1"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %s = dtfm.add %r, %y {dtfm.layer = "l1"} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %t = dtfm.label "t" {dtfm.layer = "l1"} : tensor<2xi64>
  %loss = dtfm.cross_entropy %s, %t {dtfm.layer = "l1"} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// COM: A parameter used on two paths (a tied weight): its two gradients
// COM: come from different layers, so their sum is placed in the
// COM: parameter's own layer ("emb"), and it gets one update.
// CHECK-LABEL: func.func @tied
// CHECK: %[[E:.*]] = dtfm.param "e"
// COM: The forward op's transpose_rhs travels as dtfm.forward_attrs.
// COM: matmul backward 2 * (2*B*M*N*K) = 2 * 2*2*3*8*4 = 768; embedding
// COM: backward numel(result) = 2*3*4 = 24.
// CHECK: %[[DM:.*]]:2 = dtfm.backward "dtfm.matmul"({{.*}}) {dtfm.forward_attrs = {transpose_rhs}, dtfm.layer = "head", flops = 768 : i64, wrt = array<i64: 0, 1>}
// CHECK-NEXT: %[[DE:.*]] = dtfm.backward "dtfm.embedding"(%{{.*}}, %[[E]], %[[DM]]#0) {dtfm.layer = "emb", flops = 24 : i64, wrt = array<i64: 1>}
// CHECK-NEXT: %[[SUM:.*]] = dtfm.accumulate %[[DM]]#1, %[[DE]] {dtfm.layer = "emb"} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: dtfm.adamw_update %[[E]], %[[SUM]] {dtfm.layer = "emb", lr = 1.000000e-03 : f64}
// CHECK-NOT: dtfm.adamw_update
// COM: decay-params=matrices-except-embeddings: the table dtfm.embedding
// COM: reads is left out of decay, tied or not; other matrices decay.
// EMB-LABEL: func.func @linear
// EMB: dtfm.adamw_update {{.*}} {dtfm.layer = "l0", lr = 1.000000e-03 : f64} : (tensor<4x3xf32>
// EMB-NEXT: dtfm.adamw_update {{.*}} weight_decay = 0.000000e+00 : f64} : (tensor<3xf32>
// EMB-LABEL: func.func @tied
// EMB: dtfm.adamw_update {{.*}} {dtfm.layer = "emb", lr = 1.000000e-03 : f64, weight_decay = 0.000000e+00 : f64} : (tensor<8x4xf32>
func.func @tied() -> tensor<f32> {
  %ids = dtfm.input "ids" {dtfm.layer = "emb"} : tensor<2x3xi64>
  %e = dtfm.param "e" init(normal, 0.02) {dtfm.layer = "emb"} : tensor<8x4xf32>
  %h = dtfm.embedding %ids, %e {dtfm.layer = "emb"} : (tensor<2x3xi64>, tensor<8x4xf32>) -> tensor<2x3x4xf32>
  %logits = dtfm.matmul %h, %e transpose_rhs {dtfm.layer = "head"} : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
  %t = dtfm.label "t" {dtfm.layer = "head"} : tensor<2x3xi64>
  %loss = dtfm.cross_entropy %logits, %t {dtfm.layer = "head"} : (tensor<2x3x8xf32>, tensor<2x3xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// COM: A frozen parameter gets no gradient and no update; an op off every
// COM: parameter's path (relu of the input) gets no backward op.
// CHECK-LABEL: func.func @frozen
// CHECK: dtfm.backward "dtfm.cross_entropy"
// COM: linear backward 4*2*4*3 + 2*3 = 102 (the bias term is counted even
// COM: for a frozen bias).
// CHECK-NEXT: %[[DL:.*]] = dtfm.backward "dtfm.linear"({{.*}}) {dtfm.layer = "l0", flops = 102 : i64, wrt = array<i64: 1>} : {{.*}} -> tensor<4x3xf32>
// CHECK-NEXT: dtfm.adamw_update %{{.*}}, %[[DL]]
// CHECK-NEXT: return
// CHECK-NOT: dtfm.backward "dtfm.relu"
func.func @frozen() -> tensor<f32> {
  %x = dtfm.input "x" {dtfm.layer = "l0"} : tensor<2x4xf32>
  %rx = dtfm.relu %x {dtfm.layer = "l0"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %w = dtfm.param "w" init(normal, 0.1) {dtfm.layer = "l0"} : tensor<4x3xf32>
  %f = dtfm.param "f" init(ones) frozen {dtfm.layer = "l0"} : tensor<3xf32>
  %y = dtfm.linear %rx, %w, %f {dtfm.layer = "l0"} : (tensor<2x4xf32>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %t = dtfm.label "t" {dtfm.layer = "l0"} : tensor<2xi64>
  %loss = dtfm.cross_entropy %y, %t {dtfm.layer = "l0"} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// COM: A function without a loss is left as it is when another has one.
// CHECK-LABEL: func.func @no_loss
// CHECK-NEXT: dtfm.input
// CHECK-NEXT: dtfm.relu
// CHECK-NEXT: return
// CHECK-LABEL: func.func @with_loss
// CHECK: dtfm.backward "dtfm.linear"
func.func @no_loss() -> tensor<2x3xf32> {
  %x = dtfm.input "x" : tensor<2x3xf32>
  %r = dtfm.relu %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %r : tensor<2x3xf32>
}
func.func @with_loss() -> tensor<f32> {
  %x = dtfm.input "x" : tensor<2x4xf32>
  %w = dtfm.param "w" init(zeros) : tensor<4x3xf32>
  %y = dtfm.linear %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  %t = dtfm.label "t" : tensor<2xi64>
  %loss = dtfm.cross_entropy %y, %t : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
