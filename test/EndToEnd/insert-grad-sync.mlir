// COM: End-to-end test through the importer: inputs built by dtfm-translate --import-gpt and a chain of passes, so it also breaks when the importer or an earlier pass changes (the hand-written pass tests are in test/Passes).
// RUN: dtfm-translate --import-gpt tiny | dtfm-opt --dtfm-plan="cluster=%S/../Passes/Inputs/two-regions.textproto dp=2 pp=2" -o %t.mlir
// RUN: dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/two-regions.textproto --dtfm-insert-grad-sync --dtfm-schedule-microbatches | FileCheck %s
// RUN: dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/two-regions.textproto --dtfm-insert-grad-sync="sync=ring" | FileCheck %s --check-prefix=RING
// RUN: not dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/two-regions.textproto --dtfm-insert-grad-sync="sync=tree" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: dtfm-translate --import-gpt tiny | not dtfm-opt --dtfm-import-cluster=file=%S/../Passes/Inputs/two-regions.textproto --dtfm-insert-grad-sync 2>&1 | FileCheck %s --check-prefix=NOASSIGN

// COM: Every update reads its gradient through a sync over its stage's group.
// COM: wte (256x64 f32 = 65536 B) in a two-device group: the parameter
// COM: server's 2 (alpha + c / (D beta)); the plan put each stage's group
// COM: inside one region or across both, so the link is 1 ms / 10 Gbps or
// COM: 50 ms / 1 Gbps.
// CHECK: %[[S:.*]] = dtfm.grad_sync %{{.*}} {algorithm = "ps", bytes = 65536 : i64, {{.*}}dtfm.phase = "opt", dtfm.slot = "compute", dtfm.stage = 0 : i64, group = [{{"[ab][01]", "[ab][01]"}}], seconds = {{0\.0020524[0-9]*|0\.10052[0-9]*}} : f64} : (tensor<256x64xf32>) -> tensor<256x64xf32>
// CHECK-NEXT: dtfm.adamw_update %{{.*}}, %[[S]]
// COM: Equal on a 2-device group, so auto keeps the parameter server.
// CHECK-NOT: algorithm = "ring"

// RING: dtfm.grad_sync {{.*}}algorithm = "ring"

// BAD: error: dtfm-insert-grad-sync: unknown sync 'tree' (expected auto, ps or ring)
// NOASSIGN: error: dtfm-insert-grad-sync: no dtfm.assignment; run --dtfm-assign-devices first
