// COM: End-to-end test through the importer: inputs built by dtfm-translate --import-gpt and a chain of passes, so it also breaks when the importer or an earlier pass changes (the hand-written pass tests are in test/Passes).
// RUN: dtfm-translate --import-gpt tiny -o %t.mlir
// RUN: sed s/MEMORY/4e9/ %S/../Passes/Inputs/lan-8.textproto > %t.lan.textproto
// RUN: sed s/MEMORY/3e6/ %S/../Passes/Inputs/lan-8.textproto > %t.small.textproto
// RUN: sed s/MEMORY/1e5/ %S/../Passes/Inputs/lan-8.textproto > %t.tiny.textproto

// COM: One region behind a 10 Mbit/s link is left idle, with the reason.
// RUN: dtfm-opt %t.mlir --dtfm-plan="cluster=%S/../Passes/Inputs/far-region.textproto algorithm=hetero global-batch=32" --dtfm-print-plan-summary -o %t.far.mlir | FileCheck %s --check-prefix=FAR
// RUN: FileCheck %s --check-prefix=FARIR < %t.far.mlir
// FAR: === dtfm plan shape ===
// FAR-NEXT: cluster far, global batch 32 samples; {{[0-9]+}} shapes scored
// FAR: chosen 4 1 4 x 2 4
// FAR: stage  0: near0 near1 near2 near3
// FAR-NEXT: idle: far0 far1 -- region away: 0.01 Gbps and 250 ms at best to the devices in use; adding them costs {{[0-9.]+}} s/iteration
// FARIR: dtfm.assignment = #dtfm.assignment<cluster = "far", algorithm = "hetero", seed = 0, dp = 4, pp = 1, dp_bytes = {{[^,]*}}, pp_bytes = {{[^,]*}}, data_parallel_cost_s = {{[^,]*}}, pipeline_cost_s = {{[^,]*}}, total_cost_s = {{[^,]*}}, stages = {{\[\["near[0-3]", "near[0-3]", "near[0-3]", "near[0-3]"\]\]}}, iteration_s = {{[^,]*}}, stage_bounds = [0, 4]>
// FARIR-SAME: dtfm.shape = #dtfm.shape<cluster = "far", global_batch = 32, dp = 4, pp = 1, micro_batch_size = 4, micro_batches = 2, devices_used = 4, iteration_s = {{[^,]*}}, pipeline_s = {{[^,]*}}, data_parallel_s = {{[^,]*}}, devices = ["near0", "near1", "near2", "near3"],
// FARIR-SAME: idle = [<devices = ["far0", "far1"], reason = "region away:

// COM: Compute-bound on a fast network, the model fitting: pure data
// COM: parallelism on every device; the runner-ups are pipelined.
// RUN: dtfm-opt %t.mlir --dtfm-import-cluster=file=%t.lan.textproto --dtfm-choose-shape="global-batch=64" --dtfm-print-plan-summary -o /dev/null | FileCheck %s --check-prefix=DP
// DP: chosen 8 1 {{[0-9]+}} x {{[0-9]+}} 8
// DP-NEXT: runner-up 4 2
// DP: idle: none

// COM: The model does not fit one 3 MB device (as the runtime holds it:
// COM: f32 weights, gradient sums, buckets and moments): it is pipelined
// COM: (dp 4 x pp 2 would need 3.075 MB on stage 0).
// RUN: dtfm-opt %t.mlir --dtfm-import-cluster=file=%t.small.textproto --dtfm-choose-shape="global-batch=64" --dtfm-print-plan-summary -o /dev/null | FileCheck %s --check-prefix=PIPE
// PIPE: chosen 2 3 1 x 32 6

// COM: A smaller micro-batch: the model is rebatched to it.
// RUN: dtfm-opt %t.mlir --dtfm-import-cluster=file=%t.lan.textproto --dtfm-choose-shape="global-batch=64 micro-batch-sizes=2" | FileCheck %s --check-prefix=REBATCH
// REBATCH: micro_batch_size = 2, micro_batches = 4,
// REBATCH: dtfm.input "tokens" {{.*}}: tensor<2x32xi64>
// REBATCH: dtfm.cross_entropy {{.*}}: (tensor<2x32x256xf32>, tensor<2x32xi64>) -> tensor<f32>

