// RUN: dtfm-opt %s -split-input-file --dtfm-schedule-microbatches="schedule=zb-h1 micro-batches=3" | FileCheck %s
// RUN: dtfm-opt %s -split-input-file --dtfm-schedule-microbatches="schedule=1f1b micro-batches=3" | FileCheck %s --check-prefix=ONEF

// COM: Zero bubble (ZB-H1): each dtfm.backward that differentiates a
// COM: parameter and another value becomes two reading the same inputs --
// COM: B (the other value, on the critical path, phase bwd) and W (the
// COM: parameters, phase wgt) -- their FLOPs split (a product's factors
// COM: half each of 96, the bias its 6 output gradients: B 48, W 54). A
// COM: backward of parameters alone is all W. The compute streams get a W
// COM: entry per micro-batch; the transfers stay F and B. Stage 1 runs
// COM: each W a micro-batch late, holding at most 2 micro-batches from
// COM: forward to W (1F1B's stage 0 holds 2 from forward to B: 2 x 64
// COM: bytes; stage 1 at most 128: 72 to its B, 56 more to its W). Stage 0
// COM: puts off no W (ZB-H1 never does there), so its backward stays
// COM: whole: 1F1B's order and memory.
// CHECK-LABEL: module attributes
// CHECK-SAME: dtfm.schedule = #dtfm.schedule<kind = "zb-h1", micro_batches = 3, peak_in_flight = [2, 2], stages = [<recv = ["B0<1", "B1<1", "B2<1"], compute = ["F0", "F1", "B0", "F2", "B1", "B2"], send = ["F0>1", "F1>1", "F2>1"]>, <recv = ["F0<0", "F1<0", "F2<0"], compute = ["F0", "B0", "F1", "B1", "W0", "F2", "B2", "W1", "W2"], send = ["B0>0", "B1>0", "B2>0"]>]>
// CHECK: dtfm.backward "dtfm.cross_entropy"{{.*}}dtfm.phase = "bwd"
// CHECK: %[[DH:.*]] = dtfm.backward "dtfm.linear"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {dtfm.phase = "bwd", {{.*}}flops = 48 : i64, wrt = array<i64: 0>}
// CHECK-NEXT: %[[DW:.*]]:2 = dtfm.backward "dtfm.linear"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) {dtfm.phase = "wgt", {{.*}}flops = 54 : i64, wrt = array<i64: 1, 2>}
// CHECK-NEXT: dtfm.send %[[DH]] {{.*}}dtfm.phase = "bwd"
// CHECK: dtfm.backward "dtfm.relu"{{.*}}dtfm.phase = "bwd"
// CHECK: dtfm.backward "dtfm.matmul"{{.*}}dtfm.phase = "bwd"{{.*}}wrt = array<i64: 1>
// CHECK: dtfm.adamw_update {{.*}}dtfm.phase = "opt"
// CHECK: dtfm.adamw_update %{{.*}}, %[[DW]]#0 {{.*}}dtfm.phase = "opt"
// COM: 1F1B leaves the backwards whole.
// ONEF-LABEL: module attributes
// ONEF-SAME: kind = "1f1b"
// ONEF: dtfm.backward "dtfm.linear"{{.*}}dtfm.phase = "bwd"{{.*}}flops = 102 : i64, wrt = array<i64: 0, 1, 2>}
// ONEF-NOT: "wgt"
module {
  func.func @train() -> tensor<f32> {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2x4xf32>
    %w0 = dtfm.param "w0" init(zeros) {dtfm.stage = 0 : i64} : tensor<4x4xf32>
    %y0 = dtfm.matmul %x, %w0 {dtfm.stage = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %h = dtfm.relu %y0 {dtfm.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    dtfm.send %h {bandwidth_gbps = 1.000000e+01 : f64, bytes = 32 : i64, dtfm.stage = 0 : i64, latency_s = 1.000000e-03 : f64, peer = 1 : i64, tag = 0 : i64} : tensor<2x4xf32>
    %hr = dtfm.recv {bandwidth_gbps = 1.000000e+01 : f64, bytes = 32 : i64, dtfm.stage = 1 : i64, latency_s = 1.000000e-03 : f64, peer = 0 : i64, tag = 0 : i64} : tensor<2x4xf32>
    %w1 = dtfm.param "w1" init(zeros) {dtfm.stage = 1 : i64} : tensor<4x3xf32>
    %b1 = dtfm.param "b1" init(zeros) {dtfm.stage = 1 : i64} : tensor<3xf32>
    %y = dtfm.linear %hr, %w1, %b1 {dtfm.stage = 1 : i64} : (tensor<2x4xf32>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %t = dtfm.label "t" {dtfm.stage = 1 : i64} : tensor<2xi64>
    %loss = dtfm.cross_entropy %y, %t {dtfm.stage = 1 : i64} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    %dy = dtfm.backward "dtfm.cross_entropy"(%y, %t) {dtfm.stage = 1 : i64, flops = 12 : i64, wrt = array<i64: 0>} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
    %g:3 = dtfm.backward "dtfm.linear"(%hr, %w1, %b1, %dy) {dtfm.stage = 1 : i64, flops = 102 : i64, wrt = array<i64: 0, 1, 2>} : (tensor<2x4xf32>, tensor<4x3xf32>, tensor<3xf32>, tensor<2x3xf32>) -> (tensor<2x4xf32>, tensor<4x3xf32>, tensor<3xf32>)
    dtfm.send %g#0 {bandwidth_gbps = 1.000000e+01 : f64, bytes = 32 : i64, dtfm.stage = 1 : i64, latency_s = 1.000000e-03 : f64, peer = 0 : i64, tag = 1 : i64} : tensor<2x4xf32>
    %dhr = dtfm.recv {bandwidth_gbps = 1.000000e+01 : f64, bytes = 32 : i64, dtfm.stage = 0 : i64, latency_s = 1.000000e-03 : f64, peer = 1 : i64, tag = 1 : i64} : tensor<2x4xf32>
    %dy0 = dtfm.backward "dtfm.relu"(%y0, %dhr) {dtfm.stage = 0 : i64, flops = 8 : i64, wrt = array<i64: 0>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %dw0 = dtfm.backward "dtfm.matmul"(%x, %w0, %dy0) {dtfm.stage = 0 : i64, flops = 64 : i64, wrt = array<i64: 1>} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %u0 = dtfm.adamw_update %w0, %dw0 {dtfm.stage = 0 : i64, lr = 1.000000e-03 : f64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %u1 = dtfm.adamw_update %w1, %g#1 {dtfm.stage = 1 : i64, lr = 1.000000e-03 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    %u2 = dtfm.adamw_update %b1, %g#2 {dtfm.stage = 1 : i64, lr = 1.000000e-03 : f64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    return {dtfm.stage = 1 : i64} %loss : tensor<f32>
  }
}

// -----

// COM: A parameter used twice (on stage 1): its gradients' sum is W work
// COM: too; a parameter's gradient a send reads (a tied weight's, sent
// COM: once per iteration) stays in the backward, and so does what it sums.
// CHECK-LABEL: module attributes
// CHECK-SAME: compute = ["F0", "B0", "F1", "B1", "W0", "F2", "B2", "W1", "W2"]
// CHECK: %[[A:.*]] = dtfm.backward "dtfm.matmul"{{.*}}dtfm.phase = "wgt"{{.*}}wrt = array<i64: 1>
// CHECK: %[[B:.*]] = dtfm.backward "dtfm.matmul"{{.*}}dtfm.phase = "wgt"{{.*}}wrt = array<i64: 1>
// CHECK: dtfm.accumulate %[[A]], %[[B]] {dtfm.phase = "wgt"
// CHECK: %[[T:.*]] = dtfm.backward "dtfm.matmul"{{.*}}dtfm.phase = "bwd"{{.*}}wrt = array<i64: 1>
// CHECK-NEXT: dtfm.send %[[T]] {{.*}}dtfm.phase = "bwd"
module {
  func.func @shared() -> tensor<f32> {
    %x0 = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2x4xf32>
    %w0 = dtfm.param "w0" init(zeros) {dtfm.stage = 0 : i64} : tensor<4x4xf32>
    %y0 = dtfm.matmul %x0, %w0 {dtfm.stage = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %h0 = dtfm.relu %y0 {dtfm.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %h1 = dtfm.relu %h0 {dtfm.stage = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    dtfm.send %h1 {bandwidth_gbps = 1.000000e+01 : f64, bytes = 32 : i64, dtfm.stage = 0 : i64, latency_s = 1.000000e-03 : f64, peer = 1 : i64, tag = 0 : i64} : tensor<2x4xf32>
    %x = dtfm.recv {bandwidth_gbps = 1.000000e+01 : f64, bytes = 32 : i64, dtfm.stage = 1 : i64, latency_s = 1.000000e-03 : f64, peer = 0 : i64, tag = 0 : i64} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.stage = 1 : i64} : tensor<4x4xf32>
    %v = dtfm.param "v" init(zeros) {dtfm.stage = 1 : i64} : tensor<4x4xf32>
    %a = dtfm.matmul %x, %w {dtfm.stage = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %b = dtfm.matmul %x, %w {dtfm.stage = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %c = dtfm.matmul %x, %v {dtfm.stage = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %s = dtfm.add %a, %b {dtfm.stage = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %s2 = dtfm.add %s, %c {dtfm.stage = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %t = dtfm.label "t" {dtfm.stage = 1 : i64} : tensor<2xi64>
    %loss = dtfm.cross_entropy %s2, %t {dtfm.stage = 1 : i64} : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
    %ds = dtfm.backward "dtfm.cross_entropy"(%s2, %t) {dtfm.stage = 1 : i64, flops = 16 : i64, wrt = array<i64: 0>} : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
    %da = dtfm.backward "dtfm.matmul"(%x, %w, %ds) {dtfm.stage = 1 : i64, flops = 64 : i64, wrt = array<i64: 1>} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %db = dtfm.backward "dtfm.matmul"(%x, %w, %ds) {dtfm.stage = 1 : i64, flops = 64 : i64, wrt = array<i64: 1>} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %dw = dtfm.accumulate %da, %db {dtfm.stage = 1 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %dx = dtfm.backward "dtfm.matmul"(%x, %w, %ds) {dtfm.stage = 1 : i64, flops = 64 : i64, wrt = array<i64: 0>} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    dtfm.send %dx {bandwidth_gbps = 1.000000e+01 : f64, bytes = 32 : i64, dtfm.stage = 1 : i64, latency_s = 1.000000e-03 : f64, peer = 0 : i64, tag = 1 : i64} : tensor<2x4xf32>
    %dv = dtfm.backward "dtfm.matmul"(%x, %v, %ds) {dtfm.stage = 1 : i64, flops = 64 : i64, wrt = array<i64: 1>} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    dtfm.send %dv {bandwidth_gbps = 1.000000e+01 : f64, bytes = 64 : i64, dtfm.once_per_iteration, dtfm.stage = 1 : i64, latency_s = 1.000000e-03 : f64, peer = 0 : i64, tag = 2 : i64} : tensor<4x4xf32>
    %dvr = dtfm.recv {bandwidth_gbps = 1.000000e+01 : f64, bytes = 64 : i64, dtfm.once_per_iteration, dtfm.stage = 0 : i64, latency_s = 1.000000e-03 : f64, peer = 1 : i64, tag = 2 : i64} : tensor<4x4xf32>
    %u = dtfm.adamw_update %w, %dw {dtfm.stage = 1 : i64, lr = 1.000000e-03 : f64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %dh = dtfm.recv {bandwidth_gbps = 1.000000e+01 : f64, bytes = 32 : i64, dtfm.stage = 0 : i64, latency_s = 1.000000e-03 : f64, peer = 1 : i64, tag = 1 : i64} : tensor<2x4xf32>
    %dh0 = dtfm.backward "dtfm.relu"(%h0, %dh) {dtfm.stage = 0 : i64, flops = 8 : i64, wrt = array<i64: 0>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %dy0 = dtfm.backward "dtfm.relu"(%y0, %dh0) {dtfm.stage = 0 : i64, flops = 8 : i64, wrt = array<i64: 0>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %dw0 = dtfm.backward "dtfm.matmul"(%x0, %w0, %dy0) {dtfm.stage = 0 : i64, flops = 64 : i64, wrt = array<i64: 1>} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %u0 = dtfm.adamw_update %w0, %dw0 {dtfm.stage = 0 : i64, lr = 1.000000e-03 : f64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    return {dtfm.stage = 1 : i64} %loss : tensor<f32>
  }
}

