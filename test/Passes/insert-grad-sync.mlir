// RUN: dtfm-opt %s -split-input-file --dtfm-insert-grad-sync | FileCheck %s
// RUN: dtfm-opt %s -split-input-file --dtfm-insert-grad-sync=sync=ps | FileCheck %s --check-prefix=PS
// COM: 64-byte buckets (6.103515625e-05 MiB) for @buckets; one bucket per
// COM: stage with bucket-mb=0.
// RUN: dtfm-opt %s -split-input-file --dtfm-insert-grad-sync=bucket-mb=6.103515625e-05 | FileCheck %s --check-prefix=SMALL
// RUN: dtfm-opt %s -split-input-file --dtfm-insert-grad-sync=bucket-mb=0 | FileCheck %s --check-prefix=ONE
// COM: int8 on the wire (@pair): w's 12 floats take 4 + 12 = 16 B (one
// COM: scale per 256 values), b's 3 take 7 B, the 15 of the bucket 19 B:
// COM: 2 * (1e-3 + 8*8/1e10) = 0.0020000128, 2 * (1e-3 + 8*3.5/1e10) =
// COM: 0.0020000056 and 2 * (1e-3 + 8*9.5/1e10) = 0.0020000152 s.
// RUN: not dtfm-opt %s -split-input-file --dtfm-insert-grad-sync=dp-compression=int8 2> %t.int8.err | FileCheck %s --check-prefix=INT8
// RUN: FileCheck %s --check-prefix=INT8-ERR < %t.int8.err
// INT8-LABEL: func.func @pair
// INT8: dtfm.grad_sync %{{.*}} {algorithm = "ps", bytes = 48 : i64, dtfm.bucket = 0 : i64, dtfm.bucket_ready = 1.000000e+00 : f64, dtfm.bucket_seconds = 0.0020000152 : f64, dtfm.compression = "int8", dtfm.layer = "l0", dtfm.stage = 0 : i64, group = ["a", "b"], seconds = 0.0020000128000000001 : f64}
// INT8: dtfm.grad_sync %{{.*}} {algorithm = "ps", bytes = 12 : i64, dtfm.bucket = 0 : i64, dtfm.bucket_ready = 1.000000e+00 : f64, dtfm.bucket_seconds = 0.0020000152 : f64, dtfm.compression = "int8", dtfm.layer = "l1", dtfm.stage = 0 : i64, group = ["a", "b"], seconds = 0.0020000056000000002 : f64}
// COM: A plan without data-parallel groups has nothing to compress.
// INT8-ERR: error: dtfm-insert-grad-sync: dp-compression=int8 needs data-parallel groups of 2 or more devices (dp = 1)
// COM: dp-compression=auto: int8 only where it saves 20% of a group's
// COM: exchange. @pair's 60 B are all latency (0.002000048 s dense,
// COM: 0.0020000152 s as int8: no); @auto's 3 MiB at 10 Gbps are mostly
// COM: bytes: 2 * (1e-3 + 8 * 1572864 / 1e10) = 0.0045165824 s dense, and
// COM: as int8 (786432 + 4 * 3072 = 798720 B) 2 * (1e-3 + 8 * 399360 /
// COM: 1e10) = 0.0026389760 s: yes.
// COM: dp-compression=topk:4: each gradient keeps a quarter of its values
// COM: (w 3 of 12, b 1 of 3) as (index, value) pairs after a 4-byte count,
// COM: gathered around the ring (one hop between two): w 4 + 8*3 = 28 B,
// COM: 1e-3 + 8*28/1e10 = 0.0010000224 s; b 12 B, 0.0010000096 s; the
// COM: bucket's 15 values keep 4: 36 B, 0.0010000288 s.
// RUN: not dtfm-opt %s -split-input-file --dtfm-insert-grad-sync=dp-compression=topk:4 2> %t.topk.err | FileCheck %s --check-prefix=TOPK
// RUN: FileCheck %s --check-prefix=TOPK-ERR < %t.topk.err
// TOPK-ERR: error: dtfm-insert-grad-sync: dp-compression=topk:4 needs data-parallel groups of 2 or more devices (dp = 1)
// TOPK-LABEL: func.func @pair
// TOPK: dtfm.grad_sync %{{.*}} {algorithm = "ps", bytes = 48 : i64, dtfm.bucket = 0 : i64, dtfm.bucket_ready = 1.000000e+00 : f64, dtfm.bucket_seconds = 0.0010000288000000001 : f64, dtfm.compression = "topk", dtfm.layer = "l0", dtfm.stage = 0 : i64, dtfm.topk_ratio = 4.000000e+00 : f64, dtfm.topk_warmup = 20 : i64, group = ["a", "b"], seconds = 0.0010000224000000001 : f64}
// TOPK: dtfm.grad_sync %{{.*}} {algorithm = "ps", bytes = 12 : i64, {{.*}}dtfm.compression = "topk", {{.*}}dtfm.topk_ratio = 4.000000e+00 : f64, dtfm.topk_warmup = 20 : i64, group = ["a", "b"], seconds = 0.0010000096 : f64}
// RUN: dtfm-opt %s -split-input-file --dtfm-insert-grad-sync=dp-compression=auto | FileCheck %s --check-prefix=AUTO
// AUTO-LABEL: func.func @pair
// AUTO-NOT: dtfm.compression
// AUTO-LABEL: func.func @auto
// AUTO-COUNT-3: dtfm.compression = "int8"
// COM: Local steps: every sync records H and the outer step; one bucket.
// RUN: dtfm-opt %s -split-input-file --dtfm-insert-grad-sync="sync-every=8 outer-lr=0.5 outer-momentum=0.25" | FileCheck %s --check-prefix=LOCAL
// LOCAL-LABEL: func.func @buckets
// LOCAL-COUNT-3: dtfm.bucket = 0 : i64, dtfm.bucket_ready = 1.000000e+00 : f64, dtfm.bucket_seconds = 0.0020000640000000002 : f64, dtfm.layer = "l{{[123]}}", dtfm.outer_lr = 5.000000e-01 : f64, dtfm.outer_momentum = 2.500000e-01 : f64, dtfm.stage = 0 : i64, dtfm.sync_every = 8 : i64

