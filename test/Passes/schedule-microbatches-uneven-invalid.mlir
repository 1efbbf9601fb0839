// COM: Uneven pipeline counts must keep the global batch: 3 + 2 is not
// COM: dp 2 x 2 micro-batches.
// RUN: not dtfm-opt %s --dtfm-schedule-microbatches=micro-batches=2 2>&1 | FileCheck %s --check-prefix=SHARES
// SHARES: error: dtfm-schedule-microbatches: dtfm.assignment's pipeline_micro_batches sum to 5, not dp x micro-batches = 4
module attributes {dtfm.assignment = #dtfm.assignment<cluster = "mixed", algorithm = "hetero", seed = 0, dp = 2, pp = 1, dp_bytes = 0.0, pp_bytes = 0.0, data_parallel_cost_s = 0.0, pipeline_cost_s = 0.0, total_cost_s = 0.0, stages = [["fast", "slow"]], iteration_s = 1.0, stage_bounds = [0, 1], pipeline_micro_batches = [3, 2]>} {
  func.func @shares() -> tensor<2x3xf32> {
    %x = dtfm.input "x" {dtfm.stage = 0 : i64} : tensor<2x3xf32>
    %r = dtfm.relu %x {dtfm.stage = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return {dtfm.stage = 0 : i64} %r : tensor<2x3xf32>
  }
}
