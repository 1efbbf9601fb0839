// COM: End-to-end test through the importer: inputs built by dtfm-translate --import-gpt and a chain of passes, so it also breaks when the importer or an earlier pass changes (the hand-written pass tests are in test/Passes).
// RUN: dtfm-translate --import-gpt tiny -o %t.mlir
// RUN: dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/chain-3.textproto --dtfm-partition-stages --dtfm-insert-send-recv --dtfm-insert-compression=ratio=10 --dtfm-verify-plan | FileCheck %s
// RUN: dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/chain-3.textproto --dtfm-partition-stages --dtfm-insert-send-recv --dtfm-insert-compression="ratio=10 uniform=true" --dtfm-verify-plan | FileCheck %s --check-prefix=UNIFORM
// RUN: dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/chain-3.textproto --dtfm-partition-stages --dtfm-insert-send-recv --dtfm-insert-compression="ratio=10 dense-below=0.6" | FileCheck %s --check-prefix=THRESHOLD
// RUN: not dtfm-opt %t.mlir --dtfm-insert-compression=ratio=1 2>&1 | FileCheck %s --check-prefix=RATIO

// COM: Stages on a, b, c: a-b 10 Gbps, b-c and a-c 0.1 Gbps, 0.1 ms each.
// COM: The tied embedding a->c moves once per iteration and is a weight: never
// COM: compressed. Per-micro-batch transfers: residual b->c 0.1 ms + 32768 B
// COM: at 0.1 Gbps = 2.72 ms (the slowest: r_i = 3 r = 30, k = 8192/30 = 273,
// COM: 1092 + 2184 B on the wire); residual a->b 0.13 ms (r_i = 1.4 -> dense).
// CHECK: dtfm.send %{{.*}} {{{.*}}bytes = 65536 : i64, dtfm.once_per_iteration{{.*}}peer = 2 : i64, tag = 0 : i64} : tensor<256x64xf32>
// CHECK: dtfm.send %{{.*}} {{{.*}}bytes = 32768 : i64{{.*}}peer = 1 : i64, tag = 1 : i64} : tensor<4x32x64xf32>
// CHECK: dtfm.topk_compress %{{.*}} {dtfm.ratio = 3.000000e+01 : f64, dtfm.stage = 1 : i64, k = 273 : i64} : (tensor<4x32x64xf32>) -> (tensor<273xf32>, tensor<273xi64>)
// CHECK-NEXT: dtfm.send %{{.*}} {{{.*}}bytes = 1092 : i64{{.*}}peer = 2 : i64, tag = 2 : i64} : tensor<273xf32>
// CHECK-NEXT: dtfm.send %{{.*}} {{{.*}}bytes = 2184 : i64{{.*}}peer = 2 : i64, tag = 3 : i64} : tensor<273xi64>
// CHECK: %[[V:.*]] = dtfm.recv {{{.*}}bytes = 1092 : i64{{.*}}tag = 2 : i64} : tensor<273xf32>
// CHECK-NEXT: %[[I:.*]] = dtfm.recv {{{.*}}bytes = 2184 : i64{{.*}}tag = 3 : i64} : tensor<273xi64>
// CHECK-NEXT: %[[D:.*]] = dtfm.topk_decompress %[[V]], %[[I]] {dtfm.stage = 2 : i64} : (tensor<273xf32>, tensor<273xi64>) -> tensor<4x32x64xf32>
// CHECK-NEXT: dtfm.layernorm %[[D]]
// CHECK-NOT: dtfm.topk_compress

// COM: Uniform: ratio 10 on both residual transfers (k = 819).
// UNIFORM-COUNT-2: dtfm.topk_compress {{.*}}dtfm.ratio = 1.000000e+01 : f64{{.*}}k = 819 : i64
// UNIFORM-NOT: dtfm.topk_compress

// COM: dense-below = 0.6: the a->b residual (5% of the slowest) stays dense.
// THRESHOLD-COUNT-1: dtfm.topk_compress
// THRESHOLD-NOT: dtfm.topk_compress

// RATIO: error: dtfm-insert-compression: ratio must be > 1 and dense-below >= 0, got 1.000000e+00 and 0.000000e+00
