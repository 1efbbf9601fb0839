// RUN: dtfm-opt %s -split-input-file -verify-diagnostics
// COM: One case per verifier rule of the dtfm ops.

func.func @case0() {
  // expected-error @+1 {{expected a non-empty parameter name}}
  %p = dtfm.param "" init(zeros) : tensor<4xf32>
  return
}

// -----

func.func @case1() {
  // expected-error @+1 {{initializer 'normal' expects a scale, found none}}
  %p = dtfm.param "p" init(normal) : tensor<4xf32>
  return
}

// -----

func.func @case2() {
  // expected-error @+1 {{initializer 'zeros' takes no scale, found 1}}
  %p = dtfm.param "p" init(zeros, 1.0) : tensor<4xf32>
  return
}

// -----

func.func @case3() {
  // expected-error @+1 {{initializer 'uniform' expects a positive scale, found -1}}
  %p = dtfm.param "p" init(uniform, -1.0) : tensor<4xf32>
  return
}

// -----

// COM: One tensor per name in a program: an imported head that read the
// COM: embedding table in its own layout made a second "emb" of another type.
func.func @param_twice_types() {
  %e = dtfm.param "emb" init(zeros) : tensor<16x8xf32>
  // expected-error @+1 {{'dtfm.param' op 'emb' is defined twice in this block (as 'tensor<16x8xf32>' and 'tensor<8x16xf32>')}}
  %h = dtfm.param "emb" init(zeros) : tensor<8x16xf32>
  return
}

// -----

func.func @param_twice() {
  %a = dtfm.param "w" init(zeros) : tensor<4xf32>
  %b = dtfm.param "v" init(zeros) : tensor<4xf32>
  // expected-error @+1 {{'dtfm.param' op 'w' is defined twice in this block}}
  %c = dtfm.param "w" init(zeros) : tensor<4xf32>
  return
}

// -----

func.func @case4() {
  // expected-error @+1 {{must be statically shaped tensor}}
  %p = dtfm.param "p" init(zeros) : tensor<?x4xf32>
  return
}

// -----

func.func @case5() {
  // expected-error @+1 {{must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi8>'}}
  %p = dtfm.param "p" init(zeros) : tensor<4xi8>
  return
}

// -----

