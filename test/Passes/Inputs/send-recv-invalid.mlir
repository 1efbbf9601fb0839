func.func @bytes() {
  %x = dtfm.input "x" : tensor<2x3xf32>
  // expected-error @+1 {{expected bytes = 24 (the size of 'tensor<2x3xf32>'), found 12}}
  dtfm.send %x {peer = 1 : i64, tag = 0 : i64, bytes = 12 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64} : tensor<2x3xf32>
  return
}

// -----

func.func @link() {
  // expected-error @+1 {{expected latency_s >= 0 and bandwidth_gbps > 0, found 0.000000e+00 and 0.000000e+00}}
  %r = dtfm.recv {peer = 0 : i64, tag = 0 : i64, bytes = 24 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 0.0 : f64} : tensor<2x3xf32>
  return
}

// -----

func.func @peer() {
  // expected-error @+1 {{expected a non-negative peer, found -1}}
  %r = dtfm.recv {peer = -1 : i64, tag = 0 : i64, bytes = 24 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64} : tensor<2x3xf32>
  return
}
