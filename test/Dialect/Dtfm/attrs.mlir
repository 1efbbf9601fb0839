// RUN: dtfm-opt %s -split-input-file | dtfm-opt -split-input-file | FileCheck %s
// RUN: dtfm-opt %s -split-input-file --mlir-print-op-generic | dtfm-opt -split-input-file | FileCheck %s
// COM: The typed planning state round-trips: parse -> print -> parse.

// CHECK-LABEL: module @one_f_one_b
// CHECK-SAME: dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 2, peak_in_flight = [2, 1], stages = [<recv = ["B0<1", "B1<1"], compute = ["F0", "F1", "B0", "B1"], send = ["F0>1", "F1>1"]>, <recv = ["F0<0", "F1<0"], compute = ["F0", "B0", "F1", "B1"], send = ["B0>0", "B1>0"]>]>
module @one_f_one_b attributes {dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 2, peak_in_flight = [2, 1], stages = [<recv = ["B0<1", "B1<1"], compute = ["F0", "F1", "B0", "B1"], send = ["F0>1", "F1>1"]>, <recv = ["F0<0", "F1<0"], compute = ["F0", "B0", "F1", "B1"], send = ["B0>0", "B1>0"]>]>} {
}

// -----

// COM: A stage may be spelled with its own mnemonic; it prints stripped.
// COM: Empty streams print as [].
// CHECK-LABEL: module @gpipe_one_stage
// CHECK-SAME: dtfm.schedule = #dtfm.schedule<kind = "gpipe", micro_batches = 1, peak_in_flight = [1], stages = [<recv = [], compute = ["F0", "B0"], send = []>]>
module @gpipe_one_stage attributes {dtfm.schedule = #dtfm.schedule<kind = "gpipe", micro_batches = 1, peak_in_flight = [1], stages = [#dtfm.streams<recv = [], compute = ["F0", "B0"], send = []>]>} {
}
