module attributes {dtfm.schedule = {kind = "1f1b", micro_batches = 1 : i64, stages = [{compute = ["F0"], recv = [], send = ["F0>1"]}, {compute = ["F0"], recv = ["F0<0", "X2<0"], send = []}]}} {
}
