// RUN: dtfm-opt %s -split-input-file --dtfm-emit-stage-programs | FileCheck %s

// COM: Every case is the same two-stage model (after send/recv insertion and
// COM: scheduling): stage 0 computes x * w (w: 4x8 f32, 32 elements, 128 B)
// COM: and sends it (tag 0, 64 B); stage 1 receives it and owns b (8 f32).
// COM: dtfm.peers and dtfm.streams are checked loosely (being re-typed).

// COM: No assignment: stage s runs on the cluster's device s. The model
// COM: function is replaced by @a and @b; each holds its stage's ops, the
// COM: transfers name their peer device, each program lists its parameter
// COM: shards (the whole tensor with one pipeline) and the bytes it
// COM: receives per micro-batch (b: 64). The return is not copied: each
// COM: program returns nothing.
// CHECK-LABEL: module attributes
// CHECK-SAME: dtfm.model = "toy"
// CHECK-LABEL: func.func @a()
// CHECK-SAME: dtfm.device = "a"
// CHECK-SAME: dtfm.param_shards = [#dtfm.param_shard<name = "w", begin = 0, end = 32, bytes = 128>]
// CHECK-SAME: dtfm.peers = {{.*}}next = "b"
// CHECK-SAME: dtfm.pipeline = 0 : i64, dtfm.recv_buffer_bytes = 0 : i64, dtfm.stage = 0 : i64
// CHECK-SAME: dtfm.streams = {{.*}}compute = ["F0", "B0"]{{.*}}send = ["F0>1"]
// CHECK-NEXT: dtfm.input "x"
// CHECK-NEXT: dtfm.param "w"
// CHECK-NEXT: dtfm.matmul
// CHECK-NEXT: dtfm.send %{{.*}} {{{.*}}peer = 1 : i64, peer_device = "b", tag = 0 : i64}
// CHECK-NEXT: return{{$}}
// CHECK-LABEL: func.func @b()
// CHECK-SAME: dtfm.device = "b"
// CHECK-SAME: dtfm.param_shards = [#dtfm.param_shard<name = "b", begin = 0, end = 8, bytes = 32>]
// CHECK-SAME: dtfm.peers = {{.*}}prev = "a"
// CHECK-SAME: dtfm.pipeline = 0 : i64, dtfm.recv_buffer_bytes = 64 : i64, dtfm.stage = 1 : i64
// CHECK-SAME: dtfm.streams = {{.*}}recv = ["F0<0"]
// CHECK-NEXT: dtfm.recv {{{.*}}peer = 0 : i64, peer_device = "a", tag = 0 : i64}
// CHECK-NEXT: dtfm.param "b"
// CHECK-NEXT: dtfm.relu
// CHECK-NEXT: return{{$}}
// CHECK-NOT: func.func
module attributes {dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "R0", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "R1", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>, dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 1, peak_in_flight = [1, 1], stages = [<recv = ["B0<1"], compute = ["F0", "B0"], send = ["F0>1"]>, <recv = ["F0<0"], compute = ["F0", "B0"], send = ["B0>0"]>]>} {
  func.func @model() -> tensor<2x8xf32> attributes {dtfm.model = "toy"} {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.stage = 0 : i64} : tensor<4x8xf32>
    %h = dtfm.matmul %x, %w {dtfm.stage = 0 : i64} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    dtfm.send %h {bandwidth_gbps = 1.000000e+01 : f64, bytes = 64 : i64, dtfm.stage = 0 : i64, latency_s = 1.000000e-03 : f64, peer = 1 : i64, tag = 0 : i64} : tensor<2x8xf32>
    %hr = dtfm.recv {bandwidth_gbps = 1.000000e+01 : f64, bytes = 64 : i64, dtfm.stage = 1 : i64, latency_s = 1.000000e-03 : f64, peer = 0 : i64, tag = 0 : i64} : tensor<2x8xf32>
    %b = dtfm.param "b" init(zeros) {dtfm.stage = 1 : i64} : tensor<8xf32>
    %r = dtfm.relu %hr {dtfm.stage = 1 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    return {dtfm.stage = 1 : i64} %r : tensor<2x8xf32>
  }
}

// -----

