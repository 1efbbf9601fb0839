// COM: End-to-end test through the importer: inputs built by dtfm-translate --import-gpt and a chain of passes, so it also breaks when the importer or an earlier pass changes (the hand-written pass tests are in test/Passes).
// RUN: dtfm-translate --import-gpt tiny | dtfm-opt --dtfm-autodiff --dtfm-import-cluster=file=%dtfm_src_root/examples/clusters/local-8.textproto --dtfm-partition-stages="stages=3" --dtfm-insert-send-recv --dtfm-verify-plan -o /dev/null
// RUN: dtfm-opt %s -split-input-file -verify-diagnostics --dtfm-verify-plan
// RUN: not dtfm-opt %S/../Passes/Inputs/schedule-cycle.mlir --dtfm-verify-plan 2>&1 | FileCheck %s --check-prefix=CYCLE
// CYCLE: schedule-cycle.mlir:0:0: error: dtfm-verify-plan: dtfm.schedule: stage 0 recv #0 (bwd micro-batch 0) never runs
// RUN: not dtfm-opt %S/../Passes/Inputs/schedule-malformed.mlir --dtfm-verify-plan 2>&1 | FileCheck %s --check-prefix=MALFORMED
// COM: A malformed entry is reported by the #dtfm.schedule verifier when the
// COM: input is parsed, before the pass runs.
// MALFORMED: schedule-malformed.mlir:1:50: error: dtfm.schedule: stage 1 recv: malformed item 'X2<0'

func.func @no_recv() {
  %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2xf32>
  // expected-error @+1 {{with tag 3 from stage 0 to stage 1 has no matching recv}}
  dtfm.send %x {peer = 1 : i64, tag = 3 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 0 : i64} : tensor<2xf32>
  return
}

// -----

func.func @no_send() {
  // expected-error @+1 {{with tag 4 has no send}}
  %r = dtfm.recv {peer = 0 : i64, tag = 4 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 1 : i64} : tensor<2xf32>
  return
}

// -----

func.func @bytes() {
  %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2xf32>
  dtfm.send %x {peer = 1 : i64, tag = 0 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 0 : i64} : tensor<2xf32>
  // expected-error @+1 {{receives 16 bytes but its send (tag 0) sends 8}}
  %r = dtfm.recv {peer = 0 : i64, tag = 0 : i64, bytes = 16 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 1 : i64} : tensor<4xf32>
  return
}

// -----

func.func @peers() {
  %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2xf32>
  dtfm.send %x {peer = 2 : i64, tag = 0 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 0 : i64} : tensor<2xf32>
  // expected-error @+1 {{and its send (tag 0) disagree on ends: send from stage 0 to stage 2, recv from stage 0 on stage 1}}
  %r = dtfm.recv {peer = 0 : i64, tag = 0 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 1 : i64} : tensor<2xf32>
  return
}

// -----

func.func @duplicate_recv() {
  %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2xf32>
  dtfm.send %x {peer = 1 : i64, tag = 0 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 0 : i64} : tensor<2xf32>
  %r = dtfm.recv {peer = 0 : i64, tag = 0 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 1 : i64} : tensor<2xf32>
  // expected-error @+1 {{is a second recv for tag 0 (one per send)}}
  %s = dtfm.recv {peer = 0 : i64, tag = 0 : i64, bytes = 8 : i64, latency_s = 0.0 : f64, bandwidth_gbps = 1.0 : f64, dtfm.stage = 1 : i64} : tensor<2xf32>
  return
}

