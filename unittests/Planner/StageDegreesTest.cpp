//===- StageDegreesTest.cpp - A tensor-parallel degree per stage ----------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/StageDegrees.h"

#include <gtest/gtest.h>

#include <limits>
#include <set>

using namespace dtfm::planner;

namespace {

/// Nodes "slow" (4 devices), "mid" (2) and two single fast devices; links
/// of 1 us and 1 Tbit/s inside a node, 0.1 ms and 10 Gbit/s between.
Cluster nodesCluster() {
  Cluster c;
  c.name = "nodes";
  auto add = [&](const std::string &name, const std::string &node,
                 double peak, double memory) {
    Device d;
    d.name = name;
    d.region = "r";
    d.peakFlops = peak;
    d.memoryBytes = memory;
    d.node = node;
    c.devices.push_back(d);
  };
  add("f0", "f0", 3e12, 1e10);
  for (int i = 0; i < 4; ++i)
    add("s" + std::to_string(i), "slow", 1e12, 2e9);
  for (int i = 0; i < 2; ++i)
    add("m" + std::to_string(i), "mid", 2e12, 4e9);
  add("f1", "f1", 3e12, 1e10);
  size_t n = c.devices.size();
  c.delayMs = SquareMatrix(n);
  c.bandwidthGbps = SquareMatrix(n);
  for (size_t a = 0; a < n; ++a)
    for (size_t b = 0; b < n; ++b) {
      if (a == b)
        continue;
      bool same = c.devices[a].node == c.devices[b].node;
      c.delayMs(a, b) = same ? 0.001 : 0.1;
      c.bandwidthGbps(a, b) = same ? 1000 : 10;
    }
  return c;
}

/// A chain of 8 blocks (an embedding and a head tied by a table, six
/// layers) as sharded at `degree`: FLOPs, parameters and activations
/// divided, two sums per layer block; the ends' table divided too.
Workload shardedModel(int degree) {
  Workload w;
  double t = degree;
  for (int i = 0; i < 8; ++i) {
    bool end = i == 0 || i == 7;
    ChainBlock b;
    b.flops = (end ? 2e9 : 6e9) / t;
    b.backwardFlops = b.flops * 2 / 3;
    b.parameterBytes = (i == 0 ? 4e8 : end ? 1e6 : 1e8) / t;
    b.activationBytes = 5e7 / t + 1e7;
    b.inputBytes = 1e7;
    if (degree > 1) {
      b.groupSums = end ? 1 : 4;
      b.groupSumBytes = 4e7;
    }
    w.blocks.push_back(b);
  }
  w.tied.push_back({0, 7, 4e8 / t});
  w.boundaryBytes = 1e7;
  w.trainableParameters = 2e8;
  w.layers = 8;
  w.microBatchSize = 1;
  return w;
}

StageDegreeProblem problemOn(const Cluster &cluster) {
  StageDegreeProblem p;
  p.cluster = &cluster;
  for (int degree : {1, 2, 4})
    p.workloadAt[degree] = shardedModel(degree);
  p.globalBatch = 16;
  p.microBatchSizes = {1, 2, 4};
  p.training.stages.stateBytesPerParameterByte = 4;
  return p;
}

TEST(StageDegrees, GroupsTakeTheSlowestNodesLargestDegreeFirst) {
  Cluster c = nodesCluster();
  std::vector<std::vector<std::vector<int>>> groups;
  std::string error;
  // TP 4 needs the slow node; then TP 2 the slowest left that holds 2 (mid);
  // then TP 1 the slowest device left (f0 before f1: cluster order).
  ASSERT_TRUE(stageTensorParallelGroups(c, {1, 4, 2}, 1, groups, error))
      << error;
  EXPECT_EQ(groups[1], (std::vector<std::vector<int>>{{1, 2, 3, 4}}));
  EXPECT_EQ(groups[2], (std::vector<std::vector<int>>{{5, 6}}));
  EXPECT_EQ(groups[0], (std::vector<std::vector<int>>{{0}}));
  // Two TP 2 groups: the slow node gives both.
  ASSERT_TRUE(stageTensorParallelGroups(c, {2, 1}, 2, groups, error));
  EXPECT_EQ(groups[0], (std::vector<std::vector<int>>{{1, 2}, {3, 4}}));
  EXPECT_EQ(groups[1], (std::vector<std::vector<int>>{{5}, {6}}));
  EXPECT_FALSE(stageTensorParallelGroups(c, {4, 1}, 2, groups, error));
  EXPECT_EQ(error, "stage 0 needs 2 groups of 4 devices inside a node and "
                   "cluster 'nodes' has no node left with 4 free devices");
}

TEST(StageDegrees, SpliceTakesEachStagesBlocksFromItsModel) {
  Workload one = shardedModel(1), four = shardedModel(4);
  Workload spliced = spliceStageWorkloads({&four, &one}, {0, 3, 8});
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(spliced.blocks[i].flops,
              i < 3 ? four.blocks[i].flops : one.blocks[i].flops);
  EXPECT_EQ(spliced.tied[0].bytes, four.tied[0].bytes);
}

// The search equals the brute force over every plan it may choose (two
// distinct degrees at least, D_PP 2 or 3, every D_DP the nodes hold, every
// micro-batch size dividing the batch), scored one by one: its compute
// bound prunes nothing it should keep.
TEST(StageDegrees, SearchEqualsScoringEveryPlan) {
  Cluster c = nodesCluster();
  for (double memory : {2e9, 1.5e9, 6e8}) {
    for (Device &d : c.devices)
      if (d.node == "slow")
        d.memoryBytes = memory;
    StageDegreeProblem p = problemOn(c);
    double brute = std::numeric_limits<double>::infinity();
    std::vector<int64_t> degrees{1, 2, 4};
    std::vector<std::vector<int64_t>> sequences;
    for (int64_t a : degrees)
      for (int64_t b : degrees) {
        sequences.push_back({a, b});
        for (int64_t d : degrees)
          sequences.push_back({a, b, d});
      }
    int feasible = 0;
    for (const auto &sequence : sequences) {
      if (std::set<int64_t>(sequence.begin(), sequence.end()).size() < 2)
        continue;
      for (int dp = 1; dp <= 8; ++dp)
        for (int64_t size : p.microBatchSizes) {
          if (p.globalBatch % (dp * size))
            continue;
          StageDegreeChoice choice = scoreStageDegrees(p, sequence, dp, size);
          if (choice.cost.feasible) {
            ++feasible;
            brute = std::min(brute, choice.iterationSeconds());
          }
        }
    }
    ASSERT_GT(feasible, 0) << memory;
    StageDegreeChoice best;
    int64_t scored = 0;
    std::string error;
    ASSERT_TRUE(searchStageDegrees(p, best, scored, error)) << error;
    EXPECT_NEAR(best.iterationSeconds(), brute, 1e-12 * brute) << memory;
    EXPECT_GT(scored, 0);
    // Only plans faster than `beat` are wanted.
    p.beat = brute * 0.999;
    EXPECT_FALSE(searchStageDegrees(p, best, scored, error));
    EXPECT_EQ(error.rfind("no plan with a degree per stage is predicted "
                          "faster than ",
                          0),
              0u)
        << error;
  }
}

// Embedding and tied head at different degrees: the table stays whole in
// both stages (as the sharding keeps it), so the stages cost the whole
// model's ends; at equal degrees the ends are sharded.
TEST(StageDegrees, TiedEndsAtDifferentDegreesCostTheWholeTable) {
  Cluster c = nodesCluster();
  StageDegreeProblem p = problemOn(c);
  StageDegreeChoice mixed = scoreStageDegrees(p, {2, 1}, 2, 1);
  ASSERT_TRUE(mixed.cost.feasible) << mixed.cost.error;
  // Stage 0 (TP 2) holds the embedding whole: its memory has the whole
  // table's 4e8 bytes of parameters at 4 bytes of state each.
  EXPECT_GE(mixed.cost.plan.stageMemoryBytes[0], 4 * 4e8);
  StageDegreeChoice same = scoreStageDegrees(p, {2, 1, 2}, 1, 1);
  ASSERT_TRUE(same.cost.feasible) << same.cost.error;
  EXPECT_LT(same.cost.plan.stageMemoryBytes[0], 4 * 4e8);
}

} // namespace
