//===- SearchTest.cpp - Device assignment search --------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "PlannerTestUtils.h"
#include "dtfm/Planner/Search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

using namespace dtfm::planner;

namespace {

/// Minimum cost over every partition of the cluster into groups of `size`
/// (groups unordered): enumerated by always placing the lowest unplaced
/// device into a new group.
double exhaustiveOptimum(const CostModel &model, int n, int size) {
  double best = 1e300;
  Partition current;
  std::vector<bool> used(n, false);
  std::function<void()> recurse = [&]() {
    int first = std::find(used.begin(), used.end(), false) - used.begin();
    if (first == n) {
      best = std::min(best, model.totalCost(current));
      return;
    }
    std::vector<int> group{first};
    used[first] = true;
    std::function<void(int)> extend = [&](int from) {
      if (static_cast<int>(group.size()) == size) {
        current.push_back(group);
        recurse();
        current.pop_back();
        return;
      }
      for (int d = from; d < n; ++d) {
        if (used[d])
          continue;
        used[d] = true;
        group.push_back(d);
        extend(d + 1);
        group.pop_back();
        used[d] = false;
      }
    };
    extend(first + 1);
    used[first] = false;
  };
  recurse();
  return best;
}

struct Shape {
  int dDP, dPP;
};

class GeneticFindsOptimum : public ::testing::TestWithParam<Shape> {};

TEST_P(GeneticFindsOptimum, OnRandomEightDeviceClusters) {
  Shape shape = GetParam();
  std::mt19937_64 rng(11 + shape.dDP);
  for (int instance = 0; instance < 8; ++instance) {
    Cluster cluster = testutil::randomCluster(8, rng);
    CostModel model(cluster, {2e8, 5e7}, shape.dDP);
    double optimum = exhaustiveOptimum(model, 8, shape.dDP);
    for (uint64_t seed : {0, 1, 2, 3}) {
      SearchOptions options;
      options.dataParallel = shape.dDP;
      options.pipelineParallel = shape.dPP;
      options.seed = seed;
      SearchResult r = searchLayout(model, SearchAlgorithm::Genetic, options);
      EXPECT_NEAR(r.cost.total(), optimum, 1e-9)
          << "instance " << instance << " seed " << seed;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GeneticFindsOptimum,
                         ::testing::Values(Shape{2, 4}, Shape{4, 2}));

TEST(Search, EveryAlgorithmReturnsABalancedPartitionAndIsDeterministic) {
  std::mt19937_64 rng(5);
  Cluster cluster = testutil::randomCluster(12, rng);
  CostModel model(cluster, {1e9, 1e8}, 3);
  for (SearchAlgorithm algorithm : allSearchAlgorithms()) {
    SearchOptions options;
    options.dataParallel = 3;
    options.pipelineParallel = 4;
    options.seed = 9;
    SearchResult a = searchLayout(model, algorithm, options);
    SearchResult b = searchLayout(model, algorithm, options);
    EXPECT_EQ(a.partition, b.partition) << searchAlgorithmName(algorithm);
    ASSERT_EQ(a.partition.size(), 4u);
    std::vector<int> all;
    for (const std::vector<int> &g : a.partition) {
      EXPECT_EQ(g.size(), 3u);
      all.insert(all.end(), g.begin(), g.end());
    }
    std::sort(all.begin(), all.end());
    for (int d = 0; d < 12; ++d)
      EXPECT_EQ(all[d], d);
    EXPECT_NEAR(a.cost.total(), model.totalCost(a.partition), 1e-9);
    EXPECT_EQ(a.cost.order.size(), 4u);
    EXPECT_EQ(a.cost.matchings.size(), 3u);
  }
}

TEST(Search, OpFenceKeepsEachStageInsideOneCommunity) {
  // Two regions of four devices: 10 Gbps inside, 0.5 Gbps between.
  Cluster c;
  c.delayMs = SquareMatrix(8, 1);
  c.bandwidthGbps = SquareMatrix(8);
  for (int i = 0; i < 8; ++i) {
    c.devices.push_back({"d" + std::to_string(i), "r", 1, 1, 1});
    for (int j = 0; j < 8; ++j)
      c.bandwidthGbps(i, j) = (i % 2) == (j % 2) ? 10 : 0.5;
  }
  CostModel model(c, {1e8, 1e8}, 2);
  SearchOptions options;
  options.dataParallel = 2;
  options.pipelineParallel = 4;
  SearchResult r = searchLayout(model, SearchAlgorithm::OpFence, options);
  for (const std::vector<int> &group : r.partition)
    EXPECT_EQ(group[0] % 2, group[1] % 2);
  // The slow link is crossed once along the pipeline.
  int crossings = 0;
  for (size_t k = 0; k + 1 < r.cost.order.size(); ++k)
    crossings += r.partition[r.cost.order[k]][0] % 2 !=
                 r.partition[r.cost.order[k + 1]][0] % 2;
  EXPECT_EQ(crossings, 1);
}

TEST(Search, NamesRoundTrip) {
  for (SearchAlgorithm algorithm : allSearchAlgorithms())
    EXPECT_EQ(parseSearchAlgorithm(searchAlgorithmName(algorithm)), algorithm);
  EXPECT_FALSE(parseSearchAlgorithm("annealing"));
}

} // namespace
