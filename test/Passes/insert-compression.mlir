// RUN: dtfm-translate --import-gpt tiny -o %t.mlir
// RUN: dtfm-opt %t.mlir --dtfm-partition-stages=cluster=%S/Inputs/chain-3.textproto --dtfm-insert-send-recv=cluster=%S/Inputs/chain-3.textproto --dtfm-insert-compression=ratio=10 --dtfm-verify-plan | FileCheck %s
// RUN: dtfm-opt %t.mlir --dtfm-partition-stages=cluster=%S/Inputs/chain-3.textproto --dtfm-insert-send-recv=cluster=%S/Inputs/chain-3.textproto --dtfm-insert-compression="ratio=10 uniform=true" --dtfm-verify-plan | FileCheck %s --check-prefix=UNIFORM
// RUN: dtfm-opt %t.mlir --dtfm-partition-stages=cluster=%S/Inputs/chain-3.textproto --dtfm-insert-send-recv=cluster=%S/Inputs/chain-3.textproto --dtfm-insert-compression="ratio=10 dense-below=0.6" | FileCheck %s --check-prefix=THRESHOLD
// RUN: not dtfm-opt %t.mlir --dtfm-insert-compression=ratio=1 2>&1 | FileCheck %s --check-prefix=RATIO

// COM: Stages on a, b, c: a-b 10 Gbps, b-c and a-c 0.1 Gbps, 0.1 ms each.
// COM: Dense times: wte a->c 0.1 ms + 65536 B at 0.1 Gbps = 5.34 ms (the
// COM: slowest: r_i = 3 r = 30, k = 16384/30 = 546); residual b->c 2.72 ms
// COM: (r_i = 30 x 2.72/5.34 = 15.3, k = 536); residual a->b 0.13 ms
// COM: (r_i = 0.7 -> dense).
// CHECK: dtfm.topk_compress %{{.*}} {dtfm.ratio = {{30\.0+[0-9]*|3\.0+e\+01}} : f64, dtfm.stage = 0 : i64, k = 546 : i64} : (tensor<256x64xf32>) -> (tensor<546xf32>, tensor<546xi64>)
// CHECK-NEXT: dtfm.send %{{.*}} {{{.*}}bytes = 2184 : i64{{.*}}peer = 2 : i64, tag = 0 : i64} : tensor<546xf32>
// CHECK-NEXT: dtfm.send %{{.*}} {{{.*}}bytes = 4368 : i64{{.*}}peer = 2 : i64, tag = 3 : i64} : tensor<546xi64>
// CHECK: dtfm.send %{{.*}} {{{.*}}bytes = 32768 : i64{{.*}}peer = 1 : i64, tag = 1 : i64} : tensor<4x32x64xf32>
// CHECK: dtfm.topk_compress %{{.*}} {dtfm.ratio = {{15\.28[0-9]*}} : f64, dtfm.stage = 1 : i64, k = 536 : i64}
// CHECK: %[[V:.*]] = dtfm.recv {{{.*}}bytes = 2144 : i64{{.*}}tag = 2 : i64} : tensor<536xf32>
// CHECK-NEXT: %[[I:.*]] = dtfm.recv {{{.*}}bytes = 4288 : i64{{.*}}tag = 4 : i64} : tensor<536xi64>
// CHECK-NEXT: %[[D:.*]] = dtfm.topk_decompress %[[V]], %[[I]] {dtfm.stage = 2 : i64} : (tensor<536xf32>, tensor<536xi64>) -> tensor<4x32x64xf32>
// CHECK-NEXT: dtfm.layernorm %[[D]]

// COM: Uniform: ratio 10 everywhere (k = 819 and 1638).
// UNIFORM-COUNT-3: dtfm.topk_compress {{.*}}dtfm.ratio = 1.000000e+01 : f64

// COM: dense-below = 0.6: only the wte transfer (the slowest) is compressed.
// THRESHOLD-COUNT-1: dtfm.topk_compress
// THRESHOLD-NOT: dtfm.topk_compress

// RATIO: error: dtfm-insert-compression: ratio must be > 1 and dense-below >= 0, got 1.000000e+00 and 0.000000e+00