// COM: Fixed dp: only shapes with it (pp 3 and 4 predict the same; the
// COM: fewer devices win the tie).
// RUN: dtfm-opt %t.mlir --dtfm-import-cluster=file=%t.lan.textproto --dtfm-choose-shape="global-batch=64 dp=2" --dtfm-print-plan-summary -o /dev/null | FileCheck %s --check-prefix=FIXED
// FIXED: chosen 2 3
// FIXED-NEXT: runner-up 2 4
// FIXED-NEXT: runner-up 2 2
// FIXED-NEXT: runner-up 2 1

// COM: Errors: one line each.
// RUN: not dtfm-opt %t.mlir --dtfm-import-cluster=file=%t.tiny.textproto --dtfm-choose-shape="global-batch=64" -o %t.none 2>&1 | FileCheck %s --check-prefix=NOFIT
// RUN: not ls %t.none
// NOFIT: error: dtfm-choose-shape: no plan shape fits in memory (with 8 of 8 devices, D_DP 8 x D_PP 1: model does not fit: device gpu0 (stage 0) needs {{.*}} GB but has 0.0001 GB
// RUN: not dtfm-opt %t.mlir --dtfm-import-cluster=file=%t.lan.textproto --dtfm-choose-shape 2>&1 | FileCheck %s --check-prefix=NOBATCH
// NOBATCH: error: dtfm-choose-shape: global-batch must be in [1, 1000000] samples, got 0
// RUN: not dtfm-opt %t.mlir --dtfm-import-cluster=file=%t.lan.textproto --dtfm-choose-shape="global-batch=64 micro-batch-sizes=0" 2>&1 | FileCheck %s --check-prefix=BADSIZE
// BADSIZE: error: dtfm-choose-shape: micro-batch sizes must be positive, found 0
// RUN: not dtfm-opt %t.mlir --dtfm-import-cluster=file=%t.lan.textproto --dtfm-choose-shape="global-batch=63 micro-batch-sizes=2" 2>&1 | FileCheck %s --check-prefix=NODIV
// NODIV: error: dtfm-choose-shape: no shape of the devices' subsets has a micro-batch size that divides the global batch of 63 samples
// RUN: not dtfm-opt %t.mlir --dtfm-import-cluster=file=%t.lan.textproto --dtfm-choose-shape="global-batch=64 sync=tree" 2>&1 | FileCheck %s --check-prefix=BADSYNC
// BADSYNC: error: dtfm-choose-shape: unknown sync 'tree' (expected auto, ps or ring)
// RUN: not dtfm-opt %t.mlir --dtfm-import-cluster=file=%t.lan.textproto --dtfm-choose-shape="global-batch=64 compress-ratio=0.5" 2>&1 | FileCheck %s --check-prefix=BADRATIO
// BADRATIO: error: dtfm-choose-shape: compress-ratio must be >= 1 (1: dense), found 0.500000
// RUN: not dtfm-opt %t.mlir --dtfm-choose-shape="global-batch=64" 2>&1 | FileCheck %s --check-prefix=NOCLUSTER
// NOCLUSTER: error: dtfm-choose-shape: no cluster in the module: run --dtfm-import-cluster=file=FILE first (or --dtfm-plan=cluster=FILE)
// RUN: not dtfm-opt %t.mlir --dtfm-print-plan-summary 2>&1 | FileCheck %s --check-prefix=NOSHAPE
// NOSHAPE: error: dtfm-print-plan-summary: the module has no dtfm.shape
// RUN: dtfm-opt %t.mlir --dtfm-import-cluster=file=%t.lan.textproto --dtfm-choose-shape="global-batch=64" -o %t.shaped.mlir
// RUN: not dtfm-opt %t.shaped.mlir --dtfm-autodiff --dtfm-import-cluster=file=%t.lan.textproto --dtfm-assign-devices="dp=2" 2>&1 | FileCheck %s --check-prefix=CONTRADICT
// CONTRADICT: error: dtfm-assign-devices: dp/pp contradict the chosen shape (dtfm.shape: dp 8, pp 1)
