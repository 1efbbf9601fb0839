module attributes {dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 1, peak_in_flight = [1, 1], stages = [<recv = [], compute = ["F0"], send = ["F0>1"]>, <recv = ["F0<0", "X2<0"], compute = ["F0"], send = []>]>} {
}
