// COM: End-to-end test: a whole model (not a small hand-written case) through a chain of passes or the --dtfm-plan pipeline (the hand-written pass tests are in test/Passes).
// RUN: dtfm-opt %S/../Passes/Inputs/tiny-resnet.mlir --dtfm-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: dtfm-opt %S/../Passes/Inputs/tiny-resnet.mlir --dtfm-plan="cluster=%S/../Passes/Inputs/two-regions.textproto dp=2 pp=2 print-table=true" -o %t.out | FileCheck %s --check-prefix=PLAN
// RUN: FileCheck %s --check-prefix=IR < %t.out

// COM: The frozen batchnorm statistics get no gradient and no update; the
// COM: residual inputs (pooled stem output, first block) get summed gradients,
// COM: summed in the block that uses them twice (one gradient crosses a stage
// COM: boundary, not two).
// GRAD-DAG: dtfm.backward "dtfm.batchnorm"({{.*}}) {dtfm.forward_attrs = {epsilon = {{.*}}, momentum = {{.*}}}, dtfm.layer = "stem", flops = {{[0-9]+}} : i64, wrt = array<i64: 0, 1, 2>}
// GRAD-DAG: dtfm.accumulate {{.*}} {dtfm.layer = "block1"} : (tensor<8x8x8x8xf32>, tensor<8x8x8x8xf32>) -> tensor<8x8x8x8xf32>
// GRAD-DAG: dtfm.accumulate {{.*}} {dtfm.layer = "block2"} : (tensor<8x8x8x8xf32>, tensor<8x8x8x8xf32>) -> tensor<8x8x8x8xf32>
// GRAD-DAG: dtfm.backward "dtfm.max_pool2d"
// GRAD-DAG: dtfm.backward "dtfm.global_avg_pool"
// GRAD-DAG: dtfm.backward "dtfm.flatten"

// COM: One update per trainable parameter: stem.w, stem.g, stem.b, block1.w,
// COM: block2.w, fc.w, fc.b (the two frozen statistics get none).
// RUN: dtfm-opt %S/../Passes/Inputs/tiny-resnet.mlir --dtfm-autodiff | grep -c adamw_update | FileCheck %s --check-prefix=UPDATES
// UPDATES: {{^}}7{{$}}

// PLAN: === dtfm device assignment ===
// PLAN: D_DP 2 x D_PP 2
// PLAN: === dtfm pipeline stages ===
// PLAN-NEXT: 2 stages over 4 blocks
// PLAN-NEXT: stage 0 {{.*}} stem
// PLAN-NEXT: stage 1 {{.*}} head

// IR: dtfm.conv2d {{.*}}dtfm.layer = "stem", dtfm.stage = 0 : i64
// IR: dtfm.cross_entropy {{.*}}dtfm.stage = 1 : i64
// IR: dtfm.backward "dtfm.conv2d"{{.*}}dtfm.layer = "stem", dtfm.stage = 0 : i64
