//===- AssignmentTest.cpp - Devices to groups and stages over shapes
//-------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Assignment.h"
#include "PlannerTestUtils.h"
#include "dtfm/Planner/Genetic.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace dtfm::planner;

namespace {

/// A model of `layers` equal blocks: 1e8 trainable parameters, 1e6 bytes at
/// every layer boundary.
Workload layeredWorkload(int layers, double parameterBytes = 2e6) {
  Workload w;
  w.blocks.assign(layers, ChainBlock{1e12, parameterBytes, 1e6});
  w.boundaryBytes = 1e6;
  w.trainableParameters = 100000000;
  w.layers = layers;
  return w;
}

/// The same devices, each stage's in any order.
std::vector<std::vector<int>> sorted(std::vector<std::vector<int>> stages) {
  for (std::vector<int> &stage : stages)
    std::sort(stage.begin(), stage.end());
  return stages;
}

} // namespace

TEST(Assignment, KeepsTheCheapestShapeOfDtfmCost) {
  std::mt19937_64 rng(3);
  Cluster cluster = testutil::randomCluster(8, rng);
  Workload workload = layeredWorkload(8);
  AssignmentOptions options;
  options.algorithm = SearchAlgorithm::KernighanLin;
  options.microBatches = 4;
  options.seed = 5;
  AssignmentResult result;
  std::string error;
  ASSERT_TRUE(planAssignment(cluster, workload, options, result, error))
      << error;
  // Every factorisation of 8, each searched on its own volumes.
  EXPECT_EQ(result.shapesTried, 4u);
  double best = std::numeric_limits<double>::infinity();
  int bestPp = 0;
  for (int pp : {1, 2, 4, 8}) {
    CommVolume volume{4.0 * 1e8 / pp, 1e6 * 4};
    CostModel model(cluster, volume, 8 / pp);
    SearchOptions search;
    search.dataParallel = 8 / pp;
    search.pipelineParallel = pp;
    search.seed = 5;
    double cost =
        searchLayout(model, SearchAlgorithm::KernighanLin, search).cost.total();
    if (cost < best) {
      best = cost;
      bestPp = pp;
    }
  }
  EXPECT_EQ(result.pipelineParallel, bestPp);
  EXPECT_EQ(result.dataParallel, 8 / bestPp);
  EXPECT_DOUBLE_EQ(result.search.cost.total(), best);
  EXPECT_DOUBLE_EQ(result.volume.dataParallelBytes, 4e8 / bestPp);
  EXPECT_DOUBLE_EQ(result.volume.pipelineBytes, 4e6);
  EXPECT_FALSE(result.hetero);
}

TEST(Assignment, ShapesAskedForAndTheLayerLimit) {
  std::mt19937_64 rng(4);
  Cluster cluster = testutil::randomCluster(8, rng);
  cluster.name = "eight";
  AssignmentOptions options;
  options.algorithm = SearchAlgorithm::RankOrder;
  AssignmentResult result;
  std::string error;
  // Two layers: at most two stages.
  ASSERT_TRUE(
      planAssignment(cluster, layeredWorkload(2), options, result, error));
  EXPECT_EQ(result.shapesTried, 2u);
  EXPECT_LE(result.pipelineParallel, 2);
  // D_DP given: D_PP follows.
  options.dataParallel = 2;
  ASSERT_TRUE(
      planAssignment(cluster, layeredWorkload(8), options, result, error));
  EXPECT_EQ(result.shapesTried, 1u);
  EXPECT_EQ(result.pipelineParallel, 4);
  // Volumes given directly win over the workload's.
  options.dataParallelBytes = 123;
  options.pipelineBytes = 456;
  ASSERT_TRUE(
      planAssignment(cluster, layeredWorkload(8), options, result, error));
  EXPECT_EQ(result.volume.dataParallelBytes, 123);
  EXPECT_EQ(result.volume.pipelineBytes, 456);
  // A shape the cluster does not have.
  options.dataParallel = 3;
  EXPECT_FALSE(
      planAssignment(cluster, layeredWorkload(8), options, result, error));
  EXPECT_EQ(error, "cluster 'eight' has 8 devices, which is not dp 3 x pp 0");
  // The same check alone, before any workload is built.
  error.clear();
  EXPECT_FALSE(checkAssignmentShape(cluster, options, error));
  EXPECT_EQ(error, "cluster 'eight' has 8 devices, which is not dp 3 x pp 0");
  // A chosen shape is what counts; the message names the options.
  options.chosen = ChosenShape{4, 2, 1, {}};
  EXPECT_TRUE(checkAssignmentShape(cluster, options, error));
  options.dataParallel = 0;
  options.chosen = ChosenShape{3, 2, 1, {}};
  EXPECT_FALSE(checkAssignmentShape(cluster, options, error));
  EXPECT_EQ(error, "cluster 'eight' has 8 devices, which is not dp 0 x pp 0");
}

