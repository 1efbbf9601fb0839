// COM: End-to-end test through the importer: inputs built by dtfm-translate --import-gpt and a chain of passes, so it also breaks when the importer or an earlier pass changes (the hand-written pass tests are in test/Passes).
// RUN: dtfm-translate --import-gpt tiny --layers 6 -o %t.mlir
// RUN: dtfm-opt %t.mlir --dtfm-plan="cluster=%S/../Passes/Inputs/mixed-4.textproto dp=1 pp=4 print-table=true" -o %t.out | FileCheck %s --check-prefix=TABLE
// RUN: FileCheck %s --check-prefix=IR < %t.out
// RUN: not dtfm-opt %t.mlir --dtfm-plan="cluster=%S/../Passes/Inputs/missing.textproto" 2>&1 | FileCheck %s --check-prefix=MISSING

// COM: annotate -> autodiff -> assign (pure pipeline, 4 stages) -> partition.
// TABLE: === dtfm device assignment ===
// TABLE: D_DP 1 x D_PP 4
// TABLE: === dtfm pipeline stages ===
// TABLE-NEXT: 4 stages over 8 blocks
// COM: The two fast devices take more blocks than the slow ones.
// TABLE-DAG: fast{{[01]}} {{[3-5]}} blocks
// TABLE-DAG: slow{{[01]}} 1 blocks

// IR: dtfm.assignment = #dtfm.assignment<cluster = "mixed-4", algorithm = "genetic"
// IR-SAME: dtfm.stages = #dtfm.stages<bounds
// IR: dtfm.cost = #dtfm.cost<fwd_flops
// IR: dtfm.backward "dtfm.cross_entropy"{{.*}}dtfm.stage = 3 : i64
// IR: dtfm.adamw_update {{.*}}dtfm.stage = 0 : i64

// MISSING: error: dtfm-import-cluster: {{.*}}missing.textproto: cannot open (No such file or directory)
