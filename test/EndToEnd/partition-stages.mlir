// COM: End-to-end test through the importer: inputs built by dtfm-translate --import-gpt and a chain of passes, so it also breaks when the importer or an earlier pass changes (the hand-written pass tests are in test/Passes).
// RUN: dtfm-translate --import-gpt tiny --layers 10 -o %t.mlir
// RUN: dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/mixed-4.textproto --dtfm-partition-stages="print-table=true" -o %t.out | FileCheck %s --check-prefix=MIXED
// RUN: FileCheck %s --check-prefix=IR < %t.out
// RUN: dtfm-opt %t.mlir --dtfm-import-cluster=file=%dtfm_src_root/examples/clusters/local-8.textproto --dtfm-partition-stages="stages=4 print-table=true" -o /dev/null | FileCheck %s --check-prefix=EVEN
// RUN: dtfm-opt %t.mlir --dtfm-annotate-costs --dtfm-import-cluster=file=%S/../Passes/Inputs/two-regions.textproto --dtfm-assign-devices="dp=2 pp=2" --dtfm-partition-stages="print-table=true" -o /dev/null | FileCheck %s --check-prefix=ASSIGNED

// COM: 12 blocks (embedding, 10 layers, head); the two 4x faster devices take
// COM: 5 blocks each, the slow ones 1 each.
// MIXED: === dtfm pipeline stages ===
// MIXED-NEXT: 4 stages over 12 blocks
// MIXED-NEXT: stage 0 fast0 5 blocks {{.*}} embedding .. layer.3
// MIXED-NEXT: stage 1 fast1 5 blocks {{.*}} layer.4 .. layer.8
// MIXED-NEXT: stage 2 slow0 1 blocks {{.*}} layer.9
// MIXED-NEXT: stage 3 slow1 1 blocks {{.*}} head

// IR: dtfm.stages = #dtfm.stages<bounds = [0, 5, 10, 11, 12], stage_seconds = [{{.*}}], memory_bytes = [{{.*}}], bottleneck_s = {{.*}}>
// IR: dtfm.input "tokens" {dtfm.layer = "embedding", dtfm.stage = 0 : i64}
// IR: dtfm.add {{.*}}{dtfm.layer = "layer.3", dtfm.stage = 0 : i64}
// IR: dtfm.layernorm {{.*}}{dtfm.layer = "layer.4", dtfm.stage = 1 : i64}
// IR: dtfm.cross_entropy {{.*}}{dtfm.layer = "head", dtfm.stage = 3 : i64}
// IR: return {{.*}}{dtfm.stage = 3 : i64}

// EVEN: stage 0 cpu0 3 blocks
// EVEN: stage 3 cpu3 3 blocks

// COM: With an assignment, the stage devices are its data-parallel groups.
// ASSIGNED: 2 stages over 12 blocks
// ASSIGNED: stage 0 {{[ab][01]}} 6 blocks
// ASSIGNED: stage 1 {{[ab][01]}} 6 blocks

// COM: hetero's assignment records the bounds its model scored; the
// COM: partitioner follows them (here rewritten to 2, 2, 2, 6 blocks) instead
// COM: of re-splitting, and refuses malformed ones in one line.
// RUN: dtfm-opt %t.mlir --dtfm-annotate-costs --dtfm-autodiff --dtfm-import-cluster=file=%S/../Passes/Inputs/mixed-4.textproto --dtfm-assign-devices="algorithm=hetero dp=1 pp=4 micro-batches=4" -o %t.hetero
// RUN: %torch_python %S/../Passes/Inputs/replace.py %t.hetero %t.bounds "stage_bounds = [0, 5, 10, 11, 12]" "stage_bounds = [0, 2, 4, 6, 12]"
// RUN: dtfm-opt %t.bounds --dtfm-import-cluster=file=%S/../Passes/Inputs/mixed-4.textproto --dtfm-partition-stages="micro-batches=4 print-table=true" -o /dev/null | FileCheck %s --check-prefix=FOLLOW
// FOLLOW: stage 0 fast0 2 blocks
// FOLLOW: stage 1 fast1 2 blocks
// FOLLOW: stage 2 slow0 2 blocks
// FOLLOW: stage 3 slow1 6 blocks
// RUN: %torch_python %S/../Passes/Inputs/replace.py %t.hetero %t.bad "stage_bounds = [0, 5, 10, 11, 12]" "stage_bounds = [0, 5, 5, 11, 12]"
// RUN: not dtfm-opt %t.bad --dtfm-import-cluster=file=%S/../Passes/Inputs/mixed-4.textproto --dtfm-partition-stages -o /dev/null 2> %t.bad.err
// RUN: count 1 < %t.bad.err
// RUN: FileCheck %s --check-prefix=BADBOUNDS < %t.bad.err
// BADBOUNDS: error: dtfm-partition-stages: dtfm.assignment's stage_bounds: stage bounds must rise strictly from 0 to 12 over 4 stages
