// RUN: dtfm-opt %s -split-input-file --dtfm-verify-plan | FileCheck %s

// COM: dtfm-verify-plan is read-only: a consistent module comes out as it
// COM: went in.

// COM: Stages: one send and its recv (same tag, bytes, ends).
// CHECK-LABEL: func.func @staged
// CHECK-NEXT: dtfm.input
// CHECK-NEXT: dtfm.send %{{.*}} {bandwidth_gbps = 1.000000e+00 : f64, bytes = 8 : i64, dtfm.stage = 0 : i64, latency_s = 0.000000e+00 : f64, peer = 1 : i64, tag = 0 : i64}
// CHECK-NEXT: dtfm.recv {bandwidth_gbps = 1.000000e+00 : f64, bytes = 8 : i64, dtfm.stage = 1 : i64, latency_s = 0.000000e+00 : f64, peer = 0 : i64, tag = 0 : i64}
// CHECK-NEXT: return
func.func @staged() -> tensor<2xf32> {
  %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2xf32>
  dtfm.send %x {peer = 1 : i64, tag = 0 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 0 : i64} : tensor<2xf32>
  %r = dtfm.recv {peer = 0 : i64, tag = 0 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 1 : i64} : tensor<2xf32>
  return {dtfm.stage = 1 : i64} %r : tensor<2xf32>
}

// -----

// COM: Device programs: the ends are the programs' devices and the ops'
// COM: peer_device. A tag is unique per pair of ends: tag 0 used a -> b
// COM: and b -> a is two transfers.
// CHECK-LABEL: func.func @a()
// CHECK: dtfm.send {{.*}}peer_device = "b", tag = 0 : i64}
// CHECK: dtfm.recv {{.*}}peer_device = "b", tag = 0 : i64}
// CHECK-LABEL: func.func @b()
// CHECK: dtfm.recv {{.*}}peer_device = "a", tag = 0 : i64}
// CHECK: dtfm.send {{.*}}peer_device = "a", tag = 0 : i64}
func.func @a() attributes {dtfm.device = "a"} {
  %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2xf32>
  dtfm.send %x {peer = 1 : i64, peer_device = "b", tag = 0 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 0 : i64} : tensor<2xf32>
  %back = dtfm.recv {peer = 1 : i64, peer_device = "b", tag = 0 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 0 : i64} : tensor<2xf32>
  return
}
func.func @b() attributes {dtfm.device = "b"} {
  %r = dtfm.recv {peer = 0 : i64, peer_device = "a", tag = 0 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 1 : i64} : tensor<2xf32>
  dtfm.send %r {peer = 0 : i64, peer_device = "a", tag = 0 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 1 : i64} : tensor<2xf32>
  return
}

// -----

// COM: A schedule that runs to completion (1F1B, 2 stages, 1 micro-batch)
// COM: passes the dependency check.
// CHECK-LABEL: module attributes {dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 1,
module attributes {dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 1, peak_in_flight = [1, 1], stages = [<recv = ["B0<1"], compute = ["F0", "B0"], send = ["F0>1"]>, <recv = ["F0<0"], compute = ["F0", "B0"], send = ["B0>0"]>]>} {
}
