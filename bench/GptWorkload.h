//===- GptWorkload.h - GPT3-1.3B as a chain of blocks for the benches ----===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_BENCH_GPTWORKLOAD_H
#define DTFM_BENCH_GPTWORKLOAD_H

#include "dtfm/Analysis/CostAnalysis.h"
#include "dtfm/Planner/Hetero.h"
#include "dtfm/Planner/StagePartition.h"
#include "dtfm/Target/Gpt/ImportGpt.h"

#include "mlir/IR/MLIRContext.h"

#include <vector>

namespace dtfm::bench {

/// GPT3-1.3B (embedding, 24 layers, head) from the dtfm importer, measured
/// by the same builder as the planning passes; its boundary is the residual
/// stream [B, s, h] in f16 that crosses every stage boundary.
inline planner::Workload gptWorkload() {
  mlir::MLIRContext context;
  mlir::dtfm::GptConfig config = *mlir::dtfm::getGptPreset("gpt3-1.3b");
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::dtfm::buildGptModule(&context, config);
  mlir::dtfm::CostAnalysis costs(module->getOperation());
  planner::Workload w = *mlir::dtfm::buildWorkload(costs);
  w.boundaryBytes = 2.0 * config.microBatch * config.seqLen * config.hidden;
  w.microBatchSize = config.microBatch;
  return w;
}

/// The hetero model's problem for `workload` at D_DP x D_PP with
/// `microBatches` per pipeline (the plan's defaults otherwise).
inline planner::HeteroProblem heteroProblem(const planner::Workload &workload,
                                            const planner::Cluster &cluster,
                                            int dp, int pp, int microBatches) {
  planner::HeteroProblem p;
  p.cluster = &cluster;
  p.workload = workload;
  p.dataParallel = dp;
  p.pipelineParallel = pp;
  p.training.stages.microBatches = microBatches;
  // DT-FM's own problem: its fp16 weights, gradients and Adam moments (4
  // bytes of state per parameter byte), not dtfm's f32 runtime (the
  // default, which --dtfm-plan plans for): the algorithms are compared on
  // the memory the paper gives them.
  p.training.stages.stateBytesPerParameterByte = 4;
  return p;
}

/// The predicted iteration time of `algorithm`'s layout (DT-FM's cost
/// model: equal layers per stage, in its pipeline order), scored by `model`
/// without re-balancing the stages.
inline double equalLayerSeconds(const planner::HeteroModel &model,
                                const planner::Workload &workload,
                                planner::SearchAlgorithm algorithm,
                                const planner::SearchOptions &options,
                                int microBatches) {
  const planner::HeteroProblem &problem = model.getProblem();
  int dp = options.dataParallel, pp = options.pipelineParallel;
  // DT-FM's c_DP counts fp32 gradients (4 bytes per f16 parameter's 2), as
  // its reference scheduler and --dtfm-assign-devices do.
  planner::CostModel dtfm(*problem.cluster,
                          {workload.parameterBytes() * 2.0 / pp,
                           workload.boundaryBytes * microBatches},
                          dp);
  planner::SearchResult r = planner::searchLayout(dtfm, algorithm, options);
  planner::Partition ordered;
  for (int g : r.cost.order)
    ordered.push_back(r.partition[g]);
  return model.evaluate(ordered, /*rebalance=*/false).iterationSeconds();
}

} // namespace dtfm::bench

#endif // DTFM_BENCH_GPTWORKLOAD_H
