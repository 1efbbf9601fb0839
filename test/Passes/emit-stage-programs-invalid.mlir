// RUN: dtfm-opt %s -split-input-file -verify-diagnostics --dtfm-emit-stage-programs
// RUN: not dtfm-opt %S/Inputs/emit-programs-module.mlir -split-input-file --dtfm-emit-stage-programs 2>&1 | FileCheck %s

// COM: Whole-module errors point at the cluster file (or the module).
// CHECK: emit-programs-module.mlir:{{.*}}error: dtfm-emit-stage-programs: no cluster in the module: run --dtfm-import-cluster=file=FILE first (or --dtfm-plan=cluster=FILE)
// CHECK: pair.textproto:0:0: error: dtfm-emit-stage-programs: no dtfm.schedule; run --dtfm-schedule-microbatches first
// CHECK: pair.textproto:0:0: error: dtfm-emit-stage-programs: expected one model function, found 2
// CHECK: pair.textproto:0:0: error: dtfm-emit-stage-programs: dtfm.assignment has 1 stages but the schedule 2
// CHECK: single.textproto:0:0: error: dtfm-emit-stage-programs: 2 stages but cluster 'single' has 1 devices
// CHECK: pair.textproto:0:0: error: dtfm-emit-stage-programs: dtfm.schedule has 3 pipeline micro-batch counts but stage 0 runs 2 pipelines

module attributes {dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "R0", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "R1", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>, dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 1, peak_in_flight = [1, 1], stages = [<recv = ["B0<1"], compute = ["F0", "B0"], send = ["F0>1"]>, <recv = ["F0<0"], compute = ["F0", "B0"], send = ["B0>0"]>]>} {
  func.func @outside() {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2xf32>
    // expected-error @+1 {{'dtfm.relu' op has no dtfm.stage within the schedule's stages}}
    %r = dtfm.relu %x {dtfm.stage = 2 : i64} : (tensor<2xf32>) -> tensor<2xf32>
    return {dtfm.stage = 0 : i64}
  }
}

// -----

// COM: Stage 1 reads stage 0's value directly (no send/recv pair).
module attributes {dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "R0", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "R1", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>, dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 1, peak_in_flight = [1, 1], stages = [<recv = ["B0<1"], compute = ["F0", "B0"], send = ["F0>1"]>, <recv = ["F0<0"], compute = ["F0", "B0"], send = ["B0>0"]>]>} {
  func.func @crossing() {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2xf32>
    // expected-error @+1 {{'dtfm.relu' op uses a value of another stage; run --dtfm-insert-send-recv first}}
    %r = dtfm.relu %x {dtfm.stage = 1 : i64} : (tensor<2xf32>) -> tensor<2xf32>
    return {dtfm.stage = 1 : i64}
  }
}
