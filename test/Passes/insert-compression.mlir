// RUN: dtfm-opt %s -split-input-file --dtfm-insert-compression=ratio=10 | FileCheck %s
// RUN: dtfm-opt %s -split-input-file --dtfm-insert-compression="ratio=10 uniform=true" | FileCheck %s --check-prefix=UNIFORM
// RUN: dtfm-opt %s -split-input-file --dtfm-insert-compression="ratio=10 dense-below=0.5" | FileCheck %s --check-prefix=DENSE
// RUN: dtfm-opt %s -split-input-file --dtfm-insert-compression=int8=int8 | FileCheck %s --check-prefix=INT8
// RUN: dtfm-opt %s -split-input-file --dtfm-insert-compression="ratio=10 int8=auto" | FileCheck %s --check-prefix=MIXED

// COM: int8=int8 (SWARM's 8-bit transfers, no top-k): the three
// COM: activations keep their send and recv, marked dtfm.wire = "int8",
// COM: with the format's bytes: 128 values and one scale, 128 + 4 = 132 B.
// COM: The tied weight stays dense.
// INT8-LABEL: func.func @three_links
// INT8: dtfm.send %{{.*}} {bandwidth_gbps = 1.000000e+00 : f64, bytes = 132 : i64, dtfm.stage = 0 : i64, dtfm.wire = "int8", latency_s = 0.000000e+00 : f64, peer = 1 : i64, tag = 0 : i64} : tensor<8x16xf32>
// INT8-NEXT: dtfm.send %{{.*}} {{{.*}}bytes = 132 : i64, {{.*}}dtfm.wire = "int8", {{.*}}tag = 1 : i64}
// INT8-NEXT: dtfm.send %{{.*}} {{{.*}}bytes = 132 : i64, {{.*}}dtfm.wire = "int8", {{.*}}tag = 2 : i64}
// INT8-NEXT: dtfm.param "w"
// INT8-NEXT: dtfm.send %{{.*}} {bandwidth_gbps = 5.000000e-01 : f64, bytes = 64 : i64, dtfm.once_per_iteration, dtfm.stage = 0 : i64, latency_s = 0.000000e+00 : f64, peer = 1 : i64, tag = 3 : i64}
// INT8-NEXT: dtfm.recv {bandwidth_gbps = 1.000000e+00 : f64, bytes = 132 : i64, dtfm.stage = 1 : i64, dtfm.wire = "int8", latency_s = 0.000000e+00 : f64, peer = 0 : i64, tag = 0 : i64} : tensor<8x16xf32>
// COM: With AdaTopK at r = 10, int8=auto takes the link top-k leaves
// COM: dense (tag 2, 16 Gbps: 512 B dense vs 132 B, no latency: 74% saved).
// MIXED-LABEL: func.func @three_links
// MIXED: dtfm.topk_compress
// MIXED: dtfm.topk_compress
// MIXED: dtfm.send %{{.*}} {bandwidth_gbps = 1.600000e+01 : f64, bytes = 132 : i64, dtfm.stage = 0 : i64, dtfm.wire = "int8", {{.*}}tag = 2 : i64} : tensor<8x16xf32>

