func.func @mismatch() {
  %g = dtfm.input "gate" : tensor<2x8xf32>
  %u = dtfm.input "up" : tensor<2x4xf32>
  // expected-error @+1 {{'swiglu': expected gate and up of one type, found [2, 8] and [2, 4]}}
  %s = dtfm.custom "swiglu"(%g, %u) : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @wrong_result() {
  %g = dtfm.input "gate" : tensor<2x8xf32>
  // expected-error @+1 {{'swiglu' expected result #0 of type 'tensor<2x8xf32>', found 'tensor<2x8xf16>'}}
  %s = dtfm.custom "swiglu"(%g, %g) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf16>
  return
}

// -----

func.func @missing_param() {
  %x = dtfm.input "x" : tensor<2x8xf32>
  %w = dtfm.param "w" init(ones) : tensor<8xf32>
  // expected-error @+1 {{'rmsnorm': expected a positive float param 'epsilon'}}
  %n = dtfm.custom "rmsnorm"(%x, %w) : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @bad_param_kind() {
  %x = dtfm.input "x" : tensor<2x8xf32>
  %w = dtfm.param "w" init(ones) : tensor<8xf32>
  // expected-error @+1 {{param 'epsilon' must be an integer, float, string or array<i64>}}
  %n = dtfm.custom "rmsnorm"(%x, %w) params {epsilon = [1.0]} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}
