// RUN: dtfm-opt %s -split-input-file -verify-diagnostics --dtfm-verify-plan
// RUN: not dtfm-opt %S/Inputs/schedule-cycle.mlir --dtfm-verify-plan 2>&1 | FileCheck %s --check-prefix=CYCLE

// COM: A hand-edited schedule with a cycle has no op to point at.
// CYCLE: schedule-cycle.mlir:0:0: error: dtfm-verify-plan: dtfm.schedule: stage 0 recv #0 (bwd micro-batch 0) never runs

func.func @no_recv() {
  %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2xf32>
  // expected-error @+1 {{'dtfm.send' op with tag 3 from stage 0 to stage 1 has no matching recv}}
  dtfm.send %x {peer = 1 : i64, tag = 3 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 0 : i64} : tensor<2xf32>
  return
}

// -----

func.func @no_send() {
  // expected-error @+1 {{'dtfm.recv' op with tag 4 has no send}}
  %r = dtfm.recv {peer = 0 : i64, tag = 4 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 1 : i64} : tensor<2xf32>
  return
}

// -----

func.func @bytes() {
  %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2xf32>
  dtfm.send %x {peer = 1 : i64, tag = 0 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 0 : i64} : tensor<2xf32>
  // expected-error @+1 {{'dtfm.recv' op receives 16 bytes but its send (tag 0) sends 8}}
  %r = dtfm.recv {peer = 0 : i64, tag = 0 : i64, bytes = 16 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 1 : i64} : tensor<4xf32>
  return
}

// -----

func.func @ends() {
  %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2xf32>
  dtfm.send %x {peer = 2 : i64, tag = 0 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 0 : i64} : tensor<2xf32>
  // expected-error @+1 {{'dtfm.recv' op and its send (tag 0) disagree on ends: send from stage 0 to stage 2, recv from stage 0 on stage 1}}
  %r = dtfm.recv {peer = 0 : i64, tag = 0 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 1 : i64} : tensor<2xf32>
  return
}

// -----

func.func @second_recv() {
  %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2xf32>
  dtfm.send %x {peer = 1 : i64, tag = 0 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 0 : i64} : tensor<2xf32>
  %r = dtfm.recv {peer = 0 : i64, tag = 0 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 1 : i64} : tensor<2xf32>
  // expected-error @+1 {{'dtfm.recv' op is a second recv for tag 0 (one per send)}}
  %s = dtfm.recv {peer = 0 : i64, tag = 0 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 1 : i64} : tensor<2xf32>
  return
}

// -----

// COM: Two sends with one tag between the same ends.
func.func @reused_tag() {
  %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2xf32>
  dtfm.send %x {peer = 1 : i64, tag = 0 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 0 : i64} : tensor<2xf32>
  // expected-error @+1 {{'dtfm.send' op reuses tag 0 from stage 0 to stage 1}}
  dtfm.send %x {peer = 1 : i64, tag = 0 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 0 : i64} : tensor<2xf32>
  %r = dtfm.recv {peer = 0 : i64, tag = 0 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 1 : i64} : tensor<2xf32>
  return
}

// -----

// COM: Device programs: the ends are device names (the program's
// COM: dtfm.device and the op's peer_device), not stages.
func.func @a() attributes {dtfm.device = "a"} {
  %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2xf32>
  dtfm.send %x {peer = 1 : i64, peer_device = "c", tag = 0 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 0 : i64} : tensor<2xf32>
  return
}
func.func @b() attributes {dtfm.device = "b"} {
  // expected-error @+1 {{'dtfm.recv' op and its send (tag 0) disagree on ends: send from a to c, recv from a on b}}
  %r = dtfm.recv {peer = 0 : i64, peer_device = "a", tag = 0 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 1 : i64} : tensor<2xf32>
  return
}
