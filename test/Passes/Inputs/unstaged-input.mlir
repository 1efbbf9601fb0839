// A function whose ops have no dtfm.stage (before --dtfm-partition-stages).
func.func @unstaged() {
  %x = dtfm.input "x" : tensor<2xf32>
  return
}
