// COM: End-to-end test through the importer: inputs built by dtfm-translate --import-gpt and a chain of passes, so it also breaks when the importer or an earlier pass changes (the hand-written pass tests are in test/Passes).
// RUN: dtfm-translate --import-gpt tiny | dtfm-opt --dtfm-plan="cluster=%S/../Passes/Inputs/two-regions.textproto dp=2 pp=2 dp-bytes=1e6 pp-bytes=1e8" --dtfm-insert-send-recv --dtfm-insert-grad-sync --dtfm-schedule-microbatches=micro-batches=2 -o %t.mlir
// RUN: dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/two-regions.textproto --dtfm-emit-stage-programs --dtfm-verify-plan | FileCheck %s
// RUN: dtfm-translate --import-gpt tiny | not dtfm-opt --dtfm-emit-stage-programs 2>&1 | FileCheck %s --check-prefix=NOFILE
// RUN: dtfm-translate --import-gpt tiny | not dtfm-opt --dtfm-import-cluster=file=%S/../Passes/Inputs/two-regions.textproto --dtfm-emit-stage-programs 2>&1 | FileCheck %s --check-prefix=NOSCHEDULE

// COM: dp-bytes small, pp-bytes large: pipelines stay inside a region (see
// COM: assign-devices.mlir), so stage 0 is {a0, b0} or {b0, a0}... one
// COM: program per device, four in all, the model function gone: pipeline
// COM: 0's hold their stage's ops, pipeline 1's name them (dtfm.template)
// COM: with their own attributes and their transfers' devices.
// CHECK-NOT: {{^ *}}func.func @tiny
// CHECK-COUNT-2: func.func @{{[ab][01]}}() attributes {dtfm.device = "{{[ab][01]}}", dtfm.micro_batches = 2 : i64, dtfm.param_shards = [#dtfm.param_shard<name = "{{.*}}", begin = {{[0-9]+}}, end = {{[0-9]+}}, bytes = {{[0-9]+}}>{{.*}}], dtfm.peers = #dtfm.peers<prev = "{{.*}}", next = "{{.*}}">, dtfm.pipeline = {{[01]}} : i64, dtfm.recv_buffer_bytes = {{[1-9][0-9]*}} : i64, dtfm.stage = {{[01]}} : i64, dtfm.streams = #dtfm.streams<recv = [{{.*}}], compute = ["F0", {{.*}}], send = [{{.*}}]>}
// RUN: dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/two-regions.textproto --dtfm-emit-stage-programs | FileCheck %s --check-prefix=ENTRY
// ENTRY-COUNT-2: func.func private @{{[ab][01]}}() attributes {dtfm.device = "{{[ab][01]}}", dtfm.micro_batches = 2 : i64, dtfm.param_shards = [{{.*}}], dtfm.peer_devices = ["{{[ab][01]}}"{{.*}}], dtfm.peers = {{.*}}, dtfm.pipeline = 1 : i64, {{.*}}, dtfm.template = @{{[ab][01]}}}{{$}}

// COM: Each program has its stage's ops, with peers named by device.
// RUN: dtfm-opt %t.mlir --dtfm-import-cluster=file=%S/../Passes/Inputs/two-regions.textproto --dtfm-emit-stage-programs | FileCheck %s --check-prefix=BODY
// BODY: func.func @{{.*}}dtfm.stage = 0 : i64, dtfm.streams
// BODY: dtfm.input "tokens"
// BODY: dtfm.send {{.*}}peer_device = "{{[ab][01]}}"
// BODY-NOT: dtfm.cross_entropy
// BODY: return

// NOFILE: error: dtfm-emit-stage-programs: no cluster in the module: run --dtfm-import-cluster=file=FILE first (or --dtfm-plan=cluster=FILE)
// NOSCHEDULE: error: dtfm-emit-stage-programs: no dtfm.schedule; run --dtfm-schedule-microbatches first