// COM: Three activations of 8x16 f32 (128 elements, 512 B) leave stage 0 on
// COM: links of 1, 4 and 16 Gbps (latency 0): dense times R = 8*512/bw, so
// COM: R_1 = R_0 / 4 and R_2 = R_0 / 16. A tied weight (once per iteration)
// COM: on a slower link is neither compressed nor counted as the slowest.
// COM: AdaTopK, r = 10: r_i = max(1, 3 r R_i / R_0) = 30, 7.5, 1.875.
// COM: Tag 0: k = floor(128 / 30) = 4; tag 1: k = floor(128 / 7.5) = 17;
// COM: tag 2: 1.875 <= 3 stays dense. Index transfers get new tags after
// COM: the largest (3): 4 and 5. Bytes: values k*4, indices k*8. (The
// COM: ratios print as the doubles 3*10*R_i/R_0 rounds to.)
// CHECK-LABEL: func.func @three_links
// CHECK: %[[X:.*]] = dtfm.input "x"
// CHECK-NEXT: %[[V0:.*]], %[[I0:.*]] = dtfm.topk_compress %[[X]] {dtfm.ratio = 30.000000000000004 : f64, dtfm.stage = 0 : i64, k = 4 : i64} : (tensor<8x16xf32>) -> (tensor<4xf32>, tensor<4xi64>)
// CHECK-NEXT: dtfm.send %[[V0]] {bandwidth_gbps = 1.000000e+00 : f64, bytes = 16 : i64, dtfm.stage = 0 : i64, latency_s = 0.000000e+00 : f64, peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
// CHECK-NEXT: dtfm.send %[[I0]] {bandwidth_gbps = 1.000000e+00 : f64, bytes = 32 : i64, dtfm.stage = 0 : i64, latency_s = 0.000000e+00 : f64, peer = 1 : i64, tag = 4 : i64} : tensor<4xi64>
// CHECK-NEXT: %[[V1:.*]], %[[I1:.*]] = dtfm.topk_compress %[[X]] {dtfm.ratio = 7.5000000000000008 : f64, dtfm.stage = 0 : i64, k = 17 : i64} : (tensor<8x16xf32>) -> (tensor<17xf32>, tensor<17xi64>)
// CHECK-NEXT: dtfm.send %[[V1]] {{{.*}}bytes = 68 : i64, {{.*}}tag = 1 : i64} : tensor<17xf32>
// CHECK-NEXT: dtfm.send %[[I1]] {{{.*}}bytes = 136 : i64, {{.*}}tag = 5 : i64} : tensor<17xi64>
// CHECK-NEXT: dtfm.send %[[X]] {bandwidth_gbps = 1.600000e+01 : f64, bytes = 512 : i64, {{.*}}tag = 2 : i64} : tensor<8x16xf32>
// CHECK-NEXT: dtfm.param "w"
// CHECK-NEXT: dtfm.send %{{.*}} {bandwidth_gbps = 5.000000e-01 : f64, bytes = 64 : i64, dtfm.once_per_iteration, {{.*}}tag = 3 : i64} : tensor<4x4xf32>
// COM: The receiving side: values and indices received with the same tags,
// COM: then decompressed to the dense type for the old users.
// CHECK-NEXT: %[[RV0:.*]] = dtfm.recv {bandwidth_gbps = 1.000000e+00 : f64, bytes = 16 : i64, dtfm.stage = 1 : i64, latency_s = 0.000000e+00 : f64, peer = 0 : i64, tag = 0 : i64} : tensor<4xf32>
// CHECK-NEXT: %[[RI0:.*]] = dtfm.recv {bandwidth_gbps = 1.000000e+00 : f64, bytes = 32 : i64, dtfm.stage = 1 : i64, latency_s = 0.000000e+00 : f64, peer = 0 : i64, tag = 4 : i64} : tensor<4xi64>
// CHECK-NEXT: %[[D0:.*]] = dtfm.topk_decompress %[[RV0]], %[[RI0]] {dtfm.stage = 1 : i64} : (tensor<4xf32>, tensor<4xi64>) -> tensor<8x16xf32>
// CHECK-NEXT: %[[RV1:.*]] = dtfm.recv {{{.*}}bytes = 68 : i64, {{.*}}tag = 1 : i64} : tensor<17xf32>
// CHECK-NEXT: %[[RI1:.*]] = dtfm.recv {{{.*}}bytes = 136 : i64, {{.*}}tag = 5 : i64} : tensor<17xi64>
// CHECK-NEXT: %[[D1:.*]] = dtfm.topk_decompress %[[RV1]], %[[RI1]]
// CHECK-NEXT: %[[R2:.*]] = dtfm.recv {{{.*}}bytes = 512 : i64, {{.*}}tag = 2 : i64} : tensor<8x16xf32>
// CHECK-NEXT: dtfm.recv {{{.*}}dtfm.once_per_iteration, {{.*}}tag = 3 : i64} : tensor<4x4xf32>
// CHECK-NEXT: %[[S:.*]] = dtfm.add %[[D0]], %[[D1]]
// CHECK-NEXT: dtfm.add %[[S]], %[[R2]]
// COM: Uniform: ratio 10 on every (non-weight) transfer: k = floor(12.8) = 12.
// UNIFORM-LABEL: func.func @three_links
// UNIFORM: dtfm.topk_compress {{.*}}{dtfm.ratio = 1.000000e+01 : f64, dtfm.stage = 0 : i64, k = 12 : i64}
// UNIFORM: dtfm.topk_compress {{.*}}{dtfm.ratio = 1.000000e+01 : f64, dtfm.stage = 0 : i64, k = 12 : i64}
// UNIFORM: dtfm.topk_compress {{.*}}{dtfm.ratio = 1.000000e+01 : f64, dtfm.stage = 0 : i64, k = 12 : i64}
// UNIFORM-NOT: dtfm.topk_compress
// COM: dense-below = 0.5: R_1 = R_0 / 4 < 0.5 R_0 stays dense; only tag 0.
// DENSE-LABEL: func.func @three_links
// DENSE: dtfm.topk_compress {{.*}}k = 4 : i64
// DENSE-NOT: dtfm.topk_compress
// DENSE: dtfm.send %{{.*}} {bandwidth_gbps = 4.000000e+00 : f64, bytes = 512 : i64, {{.*}}tag = 1 : i64}
func.func @three_links() -> tensor<8x16xf32> {
  %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<8x16xf32>
  dtfm.send %x {bandwidth_gbps = 1.0 : f64, bytes = 512 : i64, dtfm.stage = 0 : i64, latency_s = 0.0 : f64, peer = 1 : i64, tag = 0 : i64} : tensor<8x16xf32>
  dtfm.send %x {bandwidth_gbps = 4.0 : f64, bytes = 512 : i64, dtfm.stage = 0 : i64, latency_s = 0.0 : f64, peer = 1 : i64, tag = 1 : i64} : tensor<8x16xf32>
  dtfm.send %x {bandwidth_gbps = 16.0 : f64, bytes = 512 : i64, dtfm.stage = 0 : i64, latency_s = 0.0 : f64, peer = 1 : i64, tag = 2 : i64} : tensor<8x16xf32>
  %w = dtfm.param "w" init(zeros) {dtfm.stage = 0 : i64} : tensor<4x4xf32>
  dtfm.send %w {bandwidth_gbps = 0.5 : f64, bytes = 64 : i64, dtfm.once_per_iteration, dtfm.stage = 0 : i64, latency_s = 0.0 : f64, peer = 1 : i64, tag = 3 : i64} : tensor<4x4xf32>
  %a = dtfm.recv {bandwidth_gbps = 1.0 : f64, bytes = 512 : i64, dtfm.stage = 1 : i64, latency_s = 0.0 : f64, peer = 0 : i64, tag = 0 : i64} : tensor<8x16xf32>
  %b = dtfm.recv {bandwidth_gbps = 4.0 : f64, bytes = 512 : i64, dtfm.stage = 1 : i64, latency_s = 0.0 : f64, peer = 0 : i64, tag = 1 : i64} : tensor<8x16xf32>
  %c = dtfm.recv {bandwidth_gbps = 16.0 : f64, bytes = 512 : i64, dtfm.stage = 1 : i64, latency_s = 0.0 : f64, peer = 0 : i64, tag = 2 : i64} : tensor<8x16xf32>
  %wr = dtfm.recv {bandwidth_gbps = 0.5 : f64, bytes = 64 : i64, dtfm.once_per_iteration, dtfm.stage = 1 : i64, latency_s = 0.0 : f64, peer = 0 : i64, tag = 3 : i64} : tensor<4x4xf32>
  %s = dtfm.add %a, %b {dtfm.stage = 1 : i64} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %t = dtfm.add %s, %c {dtfm.stage = 1 : i64} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return {dtfm.stage = 1 : i64} %t : tensor<8x16xf32>
}

