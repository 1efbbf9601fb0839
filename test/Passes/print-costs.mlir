// RUN: dtfm-opt %s --dtfm-print-costs -o /dev/null | FileCheck %s --check-prefix=TABLE
// RUN: dtfm-opt %s --dtfm-annotate-costs --dtfm-print-costs -o /dev/null | FileCheck %s --check-prefix=TABLE
// RUN: dtfm-opt %s --dtfm-print-costs="format=json per-op=false" -o /dev/null | FileCheck %s --check-prefix=JSON
// RUN: dtfm-opt %s --dtfm-print-costs | FileCheck %s --check-prefix=IR

func.func @two_layers() -> tensor<f32> {
  %x = dtfm.input "x" {dtfm.layer = "in"} : tensor<2x4xf32>
  %w0 = dtfm.param "w0" init(normal, 0.1) {dtfm.layer = "l0"} : tensor<4x4xf32>
  %y0 = dtfm.linear %x, %w0 {dtfm.layer = "l0"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %w1 = dtfm.param "w1" init(normal, 0.1) {dtfm.layer = "l1"} : tensor<4x3xf32>
  %b1 = dtfm.param "b1" init(zeros) {dtfm.layer = "l1"} : tensor<3xf32>
  %y1 = dtfm.linear %y0, %w1, %b1 {dtfm.layer = "l1"} : (tensor<2x4xf32>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %m = dtfm.param "m" init(zeros) frozen {dtfm.layer = "l1"} : tensor<3xf32>
  %t = dtfm.label "t" : tensor<2xi64>
  %loss = dtfm.cross_entropy %y1, %t : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// TABLE: === dtfm costs (one micro-batch) ===
// TABLE: # op layer fwd FLOPs bwd FLOPs saved bytes result bytes param bytes
// TABLE-NEXT: 0 dtfm.input x in 0 0 0 32 0
// TABLE-NEXT: 1 dtfm.param w0 l0 0 0 0 64 64
// COM: 2*2*4*4 = 64 forward, 128 backward, keeps x (32 B).
// TABLE-NEXT: 2 dtfm.linear l0 64 128 32 32 0
// TABLE-NEXT: 3 dtfm.param w1 l1 0 0 0 48 48
// TABLE-NEXT: 4 dtfm.param b1 l1 0 0 0 12 12
// COM: 2*2*3*4 + 2*3 = 54 forward, 4*2*3*4 + 6 = 102 backward.
// TABLE-NEXT: 5 dtfm.linear l1 54 102 32 24 0
// TABLE-NEXT: 6 dtfm.param m l1 0 0 0 12 12
// TABLE-NEXT: 7 dtfm.label t - 0 0 0 16 0
// COM: 5*6 + 2*2 = 34 forward, 2*6 = 12 backward.
// TABLE-NEXT: 8 dtfm.cross_entropy - 34 12 24 4 0
// TABLE: --- per layer ---
// TABLE-NEXT: layer ops params fwd FLOPs bwd FLOPs saved bytes
// TABLE-NEXT: in 1 0 0 0 0
// TABLE-NEXT: l0 2 16 64 128 32
// TABLE-NEXT: l1 4 18 54 102 32
// TABLE-NEXT: - 2 0 34 12 24
// TABLE: --- totals ---
// TABLE-NEXT: ops 9 (9)
// TABLE-NEXT: parameters (trainable) 31 (31)
// TABLE-NEXT: parameters (frozen) 3 (3)
// TABLE-NEXT: parameter bytes 136 (136 B)
// TABLE-NEXT: forward FLOPs 152 (152)
// TABLE-NEXT: backward FLOPs 242 (242)
// TABLE-NEXT: training FLOPs 394 (394)
// TABLE-NEXT: saved activation bytes 88 (88 B)

// JSON: {"layers":[{{.*}}"layer":"in"{{.*}}"layer":"l0"{{.*}}],"ops":[],"totals":{"bwd_flops":242,"frozen_params":3,"fwd_flops":152,"ops":9,"optimizer_flops":0,"param_bytes":136,"result_bytes":{{[0-9]+}},"saved_bytes":88,"trainable_params":31,"training_flops":394}}

// COM: The pass leaves the IR as it was.
// IR: func.func @two_layers
// IR-NOT: dtfm.cost
