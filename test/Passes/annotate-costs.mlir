// RUN: dtfm-opt %s -split-input-file --dtfm-annotate-costs | FileCheck %s
// RUN: dtfm-opt %s -split-input-file --dtfm-annotate-costs --dtfm-annotate-costs | FileCheck %s
// COM: Values are hand-computed from the conventions in docs/CostModel.md.

// CHECK-LABEL: func.func @mlp
func.func @mlp() -> tensor<f32> {
  // CHECK: dtfm.input "x" {dtfm.cost = #dtfm.cost<fwd_flops = 0, bwd_flops = 0, saved_bytes = 0, param_bytes = 0, result_bytes = [96]>}
  %x = dtfm.input "x" : tensor<2x3x4xf32>
  // CHECK: dtfm.param "w" init(zeros) {dtfm.cost = #dtfm.cost<fwd_flops = 0, bwd_flops = 0, saved_bytes = 0, param_bytes = 40, result_bytes = [40]>}
  %w = dtfm.param "w" init(zeros) : tensor<4x5xf16>
  %w32 = dtfm.param "w32" init(zeros) : tensor<4x5xf32>
  // COM: 2*M*N*K = 2*(2*3)*5*4 = 240; backward 2x; keeps x (96 B), not w.
  // COM: moves x, w and y (96 + 80 + 120 B); the backward also writes dx, dw.
  // CHECK: dtfm.matmul {{.*}}dtfm.cost = #dtfm.cost<fwd_flops = 240, bwd_flops = 480, saved_bytes = 96, param_bytes = 0, result_bytes = [120], fwd_bytes = 296, bwd_bytes = 472>
  %y = dtfm.matmul %x, %w32 : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  // COM: 8 per element forward, keeps x.
  // CHECK: dtfm.gelu {{.*}}dtfm.cost = #dtfm.cost<fwd_flops = 240, bwd_flops = 480, saved_bytes = 120, param_bytes = 0, result_bytes = [120], fwd_bytes = 240, bwd_bytes = 360>
  %g = dtfm.gelu %y : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  // CHECK: dtfm.relu {{.*}}dtfm.cost = #dtfm.cost<fwd_flops = 30, bwd_flops = 30, saved_bytes = 120, param_bytes = 0, result_bytes = [120], fwd_bytes = 240, bwd_bytes = 360>
  %r = dtfm.relu %g : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  // CHECK: dtfm.add {{.*}}dtfm.cost = #dtfm.cost<fwd_flops = 30, bwd_flops = 30, saved_bytes = 0, param_bytes = 0, result_bytes = [120], fwd_bytes = 360, bwd_bytes = 600>
  %s = dtfm.add %r, %y : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  // COM: a view moves nothing.
  // CHECK: dtfm.flatten {{.*}}dtfm.cost = #dtfm.cost<fwd_flops = 0, bwd_flops = 0, saved_bytes = 0, param_bytes = 0, result_bytes = [120]>
  %f = dtfm.flatten %s {axis = 2 : i64} : (tensor<2x3x5xf32>) -> tensor<6x5xf32>
  %t = dtfm.label "t" : tensor<6xi32>
  // COM: 5 per logit + 2 per row = 5*30 + 2*6 = 162; backward 2 per logit.
  // CHECK: dtfm.cross_entropy {{.*}}dtfm.cost = #dtfm.cost<fwd_flops = 162, bwd_flops = 60, saved_bytes = 120, param_bytes = 0, result_bytes = [4], fwd_bytes = 148, bwd_bytes = 268>
  %loss = dtfm.cross_entropy %f, %t : (tensor<6x5xf32>, tensor<6xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @cnn
func.func @cnn() {
  %x = dtfm.input "x" : tensor<1x2x4x4xf32>
  // COM: max pool: numel(result)*kH*kW = (1*2*2*2)*4 = 32.
  // CHECK: dtfm.max_pool2d {{.*}}dtfm.cost = #dtfm.cost<fwd_flops = 32, bwd_flops = 8, saved_bytes = 128, param_bytes = 0, result_bytes = [32], fwd_bytes = 160, bwd_bytes = 288>
  %p = dtfm.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
  // CHECK: dtfm.global_avg_pool {{.*}}dtfm.cost = #dtfm.cost<fwd_flops = 8, bwd_flops = 8, saved_bytes = 0, param_bytes = 0, result_bytes = [8], fwd_bytes = 40, bwd_bytes = 72>
  %g = dtfm.global_avg_pool %p : (tensor<1x2x2x2xf32>) -> tensor<1x2x1x1xf32>
  return
}

// -----

// COM: A training graph: training ops are annotated too, their work as
// COM: fwd_flops (they run in their own phase). A dtfm.backward's work is
// COM: its flops attribute (here linear's backward as --dtfm-autodiff
// COM: writes it: 4*R*K*N + R*N = 4*2*4*3 + 2*3 = 102); AdamW: 12 FLOPs
// COM: per element of w (12 elements) = 144. (Loose patterns: dtfm.cost
// COM: is being re-typed.)
// CHECK-LABEL: func.func @train
// COM: The backward moves its inputs and writes its gradients:
// COM: 32 + 48 + 12 + 24 + 48 + 12 = 176 bytes.
// CHECK: dtfm.backward "dtfm.linear"{{.*}}dtfm.cost = {{.*}}fwd_flops = 102{{.*}}fwd_bytes = 176
// CHECK: dtfm.adamw_update {{.*}}dtfm.cost = {{.*}}fwd_flops = 144
func.func @train() {
  %x = dtfm.input "x" : tensor<2x4xf32>
  %w = dtfm.param "w" init(zeros) : tensor<4x3xf32>
  %b = dtfm.param "b" init(zeros) : tensor<3xf32>
  %dy = dtfm.input "dy" : tensor<2x3xf32>
  %g:2 = dtfm.backward "dtfm.linear"(%x, %w, %b, %dy) {flops = 102 : i64, wrt = array<i64: 1, 2>} : (tensor<2x4xf32>, tensor<4x3xf32>, tensor<3xf32>, tensor<2x3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>)
  %u = dtfm.adamw_update %w, %g#0 {lr = 1.000000e-03 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

// COM: Bytes moved (the roofline's, docs/CostModel.md): an embedding reads
// COM: its indices and the rows they name, not its table (32 + 2 * 128 B);
// COM: its backward reads indices, table and gradient and writes the
// COM: table's gradient (32 + 32000 + 128 + 32000 B). Views, sources and
// COM: collectives move nothing.
// CHECK-LABEL: func.func @bytes
func.func @bytes() -> tensor<32xf32> {
  // CHECK: dtfm.input "ids" {dtfm.cost = #dtfm.cost<{{.*}}result_bytes = [32]>}
  %ids = dtfm.input "ids" : tensor<4xi64>
  // CHECK: dtfm.param "wte" {{.*}}result_bytes = [32000]>}
  %table = dtfm.param "wte" init(zeros) : tensor<1000x8xf32>
  // CHECK: dtfm.embedding {{.*}}result_bytes = [128], fwd_bytes = 288, bwd_bytes = 64160>}
  %e = dtfm.embedding %ids, %table : (tensor<4xi64>, tensor<1000x8xf32>) -> tensor<4x8xf32>
  // CHECK: dtfm.tp_all_reduce {{.*}}result_bytes = [128]>}
  %s = dtfm.tp_all_reduce %e {degree = 2 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: dtfm.reshape {{.*}}result_bytes = [128]>}
  %r = dtfm.reshape %s : (tensor<4x8xf32>) -> tensor<32xf32>
  return %r : tensor<32xf32>
}