TEST(Assignment, StagesInPipelineOrderFollowTheMatchings) {
  std::mt19937_64 rng(8);
  Cluster cluster = testutil::randomCluster(8, rng);
  AssignmentOptions options;
  options.algorithm = SearchAlgorithm::Genetic;
  options.dataParallel = 2;
  options.pipelineParallel = 4;
  AssignmentResult result;
  std::string error;
  ASSERT_TRUE(
      planAssignment(cluster, layeredWorkload(8), options, result, error));
  const Partition &partition = result.search.partition;
  const LayoutCost &cost = result.search.cost;
  ASSERT_EQ(result.stages.size(), 4u);
  // Stage s holds the devices of group order[s]; stage 0 keeps its order.
  EXPECT_EQ(result.stages[0], partition[cost.order[0]]);
  for (size_t s = 0; s < 4; ++s) {
    std::vector<int> group = partition[cost.order[s]];
    std::sort(group.begin(), group.end());
    EXPECT_EQ(sorted(result.stages)[s], group);
  }
  // Pipeline i's neighbours are matched: member i of stage k + 1 is the
  // partner the matching gives member i of stage k.
  for (size_t k = 0; k + 1 < 4; ++k)
    for (size_t i = 0; i < 2; ++i) {
      const std::vector<int> &from = partition[cost.order[k]];
      size_t pos = std::find(from.begin(), from.end(), result.stages[k][i]) -
                   from.begin();
      EXPECT_EQ(result.stages[k + 1][i],
                partition[cost.order[k + 1]][cost.matchings[k][pos]]);
    }
  // The table's DATAP-COST per stage.
  CostModel model(cluster, result.volume, 2);
  ASSERT_EQ(result.stageDataParallelSeconds.size(), 4u);
  for (size_t s = 0; s < 4; ++s)
    EXPECT_DOUBLE_EQ(result.stageDataParallelSeconds[s],
                     model.groupDataParallelCost(result.stages[s]));
}

TEST(Assignment, SameSeedSamePlanAndProgressNamesTheShape) {
  std::mt19937_64 rng(9);
  Cluster cluster = testutil::randomCluster(8, rng);
  AssignmentOptions options;
  options.algorithm = SearchAlgorithm::Genetic;
  options.seed = 2;
  std::vector<std::pair<int, int>> reported;
  options.progress = [&](int dp, int pp, int, double) {
    reported.push_back({dp, pp});
  };
  AssignmentResult a, b;
  std::string error;
  ASSERT_TRUE(planAssignment(cluster, layeredWorkload(8), options, a, error));
  ASSERT_TRUE(planAssignment(cluster, layeredWorkload(8), options, b, error));
  EXPECT_EQ(a.stages, b.stages);
  EXPECT_EQ(a.search.cost.total(), b.search.cost.total());
  ASSERT_FALSE(reported.empty());
  for (auto [dp, pp] : reported)
    EXPECT_EQ(dp * pp, 8);
}

TEST(Assignment, HeteroScoresIterationTimeAndChecksMemory) {
  // Devices 0-3 four times faster.
  std::mt19937_64 rng(1);
  Cluster cluster = testutil::randomCluster(8, rng);
  for (int d = 0; d < 4; ++d)
    cluster.devices[d].peakFlops *= 4;
  AssignmentOptions options;
  options.hetero = true;
  options.dataParallel = 2;
  options.pipelineParallel = 4;
  options.microBatches = 8;
  AssignmentResult result;
  std::string error;
  Workload workload = layeredWorkload(24);
  ASSERT_TRUE(planAssignment(cluster, workload, options, result, error))
      << error;
  ASSERT_TRUE(result.hetero);
  EXPECT_TRUE(result.hetero->feasible);
  EXPECT_EQ(result.hetero->plan.bounds.size(), 5u);
  // The groups stay in stage order.
  EXPECT_EQ(sorted(result.stages), sorted(result.search.partition));
  // No worse than rank order (a seed, only ever improved), on the model of
  // this shape and micro-batch count.
  HeteroProblem problem;
  problem.cluster = &cluster;
  problem.workload = workload;
  problem.training.stages.microBatches = 8;
  problem.dataParallel = 2;
  problem.pipelineParallel = 4;
  HeteroModel model(problem);
  EXPECT_LE(result.hetero->iterationSeconds(),
            model.evaluate(rankOrderPartition(2, 4)).iterationSeconds());
  EXPECT_DOUBLE_EQ(result.hetero->iterationSeconds(),
                   model.evaluate(result.search.partition).iterationSeconds());

  // A chosen layout is adopted as it is.
  options.chosen = ChosenShape{2, 4, 8, {{6, 7}, {4, 5}, {2, 3}, {0, 1}}};
  options.dataParallel = options.pipelineParallel = 0;
  ASSERT_TRUE(
      planAssignment(cluster, layeredWorkload(24), options, result, error));
  EXPECT_EQ(sorted(result.stages), options.chosen->layout);
  EXPECT_EQ(result.search.evaluations, 0);

  // Nothing fits 1 kB devices.
  for (Device &device : cluster.devices)
    device.memoryBytes = 1e3;
  options.chosen.reset();
  EXPECT_FALSE(
      planAssignment(cluster, layeredWorkload(24), options, result, error));
  EXPECT_EQ(error, "no device layout fits the model in memory (algorithm "
                   "hetero tried 4 shapes)");
}
