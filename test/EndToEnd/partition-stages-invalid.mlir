// COM: End-to-end test through the importer: inputs built by dtfm-translate --import-gpt and a chain of passes, so it also breaks when the importer or an earlier pass changes (the hand-written pass tests are in test/Passes).
// RUN: dtfm-translate --import-gpt tiny -o %t.mlir
// RUN: not dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/tiny-memory.textproto --dtfm-partition-stages 2> %t.err
// RUN: FileCheck %s --check-prefix=MEMORY < %t.err
// COM: Exactly one line: no dump of the module after the error.
// RUN: count 1 < %t.err
// MEMORY: error: dtfm-partition-stages: model does not fit: device mcu0 (stage 0) needs 0.002079 GB but has 0.0001 GB, even in the most memory-balanced split
// RUN: not dtfm-opt %t.mlir --dtfm-partition-stages 2>&1 | FileCheck %s --check-prefix=NOFILE
// NOFILE: error: dtfm-partition-stages: no cluster in the module: run --dtfm-import-cluster=file=FILE first (or --dtfm-plan=cluster=FILE)
// RUN: not dtfm-opt %t.mlir --dtfm-import-cluster=file=%dtfm_src_root/examples/clusters/local-8.textproto --dtfm-partition-stages="stages=9" 2>&1 | FileCheck %s --check-prefix=TOOMANY
// TOOMANY: error: dtfm-partition-stages: 9 stages but cluster 'local-8' has 8 devices
// RUN: not dtfm-opt %t.mlir --dtfm-import-cluster=file=%dtfm_src_root/examples/clusters/local-8.textproto --dtfm-partition-stages="stages=5" 2>&1 | FileCheck %s --check-prefix=BLOCKS
// BLOCKS: error: dtfm-partition-stages: cannot split 4 blocks into 5 non-empty stages
// RUN: not dtfm-opt %t.mlir --dtfm-import-cluster=file=%dtfm_src_root/examples/clusters/local-8.textproto --dtfm-partition-stages="schedule=zb" 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// SCHEDULE: error: dtfm-partition-stages: unknown schedule 'zb' (expected 1f1b, zb-h1, gpipe or auto)
// RUN: not dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/two-regions.textproto --dtfm-assign-devices="dp=3" 2> %t.assign
// RUN: count 1 < %t.assign
