// A hand-edited schedule: stage 0 computes B0 before F0, so it never sends
// F0, stage 1 never computes, and stage 0's B0 never arrives: a cycle.
module attributes {dtfm.schedule = {kind = "1f1b", micro_batches = 1 : i64, stages = [{compute = ["B0", "F0"], recv = ["B0<1"], send = ["F0>1"]}, {compute = ["F0", "B0"], recv = ["F0<0"], send = ["B0>0"]}]}} {
}
