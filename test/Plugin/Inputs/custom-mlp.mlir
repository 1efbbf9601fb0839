// An MLP block with the example plugin's operators, trained end to end:
// x [8, 16] -> gate/up linears [16, 32] -> swiglu -> rmsnorm -> linear to 5
// classes -> cross entropy. Two layers so that it can be split in 2 stages.
func.func @custom_mlp() -> tensor<f32> {
  %x = dtfm.input "x" {dtfm.layer = "block"} : tensor<8x16xf32>
  %wg = dtfm.param "gate.w" init(normal, 0.2) {dtfm.layer = "block"} : tensor<16x32xf32>
  %wu = dtfm.param "up.w" init(normal, 0.2) {dtfm.layer = "block"} : tensor<16x32xf32>
  %g = dtfm.linear %x, %wg {dtfm.layer = "block"} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %u = dtfm.linear %x, %wu {dtfm.layer = "block"} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %s = dtfm.custom "swiglu"(%g, %u) {dtfm.layer = "block"} : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  %nw = dtfm.param "norm.w" init(ones) {dtfm.layer = "head"} : tensor<32xf32>
  %n = dtfm.custom "rmsnorm"(%s, %nw) params {epsilon = 1.0e-05 : f64} {dtfm.layer = "head"} : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %wo = dtfm.param "out.w" init(normal, 0.2) {dtfm.layer = "head"} : tensor<32x5xf32>
  %bo = dtfm.param "out.b" init(zeros) {dtfm.layer = "head"} : tensor<5xf32>
  %logits = dtfm.linear %n, %wo, %bo {dtfm.layer = "head"} : (tensor<8x32xf32>, tensor<32x5xf32>, tensor<5xf32>) -> tensor<8x5xf32>
  %lab = dtfm.label "y" {dtfm.layer = "head"} : tensor<8xi64>
  %loss = dtfm.cross_entropy %logits, %lab {dtfm.layer = "head"} : (tensor<8x5xf32>, tensor<8xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