// -----

// COM: No transfers (one stage): nothing to compress.
// CHECK-LABEL: func.func @one_stage
// CHECK-NEXT: dtfm.input
// CHECK-NEXT: return
func.func @one_stage() -> tensor<8x16xf32> {
  %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<8x16xf32>
  return {dtfm.stage = 0 : i64} %x : tensor<8x16xf32>
}

// -----

// COM: f16 activations: a kept element costs its 2-byte value and its
// COM: 8-byte index, 5 dense elements, so r_i = max(1, 5 r R_i / R_0):
// COM: 50 and 12.5 for links of 1 and 4 Gbps (k = floor(128 / 50) = 2 and
// COM: floor(128 / 12.5) = 10); the slowest sends 2 * (2 + 8) = 20 B, about
// COM: 256 / 10. Values k*2 bytes, indices k*8.
// CHECK-LABEL: func.func @f16_links
// COM: Uniform r = 10 pays for f16 too (10 > 5): k = floor(12.8) = 12 on
// COM: both; dense-below = 0.5 leaves the 4 Gbps link dense.
// UNIFORM-LABEL: func.func @f16_links
// UNIFORM-COUNT-2: dtfm.topk_compress {{.*}}k = 12 : i64
// DENSE-LABEL: func.func @f16_links
// DENSE: dtfm.topk_compress {{.*}}k = 2 : i64
// DENSE-NOT: dtfm.topk_compress
// CHECK: dtfm.topk_compress %{{.*}} {dtfm.ratio = 5.000000e+01 : f64, dtfm.stage = 0 : i64, k = 2 : i64} : (tensor<8x16xf16>) -> (tensor<2xf16>, tensor<2xi64>)
// CHECK-NEXT: dtfm.send %{{.*}} {{{.*}}bytes = 4 : i64, {{.*}}tag = 0 : i64} : tensor<2xf16>
// CHECK-NEXT: dtfm.send %{{.*}} {{{.*}}bytes = 16 : i64, {{.*}}tag = 2 : i64} : tensor<2xi64>
// CHECK-NEXT: dtfm.topk_compress %{{.*}} {dtfm.ratio = 1.250000e+01 : f64, dtfm.stage = 0 : i64, k = 10 : i64}
// CHECK-NEXT: dtfm.send %{{.*}} {{{.*}}bytes = 20 : i64, {{.*}}tag = 1 : i64} : tensor<10xf16>
// CHECK-NEXT: dtfm.send %{{.*}} {{{.*}}bytes = 80 : i64, {{.*}}tag = 3 : i64} : tensor<10xi64>
func.func @f16_links() -> tensor<8x16xf16> {
  %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<8x16xf16>
  dtfm.send %x {bandwidth_gbps = 1.0 : f64, bytes = 256 : i64, dtfm.stage = 0 : i64, latency_s = 0.0 : f64, peer = 1 : i64, tag = 0 : i64} : tensor<8x16xf16>
  dtfm.send %x {bandwidth_gbps = 4.0 : f64, bytes = 256 : i64, dtfm.stage = 0 : i64, latency_s = 0.0 : f64, peer = 1 : i64, tag = 1 : i64} : tensor<8x16xf16>
  %a = dtfm.recv {bandwidth_gbps = 1.0 : f64, bytes = 256 : i64, dtfm.stage = 1 : i64, latency_s = 0.0 : f64, peer = 0 : i64, tag = 0 : i64} : tensor<8x16xf16>
  %b = dtfm.recv {bandwidth_gbps = 4.0 : f64, bytes = 256 : i64, dtfm.stage = 1 : i64, latency_s = 0.0 : f64, peer = 0 : i64, tag = 1 : i64} : tensor<8x16xf16>
  %s = dtfm.add %a, %b {dtfm.stage = 1 : i64} : (tensor<8x16xf16>, tensor<8x16xf16>) -> tensor<8x16xf16>
  return {dtfm.stage = 1 : i64} %s : tensor<8x16xf16>
}
