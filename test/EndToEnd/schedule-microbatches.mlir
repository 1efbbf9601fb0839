// COM: End-to-end test through the importer: inputs built by dtfm-translate --import-gpt and a chain of passes, so it also breaks when the importer or an earlier pass changes (the hand-written pass tests are in test/Passes).
// RUN: dtfm-translate --import-gpt tiny | dtfm-opt --dtfm-autodiff --dtfm-import-cluster=file=%dtfm_src_root/examples/clusters/local-8.textproto --dtfm-partition-stages="stages=2" --dtfm-insert-send-recv -o %t.mlir
// RUN: dtfm-opt %t.mlir --dtfm-schedule-microbatches="schedule=1f1b micro-batches=4" | FileCheck %s --check-prefix=ONEF
// RUN: dtfm-opt %t.mlir --dtfm-schedule-microbatches="schedule=gpipe micro-batches=4" | FileCheck %s --check-prefix=GPIPE
// RUN: not dtfm-opt %t.mlir --dtfm-schedule-microbatches=schedule=interleaved 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not dtfm-opt %t.mlir --dtfm-schedule-microbatches=micro-batches=0 2>&1 | FileCheck %s --check-prefix=ZERO

// COM: 2 stages x 4 micro-batches. 1F1B: stage 0 warms up with one extra
// COM: forward and keeps at most 2 micro-batches in flight, stage 1 one.
// ONEF: dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 4, peak_in_flight = [2, 1], stages = [<recv = ["B0<1", "B1<1", "B2<1", "B3<1"], compute = ["F0", "F1", "B0", "F2", "B1", "F3", "B2", "B3"], send = ["F0>1", "F1>1", "F2>1", "F3>1"]>, <recv = ["F0<0", "F1<0", "F2<0", "F3<0"], compute = ["F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3"], send = ["B0>0", "B1>0", "B2>0", "B3>0"]>]>
// COM: Every op sits on one slot with its phase.
// ONEF: dtfm.input "tokens" {{.*}}dtfm.phase = "fwd", dtfm.slot = "compute", dtfm.stage = 0 : i64
// ONEF: dtfm.send {{.*}}dtfm.phase = "fwd", dtfm.slot = "send", dtfm.stage = 0 : i64
// ONEF: dtfm.recv {{.*}}dtfm.phase = "fwd", dtfm.slot = "recv", dtfm.stage = 1 : i64
// ONEF: dtfm.backward "dtfm.cross_entropy"{{.*}}dtfm.phase = "bwd", dtfm.slot = "compute", dtfm.stage = 1 : i64
// ONEF: dtfm.send {{.*}}dtfm.phase = "bwd", dtfm.slot = "send", dtfm.stage = 1 : i64
// ONEF: dtfm.recv {{.*}}dtfm.phase = "bwd", dtfm.slot = "recv", dtfm.stage = 0 : i64
// ONEF: dtfm.adamw_update {{.*}}dtfm.phase = "opt", dtfm.slot = "compute"

// COM: GPipe: all forwards, then the backwards in reverse; 4 in flight.
// GPIPE: dtfm.schedule = #dtfm.schedule<kind = "gpipe", micro_batches = 4, peak_in_flight = [4, 4], stages = [<recv = ["B3<1", "B2<1", "B1<1", "B0<1"], compute = ["F0", "F1", "F2", "F3", "B3", "B2", "B1", "B0"], send = ["F0>1", "F1>1", "F2>1", "F3>1"]>, <recv = ["F0<0", "F1<0", "F2<0", "F3<0"], compute = ["F0", "F1", "F2", "F3", "B3", "B2", "B1", "B0"], send = ["B3>0", "B2>0", "B1>0", "B0>0"]>]>

// BAD: error: dtfm-schedule-microbatches: unknown schedule 'interleaved' (expected 1f1b, zb-h1, gpipe or auto)
// ZERO: error: dtfm-schedule-microbatches: micro-batches must be in [1, 1000000], got 0