// COM: dp = 2: stage 0 = [a, b], stage 1 = [c, d]; program i of a stage is
// COM: pipeline i, talks to pipeline i of the next stage, and holds shard i
// COM: of each parameter: w [0, 16) on a, [16, 32) on b; b [0, 4) on c,
// COM: [4, 8) on d (bytes stay the whole tensor's).
// CHECK-LABEL: func.func @a()
// CHECK-SAME: dtfm.param_shards = [#dtfm.param_shard<name = "w", begin = 0, end = 16, bytes = 128>]
// CHECK-SAME: dtfm.pipeline = 0 : i64
// CHECK: dtfm.send {{.*}}peer_device = "c"
// COM: The second replica of each stage runs the first's ops: a declaration
// COM: naming it (dtfm.template) with its own attributes and the devices
// COM: its transfers reach (dtfm.peer_devices, in op order).
// CHECK-LABEL: func.func private @b()
// CHECK-SAME: dtfm.param_shards = [#dtfm.param_shard<name = "w", begin = 16, end = 32, bytes = 128>]
// CHECK-SAME: dtfm.peer_devices = ["d"]
// CHECK-SAME: dtfm.pipeline = 1 : i64
// CHECK-SAME: dtfm.template = @a}{{$}}
// CHECK-NEXT: func.func @c()
// CHECK-SAME: dtfm.param_shards = [#dtfm.param_shard<name = "b", begin = 0, end = 4, bytes = 32>]
// CHECK-SAME: dtfm.pipeline = 0 : i64
// CHECK: dtfm.recv {{.*}}peer_device = "a"
// CHECK-LABEL: func.func private @d()
// CHECK-SAME: dtfm.param_shards = [#dtfm.param_shard<name = "b", begin = 4, end = 8, bytes = 32>]
// CHECK-SAME: dtfm.peer_devices = ["b"]
// CHECK-SAME: dtfm.pipeline = 1 : i64
// CHECK-SAME: dtfm.template = @c}{{$}}
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "quad", algorithm = "genetic", seed = 0, dp = 2, pp = 2, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a", "b"], ["c", "d"]]>, dtfm.cluster = #dtfm.cluster<name = "quad", source = "quad.textproto", devices = [<name = "a", region = "R0", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "R1", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "c", region = "R2", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "d", region = "R3", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 10.0, 10.0, 0.0, 10.0, 10.0, 10.0, 10.0, 0.0, 10.0, 10.0, 10.0, 10.0, 0.0]>, dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 1, peak_in_flight = [1, 1], stages = [<recv = ["B0<1"], compute = ["F0", "B0"], send = ["F0>1"]>, <recv = ["F0<0"], compute = ["F0", "B0"], send = ["B0>0"]>]>} {
  func.func @model() -> tensor<2x8xf32> attributes {dtfm.model = "toy"} {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.stage = 0 : i64} : tensor<4x8xf32>
    %h = dtfm.matmul %x, %w {dtfm.stage = 0 : i64} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    dtfm.send %h {bandwidth_gbps = 1.000000e+01 : f64, bytes = 64 : i64, dtfm.stage = 0 : i64, latency_s = 1.000000e-03 : f64, peer = 1 : i64, tag = 0 : i64} : tensor<2x8xf32>
    %hr = dtfm.recv {bandwidth_gbps = 1.000000e+01 : f64, bytes = 64 : i64, dtfm.stage = 1 : i64, latency_s = 1.000000e-03 : f64, peer = 0 : i64, tag = 0 : i64} : tensor<2x8xf32>
    %b = dtfm.param "b" init(zeros) {dtfm.stage = 1 : i64} : tensor<8xf32>
    %r = dtfm.relu %hr {dtfm.stage = 1 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    return {dtfm.stage = 1 : i64} %r : tensor<2x8xf32>
  }
}

// -----

