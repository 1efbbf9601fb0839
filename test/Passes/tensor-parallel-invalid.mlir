// RUN: not dtfm-opt %s -split-input-file --dtfm-tensor-parallel=degree=3 2>&1 | FileCheck %s
// RUN: not dtfm-opt %S/Inputs/no-loss.mlir --dtfm-tensor-parallel=degree=0 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: dtfm-translate --import-gpt tiny | dtfm-opt --dtfm-tensor-parallel=degree=2 --dtfm-autodiff | not dtfm-opt --dtfm-tensor-parallel=degree=2 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: dtfm-translate --import-gpt tiny | dtfm-opt --dtfm-autodiff | not dtfm-opt --dtfm-tensor-parallel=degree=2 2>&1 | FileCheck %s --check-prefix=TRAINED

// COM: One line each, on the module, naming the block at fault.

// ZERO: error: dtfm-tensor-parallel: degree must be at least 1, got 0 (--dtfm-plan's tp=0, a degree chosen with the shape, needs global-batch)
// TWICE: error: dtfm-tensor-parallel: the model is sharded already
// TRAINED: error: dtfm-tensor-parallel: the module has a backward graph already; shard the forward graph (before --dtfm-autodiff)

// CHECK: error: dtfm-tensor-parallel: degree 3 does not divide the 2 heads of 'dtfm.causal_attention' in layer 'layer.0'
func.func @heads() -> tensor<2x4x6xf32> {
  %x = dtfm.input "x" : tensor<2x4x6xf32>
  %qw = dtfm.param "q.w" init(normal, 0.02) : tensor<6x6xf32>
  %q = dtfm.linear %x, %qw {dtfm.layer = "layer.0"} : (tensor<2x4x6xf32>, tensor<6x6xf32>) -> tensor<2x4x6xf32>
  %kw = dtfm.param "k.w" init(normal, 0.02) : tensor<6x6xf32>
  %k = dtfm.linear %x, %kw : (tensor<2x4x6xf32>, tensor<6x6xf32>) -> tensor<2x4x6xf32>
  %vw = dtfm.param "v.w" init(normal, 0.02) : tensor<6x6xf32>
  %v = dtfm.linear %x, %vw : (tensor<2x4x6xf32>, tensor<6x6xf32>) -> tensor<2x4x6xf32>
  %a = dtfm.causal_attention %q, %k, %v {num_heads = 2 : i64, dtfm.layer = "layer.0"} : (tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %ow = dtfm.param "o.w" init(normal, 0.02) : tensor<6x6xf32>
  %o = dtfm.linear %a, %ow : (tensor<2x4x6xf32>, tensor<6x6xf32>) -> tensor<2x4x6xf32>
  return %o : tensor<2x4x6xf32>
}

// -----

// CHECK: error: dtfm-tensor-parallel: degree 3 does not divide the 8 columns of 'dtfm.linear' in layer 'mlp'
func.func @width() -> tensor<3x4xf32> {
  %x = dtfm.input "x" : tensor<3x4xf32>
  %w1 = dtfm.param "w1" init(normal, 0.02) : tensor<4x8xf32>
  %h = dtfm.linear %x, %w1 {dtfm.layer = "mlp"} : (tensor<3x4xf32>, tensor<4x8xf32>) -> tensor<3x8xf32>
  %g = dtfm.gelu %h : (tensor<3x8xf32>) -> tensor<3x8xf32>
  %w2 = dtfm.param "w2" init(normal, 0.02) : tensor<8x4xf32>
  %y = dtfm.linear %g, %w2 : (tensor<3x8xf32>, tensor<8x4xf32>) -> tensor<3x4xf32>
  return %y : tensor<3x4xf32>
}

// -----

// COM: Nothing to shard (two linears without an activation between them
// COM: are not an MLP).
// CHECK: error: dtfm-tensor-parallel: no attention or MLP block or vocabulary to shard (degree 3)
func.func @nothing() -> tensor<3x4xf32> {
  %x = dtfm.input "x" : tensor<3x4xf32>
  %w1 = dtfm.param "w1" init(normal, 0.02) : tensor<4x6xf32>
  %h = dtfm.linear %x, %w1 : (tensor<3x4xf32>, tensor<4x6xf32>) -> tensor<3x6xf32>
  %w2 = dtfm.param "w2" init(normal, 0.02) : tensor<6x4xf32>
  %y = dtfm.linear %h, %w2 : (tensor<3x6xf32>, tensor<6x4xf32>) -> tensor<3x4xf32>
  return %y : tensor<3x4xf32>
}

// -----

// COM: Grouped-query attention: the degree must divide the key/value heads
// COM: too (3 divides the 6 query heads, not the 2 key/value heads).
// CHECK: error: dtfm-tensor-parallel: degree 3 does not divide the 2 key/value heads of 'dtfm.causal_attention' in layer 'gqa'
func.func @kv_heads() -> tensor<2x4x12xf32> {
  %x = dtfm.input "x" : tensor<2x4x12xf32>
  %qw = dtfm.param "q.w" init(normal, 0.02) : tensor<12x12xf32>
  %q = dtfm.linear %x, %qw : (tensor<2x4x12xf32>, tensor<12x12xf32>) -> tensor<2x4x12xf32>
  %kw = dtfm.param "k.w" init(normal, 0.02) : tensor<12x4xf32>
  %k = dtfm.linear %x, %kw : (tensor<2x4x12xf32>, tensor<12x4xf32>) -> tensor<2x4x4xf32>
  %vw = dtfm.param "v.w" init(normal, 0.02) : tensor<12x4xf32>
  %v = dtfm.linear %x, %vw : (tensor<2x4x12xf32>, tensor<12x4xf32>) -> tensor<2x4x4xf32>
  %a = dtfm.causal_attention %q, %k, %v {num_heads = 6 : i64, num_kv_heads = 2 : i64, dtfm.layer = "gqa"} : (tensor<2x4x12xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x12xf32>
  %ow = dtfm.param "o.w" init(normal, 0.02) : tensor<12x12xf32>
  %o = dtfm.linear %a, %ow : (tensor<2x4x12xf32>, tensor<12x12xf32>) -> tensor<2x4x12xf32>
  return %o : tensor<2x4x12xf32>
}