func.func @case6() {
  %i = dtfm.input "i" : tensor<2x3xi64>
  %t = dtfm.param "t" init(zeros) : tensor<10xf32>
  // expected-error @+1 {{expected a rank-2 table [vocab, hidden], found [10]}}
  %e = dtfm.embedding %i, %t : (tensor<2x3xi64>, tensor<10xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @case7() {
  %i = dtfm.input "i" : tensor<2x3xi64>
  %t = dtfm.param "t" init(zeros) : tensor<10x4xf32>
  // expected-error @+1 {{expected result type 'tensor<2x3x4xf32>', found 'tensor<2x3x5xf32>'}}
  %e = dtfm.embedding %i, %t : (tensor<2x3xi64>, tensor<10x4xf32>) -> tensor<2x3x5xf32>
  return
}

// -----

func.func @case8() {
  %a = dtfm.input "a" : tensor<4xf32>
  %b = dtfm.input "b" : tensor<4x5xf32>
  // expected-error @+1 {{expected lhs of rank >= 2, found [4]}}
  %c = dtfm.matmul %a, %b : (tensor<4xf32>, tensor<4x5xf32>) -> tensor<5xf32>
  return
}

// -----

func.func @case9() {
  %a = dtfm.input "a" : tensor<2x3x4xf32>
  %b = dtfm.input "b" : tensor<1x2x3x4xf32>
  // expected-error @+1 {{expected rhs of rank 2 or 3 (the lhs rank), found [1, 2, 3, 4]}}
  %c = dtfm.matmul %a, %b : (tensor<2x3x4xf32>, tensor<1x2x3x4xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @case10() {
  %a = dtfm.input "a" : tensor<3x4xf32>
  %b = dtfm.input "b" : tensor<4x5xf16>
  // expected-error @+1 {{expected rhs element type 'f32', found 'f16'}}
  %c = dtfm.matmul %a, %b : (tensor<3x4xf32>, tensor<4x5xf16>) -> tensor<3x5xf32>
  return
}

// -----

func.func @case11() {
  %a = dtfm.input "a" : tensor<3x4xf32>
  %b = dtfm.input "b" : tensor<6x5xf32>
  // expected-error @+1 {{contracting dimensions differ: lhs [3, 4] has 4, rhs [6, 5] has 6}}
  %c = dtfm.matmul %a, %b : (tensor<3x4xf32>, tensor<6x5xf32>) -> tensor<3x5xf32>
  return
}

// -----

func.func @case12() {
  %a = dtfm.input "a" : tensor<3x4xf32>
  %b = dtfm.input "b" : tensor<4x5xf32>
  // expected-error @+1 {{contracting dimensions differ: lhs [3, 4] has 4, rhs [4, 5] has 5}}
  %c = dtfm.matmul %a, %b transpose_rhs : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
  return
}

// -----

func.func @case13() {
  %a = dtfm.input "a" : tensor<2x3x4xf32>
  %b = dtfm.input "b" : tensor<3x4x5xf32>
  // expected-error @+1 {{batch dimensions differ: lhs [2, 3, 4], rhs [3, 4, 5]}}
  %c = dtfm.matmul %a, %b : (tensor<2x3x4xf32>, tensor<3x4x5xf32>) -> tensor<2x3x5xf32>
  return
}

// -----

func.func @case14() {
  %a = dtfm.input "a" : tensor<3x4xf32>
  %b = dtfm.input "b" : tensor<4x5xf32>
  // expected-error @+1 {{expected result type 'tensor<3x5xf32>', found 'tensor<3x6xf32>'}}
  %c = dtfm.matmul %a, %b : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x6xf32>
  return
}

// -----

func.func @case15() {
  %x = dtfm.input "x" : tensor<f32>
  %w = dtfm.param "w" init(zeros) : tensor<4x5xf32>
  // expected-error @+1 {{expected input of rank >= 1, found a scalar}}
  %y = dtfm.linear %x, %w : (tensor<f32>, tensor<4x5xf32>) -> tensor<5xf32>
  return
}

// -----

func.func @case16() {
  %x = dtfm.input "x" : tensor<3x4xf32>
  %w = dtfm.param "w" init(zeros) : tensor<4x5x1xf32>
  // expected-error @+1 {{expected a rank-2 weight [in, out], found [4, 5, 1]}}
  %y = dtfm.linear %x, %w : (tensor<3x4xf32>, tensor<4x5x1xf32>) -> tensor<3x5xf32>
  return
}

// -----

func.func @case17() {
  %x = dtfm.input "x" : tensor<3x4xf32>
  %w = dtfm.param "w" init(zeros) : tensor<6x5xf32>
  // expected-error @+1 {{expected weight with 4 input features (the last dimension of input [3, 4]), found weight [6, 5]}}
  %y = dtfm.linear %x, %w : (tensor<3x4xf32>, tensor<6x5xf32>) -> tensor<3x5xf32>
  return
}

// -----

func.func @case18() {
  %x = dtfm.input "x" : tensor<3x4xf32>
  %w = dtfm.param "w" init(zeros) : tensor<4x5xf32>
  %b = dtfm.param "b" init(zeros) : tensor<4xf32>
  // expected-error @+1 {{expected bias of shape [5], found [4]}}
  %y = dtfm.linear %x, %w, %b : (tensor<3x4xf32>, tensor<4x5xf32>, tensor<4xf32>) -> tensor<3x5xf32>
  return
}

// -----

func.func @case19() {
  %a = dtfm.input "a" : tensor<2x3xf32>
  %b = dtfm.input "b" : tensor<4xf32>
  // expected-error @+1 {{operand shapes [2, 3] and [4] do not broadcast}}
  %c = dtfm.add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @case20() {
  %a = dtfm.input "a" : tensor<2x3xf32>
  %b = dtfm.input "b" : tensor<3xf32>
  // expected-error @+1 {{expected result type 'tensor<2x3xf32>', found 'tensor<3xf32>'}}
  %c = dtfm.add %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @case21() {
  %x = dtfm.input "x" : tensor<2x4xf32>
  %g = dtfm.param "g" init(ones) : tensor<3xf32>
  // expected-error @+1 {{expected gamma of shape [4], found [3]}}
  %y = dtfm.layernorm %x, %g, %g : (tensor<2x4xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @case22() {
  %x = dtfm.input "x" : tensor<2x4xf32>
  %g = dtfm.param "g" init(ones) : tensor<4xf32>
  // expected-error @+1 {{expected a positive epsilon, found 0}}
  %y = dtfm.layernorm %x, %g, %g {epsilon = 0.0 : f64} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @case23() {
  %x = dtfm.input "x" : tensor<2x4xf32>
  // expected-error @+1 {{expected result type 'tensor<2x4xf32>', found 'tensor<2x4xf16>'}}
  %y = dtfm.gelu %x : (tensor<2x4xf32>) -> tensor<2x4xf16>
  return
}

// -----

func.func @case24() {
  %x = dtfm.input "x" : tensor<2x4xf32>
  // expected-error @+1 {{expected result type 'tensor<2x4xf32>', found 'tensor<4x2xf32>'}}
  %y = dtfm.relu %x : (tensor<2x4xf32>) -> tensor<4x2xf32>
  return
}

// -----

func.func @case25() {
  %x = dtfm.input "x" : tensor<2x4xf32>
  // expected-error @+1 {{expected axis in [-2, 1], found 2}}
  %y = dtfm.softmax %x {axis = 2 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @case26() {
  %q = dtfm.input "q" : tensor<8x16xf32>
  %k = dtfm.input "k" : tensor<8x16xf32>
  // expected-error @+1 {{expected query of rank 3 [batch, seq, hidden], found [8, 16]}}
  %o = dtfm.causal_attention %q, %k, %k {num_heads = 4 : i64} : (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return
}

// -----

func.func @case27() {
  %q = dtfm.input "q" : tensor<1x8x16xf32>
  %k = dtfm.input "k" : tensor<1x4x16xf32>
  // expected-error @+1 {{expected key and value of shape [1, 8, 16] (4 heads of 4) and query's element type, found 'tensor<1x4x16xf32>' and 'tensor<1x4x16xf32>'}}
  %o = dtfm.causal_attention %q, %k, %k {num_heads = 4 : i64} : (tensor<1x8x16xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x8x16xf32>
  return
}

// -----

func.func @gqa_kv_heads_not_dividing() {
  %q = dtfm.input "q" : tensor<1x8x16xf32>
  %k = dtfm.input "k" : tensor<1x8x12xf32>
  // expected-error @+1 {{expected num_kv_heads 3 dividing num_heads 4}}
  %o = dtfm.causal_attention %q, %k, %k {num_heads = 4 : i64, num_kv_heads = 3 : i64} : (tensor<1x8x16xf32>, tensor<1x8x12xf32>, tensor<1x8x12xf32>) -> tensor<1x8x16xf32>
  return
}

// -----

func.func @gqa_key_of_query_width() {
  %q = dtfm.input "q" : tensor<1x8x16xf32>
  // expected-error @+1 {{expected key and value of shape [1, 8, 8] (2 heads of 4)}}
  %o = dtfm.causal_attention %q, %q, %q {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<1x8x16xf32>, tensor<1x8x16xf32>, tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  return
}

// -----

func.func @gqa_zero_kv_heads() {
  %q = dtfm.input "q" : tensor<1x8x16xf32>
  // expected-error @+1 {{attribute 'num_kv_heads' failed to satisfy constraint}}
  %o = dtfm.causal_attention %q, %q, %q {num_heads = 4 : i64, num_kv_heads = 0 : i64} : (tensor<1x8x16xf32>, tensor<1x8x16xf32>, tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  return
}

// -----

func.func @rotary_odd_head_dim() {
  %x = dtfm.input "x" : tensor<1x8x12xf32>
  // expected-error @+1 {{'dtfm.rotary' op expected an even head dimension, found 3}}
  %y = dtfm.rotary %x {num_heads = 4 : i64} : (tensor<1x8x12xf32>) -> tensor<1x8x12xf32>
  return
}

// -----

func.func @rotary_theta_one() {
  %x = dtfm.input "x" : tensor<1x8x16xf32>
  // expected-error @+1 {{'dtfm.rotary' op expected a finite theta > 1, found 1}}
  %y = dtfm.rotary %x {num_heads = 4 : i64, theta = 1.0 : f64} : (tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  return
}

// -----

func.func @rotary_heads_not_dividing() {
  %x = dtfm.input "x" : tensor<1x8x16xf32>
  // expected-error @+1 {{'dtfm.rotary' op expected num_heads dividing the last dimension 16, found 3}}
  %y = dtfm.rotary %x {num_heads = 3 : i64} : (tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  return
}

// -----

func.func @rms_norm_gamma_width() {
  %x = dtfm.input "x" : tensor<2x4xf32>
  %g = dtfm.param "g" init(ones) : tensor<3xf32>
  // expected-error @+1 {{'dtfm.rms_norm' op}}
  %y = dtfm.rms_norm %x, %g : (tensor<2x4xf32>, tensor<3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @rms_norm_zero_epsilon() {
  %x = dtfm.input "x" : tensor<2x4xf32>
  %g = dtfm.param "g" init(ones) : tensor<4xf32>
  // expected-error @+1 {{'dtfm.rms_norm' op expected a positive epsilon, found 0}}
  %y = dtfm.rms_norm %x, %g {epsilon = 0.0 : f64} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @case28() {
  %q = dtfm.input "q" : tensor<1x8x16xf32>
  %k = dtfm.input "k" : tensor<1x8x16xf32>
  // expected-error @+1 {{expected hidden size 16 divisible by num_heads 3}}
  %o = dtfm.causal_attention %q, %k, %k {num_heads = 3 : i64} : (tensor<1x8x16xf32>, tensor<1x8x16xf32>, tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  return
}

// -----

func.func @case29() {
  %q = dtfm.input "q" : tensor<1x8x16xf32>
  %k = dtfm.input "k" : tensor<1x8x16xf32>
  // expected-error @+1 {{attribute 'num_heads' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %o = dtfm.causal_attention %q, %k, %k {num_heads = 0 : i64} : (tensor<1x8x16xf32>, tensor<1x8x16xf32>, tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
  return
}

// -----

func.func @case30() {
  %x = dtfm.input "x" : tensor<1x3x8xf32>
  %w = dtfm.param "w" init(zeros) : tensor<4x3x3x3xf32>
  // expected-error @+1 {{expected input of rank 4 [N, C, H, W], found [1, 3, 8]}}
  %y = dtfm.conv2d %x, %w {} : (tensor<1x3x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @case31() {
  %x = dtfm.input "x" : tensor<1x3x8x8xf32>
  %w = dtfm.param "w" init(zeros) : tensor<4x3x3xf32>
  // expected-error @+1 {{expected weight of rank 4 [O, C/groups, kH, kW], found [4, 3, 3]}}
  %y = dtfm.conv2d %x, %w {} : (tensor<1x3x8x8xf32>, tensor<4x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @case32() {
  %x = dtfm.input "x" : tensor<1x3x8x8xf32>
  %w = dtfm.param "w" init(zeros) : tensor<4x3x3x3xf32>
  // expected-error @+1 {{expected positive strides, found [0, 1]}}
  %y = dtfm.conv2d %x, %w {strides = array<i64: 0, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @case33() {
  %x = dtfm.input "x" : tensor<1x3x8x8xf32>
  %w = dtfm.param "w" init(zeros) : tensor<4x3x3x3xf32>
  // expected-error @+1 {{expected 2 dilations, found 1}}
  %y = dtfm.conv2d %x, %w {dilations = array<i64: 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @case34() {
  %x = dtfm.input "x" : tensor<1x3x8x8xf32>
  %w = dtfm.param "w" init(zeros) : tensor<4x3x3x3xf32>
  // expected-error @+1 {{expected 4 padding values [top, left, bottom, right], found 2}}
  %y = dtfm.conv2d %x, %w {padding = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @case35() {
  %x = dtfm.input "x" : tensor<1x3x8x8xf32>
  %w = dtfm.param "w" init(zeros) : tensor<4x3x3x3xf32>
  // expected-error @+1 {{expected non-negative padding, found [0, -1, 0, 0]}}
  %y = dtfm.conv2d %x, %w {padding = array<i64: 0, -1, 0, 0>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @case36() {
  %x = dtfm.input "x" : tensor<1x3x8x8xf32>
  %w = dtfm.param "w" init(zeros) : tensor<4x3x3x3xf32>
  // expected-error @+1 {{expected positive groups, found 0}}
  %y = dtfm.conv2d %x, %w {groups = 0 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @case37() {
  %x = dtfm.input "x" : tensor<1x3x8x8xf32>
  %w = dtfm.param "w" init(zeros) : tensor<4x3x3x3xf32>
  // expected-error @+1 {{expected input channels 3 and output channels 4 divisible by groups 2}}
  %y = dtfm.conv2d %x, %w {groups = 2 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @case38() {
  %x = dtfm.input "x" : tensor<1x4x8x8xf32>
  %w = dtfm.param "w" init(zeros) : tensor<4x3x3x3xf32>
  // expected-error @+1 {{expected weight dimension 1 = 4/1 = 4, found 3}}
  %y = dtfm.conv2d %x, %w {} : (tensor<1x4x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @case39() {
  %x = dtfm.input "x" : tensor<1x3x2x2xf32>
  %w = dtfm.param "w" init(zeros) : tensor<4x3x3x3xf32>
  // expected-error @+1 {{kernel [4, 3, 3, 3] does not fit the padded input [1, 3, 2, 2]}}
  %y = dtfm.conv2d %x, %w {} : (tensor<1x3x2x2xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x1x1xf32>
  return
}

// -----

func.func @case40() {
  %x = dtfm.input "x" : tensor<1x3x8x8xf32>
  %w = dtfm.param "w" init(zeros) : tensor<4x3x3x3xf32>
  // expected-error @+1 {{expected result type 'tensor<1x4x6x6xf32>', found 'tensor<1x4x8x8xf32>'}}
  %y = dtfm.conv2d %x, %w {} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @case41() {
  %x = dtfm.input "x" : tensor<1x3x8x8xf32>
  %w = dtfm.param "w" init(zeros) : tensor<4x3x3x3xf32>
  %b = dtfm.param "b" init(zeros) : tensor<3xf32>
  // expected-error @+1 {{expected bias of shape [4], found [3]}}
  %y = dtfm.conv2d %x, %w, %b : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @case42() {
  %x = dtfm.input "x" : tensor<4xf32>
  %g = dtfm.param "g" init(ones) : tensor<4xf32>
  // expected-error @+1 {{expected input of rank >= 2 [N, C, ...], found [4]}}
  %y = dtfm.batchnorm %x, %g, %g, %g, %g {} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @case43() {
  %x = dtfm.input "x" : tensor<2x4xf32>
  %g = dtfm.param "g" init(ones) : tensor<3xf32>
  // expected-error @+1 {{expected gamma of shape [4], found [3]}}
  %y = dtfm.batchnorm %x, %g, %g, %g, %g {} : (tensor<2x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @case44() {
  %x = dtfm.input "x" : tensor<2x4xf32>
  %g = dtfm.param "g" init(ones) : tensor<4xf32>
  // expected-error @+1 {{expected a positive epsilon, found -1}}
  %y = dtfm.batchnorm %x, %g, %g, %g, %g {epsilon = -1.0 : f64} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @case45() {
  %x = dtfm.input "x" : tensor<2x4xf32>
  %g = dtfm.param "g" init(ones) : tensor<4xf32>
  // expected-error @+1 {{expected momentum in [0, 1], found 1.5}}
  %y = dtfm.batchnorm %x, %g, %g, %g, %g {momentum = 1.5 : f64} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @case46() {
  %x = dtfm.input "x" : tensor<1x2x8xf32>
  // expected-error @+1 {{expected input of rank 4 [N, C, H, W], found [1, 2, 8]}}
  %y = dtfm.max_pool2d %x {kernel = array<i64: 2, 2>} : (tensor<1x2x8xf32>) -> tensor<1x2x4xf32>
  return
}

// -----

func.func @case47() {
  %x = dtfm.input "x" : tensor<1x2x8x8xf32>
  // expected-error @+1 {{expected positive kernel, found [2, 0]}}
  %y = dtfm.max_pool2d %x {kernel = array<i64: 2, 0>} : (tensor<1x2x8x8xf32>) -> tensor<1x2x7x7xf32>
  return
}

// -----

func.func @case48() {
  %x = dtfm.input "x" : tensor<1x2x8x8xf32>
  // expected-error @+1 {{expected padding smaller than the kernel [2, 2], found [2, 0, 0, 0]}}
  %y = dtfm.avg_pool2d %x {kernel = array<i64: 2, 2>, padding = array<i64: 2, 0, 0, 0>} : (tensor<1x2x8x8xf32>) -> tensor<1x2x9x7xf32>
  return
}

// -----

func.func @case49() {
  %x = dtfm.input "x" : tensor<1x2x8x8xf32>
  // expected-error @+1 {{kernel [9, 2] does not fit the padded input [1, 2, 8, 8]}}
  %y = dtfm.avg_pool2d %x {kernel = array<i64: 9, 2>} : (tensor<1x2x8x8xf32>) -> tensor<1x2x1x7xf32>
  return
}

// -----

func.func @case50() {
  %x = dtfm.input "x" : tensor<1x2x8x8xf32>
  // expected-error @+1 {{expected result type 'tensor<1x2x4x4xf32>', found 'tensor<1x2x3x4xf32>'}}
  %y = dtfm.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x2x8x8xf32>) -> tensor<1x2x3x4xf32>
  return
}

// -----

func.func @case51() {
  %x = dtfm.input "x" : tensor<2x8xf32>
  // expected-error @+1 {{expected input of rank >= 3 [N, C, ...], found [2, 8]}}
  %y = dtfm.global_avg_pool %x : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @case52() {
  %x = dtfm.input "x" : tensor<2x8x4x4xf32>
  // expected-error @+1 {{expected result type 'tensor<2x8x1x1xf32>', found 'tensor<2x8xf32>'}}
  %y = dtfm.global_avg_pool %x : (tensor<2x8x4x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @case53() {
  %x = dtfm.input "x" : tensor<2x3x4xf32>
  // expected-error @+1 {{expected axis in [0, 3], found 4}}
  %y = dtfm.flatten %x {axis = 4 : i64} : (tensor<2x3x4xf32>) -> tensor<24x1xf32>
  return
}

// -----

func.func @case54() {
  %x = dtfm.input "x" : tensor<2x3x4xf32>
  // expected-error @+1 {{expected result type 'tensor<2x12xf32>', found 'tensor<6x4xf32>'}}
  %y = dtfm.flatten %x : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  return
}

// -----

func.func @case55() {
  %x = dtfm.input "x" : tensor<2x3xf32>
  // expected-error @+1 {{expected result with 6 elements (input [2, 3]), found 7 ([7])}}
  %y = dtfm.reshape %x : (tensor<2x3xf32>) -> tensor<7xf32>
  return
}

// -----

func.func @case56() {
  %x = dtfm.input "x" : tensor<2x3xf32>
  // expected-error @+1 {{expected result element type 'f32', found 'f16'}}
  %y = dtfm.reshape %x : (tensor<2x3xf32>) -> tensor<6xf16>
  return
}

// -----

func.func @case57() {
  %l = dtfm.input "l" : tensor<f32>
  %t = dtfm.label "t" : tensor<i64>
  // expected-error @+1 {{expected logits of rank >= 1, found a scalar}}
  %y = dtfm.cross_entropy %l, %t : (tensor<f32>, tensor<i64>) -> tensor<f32>
  return
}

// -----

func.func @case58() {
  %l = dtfm.input "l" : tensor<2x5xf32>
  %t = dtfm.label "t" : tensor<5xi64>
  // expected-error @+1 {{expected labels of shape [2] (logits [2, 5] without the class dimension), found [5]}}
  %y = dtfm.cross_entropy %l, %t : (tensor<2x5xf32>, tensor<5xi64>) -> tensor<f32>
  return
}

// -----

func.func @case59() {
  %l = dtfm.input "l" : tensor<2x5xf32>
  %t = dtfm.label "t" : tensor<2xf32>
  // expected-error @+1 {{must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2xf32>'}}
  %y = dtfm.cross_entropy %l, %t : (tensor<2x5xf32>, tensor<2xf32>) -> tensor<f32>
  return
}

// -----

func.func @case60() {
  %l = dtfm.input "l" : tensor<2x5xf32>
  %t = dtfm.label "t" : tensor<2xi64>
  // expected-error @+1 {{must be 0D tensor of 32-bit float values, but got 'tensor<2xf32>'}}
  %y = dtfm.cross_entropy %l, %t : (tensor<2x5xf32>, tensor<2xi64>) -> tensor<2xf32>
  return
}

// -----

// A padded vocabulary's classes: no more than the logits' columns.
func.func @cross_entropy_classes_beyond_the_vocabulary() {
  %l = dtfm.input "l" : tensor<2x5xf32>
  %t = dtfm.label "t" : tensor<2xi64>
  // expected-error @+1 {{expected classes between 1 and the 5 of the vocabulary, found 6}}
  %y = dtfm.cross_entropy %l, %t {classes = 6 : i64} : (tensor<2x5xf32>, tensor<2xi64>) -> tensor<f32>
  return
}

// -----

// Vocabulary-parallel: the classes of the whole vocabulary (5 x 2).
func.func @cross_entropy_classes_beyond_the_sharded_vocabulary() {
  %l = dtfm.input "l" : tensor<2x5xf32>
  %t = dtfm.label "t" : tensor<2xi64>
  // expected-error @+1 {{expected classes between 1 and the 10 of the vocabulary, found 11}}
  %y = dtfm.cross_entropy %l, %t {vocab_shard = 2 : i64, classes = 11 : i64} : (tensor<2x5xf32>, tensor<2xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_no_classes() {
  %l = dtfm.input "l" : tensor<2x5xf32>
  %t = dtfm.label "t" : tensor<2xi64>
  // expected-error @+1 {{attribute 'classes' failed to satisfy constraint: 64-bit signless integer attribute whose minimum value is 1}}
  %y = dtfm.cross_entropy %l, %t {classes = 0 : i64} : (tensor<2x5xf32>, tensor<2xi64>) -> tensor<f32>
  return
}

// -----

func.func @case61() {
  %x = dtfm.input "x" : tensor<2x3xf32>
  // expected-error @+1 {{custom kind 'no_such_kind' is not registered (load the plugin that defines it with --load-dtfm-plugin)}}
  %y = dtfm.custom "no_such_kind"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @avg_pool_divisor_beyond_padding() {
  %x = dtfm.input "x" : tensor<1x2x8x8xf32>
  // expected-error @+1 {{expected divisor_padding within the padding [1, 1, 1, 1], found [1, 1, 2, 0]}}
  %y = dtfm.avg_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, divisor_padding = array<i64: 1, 1, 2, 0>} : (tensor<1x2x8x8xf32>) -> tensor<1x2x4x4xf32>
  return
}

// -----

func.func @avg_pool_divisor_count() {
  %x = dtfm.input "x" : tensor<1x2x8x8xf32>
  // expected-error @+1 {{expected 4 divisor_padding entries [top, left, bottom, right], found 2}}
  %y = dtfm.avg_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, divisor_padding = array<i64: 0, 0>} : (tensor<1x2x8x8xf32>) -> tensor<1x2x4x4xf32>
  return
}

// -----

func.func @backward_wrt_count() {
  %x = dtfm.input "x" : tensor<2x3xf32>
  // expected-error @+1 {{expected one gradient per 'wrt' index (2), found 1}}
  %g = dtfm.backward "dtfm.relu"(%x, %x) {flops = 6 : i64, wrt = array<i64: 0, 1>} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @backward_wrt_range() {
  %x = dtfm.input "x" : tensor<2x3xf32>
  // expected-error @+1 {{'wrt' index 5 is out of range [0, 2)}}
  %g = dtfm.backward "dtfm.relu"(%x, %x) {flops = 6 : i64, wrt = array<i64: 5>} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @backward_type() {
  %x = dtfm.input "x" : tensor<2x3xf32>
  // expected-error @+1 {{expected the gradient of input #0 to have type 'tensor<2x3xf32>', found 'tensor<3x2xf32>'}}
  %g = dtfm.backward "dtfm.relu"(%x, %x) {flops = 6 : i64, wrt = array<i64: 0>} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @backward_name() {
  %x = dtfm.input "x" : tensor<2x3xf32>
  // expected-error @+1 {{expected a dtfm forward op name, found 'relu'}}
  %g = dtfm.backward "relu"(%x) {flops = 6 : i64, wrt = array<i64: 0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @accumulate_one() {
  %x = dtfm.input "x" : tensor<2x3xf32>
  // expected-error @+1 {{expected at least 2 gradients, found 1}}
  %s = dtfm.accumulate %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @accumulate_types() {
  %x = dtfm.input "x" : tensor<2x3xf32>
  %y = dtfm.input "y" : tensor<2x3xf16>
  // expected-error @+1 {{expected every gradient of type 'tensor<2x3xf32>', found 'tensor<2x3xf16>'}}
  %s = dtfm.accumulate %x, %y : (tensor<2x3xf32>, tensor<2x3xf16>) -> tensor<2x3xf32>
  return
}

// -----

func.func @update_not_param() {
  %x = dtfm.input "x" : tensor<3xf32>
  // expected-error @+1 {{expected the parameter operand to be a dtfm.param}}
  %u = dtfm.sgd_update %x, %x {lr = 0.5 : f64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @update_lr() {
  %p = dtfm.param "p" init(zeros) : tensor<3xf32>
  // expected-error @+1 {{learning rate: lr must be positive and finite, got 0}}
  %u = dtfm.adamw_update %p, %p {lr = 0.0 : f64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @update_schedule_kind() {
  %p = dtfm.param "p" init(zeros) : tensor<3xf32>
  // expected-error @+1 {{'dtfm.sgd_update' op unknown lr_schedule 'step' (expected constant, cosine, linear or wsd)}}
  %u = dtfm.sgd_update %p, %p {lr = 0.5 : f64, lr_schedule = "step"} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @update_schedule_steps() {
  %p = dtfm.param "p" init(zeros) : tensor<3xf32>
  // expected-error @+1 {{learning rate: lr-schedule=wsd needs decay-steps in [1, total-steps - warmup-steps] = [1, 5], got 6}}
  %u = dtfm.adamw_update %p, %p {lr = 0.5 : f64, lr_schedule = "wsd", warmup_steps = 5 : i64, total_steps = 10 : i64, decay_steps = 6 : i64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @update_momentum() {
  %p = dtfm.param "p" init(zeros) : tensor<3xf32>
  // expected-error @+1 {{expected momentum in [0, 1), found 1}}
  %u = dtfm.sgd_update %p, %p {lr = 0.5 : f64, momentum = 1.0 : f64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @update_grad_type() {
  %p = dtfm.param "p" init(zeros) : tensor<3xf32>
  %g = dtfm.input "g" : tensor<4xf32>
  // expected-error @+1 {{expected gradient and result of type 'tensor<3xf32>', found 'tensor<4xf32>'}}
  %u = dtfm.sgd_update %p, %g {lr = 0.5 : f64} : (tensor<3xf32>, tensor<4xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @adamw_beta() {
  %p = dtfm.param "p" init(zeros) : tensor<3xf32>
  // expected-error @+1 {{expected betas in [0, 1), found 1.5}}
  %u = dtfm.adamw_update %p, %p {lr = 0.5 : f64, beta2 = 1.5 : f64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @mul_no_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'dtfm.mul' op operand shapes [2, 3] and [4] do not broadcast}}
  %0 = dtfm.mul %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @div_result(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'dtfm.div' op expected result type 'tensor<2x3xf32>', found 'tensor<3xf32>'}}
  %0 = dtfm.div %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @transpose_not_permutation(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'dtfm.transpose' op expected perm to be a permutation of [0, 2), found [0, 0]}}
  %0 = dtfm.transpose %a {perm = array<i64: 0, 0>} : (tensor<2x3xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @transpose_result(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'dtfm.transpose' op expected result type 'tensor<3x2xf32>', found 'tensor<2x3xf32>'}}
  %0 = dtfm.transpose %a {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @reduce_mean_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'dtfm.reduce_mean' op axis 2 out of range for rank 2}}
  %0 = dtfm.reduce_mean %a {axes = array<i64: 2>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @reduce_mean_result(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'dtfm.reduce_mean' op expected result type 'tensor<2x1xf32>', found 'tensor<2xf32>'}}
  %0 = dtfm.reduce_mean %a {axes = array<i64: -1>, keepdims} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @conv_transpose_output_padding(%x: tensor<1x2x3x3xf32>, %w: tensor<2x4x3x3xf32>) {
  // expected-error @+1 {{'dtfm.conv_transpose2d' op expected 0 <= output_padding < stride, found output_padding [0, 2] and strides [2, 2]}}
  %0 = dtfm.conv_transpose2d %x, %w {strides = array<i64: 2, 2>, output_padding = array<i64: 0, 2>} : (tensor<1x2x3x3xf32>, tensor<2x4x3x3xf32>) -> tensor<1x4x7x9xf32>
  return
}

// -----

func.func @conv_transpose_weight_channels(%x: tensor<1x2x3x3xf32>, %w: tensor<3x4x3x3xf32>) {
  // expected-error @+1 {{'dtfm.conv_transpose2d' op expected weight dimension 0 = 2 (the input channels), found 3}}
  %0 = dtfm.conv_transpose2d %x, %w : (tensor<1x2x3x3xf32>, tensor<3x4x3x3xf32>) -> tensor<1x4x5x5xf32>
  return
}

// -----

func.func @conv_transpose_result(%x: tensor<1x2x3x3xf32>, %w: tensor<2x2x3x3xf32>) {
  // expected-error @+1 {{'dtfm.conv_transpose2d' op expected result type 'tensor<1x4x6x6xf32>', found 'tensor<1x4x7x7xf32>'}}
  %0 = dtfm.conv_transpose2d %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, output_padding = array<i64: 1, 1>, groups = 2 : i64} : (tensor<1x2x3x3xf32>, tensor<2x2x3x3xf32>) -> tensor<1x4x7x7xf32>
  return
}

// -----

func.func @conv_transpose_no_output(%x: tensor<1x2x1x1xf32>, %w: tensor<2x2x1x1xf32>) {
  // expected-error @+1 {{'dtfm.conv_transpose2d' op kernel [2, 2, 1, 1] with padding [1, 0, 1, 0] leaves no output for input [1, 2, 1, 1]}}
  %0 = dtfm.conv_transpose2d %x, %w {padding = array<i64: 1, 0, 1, 0>} : (tensor<1x2x1x1xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x1x1xf32>
  return
}

// -----

func.func @reduce_max_empty_axis(%a: tensor<2x0xf32>) {
  // expected-error @+1 {{'dtfm.reduce_max' op axis 1 is empty: no extremum}}
  %0 = dtfm.reduce_max %a {axes = array<i64: 1>} : (tensor<2x0xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @reduce_min_axis_twice(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'dtfm.reduce_min' op axis -1 given twice}}
  %0 = dtfm.reduce_min %a {axes = array<i64: 1, -1>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @maximum_shapes(%a: tensor<2x3xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{'dtfm.maximum' op}}
  %0 = dtfm.maximum %a, %b : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @prelu_result(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'dtfm.prelu' op expected result type 'tensor<2x3xf32>', found 'tensor<3xf32>'}}
  %0 = dtfm.prelu %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @log_result(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'dtfm.log' op}}
  %0 = dtfm.log %a : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @sqrt_result(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'dtfm.sqrt' op expected result type 'tensor<2x3xf32>', found 'tensor<3xf32>'}}
  %0 = dtfm.sqrt %a : (tensor<2x3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @concat_shapes(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) {
  // expected-error @+1 {{'dtfm.concat' op operand shapes [2, 3] and [3, 3] differ outside axis 1}}
  %0 = dtfm.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @slice_bounds(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'dtfm.slice' op dimension 1: expected 0 <= start < end <= 3 and step >= 1, found 1, 4, 1}}
  %0 = dtfm.slice %a {starts = array<i64: 0, 1>, ends = array<i64: 2, 4>, steps = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @constant_count() {
  // expected-error @+1 {{'dtfm.constant' op expected 3 values for 'tensor<3xi64>', found 2}}
  %0 = dtfm.constant [1, 2] : tensor<3xi64>
  return
}

// -----

func.func @constant_boolean() {
  // expected-error @+1 {{'dtfm.constant' op expected boolean values 0 or 1, found 2}}
  %0 = dtfm.constant [0, 2] : tensor<2xi1>
  return
}

// -----

func.func @constant_float() {
  // expected-error @+1 {{'dtfm.constant' op result #0 must be statically shaped tensor of 1-bit signless integer or 32-bit signless integer or 64-bit signless integer values}}
  %0 = dtfm.constant [0, 2] : tensor<2xf32>
  return
}

// -----

func.func @gather_axis(%a: tensor<2x3xf32>, %i: tensor<4xi64>) {
  // expected-error @+1 {{'dtfm.gather' op axis 2 out of range for rank 2}}
  %0 = dtfm.gather %a, %i {axis = 2 : i64} : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<2x4xf32>
  return
}

// -----

func.func @gather_result(%a: tensor<2x3xf32>, %i: tensor<4x5xi64>) {
  // expected-error @+1 {{'dtfm.gather' op expected result type 'tensor<2x4x5xf32>', found 'tensor<2x4xf32>'}}
  %0 = dtfm.gather %a, %i {axis = 1 : i64} : (tensor<2x3xf32>, tensor<4x5xi64>) -> tensor<2x4xf32>
  return
}

// -----

func.func @where_broadcast(%c: tensor<3xi1>, %a: tensor<2x4xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+1 {{'dtfm.where' op operand shapes [3], [2, 4] and [2, 4] do not broadcast}}
  %0 = dtfm.where %c, %a, %b : (tensor<3xi1>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @where_condition(%c: tensor<4xi64>, %a: tensor<2x4xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+1 {{'dtfm.where' op operand #0 must be statically shaped tensor of 1-bit signless integer values}}
  %0 = dtfm.where %c, %a, %b : (tensor<4xi64>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

// COM: An element count that wraps 64 bits (to 6) is refused, not matched.
func.func @wrapping_reshape() {
  %x = dtfm.input "x" : tensor<2x3xf32>
  // expected-error @+1 {{'dtfm.reshape' op result #0 ('tensor<6579642004965823102x1087609157802800189xf32>') has more than 1125899906842624 bytes}}
  %y = dtfm.reshape %x : (tensor<2x3xf32>) -> tensor<6579642004965823102x1087609157802800189xf32>
  return
}

// -----

func.func @huge_input() {
  // expected-error @+1 {{'dtfm.input' op result #0 ('tensor<1125899906842624x2xf32>') has more than 1125899906842624 bytes}}
  %x = dtfm.input "x" : tensor<1125899906842624x2xf32>
  return
}

// -----

// COM: NaN and infinite attributes are refused (NaN passed every "<= 0" test).
func.func @nan_scale() {
  // expected-error @+1 {{initializer 'normal' expects a finite scale, found nan}}
  %p = dtfm.param "p" init(normal, 0x7FF8000000000000) : tensor<4xf32>
  return
}

// -----

func.func @nan_exponent() {
  %x = dtfm.input "x" : tensor<4xf32>
  // expected-error @+1 {{'dtfm.pow' op expected a finite exponent, found nan}}
  %y = dtfm.pow %x {exponent = 0x7FF8000000000000 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @clip_bounds_reversed() {
  %x = dtfm.input "x" : tensor<4xf32>
  // expected-error @+1 {{'dtfm.clip' op expected bounds min <= max, neither NaN, found min 6 and max 0}}
  %y = dtfm.clip %x {min = 6.0 : f64, max = 0.0 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @clip_nan_bound() {
  %x = dtfm.input "x" : tensor<4xf32>
  // expected-error @+1 {{'dtfm.clip' op expected bounds min <= max, neither NaN, found min nan and max 6}}
  %y = dtfm.clip %x {min = 0x7FF8000000000000 : f64, max = 6.0 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @sigmoid_changes_type() {
  %x = dtfm.input "x" : tensor<4xf32>
  // expected-error @+1 {{'dtfm.sigmoid' op}}
  %y = dtfm.sigmoid %x : (tensor<4xf32>) -> tensor<5xf32>
  return
}

// -----

func.func @infinite_latency() {
  %x = dtfm.input "x" : tensor<2x3xf32>
  // expected-error @+1 {{'dtfm.send' op expected latency_s >= 0 and bandwidth_gbps > 0, both finite, found inf and 1}}
  dtfm.send %x {peer = 1 : i64, tag = 0 : i64, bytes = 24 : i64, latency_s = 0x7FF0000000000000 : f64, bandwidth_gbps = 1.0 : f64} : tensor<2x3xf32>
  return
}

// -----

func.func @nan_lr() {
  %w = dtfm.param "w" init(zeros) : tensor<4xf32>
  %g = dtfm.input "g" : tensor<4xf32>
  // expected-error @+1 {{'dtfm.sgd_update' op learning rate: lr must be positive and finite, got nan}}
  %u = dtfm.sgd_update %w, %g {lr = 0x7FF8000000000000 : f64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @wrt_twice() {
  %x = dtfm.input "x" : tensor<2x3xf32>
  // expected-error @+1 {{'dtfm.backward' op 'wrt' index 0 given twice}}
  %g:2 = dtfm.backward "dtfm.add"(%x, %x, %x) {flops = 6 : i64, wrt = array<i64: 0, 0>} : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}
