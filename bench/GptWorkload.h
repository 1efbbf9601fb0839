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
  double boundaryBytes = 0;
  double parameterBytes = 0;
  double gradientBytesPerParameterByte = 2; // f16 parameters, fp32 gradients
  int64_t microBatchSize = 1;
};

/// GPT3-1.3B's blocks (embedding, 24 layers, head) from the dtfm importer.
inline Workload gptWorkload() {
  mlir::MLIRContext context;
  mlir::dtfm::GptConfig config = *mlir::dtfm::getGptPreset("gpt3-1.3b");
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::dtfm::buildGptModule(&context, config);
  mlir::dtfm::CostAnalysis costs(module->getOperation());
  Workload w;
  for (const mlir::dtfm::LayerBlock &block :
       *mlir::dtfm::buildLayerChain(costs)) {
    w.blocks.push_back(
        {block.flops, block.parameterBytes, block.activationBytes});
    w.parameterBytes += block.parameterBytes;
  }
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
  planner::CostModel dtfm(*problem.cluster,
                          {workload.parameterBytes *
                               workload.gradientBytesPerParameterByte / pp,
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
