// COM: End-to-end test through the importer: inputs built by dtfm-translate --import-gpt and a chain of passes, so it also breaks when the importer or an earlier pass changes (the hand-written pass tests are in test/Passes).
// RUN: not dtfm-opt %s --dtfm-autodiff 2>&1 | FileCheck %s --check-prefix=NOLOSS
// NOLOSS: autodiff-invalid.mlir:0:0: error: dtfm-autodiff: no function has a loss (dtfm.cross_entropy); nothing to differentiate
// RUN: dtfm-translate --import-gpt tiny -o %t.mlir
// RUN: not dtfm-opt %t.mlir --dtfm-autodiff=optimizer=lamb 2>&1 | FileCheck %s --check-prefix=OPT
// OPT: error: dtfm-autodiff: unknown optimizer 'lamb' (expected adamw or sgd)
// RUN: not dtfm-opt %t.mlir --dtfm-autodiff=lr=0 2>&1 | FileCheck %s --check-prefix=LR
// LR: error: dtfm-autodiff: lr must be positive and finite, got 0
// RUN: not dtfm-opt %t.mlir --dtfm-autodiff --dtfm-autodiff 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: dtfm-autodiff: function @tiny already has its backward graph and optimizer updates; give the forward model (--dtfm-plan and --dtfm-autodiff take the same optimizer options)
// RUN: dtfm-translate --import-gpt tiny --layers 10 -o %t10.mlir
// RUN: dtfm-opt %t10.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/mixed-4.textproto --dtfm-partition-stages -o %t.fwd
// RUN: dtfm-opt %t10.mlir --dtfm-autodiff --dtfm-import-cluster=file=%S/../Passes/Inputs/mixed-4.textproto --dtfm-partition-stages -o %t.train
// COM: Training and forward graphs split alike; backward ops follow their layer.
// RUN: FileCheck %s --check-prefix=SPLIT < %t.fwd
// RUN: FileCheck %s --check-prefix=SPLIT --check-prefix=TRAIN < %t.train
// SPLIT: bounds = [0, 5, 10, 11, 12]
// TRAIN: dtfm.backward "dtfm.cross_entropy"{{.*}}dtfm.stage = 3 : i64
// TRAIN: dtfm.backward "dtfm.embedding"{{.*}}dtfm.stage = 0 : i64
// TRAIN: dtfm.adamw_update {{.*}}dtfm.layer = "head", {{.*}}dtfm.stage = 3 : i64

func.func @no_loss() -> tensor<2x3xf32> {
  %x = dtfm.input "x" : tensor<2x3xf32>
  %r = dtfm.relu %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %r : tensor<2x3xf32>
}
