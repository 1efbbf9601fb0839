// COM: End-to-end test through the importer: inputs built by dtfm-translate --import-gpt and a chain of passes, so it also breaks when the importer or an earlier pass changes (the hand-written pass tests are in test/Passes).
// RUN: dtfm-translate --import-gpt tiny -o %t.mlir
// RUN: dtfm-opt %t.mlir --dtfm-annotate-costs --dtfm-import-cluster=file=%S/../Passes/Inputs/two-regions.textproto --dtfm-assign-devices="dp=2 pp=2 dp-bytes=1e6 pp-bytes=1e8 print-table=true" -o %t.out | FileCheck %s --check-prefix=TABLE
// RUN: FileCheck %s --check-prefix=ATTR < %t.out
// RUN: dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/two-regions.textproto --dtfm-assign-devices="dp=2 pp=2 dp-bytes=1e8 pp-bytes=1e6 print-table=true" -o /dev/null | FileCheck %s --check-prefix=SWAPPED
// RUN: dtfm-opt %t.mlir --dtfm-import-cluster=file=%dtfm_src_root/examples/clusters/local-8.textproto --dtfm-assign-devices="print-table=true" -o /dev/null | FileCheck %s --check-prefix=AUTO
// RUN: dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/two-regions.textproto --dtfm-assign-devices="dp=2 pp=2 algorithm=rank-order print-table=true" -o /dev/null | FileCheck %s --check-prefix=RANK
// RUN: dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/two-regions.textproto --dtfm-assign-devices="pp=2 progress=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=PROGRESS

// COM: c_PP large: pipelines stay inside a region, data-parallel groups span
// COM: both. DP: 2 (0.05 + 8*5e5/1e9) = 0.108 s. PP: each stage pair matched
// COM: inside a region, 0.001 + 8e8/1e10 = 0.081 s, times 2 = 0.162 s.
// TABLE: === dtfm device assignment ===
// TABLE-NEXT: cluster two-regions, 4 devices, algorithm genetic, seed 0
// TABLE-NEXT: D_DP 2 x D_PP 2; c_DP 1e+06 B, c_PP 1e+08 B
// TABLE-NEXT: cost 0.270000 s = DATAP 0.108000 s + PIPELINEP 0.162000 s
// TABLE-NEXT: stage 0 DATAP 0.108000 s [[D0:[ab]]][[I:[01]]]({{[AB]}}) [[E0:[ab]]][[J:[01]]]({{[AB]}})
// COM: Pipeline i keeps to one region: stage 1 entry i has the same letter.
// TABLE-NEXT: stage 1 DATAP 0.108000 s [[D0]]{{[01]}}({{[AB]}}) [[E0]]{{[01]}}({{[AB]}})

// ATTR: dtfm.assignment = #dtfm.assignment<cluster = "two-regions", algorithm = "genetic", seed = 0, dp = 2, pp = 2, dp_bytes = 1.0e+06, pp_bytes = 1.0e+08, {{.*}}stages = {{\[\[".*", ".*"\], \[".*", ".*"\]\]}}>

// COM: c_DP large: data-parallel groups stay inside a region.
// COM: DP: 2 (0.001 + 8*5e7/1e10) = 0.082 s; PP: 2 (0.05 + 8e6/1e9) = 0.116 s.
// SWAPPED: cost 0.198000 s = DATAP 0.082000 s + PIPELINEP 0.116000 s
// SWAPPED: stage 0 DATAP 0.082000 s [[X:[ab]]]{{[01]}}({{[AB]}}) [[X]]{{[01]}}({{[AB]}})

// COM: dp = pp = 0: every factorisation with at most 4 stages (tiny has 4 layers).
// AUTO: cluster local-8, 8 devices
// AUTO: D_DP {{[0-9]}} x D_PP {{[1-4]}};

// RANK: stage 0 DATAP {{.*}} a0(A) a1(A)
// RANK: stage 1 DATAP {{.*}} b0(B) b1(B)

// PROGRESS: dtfm-assign-devices: dp 2 pp 2 generation 0 best {{[0-9.]+}} s

// COM: hetero: stages re-balanced for the devices that run them; the two 4x
// COM: faster devices take 5 of the 12 blocks each.
// RUN: dtfm-translate --import-gpt tiny --layers 10 | dtfm-opt --dtfm-annotate-costs --dtfm-autodiff --dtfm-import-cluster=file=%S/../Passes/Inputs/mixed-4.textproto --dtfm-assign-devices="algorithm=hetero dp=1 pp=4 micro-batches=4 print-table=true" -o %t.hetero | FileCheck %s --check-prefix=HETERO
// RUN: FileCheck %s --check-prefix=HETERO-ATTR < %t.hetero
// HETERO: algorithm hetero
// COM: No data-parallel groups (dp 1): the only sync is the tied embedding
// COM: (256 x 64 f32 = 65,536 B) between stages 0 and 3, once per iteration:
// COM: 0.1 ms + 65,536 x 8 / 10 Gbps = 0.152 ms.
// HETERO: hetero: predicted iteration {{[0-9.]+}} s = pipeline {{[0-9.]+}} s + gradient sync 0.000152 s
// HETERO: stage 0 {{.*}} fast0(lan)
// HETERO: stage 1 {{.*}} fast1(lan)
// HETERO-ATTR: iteration_s = {{.*}}stage_bounds = [0, 5, 10, 11, 12]>

// COM: keep-layout=true: hetero re-plans the layout already recorded (here
// COM: rank-order's, which keeps each stage inside one region) instead of
// COM: searching its own; --dtfm-plan's hetero:link-shares candidate uses it.
// RUN: dtfm-opt %t.mlir --dtfm-annotate-costs --dtfm-autodiff --dtfm-import-cluster=file=%S/../Passes/Inputs/two-regions.textproto --dtfm-assign-devices="dp=2 pp=2 algorithm=rank-order" -o %t.rank
// RUN: dtfm-opt %t.rank --dtfm-assign-devices="algorithm=hetero keep-layout=true print-table=true" -o %t.kept | FileCheck %s --check-prefix=KEEP
// RUN: FileCheck %s --check-prefix=KEEP-ATTR < %t.kept
// KEEP: algorithm hetero
// KEEP: stage  0 {{.*}} a0(A) a1(A)
// KEEP-NEXT: stage  1 {{.*}} b0(B) b1(B)
// KEEP-ATTR: algorithm = "hetero"
// KEEP-ATTR-SAME: stages = {{\[}}["a0", "a1"], ["b0", "b1"]], iteration_s =
