//===- Assignment.cpp - Devices to data-parallel groups and stages --------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Assignment.h"

#include <algorithm>
#include <chrono>

using namespace dtfm::planner;

std::vector<std::vector<int>>
dtfm::planner::stagesInPipelineOrder(const Partition &partition,
                                     const LayoutCost &cost) {
  std::vector<std::vector<int>> stages;
  std::vector<int> first = partition[cost.order[0]];
  stages.push_back(first);
  for (size_t k = 0; k < cost.matchings.size(); ++k) {
    const std::vector<int> &next = partition[cost.order[k + 1]];
    // matchings[k][i]: position in `next` of the partner of position i of
    // the previous stage in its original order. Carry the permutation.
    const std::vector<int> &previousOriginal = partition[cost.order[k]];
    std::vector<int> stage(next.size());
    for (size_t i = 0; i < stages.back().size(); ++i) {
      int device = stages.back()[i];
      size_t pos =
          std::find(previousOriginal.begin(), previousOriginal.end(), device) -
          previousOriginal.begin();
      stage[i] = next[cost.matchings[k][pos]];
    }
    stages.push_back(stage);
  }
  return stages;
}

namespace {

/// The best candidate so far.
struct Best {
  SearchResult result;
  CommVolume volume;
  int dp = 0, pp = 0;
  /// hetero: predicted iteration time (its objective).
  std::optional<HeteroCost> hetero;
  double score() const {
    return hetero ? hetero->iterationSeconds() : result.cost.total();
  }
};

/// D_DP x D_PP asked for (by the chosen shape, else the options), a zero
/// completed from the cluster's size where the other divides it; 0 x 0 when
/// any shape will do.
std::pair<int, int> askedShape(const Cluster &cluster,
                               const AssignmentOptions &options) {
  int n = static_cast<int>(cluster.size());
  int dp = options.dataParallel, pp = options.pipelineParallel;
  if (options.chosen) {
    dp = options.chosen->dataParallel;
    pp = options.chosen->pipelineParallel;
  }
  if (dp == 0 && pp == 0)
    return {0, 0};
  if (dp == 0 && n % pp == 0)
    dp = n / pp;
  if (pp == 0 && n % dp == 0)
    pp = n / dp;
  return {dp, pp};
}

/// The shapes D_DP x D_PP to try on the cluster's N devices: the one asked
/// for, or every factorisation with at most the model's layers as stages.
std::vector<std::pair<int, int>>
candidateShapes(const Cluster &cluster, const Workload &workload,
                const AssignmentOptions &options) {
  std::pair<int, int> asked = askedShape(cluster, options);
  if (asked != std::pair<int, int>{0, 0})
    return {asked};
  int n = static_cast<int>(cluster.size());
  int64_t maxStages = std::max<int64_t>(1, workload.layers);
  std::vector<std::pair<int, int>> shapes;
  for (int pp = 1; pp <= n; ++pp)
    if (n % pp == 0 && pp <= maxStages)
      shapes.push_back({n / pp, pp});
  return shapes;
}

} // namespace

bool dtfm::planner::checkAssignmentShape(const Cluster &cluster,
                                         const AssignmentOptions &options,
                                         std::string &error) {
  auto [dp, pp] = askedShape(cluster, options);
  if ((dp == 0 && pp == 0) || dp * pp == static_cast<int>(cluster.size()))
    return true;
  error = "cluster '" + cluster.name + "' has " +
          std::to_string(cluster.size()) + " devices, which is not dp " +
          std::to_string(options.dataParallel) + " x pp " +
          std::to_string(options.pipelineParallel);
  return false;
}

