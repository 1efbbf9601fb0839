// RUN: dtfm-translate --import-gpt tiny | FileCheck %s
// RUN: dtfm-translate --import-gpt tiny | dtfm-opt --verify-roundtrip > /dev/null
// RUN: dtfm-translate --import-gpt=tiny --layers 3 --dtype bf16 --micro-batch 2 | FileCheck %s --check-prefix=OVERRIDE
// RUN: dtfm-translate --import-gpt custom --layers 1 --hidden 8 --heads 2 --seq-len 4 --vocab 10 | FileCheck %s --check-prefix=CUSTOM
// RUN: dtfm-translate --import-gpt tiny -o %t.mlir && dtfm-opt %t.mlir | FileCheck %s
// RUN: dtfm-translate --list-gpt-presets | FileCheck %s --check-prefix=LIST

// CHECK-LABEL: func.func @tiny() -> tensor<f32> attributes {dtfm.model = "tiny"}
// CHECK: %[[TOK:.*]] = dtfm.input "tokens" {dtfm.layer = "embedding"} : tensor<4x32xi64>
// CHECK: %[[WTE:.*]] = dtfm.param "wte" init(normal, 2.000000e-02) {dtfm.layer = "embedding"} : tensor<256x64xf32>
// CHECK: dtfm.param "wpe" {{.*}} : tensor<32x64xf32>
// CHECK: dtfm.embedding %[[TOK]], %[[WTE]]
// CHECK: dtfm.layernorm {{.*}}{dtfm.layer = "layer.0"
// CHECK-COUNT-4: dtfm.linear {{.*}}{dtfm.layer = "layer.0"} : (tensor<4x32x64xf32>, tensor<64x64xf32>, tensor<64xf32>)
// CHECK: dtfm.linear {{.*}} -> tensor<4x32x256xf32>
// CHECK: dtfm.gelu
// CHECK: dtfm.add {{.*}}{dtfm.layer = "layer.1"}
// CHECK: dtfm.param "ln_f.gamma" init(ones) {dtfm.layer = "head"}
// CHECK: %[[LOGITS:.*]] = dtfm.matmul %{{.*}}, %[[WTE]] transpose_rhs {dtfm.layer = "head"} : (tensor<4x32x64xf32>, tensor<256x64xf32>) -> tensor<4x32x256xf32>
// CHECK: %[[LABELS:.*]] = dtfm.label "labels"
// CHECK: %[[LOSS:.*]] = dtfm.cross_entropy %[[LOGITS]], %[[LABELS]]
// CHECK: return %[[LOSS]] : tensor<f32>

// OVERRIDE: dtfm.input "tokens" {{.*}} : tensor<2x32xi64>
// OVERRIDE: dtfm.layer = "layer.2"
// OVERRIDE-NOT: dtfm.layer = "layer.3"
// OVERRIDE: dtfm.matmul {{.*}} -> tensor<2x32x256xbf16>

// CUSTOM: func.func @custom()
// CUSTOM: dtfm.causal_attention {{.*}}num_heads = 2 : i64{{.*}} -> tensor<1x4x8xf32>

// LIST: gpt3-1.3b   arch gpt    layers  24  hidden  2048  heads  16  kv-heads  16  ffn  8192  seq 2048  vocab  50257  micro-batch 1  dtype f16   params 1315723264
// LIST: gpt3-175b   arch gpt    layers  96  hidden 12288  heads  96
// LIST: gpt2-xl
// LIST: tiny        arch gpt
// LIST: llama2-7b   arch llama  layers  32  hidden  4096  heads  32  kv-heads  32  ffn 11008  seq 4096  vocab  32000  micro-batch 1  dtype bf16  params 6738415616
// LIST: llama3-8b   arch llama  layers  32  hidden  4096  heads  32  kv-heads   8  ffn 14336  seq 8192  vocab 128256  micro-batch 1  dtype bf16  params 8030261248
// LIST: tiny-llama  arch llama
