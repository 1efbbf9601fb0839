func.func @ffn() -> tensor<2x8xf32> {
  %g = dtfm.input "gate" : tensor<2x8xf32>
  %u = dtfm.input "up" : tensor<2x8xf32>
  %w = dtfm.param "w" init(ones) : tensor<8xf32>
  %s = dtfm.custom "swiglu"(%g, %u) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %n = dtfm.custom "rmsnorm"(%s, %w) params {epsilon = 0.25 : f64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %n : tensor<2x8xf32>
}
