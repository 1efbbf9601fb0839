// Two layers for --check-finite: layer "sum" adds up each row of the input
// (all-ones weights) and takes its logarithm, which is NaN wherever a sum is
// negative (synthetic inputs are normal); layer "head" classifies.
module {
  func.func @log_of_sums() -> tensor<f32> attributes {dtfm.model = "log-of-sums"} {
    %x = dtfm.input "x" {dtfm.layer = "sum"} : tensor<4x8xf32>
    %w = dtfm.param "sum.weight" init(ones) {dtfm.layer = "sum"} : tensor<8x8xf32>
    %b = dtfm.param "sum.bias" init(zeros) {dtfm.layer = "sum"} : tensor<8xf32>
    %s = dtfm.linear %x, %w, %b {dtfm.layer = "sum"} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %l = dtfm.log %s {dtfm.layer = "sum"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %hw = dtfm.param "head.weight" init(normal, 2.0e-02) {dtfm.layer = "head"} : tensor<8x10xf32>
    %hb = dtfm.param "head.bias" init(zeros) {dtfm.layer = "head"} : tensor<10xf32>
    %y = dtfm.linear %l, %hw, %hb {dtfm.layer = "head"} : (tensor<4x8xf32>, tensor<8x10xf32>, tensor<10xf32>) -> tensor<4x10xf32>
    %t = dtfm.label "labels" {dtfm.layer = "head"} : tensor<4xi64>
    %loss = dtfm.cross_entropy %y, %t {dtfm.layer = "head"} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