// COM: Uneven replicas: pipeline 0 runs 3 micro-batches, pipeline 1 one.
// COM: Each program gets its pipeline's count and streams built for it.
// COM: The schedule's backward transfers are dropped: no op of the model
// COM: sends a gradient back (entries follow the program's transfer ops).
// CHECK-LABEL: func.func @a()
// CHECK-SAME: dtfm.micro_batches = 3 : i64
// CHECK-SAME: dtfm.pipeline = 0 : i64
// CHECK-SAME: compute = ["F0", "F1", "B0", "F2", "B1", "B2"]
// COM: Their bodies are the same: pipeline 1's programs name pipeline 0's.
// CHECK-LABEL: func.func private @b()
// CHECK-SAME: dtfm.micro_batches = 1 : i64
// CHECK-SAME: dtfm.pipeline = 1 : i64
// CHECK-SAME: dtfm.streams = #dtfm.streams<recv = [], compute = ["F0", "B0"], send = ["F0>1"]>, dtfm.template = @a
// CHECK-LABEL: func.func @c()
// CHECK-SAME: dtfm.micro_batches = 3 : i64
// CHECK-SAME: compute = ["F0", "B0", "F1", "B1", "F2", "B2"]
// CHECK-LABEL: func.func private @d()
// CHECK-SAME: dtfm.micro_batches = 1 : i64
// CHECK-SAME: dtfm.streams = #dtfm.streams<recv = ["F0<0"], compute = ["F0", "B0"], send = []>
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "quad", algorithm = "hetero", seed = 0, dp = 2, pp = 2, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a", "b"], ["c", "d"]], iteration_s = 1.0, stage_bounds = [0, 1, 2], pipeline_micro_batches = [3, 1]>, dtfm.cluster = #dtfm.cluster<name = "quad", source = "quad.textproto", devices = [<name = "a", region = "R0", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "R1", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "c", region = "R2", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "d", region = "R3", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 10.0, 10.0, 0.0, 10.0, 10.0, 10.0, 10.0, 0.0, 10.0, 10.0, 10.0, 10.0, 0.0]>, dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 3, peak_in_flight = [2, 1], stages = [<recv = ["B0<1", "B1<1", "B2<1"], compute = ["F0", "F1", "B0", "F2", "B1", "B2"], send = ["F0>1", "F1>1", "F2>1"]>, <recv = ["F0<0", "F1<0", "F2<0"], compute = ["F0", "B0", "F1", "B1", "F2", "B2"], send = ["B0>0", "B1>0", "B2>0"]>], pipeline_micro_batches = [3, 1]>} {
  func.func @model() -> tensor<2x8xf32> attributes {dtfm.model = "toy"} {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.stage = 0 : i64} : tensor<4x8xf32>
    %h = dtfm.matmul %x, %w {dtfm.stage = 0 : i64} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    dtfm.send %h {bandwidth_gbps = 1.000000e+01 : f64, bytes = 64 : i64, dtfm.stage = 0 : i64, latency_s = 1.000000e-03 : f64, peer = 1 : i64, tag = 0 : i64} : tensor<2x8xf32>
    %hr = dtfm.recv {bandwidth_gbps = 1.000000e+01 : f64, bytes = 64 : i64, dtfm.stage = 1 : i64, latency_s = 1.000000e-03 : f64, peer = 0 : i64, tag = 0 : i64} : tensor<2x8xf32>
    %b = dtfm.param "b" init(zeros) {dtfm.stage = 1 : i64} : tensor<8xf32>
    %r = dtfm.relu %hr {dtfm.stage = 1 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    return {dtfm.stage = 1 : i64} %r : tensor<2x8xf32>
  }
}

// -----

// COM: Device names become symbols ("gpu-0" -> @gpu_0, a leading digit
// COM: gets "d_"); dtfm.device and peer_device keep the names. The
// COM: assignment's order wins over the cluster's (2nd is device 0).
// CHECK-LABEL: func.func @gpu_0()
// CHECK-SAME: dtfm.device = "gpu-0"
// CHECK-SAME: dtfm.peers = {{.*}}next = "2nd"
// CHECK: dtfm.send {{.*}}peer_device = "2nd"
// CHECK-LABEL: func.func @d_2nd()
// CHECK-SAME: dtfm.device = "2nd"
// CHECK-SAME: dtfm.param_shards = [#dtfm.param_shard<name = "b", begin = 0, end = 8, bytes = 32>]
// CHECK-SAME: dtfm.peers = {{.*}}prev = "gpu-0"
// CHECK: dtfm.recv {{.*}}peer_device = "gpu-0"
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "odd", algorithm = "genetic", seed = 0, dp = 1, pp = 2, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["gpu-0"], ["2nd"]]>, dtfm.cluster = #dtfm.cluster<name = "odd", source = "odd.textproto", devices = [<name = "2nd", region = "R0", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "gpu-0", region = "R1", peak_flops = 1.0e+09, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>, dtfm.schedule = #dtfm.schedule<kind = "1f1b", micro_batches = 1, peak_in_flight = [1, 1], stages = [<recv = ["B0<1"], compute = ["F0", "B0"], send = ["F0>1"]>, <recv = ["F0<0"], compute = ["F0", "B0"], send = ["B0>0"]>]>} {
  func.func @model() -> tensor<2x8xf32> attributes {dtfm.model = "toy"} {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2x4xf32>
    %w = dtfm.param "w" init(zeros) {dtfm.stage = 0 : i64} : tensor<4x8xf32>
    %h = dtfm.matmul %x, %w {dtfm.stage = 0 : i64} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    dtfm.send %h {bandwidth_gbps = 1.000000e+01 : f64, bytes = 64 : i64, dtfm.stage = 0 : i64, latency_s = 1.000000e-03 : f64, peer = 1 : i64, tag = 0 : i64} : tensor<2x8xf32>
    %hr = dtfm.recv {bandwidth_gbps = 1.000000e+01 : f64, bytes = 64 : i64, dtfm.stage = 1 : i64, latency_s = 1.000000e-03 : f64, peer = 0 : i64, tag = 0 : i64} : tensor<2x8xf32>
    %b = dtfm.param "b" init(zeros) {dtfm.stage = 1 : i64} : tensor<8xf32>
    %r = dtfm.relu %hr {dtfm.stage = 1 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    return {dtfm.stage = 1 : i64} %r : tensor<2x8xf32>
  }
}
