// A device program whose compute stream holds a send entry.
module attributes {dtfm.cluster = #dtfm.cluster<name = "one", source = "one.textproto", devices = [<name = "a", region = "r", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 0.0>], delay_ms = [0.0], bandwidth_gbps = [0.0]>} {
  func.func @a() attributes {dtfm.device = "a", dtfm.stage = 0 : i64, dtfm.pipeline = 0 : i64, dtfm.peers = #dtfm.peers<prev = "", next = "">, dtfm.streams = #dtfm.streams<recv = [], compute = ["F0", "F0>1"], send = []>} {
    return
  }
}