// COM: One stage on a two-device group (a-b: 1 ms, 10 Gbps): each update
// COM: reads its gradient through a dtfm.grad_sync over the group, which
// COM: copies the update's stage and layer. Per link, 2 * transfer(shard)
// COM: with shard = bytes / dp and transfer = latency + 8 * shard / bw.
// COM: w: 48 B, shard 24: 2 * (1e-3 + 8*24/1e10) = 0.0020000384 s.
// COM: b: 12 B, shard 6: 2 * (1e-3 + 8*6/1e10) = 0.0020000096 s.
// COM: (printed as the nearest doubles)
// COM: One bucket (60 B < 25 MiB, shard 30): 2 * (1e-3 + 8*30/1e10) =
// COM: 0.002000048 s on both; the gradients are inputs, not computed by the
// COM: stage's backward, which does no work: the bucket is ready at its end. With two devices the ring (2(n-1) * link/2) equals the
// COM: parameter server, and auto keeps the parameter server.
// CHECK-LABEL: func.func @pair
// CHECK: %[[DW:.*]] = dtfm.input "dw"
// CHECK: %[[DB:.*]] = dtfm.input "db"
// CHECK-NEXT: %[[SW:.*]] = dtfm.grad_sync %[[DW]] {algorithm = "ps", bytes = 48 : i64, dtfm.bucket = 0 : i64, dtfm.bucket_ready = 1.000000e+00 : f64, dtfm.bucket_seconds = 0.0020000479999999999 : f64, dtfm.layer = "l0", dtfm.stage = 0 : i64, group = ["a", "b"], seconds = 0.0020000384000000001 : f64} : (tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: dtfm.adamw_update %{{.*}}, %[[SW]] {dtfm.layer = "l0", dtfm.stage = 0 : i64
// CHECK-NEXT: %[[SB:.*]] = dtfm.grad_sync %[[DB]] {algorithm = "ps", bytes = 12 : i64, dtfm.bucket = 0 : i64, dtfm.bucket_ready = 1.000000e+00 : f64, dtfm.bucket_seconds = 0.0020000479999999999 : f64, dtfm.layer = "l1", dtfm.stage = 0 : i64, group = ["a", "b"], seconds = 0.0020000095999999998 : f64} : (tensor<3xf32>) -> tensor<3xf32>
// CHECK-NEXT: dtfm.sgd_update %{{.*}}, %[[SB]]
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "pair", algorithm = "genetic", seed = 0, dp = 2, pp = 1, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a", "b"]]>, dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @pair() {
    %w = dtfm.param "w" init(zeros) {dtfm.stage = 0 : i64} : tensor<4x3xf32>
    %b = dtfm.param "b" init(zeros) {dtfm.stage = 0 : i64} : tensor<3xf32>
    %dw = dtfm.input "dw" {dtfm.stage = 0 : i64} : tensor<4x3xf32>
    %db = dtfm.input "db" {dtfm.stage = 0 : i64} : tensor<3xf32>
    %uw = dtfm.adamw_update %w, %dw {dtfm.layer = "l0", dtfm.stage = 0 : i64, lr = 1.000000e-03 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    %ub = dtfm.sgd_update %b, %db {dtfm.layer = "l1", dtfm.stage = 0 : i64, lr = 1.000000e-01 : f64, momentum = 0.0 : f64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    return {dtfm.stage = 0 : i64}
  }
}

