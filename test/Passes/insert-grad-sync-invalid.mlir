// RUN: dtfm-opt %s -split-input-file -verify-diagnostics --dtfm-insert-grad-sync
// RUN: not dtfm-opt %S/Inputs/grad-sync-module.mlir -split-input-file --dtfm-insert-grad-sync 2>&1 | FileCheck %s
// RUN: not dtfm-opt %S/Inputs/grad-sync-module.mlir -split-input-file --dtfm-insert-grad-sync=sync=tree 2>&1 | FileCheck %s --check-prefix=BAD

// COM: Whole-module errors (Inputs/grad-sync-module.mlir) point at the
// COM: cluster file or the module, not at an op.
// CHECK: grad-sync-module.mlir:1 offset :0:0: error: dtfm-insert-grad-sync: no cluster in the module: run --dtfm-import-cluster=file=FILE first (or --dtfm-plan=cluster=FILE)
// CHECK: pair.textproto:0:0: error: dtfm-insert-grad-sync: no dtfm.assignment; run --dtfm-assign-devices first
// CHECK: pair.textproto:0:0: error: dtfm-insert-grad-sync: no optimizer updates: no trainable parameter reaches the loss (none, or all frozen), or --dtfm-autodiff has not run
// CHECK: pair.textproto:0:0: error: dtfm-insert-grad-sync: dtfm.assignment names a device that cluster 'pair' does not have
// BAD: error: dtfm-insert-grad-sync: unknown sync 'tree' (expected auto, ps or ring)
// RUN: not dtfm-opt %S/Inputs/grad-sync-module.mlir -split-input-file --dtfm-insert-grad-sync=bucket-mb=-1 2>&1 | FileCheck %s --check-prefix=BUCKET
// RUN: not dtfm-opt %S/Inputs/grad-sync-module.mlir -split-input-file --dtfm-insert-grad-sync=bucket-mb=nan 2>&1 | FileCheck %s --check-prefix=BUCKET-NAN
// RUN: not dtfm-opt %S/Inputs/grad-sync-module.mlir -split-input-file --dtfm-insert-grad-sync=bucket-mb=25MB 2>&1 | FileCheck %s --check-prefix=BUCKET-TEXT
// RUN: not dtfm-opt %S/Inputs/grad-sync-module.mlir -split-input-file --dtfm-insert-grad-sync=sync-every=-1 2>&1 | FileCheck %s --check-prefix=EVERY
// RUN: not dtfm-opt %S/Inputs/grad-sync-module.mlir -split-input-file --dtfm-insert-grad-sync="sync-every=4 outer-momentum=1" 2>&1 | FileCheck %s --check-prefix=OUTER
// RUN: not dtfm-opt %S/Inputs/grad-sync-module.mlir -split-input-file --dtfm-insert-grad-sync="sync-every=4 outer-lr=0" 2>&1 | FileCheck %s --check-prefix=OUTER
// RUN: not dtfm-opt %S/Inputs/grad-sync-module.mlir -split-input-file --dtfm-insert-grad-sync=dp-compression=fp8 2>&1 | FileCheck %s --check-prefix=COMPRESSION
// COMPRESSION: pair.textproto:0:0: error: dtfm-insert-grad-sync: unknown dp-compression 'fp8' (expected none, int8, topk:R (R > 1), int4 or auto)
// RUN: not dtfm-opt %S/Inputs/grad-sync-module.mlir -split-input-file --dtfm-insert-grad-sync=dp-compression=topk:1 2>&1 | FileCheck %s --check-prefix=TOPK-ONE
// TOPK-ONE: pair.textproto:0:0: error: dtfm-insert-grad-sync: unknown dp-compression 'topk:1' (expected none, int8, topk:R (R > 1), int4 or auto)
// RUN: not dtfm-opt %S/Inputs/grad-sync-module.mlir -split-input-file --dtfm-insert-grad-sync="sync-every=4 dp-compression=topk:10" 2>&1 | FileCheck %s --check-prefix=TOPK-LOCAL
// TOPK-LOCAL: pair.textproto:0:0: error: dtfm-insert-grad-sync: dp-compression=topk:10 with sync-every: local steps' parameter exchange takes dp-compression none, int8 or int4
// RUN: not dtfm-opt %S/Inputs/grad-sync-module.mlir -split-input-file --dtfm-insert-grad-sync="dp-compression=int4" 2>&1 | FileCheck %s --check-prefix=INT4-EVERY-STEP
// INT4-EVERY-STEP: pair.textproto:0:0: error: dtfm-insert-grad-sync: dp-compression=int4 takes local steps' exchange only (sync-every=H, H >= 1); every step's gradient exchange takes dp-compression none, int8 or topk
// RUN: not dtfm-opt %S/Inputs/grad-sync-module.mlir -split-input-file --dtfm-insert-grad-sync="dp-compression=topk:10 topk-warmup=-1" 2>&1 | FileCheck %s --check-prefix=TOPK-WARMUP
// TOPK-WARMUP: pair.textproto:0:0: error: dtfm-insert-grad-sync: topk-warmup must be in [0, 1e9] steps, got -1
// EVERY: pair.textproto:0:0: error: dtfm-insert-grad-sync: sync-every must be auto or between 0 and 1000000, got '-1'
// OUTER: pair.textproto:0:0: error: dtfm-insert-grad-sync: outer-lr must be in (0, 1e6) and outer-momentum in [0, 1)
// BUCKET: pair.textproto:0:0: error: dtfm-insert-grad-sync: bucket-mb must be auto or a number of MiB in [0, 1e6] (0: one bucket), got '-1'
// BUCKET-NAN: pair.textproto:0:0: error: dtfm-insert-grad-sync: bucket-mb must be auto or a number of MiB in [0, 1e6] (0: one bucket), got 'nan'
// BUCKET-TEXT: pair.textproto:0:0: error: dtfm-insert-grad-sync: bucket-mb must be auto or a number of MiB in [0, 1e6] (0: one bucket), got '25MB'

// COM: An update outside the assignment's stages.
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "pair", algorithm = "genetic", seed = 0, dp = 2, pp = 1, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a", "b"]]>, dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @unstaged() {
    %w = dtfm.param "w" init(zeros) {dtfm.stage = 0 : i64} : tensor<3xf32>
    %dw = dtfm.input "dw" {dtfm.stage = 0 : i64} : tensor<3xf32>
    // expected-error @+1 {{'dtfm.adamw_update' op has no dtfm.stage of the assignment; run --dtfm-partition-stages first}}
    %u = dtfm.adamw_update %w, %dw {dtfm.stage = 1 : i64, lr = 1.000000e-03 : f64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    return {dtfm.stage = 0 : i64}
  }
}
