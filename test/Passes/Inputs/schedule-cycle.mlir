// A hand-edited schedule: stage 0 computes B0 before F0, so it never sends
// F0, stage 1 never computes, and stage 0's B0 never arrives: a cycle.
module attributes {dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 1, peak_in_flight = [1, 1], stages = [<recv = ["B0<1"], compute = ["B0", "F0"], send = ["F0>1"]>, <recv = ["F0<0"], compute = ["F0", "B0"], send = ["B0>0"]>]>} {
}
