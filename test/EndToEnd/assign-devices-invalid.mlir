// COM: End-to-end test through the importer: inputs built by dtfm-translate --import-gpt and a chain of passes, so it also breaks when the importer or an earlier pass changes (the hand-written pass tests are in test/Passes).
// RUN: dtfm-translate --import-gpt tiny -o %t.mlir
// RUN: not dtfm-opt %t.mlir --dtfm-assign-devices 2>&1 | FileCheck %s --check-prefix=NOFILE
// NOFILE: error: dtfm-assign-devices: no cluster in the module: run --dtfm-import-cluster=file=FILE first (or --dtfm-plan=cluster=FILE)
// RUN: not dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/missing.textproto --dtfm-assign-devices 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: error: dtfm-import-cluster: {{.*}}missing.textproto: cannot open (No such file or directory)
// RUN: not dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/nonsquare.textproto --dtfm-assign-devices 2>&1 | FileCheck %s --check-prefix=SQUARE
// SQUARE: error: dtfm-import-cluster: {{.*}}nonsquare.csv: matrix is not square (2 rows, 3 columns)
// RUN: not dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/zero-bandwidth.textproto --dtfm-assign-devices 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: error: dtfm-import-cluster: {{.*}}zero-bandwidth.textproto: link g0 <-> g1: bandwidth must be finite and > 0, got 0.000000 Gbps
// RUN: not dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/negative-link.textproto --dtfm-assign-devices 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// NEGATIVE: error: dtfm-import-cluster: {{.*}}negative-link.textproto: link A <-> B: expected delay_ms >= 0 and bandwidth_gbps > 0, got 1 ms and -2 Gbps
// RUN: not dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/two-regions.textproto --dtfm-assign-devices="dp=3 pp=2" 2>&1 | FileCheck %s --check-prefix=FACTOR
// FACTOR: error: dtfm-assign-devices: cluster 'two-regions' has 4 devices, which is not dp 3 x pp 2
// RUN: not dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/two-regions.textproto --dtfm-assign-devices="algorithm=annealing" 2>&1 | FileCheck %s --check-prefix=ALGO
// ALGO: error: dtfm-assign-devices: unknown algorithm 'annealing'
// RUN: not dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/two-regions.textproto --dtfm-assign-devices="dp=-1" 2>&1 | FileCheck %s --check-prefix=NEG
// NEG: error: dtfm-assign-devices: dp, pp, dp-bytes, pp-bytes and budget must be >= 0
// RUN: not dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/two-regions.textproto --dtfm-assign-devices="algorithm=hetero sync=tree" 2>&1 | FileCheck %s --check-prefix=SYNC
// SYNC: error: dtfm-assign-devices: unknown sync 'tree' (expected auto, ps or ring)
// RUN: not dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/two-regions.textproto --dtfm-assign-devices="algorithm=hetero compress-ratio=0" 2>&1 | FileCheck %s --check-prefix=RATIO
// RATIO: error: dtfm-assign-devices: compress-ratio must be >= 1 (1: dense), found 0.000000

// COM: keep-layout=true needs hetero and a recorded assignment whose devices
// COM: the cluster has, each once.
// RUN: not dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/two-regions.textproto --dtfm-assign-devices="algorithm=hetero keep-layout=true" 2>&1 | FileCheck %s --check-prefix=KEEP-NONE
// KEEP-NONE: two-regions.textproto:0:0: error: dtfm-assign-devices: keep-layout=true needs a dtfm.assignment to take the layout from
// RUN: dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/two-regions.textproto --dtfm-assign-devices="dp=2 pp=2 algorithm=rank-order" -o %t.rank
// RUN: not dtfm-opt %t.rank --dtfm-assign-devices="keep-layout=true" 2>&1 | FileCheck %s --check-prefix=KEEP-ALGO
// KEEP-ALGO: error: dtfm-assign-devices: keep-layout=true needs algorithm=hetero
// RUN: not dtfm-opt %t.rank --dtfm-assign-devices="algorithm=hetero keep-layout=true dp=4 pp=1" 2>&1 | FileCheck %s --check-prefix=KEEP-SHAPE
// KEEP-SHAPE: error: dtfm-assign-devices: dp/pp contradict the recorded assignment (dp 2, pp 2)
// RUN: sed 's/\["b0", "b1"\]\]/["b0", "zz"]]/' %t.rank > %t.unknown
// RUN: not dtfm-opt %t.unknown --dtfm-assign-devices="algorithm=hetero keep-layout=true" 2>&1 | FileCheck %s --check-prefix=KEEP-UNKNOWN
// KEEP-UNKNOWN: error: dtfm-assign-devices: the recorded assignment names device 'zz', which cluster 'two-regions' lacks
// RUN: sed 's/\["b0", "b1"\]\]/["b0", "a0"]]/' %t.rank > %t.twice
// RUN: not dtfm-opt %t.twice --dtfm-assign-devices="algorithm=hetero keep-layout=true" 2>&1 | FileCheck %s --check-prefix=KEEP-TWICE
// KEEP-TWICE: error: dtfm-assign-devices: the recorded assignment names device 'a0' twice
