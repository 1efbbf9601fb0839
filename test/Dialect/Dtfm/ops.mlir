// RUN: dtfm-opt %s | dtfm-opt | FileCheck %s
// RUN: dtfm-opt %s --mlir-print-op-generic | dtfm-opt | FileCheck %s

// CHECK-LABEL: func.func @transformer_ops
func.func @transformer_ops() -> tensor<f32> {
  // CHECK: %[[TOK:.*]] = dtfm.input "tokens" : tensor<2x8xi64>
  %tok = dtfm.input "tokens" : tensor<2x8xi64>
  // CHECK: %[[WTE:.*]] = dtfm.param "wte" init(normal, 2.000000e-02) : tensor<32x16xf32>
  %wte = dtfm.param "wte" init(normal, 0.02) : tensor<32x16xf32>
  // CHECK: dtfm.param "pos" init(uniform, 1.000000e-01) : tensor<8x16xf32>
  %pos = dtfm.param "pos" init(uniform, 0.1) : tensor<8x16xf32>
  // CHECK: dtfm.param "g" init(ones) : tensor<16xf32>
  %g = dtfm.param "g" init(ones) : tensor<16xf32>
  // CHECK: dtfm.param "b" init(zeros) : tensor<16xf32>
  %b = dtfm.param "b" init(zeros) : tensor<16xf32>
  // CHECK: dtfm.param "c" init(constant, 5.000000e-01) frozen : tensor<16xf32>
  %c = dtfm.param "c" init(constant, 0.5) frozen : tensor<16xf32>
  %w = dtfm.param "w" init(normal, 0.02) : tensor<16x16xf32>
  // CHECK: %[[EMB:.*]] = dtfm.embedding %[[TOK]], %[[WTE]] : (tensor<2x8xi64>, tensor<32x16xf32>) -> tensor<2x8x16xf32>
  %e = dtfm.embedding %tok, %wte : (tensor<2x8xi64>, tensor<32x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: dtfm.add %[[EMB]], %{{.*}} : (tensor<2x8x16xf32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
  %x = dtfm.add %e, %pos : (tensor<2x8x16xf32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: dtfm.layernorm %{{.*}} {epsilon = 2.500000e-01 : f64}
  %n = dtfm.layernorm %x, %g, %b {epsilon = 0.25 : f64} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  // CHECK: dtfm.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x8x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %q = dtfm.linear %n, %w, %b : (tensor<2x8x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  // CHECK: dtfm.linear %{{.*}}, %{{.*}} : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  %k = dtfm.linear %n, %w : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: dtfm.causal_attention %{{.*}} {num_heads = 4 : i64}
  %a = dtfm.causal_attention %q, %k, %k {num_heads = 4 : i64} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: dtfm.gelu %{{.*}} {tanh_approximation}
  %ge = dtfm.gelu %a {tanh_approximation} : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: dtfm.relu
  %r = dtfm.relu %ge : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: dtfm.softmax %{{.*}} {axis = 1 : i64}
  %s = dtfm.softmax %r {axis = 1 : i64} : (tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  // CHECK: dtfm.matmul %{{.*}}, %[[WTE]] transpose_rhs : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  %logits = dtfm.matmul %s, %wte transpose_rhs : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  // CHECK: dtfm.matmul %{{.*}}, %{{.*}} : (tensor<2x8x16xf32>, tensor<2x16x8xf32>) -> tensor<2x8x8xf32>
  %t = dtfm.reshape %s : (tensor<2x8x16xf32>) -> tensor<2x16x8xf32>
  %bmm = dtfm.matmul %s, %t : (tensor<2x8x16xf32>, tensor<2x16x8xf32>) -> tensor<2x8x8xf32>
  // CHECK: dtfm.label "labels" : tensor<2x8xi64>
  %lab = dtfm.label "labels" : tensor<2x8xi64>
  // CHECK: dtfm.cross_entropy %{{.*}} : (tensor<2x8x32xf32>, tensor<2x8xi64>) -> tensor<f32>
  %loss = dtfm.cross_entropy %logits, %lab : (tensor<2x8x32xf32>, tensor<2x8xi64>) -> tensor<f32>
  // A vocabulary padded from 30 to 32 classes.
  // CHECK: dtfm.cross_entropy %{{.*}} {classes = 30 : i64} : (tensor<2x8x32xf32>, tensor<2x8xi64>) -> tensor<f32>
  %padded = dtfm.cross_entropy %logits, %lab {classes = 30 : i64} : (tensor<2x8x32xf32>, tensor<2x8xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @resnet_ops
func.func @resnet_ops() -> tensor<f32> {
  %img = dtfm.input "images" : tensor<2x3x16x16xbf16>
  %w = dtfm.param "conv.w" init(normal, 0.1) : tensor<8x3x3x3xbf16>
  %cb = dtfm.param "conv.b" init(zeros) : tensor<8xbf16>
  %g = dtfm.param "bn.g" init(ones) : tensor<8xbf16>
  %b = dtfm.param "bn.b" init(zeros) : tensor<8xbf16>
  %m = dtfm.param "bn.mean" init(zeros) frozen : tensor<8xbf16>
  %v = dtfm.param "bn.var" init(ones) frozen : tensor<8xbf16>
  // CHECK: dtfm.conv2d %{{.*}}, %{{.*}}, %{{.*}} {padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x3x16x16xbf16>, tensor<8x3x3x3xbf16>, tensor<8xbf16>) -> tensor<2x8x8x8xbf16>
  %c = dtfm.conv2d %img, %w, %cb {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>} : (tensor<2x3x16x16xbf16>, tensor<8x3x3x3xbf16>, tensor<8xbf16>) -> tensor<2x8x8x8xbf16>
  // CHECK: dtfm.batchnorm %{{.*}} {momentum = 2.000000e-01 : f64}
  %n = dtfm.batchnorm %c, %g, %b, %m, %v {momentum = 0.2 : f64} : (tensor<2x8x8x8xbf16>, tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>) -> tensor<2x8x8x8xbf16>
  %r = dtfm.relu %n : (tensor<2x8x8x8xbf16>) -> tensor<2x8x8x8xbf16>
  // CHECK: dtfm.max_pool2d %{{.*}} {kernel = array<i64: 3, 3>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x8x8x8xbf16>) -> tensor<2x8x4x4xbf16>
  %p = dtfm.max_pool2d %r {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>} : (tensor<2x8x8x8xbf16>) -> tensor<2x8x4x4xbf16>
  // CHECK: dtfm.avg_pool2d %{{.*}} {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<2x8x4x4xbf16>) -> tensor<2x8x2x2xbf16>
  %ap = dtfm.avg_pool2d %p {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<2x8x4x4xbf16>) -> tensor<2x8x2x2xbf16>
  // CHECK: dtfm.avg_pool2d %{{.*}} {divisor_padding = array<i64: 0, 0, 0, 0>, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1, 2, 2>, strides = array<i64: 2, 2>} : (tensor<2x8x4x4xbf16>) -> tensor<2x8x3x3xbf16>
  %ceil = dtfm.avg_pool2d %p {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 2, 2>, divisor_padding = array<i64: 0, 0, 0, 0>} : (tensor<2x8x4x4xbf16>) -> tensor<2x8x3x3xbf16>
  // CHECK: dtfm.global_avg_pool %{{.*}} : (tensor<2x8x2x2xbf16>) -> tensor<2x8x1x1xbf16>
  %gp = dtfm.global_avg_pool %ap : (tensor<2x8x2x2xbf16>) -> tensor<2x8x1x1xbf16>
  // CHECK: dtfm.flatten %{{.*}} : (tensor<2x8x1x1xbf16>) -> tensor<2x8xbf16>
  %f = dtfm.flatten %gp : (tensor<2x8x1x1xbf16>) -> tensor<2x8xbf16>
  %fw = dtfm.param "fc.w" init(normal, 0.1) : tensor<8x10xbf16>
  %logits = dtfm.linear %f, %fw : (tensor<2x8xbf16>, tensor<8x10xbf16>) -> tensor<2x10xbf16>
  %lab = dtfm.label "labels" : tensor<2xi32>
  %loss = dtfm.cross_entropy %logits, %lab : (tensor<2x10xbf16>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @training_ops
func.func @training_ops() {
  %x = dtfm.input "x" : tensor<2x4xf32>
  %w = dtfm.param "w" init(normal, 0.1) : tensor<4x3xf32>
  %dy = dtfm.input "dy" : tensor<2x3xf32>
  // CHECK: dtfm.backward "dtfm.linear"(%{{.*}}, %{{.*}}, %{{.*}}) {flops = 96 : i64, wrt = array<i64: 0, 1>} : (tensor<2x4xf32>, tensor<4x3xf32>, tensor<2x3xf32>) -> (tensor<2x4xf32>, tensor<4x3xf32>)
  %dx, %dw = dtfm.backward "dtfm.linear"(%x, %w, %dy) {flops = 96 : i64, wrt = array<i64: 0, 1>} : (tensor<2x4xf32>, tensor<4x3xf32>, tensor<2x3xf32>) -> (tensor<2x4xf32>, tensor<4x3xf32>)
  // CHECK: dtfm.accumulate %{{.*}}, %{{.*}} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %s = dtfm.accumulate %dw, %dw : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  // CHECK: dtfm.sgd_update %{{.*}}, %{{.*}} {lr = 5.000000e-01 : f64, momentum = 5.000000e-01 : f64}
  %u = dtfm.sgd_update %w, %s {lr = 0.5 : f64, momentum = 0.5 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  // CHECK: dtfm.adamw_update %{{.*}}, %{{.*}} {beta1 = 5.000000e-01 : f64, lr = 2.500000e-01 : f64}
  %a = dtfm.adamw_update %w, %s {lr = 0.25 : f64, beta1 = 0.5 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return
}

// CHECK-LABEL: func.func @activations
func.func @activations() -> tensor<2x3xf32> {
  %x = dtfm.input "x" : tensor<2x3xf32>
  // CHECK: dtfm.sigmoid %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %s = dtfm.sigmoid %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: dtfm.clip %{{.*}} {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %c = dtfm.clip %s {min = 0.0 : f64, max = 6.0 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: dtfm.silu %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %l = dtfm.silu %c : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %g = dtfm.param "g" init(ones) : tensor<3xf32>
  // CHECK: dtfm.rms_norm %{{.*}}, %{{.*}} {epsilon = 9.9999999999999995E-7 : f64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %n = dtfm.rms_norm %l, %g {epsilon = 1.0e-6 : f64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %n : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @selections
func.func @selections() -> tensor<2x1xf32> {
  %x = dtfm.input "x" : tensor<2x3xf32>
  %s = dtfm.param "slope" init(ones) : tensor<3xf32>
  // CHECK: dtfm.prelu %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %p = dtfm.prelu %x, %s : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: dtfm.maximum %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %hi = dtfm.maximum %p, %s : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: dtfm.minimum
  %lo = dtfm.minimum %hi, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: dtfm.abs %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %a = dtfm.abs %lo : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: dtfm.log %{{.*}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %l = dtfm.log %a : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: dtfm.reduce_min %{{.*}} {axes = array<i64: 0>} : (tensor<2x3xf32>) -> tensor<3xf32>
  %m = dtfm.reduce_min %l {axes = array<i64: 0>} : (tensor<2x3xf32>) -> tensor<3xf32>
  // CHECK: dtfm.reduce_max %{{.*}} {axes = array<i64: -1>, keepdims} : (tensor<2x3xf32>) -> tensor<2x1xf32>
  %r = dtfm.reduce_max %l {axes = array<i64: -1>, keepdims} : (tensor<2x3xf32>) -> tensor<2x1xf32>
  return %r : tensor<2x1xf32>
}

// CHECK-LABEL: func.func @transposed_convolution
func.func @transposed_convolution() -> tensor<2x6x7x13xf32> {
  %x = dtfm.input "x" : tensor<2x4x3x4xf32>
  %w = dtfm.param "w" init(ones) : tensor<4x3x3x2xf32>
  %b = dtfm.param "b" init(zeros) : tensor<6xf32>
  // CHECK: dtfm.conv_transpose2d %{{.*}}, %{{.*}}, %{{.*}} {dilations = array<i64: 1, 2>, groups = 2 : i64, output_padding = array<i64: 1, 2>, padding = array<i64: 1, 0, 0, 1>, strides = array<i64: 2, 3>} : (tensor<2x4x3x4xf32>, tensor<4x3x3x2xf32>, tensor<6xf32>) -> tensor<2x6x7x13xf32>
  %y = dtfm.conv_transpose2d %x, %w, %b {strides = array<i64: 2, 3>, padding = array<i64: 1, 0, 0, 1>, dilations = array<i64: 1, 2>, output_padding = array<i64: 1, 2>, groups = 2 : i64} : (tensor<2x4x3x4xf32>, tensor<4x3x3x2xf32>, tensor<6xf32>) -> tensor<2x6x7x13xf32>
  return %y : tensor<2x6x7x13xf32>
}

// CHECK-LABEL: func.func @inference_batchnorm
func.func @inference_batchnorm() -> tensor<2x3x4x4xf32> {
  %x = dtfm.input "x" : tensor<2x3x4x4xf32>
  %g = dtfm.param "g" init(ones) : tensor<3xf32>
  %b = dtfm.param "b" init(zeros) : tensor<3xf32>
  %m = dtfm.param "m" init(zeros) frozen : tensor<3xf32>
  %v = dtfm.param "v" init(ones) frozen : tensor<3xf32>
  // CHECK: dtfm.batchnorm {{.*}} {inference}
  %y = dtfm.batchnorm %x, %g, %b, %m, %v {inference} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  return %y : tensor<2x3x4x4xf32>
}
