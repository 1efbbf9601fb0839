// Three stages, for pass errors about the cluster.
func.func @staged() -> tensor<2x3xf32> {
  %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2x3xf32>
  %r = dtfm.relu %x {dtfm.stage = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %g = dtfm.gelu %r {dtfm.stage = 2 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return {dtfm.stage = 2 : i64} %g : tensor<2x3xf32>
}
