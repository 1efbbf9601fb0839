func.func @f() {
  %x = dtfm.input "x" : tensor<2x3xf32>
  %y = dtfm.relu %x : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}
