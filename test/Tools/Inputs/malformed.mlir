func.func @f() {
  %x = dtfm.input "x" : tensor<2x
}
