// COM: End-to-end test through the importer: inputs built by dtfm-translate --import-gpt and a chain of passes, so it also breaks when the importer or an earlier pass changes (the hand-written pass tests are in test/Passes).
// RUN: dtfm-translate --import-gpt tiny -o %t.mlir
// RUN: dtfm-opt %t.mlir --dtfm-import-cluster=file=%dtfm_src_root/examples/clusters/local-8.textproto --dtfm-partition-stages="stages=2" --dtfm-insert-send-recv | FileCheck %s
// RUN: dtfm-opt %t.mlir --dtfm-autodiff --dtfm-import-cluster=file=%dtfm_src_root/examples/clusters/local-8.textproto --dtfm-partition-stages="stages=2" --dtfm-insert-send-recv | FileCheck %s --check-prefix=TRAIN
// RUN: dtfm-opt %t.mlir --dtfm-plan="cluster=%S/../Passes/Inputs/two-regions.textproto dp=2 pp=2" --dtfm-insert-send-recv | FileCheck %s --check-prefix=REGIONS

// COM: Forward graph on 2 stages: the tied token embedding (256x64 f32) and
// COM: the residual stream (4x32x64 f32) cross from stage 0 to stage 1.
// CHECK: %[[WTE:.*]] = dtfm.param "wte"
// COM: A parameter moves once per iteration, not per micro-batch.
// CHECK-NEXT: dtfm.send %[[WTE]] {bandwidth_gbps = 4.000000e+01 : f64, bytes = 65536 : i64, dtfm.once_per_iteration, dtfm.stage = 0 : i64, latency_s = 5.000000e-05 : f64, peer = 1 : i64, tag = 0 : i64} : tensor<256x64xf32>
// CHECK: dtfm.send %{{[0-9]+}} {{{.*}}bytes = 32768 : i64, dtfm.stage = 0 : i64, {{.*}}peer = 1 : i64, tag = 1 : i64}
// CHECK-NEXT: dtfm.param "h.1.ln_1.gamma"
// COM: The recv sits right before the first use on the receiving stage.
// CHECK: %[[R:.*]] = dtfm.recv {{{.*}}bytes = 32768 : i64, dtfm.stage = 1 : i64, {{.*}}peer = 0 : i64, tag = 1 : i64} : tensor<4x32x64xf32>
// CHECK-NEXT: dtfm.layernorm %[[R]]
// CHECK: %[[RW:.*]] = dtfm.recv {{{.*}}dtfm.once_per_iteration{{.*}}tag = 0 : i64} : tensor<256x64xf32>
// CHECK-NEXT: dtfm.matmul %{{.*}}, %[[RW]] transpose_rhs
// CHECK-NOT: dtfm.send

// COM: Training graph: gradients flow back from stage 1 to stage 0; the tied
// COM: embedding's gradient also moves once per iteration.
// TRAIN-DAG: dtfm.send {{.*}}dtfm.once_per_iteration, dtfm.stage = 1 : i64, {{.*}}peer = 0 : i64{{.*}} : tensor<256x64xf32>
// TRAIN-DAG: dtfm.send {{.*}}bytes = 32768 : i64, dtfm.stage = 1 : i64, {{.*}}peer = 0 : i64{{.*}} : tensor<4x32x64xf32>
// TRAIN-DAG: dtfm.recv {{.*}}bytes = 32768 : i64, dtfm.stage = 0 : i64, {{.*}}peer = 1 : i64{{.*}} : tensor<4x32x64xf32>

// COM: With an assignment the link is the slowest matched pair: 50 ms,
// COM: 1 Gbps between the regions, or 1 ms, 10 Gbps inside one.
// REGIONS: dtfm.send {{.*}}latency_s = {{(5.000000e-02|1.000000e-03)}} : f64
