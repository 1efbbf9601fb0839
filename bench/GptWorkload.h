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

struct Workload {
  std::vector<planner::ChainBlock> blocks; ///< one micro-batch
  std::vector<planner::TiedParameter> tied; ///< the token embedding and head
  double boundaryBytes = 0;
  double parameterBytes = 0;
  /// What the plan's syncs carry: f16 gradients of f16 parameters.
  double gradientBytesPerParameterByte = 1;
  int64_t microBatchSize = 1;

  /// The hetero model's problem for this workload.
  planner::HeteroProblem problem(const planner::Cluster &cluster, int dp,
                                 int pp, int microBatches) const {
    planner::HeteroProblem p;
    p.cluster = &cluster;
    p.blocks = blocks;
    p.tied = tied;
    p.boundaryBytes = boundaryBytes;
    p.gradientBytesPerParameterByte = gradientBytesPerParameterByte;
    p.dataParallel = dp;
    p.pipelineParallel = pp;
    p.stageOptions.microBatches = microBatches;
    return p;
  }
};

/// GPT3-1.3B's blocks (embedding, 24 layers, head) from the dtfm importer.
inline Workload gptWorkload() {
  mlir::MLIRContext context;
  mlir::dtfm::GptConfig config = *mlir::dtfm::getGptPreset("gpt3-1.3b");
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::dtfm::buildGptModule(&context, config);
  mlir::dtfm::CostAnalysis costs(module->getOperation());
  mlir::dtfm::PlannerChain chain = *mlir::dtfm::buildPlannerChain(costs);
  Workload w;
  w.blocks = std::move(chain.blocks);
  w.tied = std::move(chain.tied);
  w.gradientBytesPerParameterByte = chain.gradientBytesPerParameterByte;
  for (const planner::ChainBlock &block : w.blocks)
    w.parameterBytes += block.parameterBytes;
  // The residual stream [B, s, h] in f16 crosses every stage boundary.
  w.boundaryBytes = 2.0 * config.microBatch * config.seqLen * config.hidden;
  w.microBatchSize = config.microBatch;
  return w;
}

/// The predicted iteration time of `algorithm`'s layout (DT-FM's cost
/// model: equal layers per stage, in its pipeline order), scored by `model`
/// without re-balancing the stages.
inline double equalLayerSeconds(const planner::HeteroModel &model,
                                const Workload &workload,
                                planner::SearchAlgorithm algorithm,
                                const planner::SearchOptions &options,
                                int microBatches) {
  const planner::HeteroProblem &problem = model.getProblem();
  int dp = options.dataParallel, pp = options.pipelineParallel;
  // DT-FM's c_DP counts fp32 gradients (4 bytes per f16 parameter's 2), as
  // its reference scheduler and --dtfm-assign-devices do.
  planner::CostModel dtfm(*problem.cluster,
                          {workload.parameterBytes * 2.0 / pp,
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