// -----

// COM: Groups of one device (dp = 1, two stages) need no sync.
// CHECK-LABEL: func.func @no_dp
// CHECK-NOT: dtfm.grad_sync
// CHECK: return
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "pair", algorithm = "genetic", seed = 0, dp = 1, pp = 2, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a"], ["b"]]>, dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @no_dp() {
    %w = dtfm.param "w" init(zeros) {dtfm.stage = 1 : i64} : tensor<4x3xf32>
    %dw = dtfm.input "dw" {dtfm.stage = 1 : i64} : tensor<4x3xf32>
    %uw = dtfm.adamw_update %w, %dw {dtfm.stage = 1 : i64, lr = 1.000000e-03 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    return {dtfm.stage = 1 : i64}
  }
}

// -----

// COM: Four devices in a ring of fast links (a-b-c-d-a: 0.1 ms, 10 Gbps)
// COM: with slow diagonals (a-c, b-d: 10 ms, 1 Gbps). w: 48 B, dp = 4,
// COM: shard 12 B. Fast link: 2 * (1e-4 + 8*12/1e10) = 2.000192e-4 s; slow:
// COM: 2 * (1e-2 + 8*12/1e9) = 0.020000192 s.
// COM: Ring: 2 (n-1) * slowest link / 2 = 3 * 2.000192e-4 = 6.000576e-4 s.
// COM: Parameter server: worst device's sum = 2 fast + 1 slow = 0.0204002304 s.
// COM: Auto picks the ring; sync=ps forces the parameter server.
// CHECK-LABEL: func.func @ring
// CHECK: dtfm.grad_sync %{{.*}} {algorithm = "ring", bytes = 48 : i64, dtfm.bucket = 0 : i64, dtfm.bucket_ready = 1.000000e+00 : f64, dtfm.bucket_seconds = 6.0005759999999997E-4 : f64, dtfm.stage = 0 : i64, group = ["a", "b", "c", "d"], seconds = 6.0005759999999997E-4 : f64}
// PS-LABEL: func.func @ring
// PS: dtfm.grad_sync %{{.*}} {algorithm = "ps", bytes = 48 : i64, dtfm.bucket = 0 : i64, dtfm.bucket_ready = 1.000000e+00 : f64, dtfm.bucket_seconds = 0.0204002304 : f64, dtfm.stage = 0 : i64, group = ["a", "b", "c", "d"], seconds = 0.0204002304 : f64}
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "ring", algorithm = "genetic", seed = 0, dp = 4, pp = 1, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a", "b", "c", "d"]]>, dtfm.cluster = #dtfm.cluster<name = "ring", source = "ring.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "c", region = "C", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "d", region = "D", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 0.1, 10.0, 0.1, 0.1, 0.0, 0.1, 10.0, 10.0, 0.1, 0.0, 0.1, 0.1, 10.0, 0.1, 0.0], bandwidth_gbps = [0.0, 10.0, 1.0, 10.0, 10.0, 0.0, 10.0, 1.0, 1.0, 10.0, 0.0, 10.0, 10.0, 1.0, 10.0, 0.0]>} {
  func.func @ring() {
    %w = dtfm.param "w" init(zeros) {dtfm.stage = 0 : i64} : tensor<4x3xf32>
    %dw = dtfm.input "dw" {dtfm.stage = 0 : i64} : tensor<4x3xf32>
    %uw = dtfm.adamw_update %w, %dw {dtfm.stage = 0 : i64, lr = 1.000000e-03 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    return {dtfm.stage = 0 : i64}
  }
}

// -----

// COM: Two stages of two devices each: each stage's updates sync over its
// COM: own group; both groups' links are fast: 2 * (1e-4 + 8*24/1e10) =
// COM: 2.000384e-4 s.
// CHECK-LABEL: func.func @two_stages
// CHECK: dtfm.grad_sync {{.*}}{algorithm = "ps", bytes = 48 : i64, dtfm.bucket = 0 : i64, dtfm.bucket_ready = 1.000000e+00 : f64, dtfm.bucket_seconds = 2.0003840000000001E-4 : f64, dtfm.stage = 0 : i64, group = ["a", "b"], seconds = 2.0003840000000001E-4 : f64}
// CHECK: dtfm.grad_sync {{.*}}{algorithm = "ps", bytes = 48 : i64, dtfm.bucket = 0 : i64, dtfm.bucket_ready = 1.000000e+00 : f64, dtfm.bucket_seconds = 2.0003840000000001E-4 : f64, dtfm.stage = 1 : i64, group = ["c", "d"], seconds = 2.0003840000000001E-4 : f64}
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "ring", algorithm = "genetic", seed = 0, dp = 2, pp = 2, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a", "b"], ["c", "d"]]>, dtfm.cluster = #dtfm.cluster<name = "ring", source = "ring.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "c", region = "C", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "d", region = "D", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 0.1, 10.0, 0.1, 0.1, 0.0, 0.1, 10.0, 10.0, 0.1, 0.0, 0.1, 0.1, 10.0, 0.1, 0.0], bandwidth_gbps = [0.0, 10.0, 1.0, 10.0, 10.0, 0.0, 10.0, 1.0, 1.0, 10.0, 0.0, 10.0, 10.0, 1.0, 10.0, 0.0]>} {
  func.func @two_stages() {
    %w = dtfm.param "w" init(zeros) {dtfm.stage = 0 : i64} : tensor<4x3xf32>
    %dw = dtfm.input "dw" {dtfm.stage = 0 : i64} : tensor<4x3xf32>
    %uw = dtfm.adamw_update %w, %dw {dtfm.stage = 0 : i64, lr = 1.000000e-03 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    %v = dtfm.param "v" init(zeros) {dtfm.stage = 1 : i64} : tensor<4x3xf32>
    %dv = dtfm.input "dv" {dtfm.stage = 1 : i64} : tensor<4x3xf32>
    %uv = dtfm.adamw_update %v, %dv {dtfm.stage = 1 : i64, lr = 1.000000e-03 : f64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    return {dtfm.stage = 1 : i64}
  }
}

// -----

// COM: Buckets follow the order the backward completes the gradients, not
// COM: the order of the updates. Backward FLOPs of the stage, in IR order:
// COM: g1 = relu(4) 4, g2 = relu(12) 12 (16 done), g3 = relu(4) 4 (20
// COM: done): g1 is complete at 4/20 = 0.2, g2 at 0.8, g3 at 1.
// COM: 64-byte buckets: g1 (16 B) + g2 (48 B) = 64 fill bucket 0 (ready at
// COM: 0.8); g3 (16 B) goes to bucket 1 (ready at 1). Seconds on the pair
// COM: (1 ms, 10 Gbps): bucket 0, shard 32 B: 2 * (1e-3 + 8*32/1e10) =
// COM: 0.0020000512; bucket 1, shard 8 B: 2 * (1e-3 + 8*8/1e10) =
// COM: 0.0020000128. The default 25 MiB cap (and bucket-mb=0) keeps one
// COM: 80-byte bucket: 2 * (1e-3 + 8*40/1e10) = 0.002000064.
// SMALL-LABEL: func.func @buckets
// SMALL: dtfm.grad_sync %[[G3:.*]] {{{.*}}dtfm.bucket = 1 : i64, dtfm.bucket_ready = 1.000000e+00 : f64, dtfm.bucket_seconds = 0.0020000128000000001 : f64
// SMALL-NEXT: dtfm.sgd_update %{{.*}}, %{{.*}} {{{.*}}dtfm.layer = "l3"
// SMALL: dtfm.grad_sync %[[G1:.*]] {{{.*}}dtfm.bucket = 0 : i64, dtfm.bucket_ready = 8.000000e-01 : f64, dtfm.bucket_seconds = 0.0020000512000000002 : f64
// SMALL-NEXT: dtfm.sgd_update %{{.*}}, %{{.*}} {{{.*}}dtfm.layer = "l1"
// SMALL: dtfm.grad_sync %[[G2:.*]] {{{.*}}dtfm.bucket = 0 : i64, dtfm.bucket_ready = 8.000000e-01 : f64, dtfm.bucket_seconds = 0.0020000512000000002 : f64
// SMALL-NEXT: dtfm.sgd_update %{{.*}}, %{{.*}} {{{.*}}dtfm.layer = "l2"
// CHECK-LABEL: func.func @buckets
// CHECK-COUNT-3: dtfm.bucket = 0 : i64, dtfm.bucket_ready = 1.000000e+00 : f64, dtfm.bucket_seconds = 0.0020000640000000002 : f64
// ONE-LABEL: func.func @buckets
// ONE-COUNT-3: dtfm.bucket = 0 : i64, dtfm.bucket_ready = 1.000000e+00 : f64, dtfm.bucket_seconds = 0.0020000640000000002 : f64
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "pair", algorithm = "genetic", seed = 0, dp = 2, pp = 1, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a", "b"]]>, dtfm.cluster = #dtfm.cluster<name = "pair", source = "pair.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @buckets() {
    %w1 = dtfm.param "w1" init(zeros) {dtfm.stage = 0 : i64} : tensor<4xf32>
    %w2 = dtfm.param "w2" init(zeros) {dtfm.stage = 0 : i64} : tensor<12xf32>
    %w3 = dtfm.param "w3" init(zeros) {dtfm.stage = 0 : i64} : tensor<4xf32>
    %x1 = dtfm.input "x1" {dtfm.stage = 0 : i64} : tensor<4xf32>
    %x2 = dtfm.input "x2" {dtfm.stage = 0 : i64} : tensor<12xf32>
    %g1 = dtfm.relu %x1 {dtfm.stage = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %g2 = dtfm.relu %x2 {dtfm.stage = 0 : i64} : (tensor<12xf32>) -> tensor<12xf32>
    %g3 = dtfm.relu %g1 {dtfm.stage = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    %u3 = dtfm.sgd_update %w3, %g3 {dtfm.layer = "l3", dtfm.stage = 0 : i64, lr = 1.000000e-01 : f64, momentum = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %u1 = dtfm.sgd_update %w1, %g1 {dtfm.layer = "l1", dtfm.stage = 0 : i64, lr = 1.000000e-01 : f64, momentum = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %u2 = dtfm.sgd_update %w2, %g2 {dtfm.layer = "l2", dtfm.stage = 0 : i64, lr = 1.000000e-01 : f64, momentum = 0.0 : f64} : (tensor<12xf32>, tensor<12xf32>) -> tensor<12xf32>
    return {dtfm.stage = 0 : i64}
  }
}

// -----

// COM: bucket-mb=auto (the default) picks the cap that leaves the least
// COM: all-reduce after the last backward. Three 1 MiB gradients complete
// COM: at 1/3, 2/3 and 1 of a backward of 786432 FLOPs at 1e6 FLOP/s
// COM: (0.786 s); the pair's link (1 ms, 10 Gbps) all-reduces 1 MiB in
// COM: 2 * (1e-3 + 8*524288/1e10) = 0.0028388608 s, 2 MiB in 0.0036777216 s,
// COM: 3 MiB in 0.0045165824 s. One bucket leaves 0.0045 s after the
// COM: backward; 1 MiB and 2 MiB caps both leave only the last gradient's
// COM: 0.0028 s, and the tie goes to fewer buckets: 2 MiB.
// CHECK-LABEL: func.func @auto
// CHECK: dtfm.grad_sync {{.*}}dtfm.bucket = 0 : i64, dtfm.bucket_ready = 0.66666666666666663 : f64, dtfm.bucket_seconds = 0.0036777216000000003 : f64, dtfm.layer = "l1"
// CHECK: dtfm.grad_sync {{.*}}dtfm.bucket = 0 : i64, dtfm.bucket_ready = 0.66666666666666663 : f64, dtfm.bucket_seconds = 0.0036777216000000003 : f64, dtfm.layer = "l2"
// CHECK: dtfm.grad_sync {{.*}}dtfm.bucket = 1 : i64, dtfm.bucket_ready = 1.000000e+00 : f64, dtfm.bucket_seconds = 0.0028388608000000002 : f64, dtfm.layer = "l3"
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "slow", algorithm = "genetic", seed = 0, dp = 2, pp = 1, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["a", "b"]]>, dtfm.cluster = #dtfm.cluster<name = "slow", source = "slow.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+06, efficiency = 1.0, memory_bytes = 1.0e+09>, <name = "b", region = "B", peak_flops = 1.0e+06, efficiency = 1.0, memory_bytes = 1.0e+09>], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>} {
  func.func @auto() {
    %w1 = dtfm.param "w1" init(zeros) {dtfm.stage = 0 : i64} : tensor<262144xf32>
    %w2 = dtfm.param "w2" init(zeros) {dtfm.stage = 0 : i64} : tensor<262144xf32>
    %w3 = dtfm.param "w3" init(zeros) {dtfm.stage = 0 : i64} : tensor<262144xf32>
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<262144xf32>
    %g1 = dtfm.relu %x {dtfm.stage = 0 : i64} : (tensor<262144xf32>) -> tensor<262144xf32>
    %g2 = dtfm.relu %g1 {dtfm.stage = 0 : i64} : (tensor<262144xf32>) -> tensor<262144xf32>
    %g3 = dtfm.relu %g2 {dtfm.stage = 0 : i64} : (tensor<262144xf32>) -> tensor<262144xf32>
    %u1 = dtfm.sgd_update %w1, %g1 {dtfm.layer = "l1", dtfm.stage = 0 : i64, lr = 1.000000e-01 : f64, momentum = 0.0 : f64} : (tensor<262144xf32>, tensor<262144xf32>) -> tensor<262144xf32>
    %u2 = dtfm.sgd_update %w2, %g2 {dtfm.layer = "l2", dtfm.stage = 0 : i64, lr = 1.000000e-01 : f64, momentum = 0.0 : f64} : (tensor<262144xf32>, tensor<262144xf32>) -> tensor<262144xf32>
    %u3 = dtfm.sgd_update %w3, %g3 {dtfm.layer = "l3", dtfm.stage = 0 : i64, lr = 1.000000e-01 : f64, momentum = 0.0 : f64} : (tensor<262144xf32>, tensor<262144xf32>) -> tensor<262144xf32>
    return {dtfm.stage = 0 : i64}
  }
}
