func.func @bytes() {
  %x = dtfm.input "x" : tensor<2x3xf32>
  // expected-error @+1 {{expected bytes = 24 (the size of 'tensor<2x3xf32>'), found 12}}
  dtfm.send %x {peer = 1 : i64, tag = 0 : i64, bytes = 12 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64} : tensor<2x3xf32>
  return
}

// -----

func.func @link() {
  // expected-error @+1 {{expected latency_s >= 0 and bandwidth_gbps > 0, both finite, found 0 and 0}}
  %r = dtfm.recv {peer = 0 : i64, tag = 0 : i64, bytes = 24 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 0.0 : f64} : tensor<2x3xf32>
  return
}

// -----

func.func @peer() {
  // expected-error @+1 {{expected a non-negative peer, found -1}}
  %r = dtfm.recv {peer = -1 : i64, tag = 0 : i64, bytes = 24 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64} : tensor<2x3xf32>
  return
}

// -----

// An int8 transfer carries the int8 format's bytes: 6 values and a scale.
func.func @int8_bytes() {
  %x = dtfm.input "x" : tensor<2x3xf32>
  // expected-error @+1 {{expected bytes = 10 (the size of 'tensor<2x3xf32>' in int8), found 24}}
  dtfm.send %x {peer = 1 : i64, tag = 0 : i64, bytes = 24 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.wire = "int8"} : tensor<2x3xf32>
  return
}

// -----

func.func @unknown_wire() {
  // expected-error @+1 {{expected dtfm.wire = "int8", found "fp8"}}
  %r = dtfm.recv {peer = 0 : i64, tag = 0 : i64, bytes = 24 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.wire = "fp8"} : tensor<2x3xf32>
  return
}

// -----

func.func @int8_weight() {
  // expected-error @+1 {{sends a weight once per iteration: dtfm.wire does not apply}}
  %r = dtfm.recv {peer = 0 : i64, tag = 0 : i64, bytes = 10 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.wire = "int8", dtfm.once_per_iteration} : tensor<2x3xf32>
  return
}