bool dtfm::planner::planAssignment(const Cluster &cluster,
                                   const Workload &workload,
                                   const AssignmentOptions &options,
                                   AssignmentResult &out, std::string &error) {
  if (!checkAssignmentShape(cluster, options, error))
    return false;
  std::vector<std::pair<int, int>> shapes =
      candidateShapes(cluster, workload, options);
  int microBatchCount =
      options.chosen ? options.chosen->microBatches : options.microBatches;
  const std::optional<Partition> chosenLayout =
      options.chosen ? std::optional<Partition>(options.chosen->layout)
                     : std::nullopt;
  std::optional<Best> best;

  // hetero: the model as a chain of blocks, re-balanced per candidate.
  HeteroProblem heteroProblem;
  if (options.hetero) {
    heteroProblem.workload = workload;
    heteroProblem.training = options.training;
    heteroProblem.cluster = &cluster;
    heteroProblem.workload.boundaryBytes = options.pipelineBytes > 0
                                               ? options.pipelineBytes
                                               : workload.boundaryBytes;
    heteroProblem.training.stages.microBatches = microBatchCount;
    if (options.chosen)
      heteroProblem.fixedBounds = options.chosen->bounds;
  }

  for (auto [dp, pp] : shapes) {
    CommVolume volume;
    volume.dataParallelBytes =
        options.dataParallelBytes > 0
            ? options.dataParallelBytes
            : 4.0 * static_cast<double>(workload.trainableParameters) / pp;
    volume.pipelineBytes = options.pipelineBytes > 0
                               ? options.pipelineBytes
                               : workload.boundaryBytes * microBatchCount;
    CostModel costModel(cluster, volume, dp);
    SearchOptions search;
    search.dataParallel = dp;
    search.pipelineParallel = pp;
    search.seed = options.seed;
    search.timeBudgetSeconds =
        options.budgetSeconds / static_cast<double>(shapes.size());
    if (options.progress)
      search.progress = [&options, dp = dp, pp = pp](int generation,
                                                     double cost) {
        options.progress(dp, pp, generation, cost);
      };
    if (options.hetero) {
      if (static_cast<size_t>(pp) > heteroProblem.workload.blocks.size())
        continue;
      HeteroProblem problem = heteroProblem;
      problem.dataParallel = dp;
      problem.pipelineParallel = pp;
      HeteroModel heteroModel(problem);
      SearchResult result;
      auto start = std::chrono::steady_clock::now();
      result.partition =
          chosenLayout ? *chosenLayout
                       : searchHetero(heteroModel, search, &result.evaluations);
      result.wallSeconds = std::chrono::duration<double>(
                               std::chrono::steady_clock::now() - start)
                               .count();
      HeteroCost cost = heteroModel.evaluate(result.partition);
      if (!cost.feasible)
        continue;
      // The groups are already in stage order: keep it, and match the
      // devices of neighbouring stages as DT-FM does.
      LayoutCost &layout = result.cost;
      LayoutCost dtfmCost = costModel.evaluate(result.partition);
      layout.dataParallel = dtfmCost.dataParallel;
      layout.pipeline = dtfmCost.pipeline;
      for (int s = 0; s < pp; ++s)
        layout.order.push_back(s);
      for (int s = 0; s + 1 < pp; ++s) {
        std::vector<int> match;
        costModel.groupPipelineWeight(result.partition[s],
                                      result.partition[s + 1], &match);
        layout.matchings.push_back(std::move(match));
      }
      Best candidate{std::move(result), volume, dp, pp, std::move(cost)};
      if (!best || candidate.score() < best->score())
        best = std::move(candidate);
      continue;
    }
    SearchResult result = searchLayout(costModel, options.algorithm, search);
    Best candidate{std::move(result), volume, dp, pp, std::nullopt};
    if (!best || candidate.score() < best->score())
      best = std::move(candidate);
  }
  if (!best) {
    error = "no device layout fits the model in memory (algorithm hetero "
            "tried " +
            std::to_string(shapes.size()) + " shapes)";
    return false;
  }
  out = AssignmentResult();
  out.dataParallel = best->dp;
  out.pipelineParallel = best->pp;
  out.volume = best->volume;
  out.stages = stagesInPipelineOrder(best->result.partition, best->result.cost);
  out.search = std::move(best->result);
  out.hetero = std::move(best->hetero);
  CostModel costModel(cluster, out.volume, out.dataParallel);
  for (const std::vector<int> &stage : out.stages)
    out.stageDataParallelSeconds.push_back(
        costModel.groupDataParallelCost(stage));
  out.shapesTried = shapes.size();
  return true;
}
