// RUN: dtfm-opt %s -split-input-file --dtfm-tensor-parallel=degree=2 | FileCheck %s

// COM: An attention block: Q, K and V column-parallel (their weights and
// COM: biases halved along the output), the attention over half the heads,
// COM: the output projection row-parallel with its sum and then its bias;
// COM: the block's input passes the backward-summing copy once, shared by
// COM: Q, K and V. The norm stays whole.

// CHECK: module attributes {dtfm.tensor_parallel = 2 : i64}
// CHECK-LABEL: func.func @attention
// CHECK: %[[LN:.*]] = dtfm.layernorm
// CHECK: dtfm.param "q.w" init(normal, 2.000000e-02) {dtfm.tp_shard = array<i64: 1, 2>} : tensor<8x4xf32>
// CHECK: dtfm.param "q.b" init(zeros) {dtfm.tp_shard = array<i64: 0, 2>} : tensor<4xf32>
// CHECK: %[[IN:.*]] = dtfm.tp_all_reduce %[[LN]] {degree = 2 : i64, in_backward}
// CHECK: %[[Q:.*]] = dtfm.linear %[[IN]], {{.*}} -> tensor<2x4x4xf32>
// CHECK: %[[K:.*]] = dtfm.linear %[[IN]], {{.*}} -> tensor<2x4x4xf32>
// CHECK: %[[V:.*]] = dtfm.linear %[[IN]], {{.*}} -> tensor<2x4x4xf32>
// CHECK: %[[A:.*]] = dtfm.causal_attention %[[Q]], %[[K]], %[[V]] {num_heads = 1 : i64} {{.*}} -> tensor<2x4x4xf32>
// CHECK: dtfm.param "o.w" {{.*}} {dtfm.tp_shard = array<i64: 0, 2>} : tensor<4x8xf32>
// CHECK: %[[OB:.*]] = dtfm.param "o.b" init(zeros) : tensor<8xf32>
// CHECK: %[[P:.*]] = dtfm.linear %[[A]], %{{.*}} : (tensor<2x4x4xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[S:.*]] = dtfm.tp_all_reduce %[[P]] {degree = 2 : i64} :
// CHECK: %[[Y:.*]] = dtfm.add %[[S]], %[[OB]]
// CHECK: dtfm.add %{{.*}}, %[[Y]]
func.func @attention() -> tensor<f32> {
  %x = dtfm.input "x" : tensor<2x4x8xf32>
  %g = dtfm.param "ln.g" init(ones) : tensor<8xf32>
  %b = dtfm.param "ln.b" init(zeros) : tensor<8xf32>
  %n = dtfm.layernorm %x, %g, %b : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %qw = dtfm.param "q.w" init(normal, 0.02) : tensor<8x8xf32>
  %qb = dtfm.param "q.b" init(zeros) : tensor<8xf32>
  %q = dtfm.linear %n, %qw, %qb : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %kw = dtfm.param "k.w" init(normal, 0.02) : tensor<8x8xf32>
  %k = dtfm.linear %n, %kw : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %vw = dtfm.param "v.w" init(normal, 0.02) : tensor<8x8xf32>
  %v = dtfm.linear %n, %vw : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %a = dtfm.causal_attention %q, %k, %v {num_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %ow = dtfm.param "o.w" init(normal, 0.02) : tensor<8x8xf32>
  %ob = dtfm.param "o.b" init(zeros) : tensor<8xf32>
  %o = dtfm.linear %a, %ow, %ob : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %r = dtfm.add %x, %o : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %l = dtfm.reduce_mean %r {axes = array<i64: 0, 1, 2>} : (tensor<2x4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// COM: An MLP: the first linear column-parallel, its activations on the
// COM: shard, the second row-parallel without a bias (nothing added).

// CHECK-LABEL: func.func @mlp
// CHECK: %[[IN:.*]] = dtfm.tp_all_reduce %{{.*}} {degree = 2 : i64, in_backward}
// CHECK: dtfm.linear %[[IN]], {{.*}} -> tensor<3x16xf32>
// CHECK: dtfm.gelu {{.*}} -> tensor<3x16xf32>
// CHECK: dtfm.relu {{.*}} -> tensor<3x16xf32>
// CHECK: %[[P:.*]] = dtfm.linear {{.*}} : (tensor<3x16xf32>, tensor<16x8xf32>) -> tensor<3x8xf32>
// CHECK: %[[S:.*]] = dtfm.tp_all_reduce %[[P]] {degree = 2 : i64}
// CHECK-NEXT: dtfm.reduce_mean %[[S]]
func.func @mlp() -> tensor<f32> {
  %x = dtfm.input "x" : tensor<3x8xf32>
  %w1 = dtfm.param "w1" init(normal, 0.02) : tensor<8x32xf32>
  %b1 = dtfm.param "b1" init(zeros) : tensor<32xf32>
  %h = dtfm.linear %x, %w1, %b1 : (tensor<3x8xf32>, tensor<8x32xf32>, tensor<32xf32>) -> tensor<3x32xf32>
  %g = dtfm.gelu %h : (tensor<3x32xf32>) -> tensor<3x32xf32>
  %r = dtfm.relu %g : (tensor<3x32xf32>) -> tensor<3x32xf32>
  %w2 = dtfm.param "w2" init(normal, 0.02) : tensor<32x8xf32>
  %y = dtfm.linear %r, %w2 : (tensor<3x32xf32>, tensor<32x8xf32>) -> tensor<3x8xf32>
  %l = dtfm.reduce_mean %y {axes = array<i64: 0, 1>} : (tensor<3x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// COM: A weight that something else reads too (tied) stays whole, and so
// COM: does its block; another block in the module is still sharded.

// CHECK-LABEL: func.func @tied
// CHECK: dtfm.param "tied" init(zeros) : tensor<8x32xf32>
// CHECK: dtfm.linear {{.*}} -> tensor<3x32xf32>
// CHECK: dtfm.param "w3" {{.*}} {dtfm.tp_shard = array<i64: 1, 2>} : tensor<8x16xf32>
func.func @tied() -> tensor<f32> {
  %x = dtfm.input "x" : tensor<3x8xf32>
  %w1 = dtfm.param "tied" init(zeros) : tensor<8x32xf32>
  %h = dtfm.linear %x, %w1 : (tensor<3x8xf32>, tensor<8x32xf32>) -> tensor<3x32xf32>
  %g = dtfm.gelu %h : (tensor<3x32xf32>) -> tensor<3x32xf32>
  %w2 = dtfm.param "w2" init(normal, 0.02) : tensor<32x8xf32>
  %y = dtfm.linear %g, %w2 : (tensor<3x32xf32>, tensor<32x8xf32>) -> tensor<3x8xf32>
  %z = dtfm.linear %y, %w1 : (tensor<3x8xf32>, tensor<8x32xf32>) -> tensor<3x32xf32>
  %w3 = dtfm.param "w3" init(normal, 0.02) : tensor<8x32xf32>
  %h3 = dtfm.linear %y, %w3 : (tensor<3x8xf32>, tensor<8x32xf32>) -> tensor<3x32xf32>
  %g3 = dtfm.relu %h3 : (tensor<3x32xf32>) -> tensor<3x32xf32>
  %w4 = dtfm.param "w4" init(normal, 0.02) : tensor<32x8xf32>
  %y4 = dtfm.linear %g3, %w4 : (tensor<3x32xf32>, tensor<32x8xf32>) -> tensor<3x8xf32>
  %s = dtfm.add %z, %z : (tensor<3x32xf32>, tensor<3x32xf32>) -> tensor<3x32xf32>
  %l = dtfm.reduce_mean %y4 {axes = array<i64: 0, 1>} : (tensor<3x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// COM: Vocabulary-parallel, tied: the table is split by rows (the
// COM: vocabulary), its lookup gives zeros outside the member's rows and a
// COM: forward sum makes it whole; the tied head computes the member's
// COM: slice of the logits from an input whose gradient the group sums, and
// COM: the loss sums its per-row parts over the group.

// CHECK-LABEL: func.func @tied_vocabulary
// CHECK: %[[T:.*]] = dtfm.param "wte" init(normal, 2.000000e-02) {dtfm.tp_shard = array<i64: 0, 2>} : tensor<8x4xf32>
// CHECK: %[[E:.*]] = dtfm.embedding %{{.*}}, %[[T]] {vocab_shard = 2 : i64} : (tensor<2x3xi64>, tensor<8x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[W:.*]] = dtfm.tp_all_reduce %[[E]] {degree = 2 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[H:.*]] = dtfm.gelu %[[W]]
// CHECK: %[[IN:.*]] = dtfm.tp_all_reduce %[[H]] {degree = 2 : i64, in_backward}
// CHECK-NEXT: %[[L:.*]] = dtfm.matmul %[[IN]], %[[T]] transpose_rhs : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
// CHECK: dtfm.cross_entropy %[[L]], %{{.*}} {vocab_shard = 2 : i64} : (tensor<2x3x8xf32>, tensor<2x3xi64>) -> tensor<f32>
func.func @tied_vocabulary() -> tensor<f32> {
  %tokens = dtfm.input "tokens" : tensor<2x3xi64>
  %wte = dtfm.param "wte" init(normal, 0.02) : tensor<16x4xf32>
  %e = dtfm.embedding %tokens, %wte : (tensor<2x3xi64>, tensor<16x4xf32>) -> tensor<2x3x4xf32>
  %h = dtfm.gelu %e : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %logits = dtfm.matmul %h, %wte transpose_rhs : (tensor<2x3x4xf32>, tensor<16x4xf32>) -> tensor<2x3x16xf32>
  %labels = dtfm.label "labels" : tensor<2x3xi64>
  %loss = dtfm.cross_entropy %logits, %labels : (tensor<2x3x16xf32>, tensor<2x3xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// COM: An untied linear head: its weight [H, V] split by columns and its
// COM: bias with it; an embedding table of a vocabulary the degree does not
// COM: divide (15 rows) stays whole, with no sum.

// CHECK-LABEL: func.func @linear_head
// CHECK: dtfm.param "wte" init(normal, 2.000000e-02) : tensor<15x4xf32>
// CHECK: dtfm.embedding {{.*}} -> tensor<2x3x4xf32>
// CHECK-NOT: vocab_shard
// CHECK: dtfm.param "head.w" init(normal, 2.000000e-02) {dtfm.tp_shard = array<i64: 1, 2>} : tensor<4x8xf32>
// CHECK: dtfm.param "head.b" init(zeros) {dtfm.tp_shard = array<i64: 0, 2>} : tensor<8xf32>
// CHECK: dtfm.tp_all_reduce {{.*}}in_backward
// CHECK-NEXT: dtfm.linear {{.*}} -> tensor<2x3x8xf32>
// CHECK: dtfm.cross_entropy {{.*}} {vocab_shard = 2 : i64}
func.func @linear_head() -> tensor<f32> {
  %tokens = dtfm.input "tokens" : tensor<2x3xi64>
  %wte = dtfm.param "wte" init(normal, 0.02) : tensor<15x4xf32>
  %e = dtfm.embedding %tokens, %wte : (tensor<2x3xi64>, tensor<15x4xf32>) -> tensor<2x3x4xf32>
  %w = dtfm.param "head.w" init(normal, 0.02) : tensor<4x16xf32>
  %b = dtfm.param "head.b" init(zeros) : tensor<16xf32>
  %logits = dtfm.linear %e, %w, %b : (tensor<2x3x4xf32>, tensor<4x16xf32>, tensor<16xf32>) -> tensor<2x3x16xf32>
  %labels = dtfm.label "labels" : tensor<2x3xi64>
  %loss = dtfm.cross_entropy %logits, %labels : (tensor<2x3x16xf32>, tensor<2x3xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// COM: Logits read by something besides the loss, and a table read by
// COM: another op: neither is split (the MLP beside them is).

// CHECK-LABEL: func.func @shared_vocabulary
// CHECK-NOT: vocab_shard
// CHECK: dtfm.param "w1" {{.*}} {dtfm.tp_shard = array<i64: 1, 2>}
// CHECK-NOT: vocab_shard
// CHECK: return
func.func @shared_vocabulary() -> tensor<f32> {
  %tokens = dtfm.input "tokens" : tensor<2x3xi64>
  %wte = dtfm.param "wte" init(normal, 0.02) : tensor<16x4xf32>
  %e = dtfm.embedding %tokens, %wte : (tensor<2x3xi64>, tensor<16x4xf32>) -> tensor<2x3x4xf32>
  %twice = dtfm.add %wte, %wte : (tensor<16x4xf32>, tensor<16x4xf32>) -> tensor<16x4xf32>
  %w = dtfm.param "head.w" init(normal, 0.02) : tensor<4x16xf32>
  %logits = dtfm.linear %e, %w : (tensor<2x3x4xf32>, tensor<4x16xf32>) -> tensor<2x3x16xf32>
  %probs = dtfm.softmax %logits : (tensor<2x3x16xf32>) -> tensor<2x3x16xf32>
  %labels = dtfm.label "labels" : tensor<2x3xi64>
  %loss = dtfm.cross_entropy %logits, %labels : (tensor<2x3x16xf32>, tensor<2x3xi64>) -> tensor<f32>
  %w1 = dtfm.param "w1" init(normal, 0.02) : tensor<4x8xf32>
  %m = dtfm.linear %e, %w1 : (tensor<2x3x4xf32>, tensor<4x8xf32>) -> tensor<2x3x8xf32>
  %g = dtfm.gelu %m : (tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %w2 = dtfm.param "w2" init(normal, 0.02) : tensor<8x4xf32>
  %y = dtfm.linear %g, %w2 : (tensor<2x3x8xf32>, tensor<8x4xf32>) -> tensor<2x3x4xf32>
  return %loss : tensor<f32>
}

// -----

// COM: A Llama attention block: rotary embeddings between the projections
// COM: and the attention shard with them (over half their heads), and the
// COM: grouped-query attention keeps its ratio: 4 query heads over 2
// COM: key/value heads become 2 over 1.

// CHECK-LABEL: func.func @llama_attention
// CHECK: %[[IN:.*]] = dtfm.tp_all_reduce %{{.*}} {degree = 2 : i64, in_backward}
// CHECK: %[[Q:.*]] = dtfm.linear %[[IN]], {{.*}} -> tensor<2x4x8xf32>
// CHECK: dtfm.param "k.w" {{.*}} {dtfm.tp_shard = array<i64: 1, 2>} : tensor<16x4xf32>
// CHECK: %[[K:.*]] = dtfm.linear %[[IN]], {{.*}} -> tensor<2x4x4xf32>
// CHECK: %[[V:.*]] = dtfm.linear %[[IN]], {{.*}} -> tensor<2x4x4xf32>
// CHECK: %[[RQ:.*]] = dtfm.rotary %[[Q]] {num_heads = 2 : i64, theta = 5.000000e+05 : f64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[RK:.*]] = dtfm.rotary %[[K]] {num_heads = 1 : i64{{.*}}} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
// CHECK: dtfm.causal_attention %[[RQ]], %[[RK]], %[[V]] {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x8xf32>
// CHECK: dtfm.linear {{.*}} : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
// CHECK: dtfm.tp_all_reduce %{{.*}} {degree = 2 : i64} :
func.func @llama_attention() -> tensor<f32> {
  %x = dtfm.input "x" : tensor<2x4x16xf32>
  %qw = dtfm.param "q.w" init(normal, 0.02) : tensor<16x16xf32>
  %q = dtfm.linear %x, %qw : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %kw = dtfm.param "k.w" init(normal, 0.02) : tensor<16x8xf32>
  %k = dtfm.linear %x, %kw : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %vw = dtfm.param "v.w" init(normal, 0.02) : tensor<16x8xf32>
  %v = dtfm.linear %x, %vw : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %rq = dtfm.rotary %q {num_heads = 4 : i64, theta = 500000.0 : f64} : (tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %rk = dtfm.rotary %k {num_heads = 2 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %a = dtfm.causal_attention %rq, %rk, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x16xf32>
  %ow = dtfm.param "o.w" init(normal, 0.02) : tensor<16x16xf32>
  %o = dtfm.linear %a, %ow : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %l = dtfm.reduce_mean %o {axes = array<i64: 0, 1, 2>} : (tensor<2x4x16xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// COM: A SwiGLU MLP: gate and up both column-parallel from one copy of the
// COM: input, SiLU and the product on the shard, down row-parallel.

// CHECK-LABEL: func.func @swiglu
// CHECK: dtfm.param "gate.w" {{.*}} {dtfm.tp_shard = array<i64: 1, 2>} : tensor<8x12xf32>
// CHECK: %[[IN:.*]] = dtfm.tp_all_reduce %{{.*}} {degree = 2 : i64, in_backward}
// CHECK: %[[G:.*]] = dtfm.linear %[[IN]], {{.*}} -> tensor<2x4x12xf32>
// CHECK: dtfm.param "up.w" {{.*}} {dtfm.tp_shard = array<i64: 1, 2>} : tensor<8x12xf32>
// CHECK: %[[U:.*]] = dtfm.linear %[[IN]], {{.*}} -> tensor<2x4x12xf32>
// CHECK: %[[S:.*]] = dtfm.silu %[[G]] : (tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
// CHECK: %[[M:.*]] = dtfm.mul %[[S]], %[[U]] : (tensor<2x4x12xf32>, tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
// CHECK: dtfm.param "down.w" {{.*}} {dtfm.tp_shard = array<i64: 0, 2>} : tensor<12x8xf32>
// CHECK: %[[P:.*]] = dtfm.linear %[[M]], {{.*}} -> tensor<2x4x8xf32>
// CHECK: dtfm.tp_all_reduce %[[P]] {degree = 2 : i64} :
func.func @swiglu() -> tensor<f32> {
  %x = dtfm.input "x" : tensor<2x4x8xf32>
  %g = dtfm.param "norm.g" init(ones) : tensor<8xf32>
  %n = dtfm.rms_norm %x, %g : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %gw = dtfm.param "gate.w" init(normal, 0.02) : tensor<8x24xf32>
  %gate = dtfm.linear %n, %gw : (tensor<2x4x8xf32>, tensor<8x24xf32>) -> tensor<2x4x24xf32>
  %uw = dtfm.param "up.w" init(normal, 0.02) : tensor<8x24xf32>
  %up = dtfm.linear %n, %uw : (tensor<2x4x8xf32>, tensor<8x24xf32>) -> tensor<2x4x24xf32>
  %s = dtfm.silu %gate : (tensor<2x4x24xf32>) -> tensor<2x4x24xf32>
  %m = dtfm.mul %s, %up : (tensor<2x4x24xf32>, tensor<2x4x24xf32>) -> tensor<2x4x24xf32>
  %dw = dtfm.param "down.w" init(normal, 0.02) : tensor<24x8xf32>
  %d = dtfm.linear %m, %dw : (tensor<2x4x24xf32>, tensor<24x8xf32>) -> tensor<2x4x8xf32>
  %l = dtfm.reduce_mean %d {axes = array<i64: 0, 1, 2>} : (tensor<2x4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
