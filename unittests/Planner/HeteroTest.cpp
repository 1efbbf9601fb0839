//===- HeteroTest.cpp - Mixed-device planning ------------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Hetero.h"

#include <gtest/gtest.h>

using namespace dtfm::planner;

namespace {

/// n devices on one fast LAN; the first `fast` are `ratio` x faster.
Cluster mixedCluster(int n, int fast, double ratio, double memory = 1e12) {
  Cluster c;
  c.name = "mixed";
  c.delayMs = SquareMatrix(n, 0.1);
  c.bandwidthGbps = SquareMatrix(n, 100);
  for (int i = 0; i < n; ++i)
    c.devices.push_back({"gpu" + std::to_string(i), "lan",
                         i < fast ? ratio * 1e12 : 1e12, 1, memory});
  return c;
}

HeteroProblem problemFor(const Cluster &c, int dp, int pp, int layers) {
  HeteroProblem p;
  p.cluster = &c;
  p.blocks.assign(layers, ChainBlock{1e12, 1e6, 1e6});
  p.boundaryBytes = 1e6;
  p.dataParallel = dp;
  p.pipelineParallel = pp;
  p.stageOptions.microBatches = 8;
  return p;
}

TEST(Hetero, EvenSplitAndRebalancedSplitOnAMixedPipeline) {
  Cluster c = mixedCluster(8, 2, 4.0);
  HeteroModel model(problemFor(c, 1, 8, 28));
  Partition rank;
  for (int d = 0; d < 8; ++d)
    rank.push_back({d});
  HeteroCost even = model.evaluate(rank, /*rebalance=*/false);
  HeteroCost rebalanced = model.evaluate(rank);
  ASSERT_TRUE(even.feasible && rebalanced.feasible);
  EXPECT_EQ(even.plan.bounds, evenBounds(28, 8));
  // Even: slow stages take 4 layers (4 s per micro-batch); rebalanced: 8 on
  // the fast devices, 2 on the slow ones (2 s).
  EXPECT_DOUBLE_EQ(even.plan.bottleneckSeconds, 4.0);
  EXPECT_DOUBLE_EQ(rebalanced.plan.bottleneckSeconds, 2.0);
  EXPECT_GE(even.iterationSeconds() / rebalanced.iterationSeconds(), 1.3);
}

TEST(Hetero, SearchBeatsEqualLayersOnMixedSpeedsAndIsDeterministic) {
  Cluster c = mixedCluster(8, 4, 4.0);
  HeteroModel model(problemFor(c, 2, 4, 24));
  SearchOptions options;
  options.dataParallel = 2;
  options.pipelineParallel = 4;
  options.seed = 3;
  Partition a = searchHetero(model, options);
  EXPECT_EQ(a, searchHetero(model, options));
  HeteroCost cost = model.evaluate(a);
  ASSERT_TRUE(cost.feasible);
  // A data-parallel group runs at its slowest member: the search pairs the
  // fast devices together and gives their stages more layers.
  Partition rank{{0, 1}, {2, 3}, {4, 5}, {6, 7}};
  Partition mixedPairs{{0, 4}, {1, 5}, {2, 6}, {3, 7}};
  double bestEqual = std::min(model.evaluate(rank, false).iterationSeconds(),
                              model.evaluate(mixedPairs, false)
                                  .iterationSeconds());
  EXPECT_GE(bestEqual / cost.iterationSeconds(), 1.3);
  for (const std::vector<int> &group : a)
    EXPECT_EQ(group[0] < 4, group[1] < 4) << "mixed speeds in one group";
}

TEST(Hetero, InfeasibleMemoryIsReported) {
  Cluster c = mixedCluster(2, 0, 1.0, /*memory=*/1e3);
  HeteroModel model(problemFor(c, 1, 2, 4));
  HeteroCost cost = model.evaluate({{0}, {1}});
  EXPECT_FALSE(cost.feasible);
  EXPECT_NE(cost.error.find("does not fit"), std::string::npos) << cost.error;
  EXPECT_EQ(cost.iterationSeconds(), std::numeric_limits<double>::infinity());
}

} // namespace
