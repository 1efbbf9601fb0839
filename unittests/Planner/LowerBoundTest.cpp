//===- LowerBoundTest.cpp - No plan beats the lower bound
//------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/LowerBound.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

using namespace dtfm::planner;

namespace {

/// `n` devices of random speed (1-4 TFLOP/s) and memory, in up to three
/// regions: fast links inside, random slow ones between.
Cluster randomRegions(int n, double memory, std::mt19937_64 &rng) {
  std::uniform_real_distribution<double> speed(1e12, 4e12), slowMs(5, 200),
      slowGbps(0.05, 2), spread(0.5, 1.5);
  std::uniform_int_distribution<int> regionOf(0, 2);
  Cluster c;
  c.name = "random";
  c.delayMs = SquareMatrix(n);
  c.bandwidthGbps = SquareMatrix(n);
  std::vector<int> region(n);
  for (int i = 0; i < n; ++i) {
    region[i] = regionOf(rng);
    c.devices.push_back({"d" + std::to_string(i),
                         "r" + std::to_string(region[i]), speed(rng), 1,
                         memory * spread(rng)});
  }
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) {
      bool same = region[i] == region[j];
      c.delayMs(i, j) = c.delayMs(j, i) = same ? 0.05 : slowMs(rng);
      c.bandwidthGbps(i, j) = c.bandwidthGbps(j, i) =
          same ? 10 * spread(rng) : slowGbps(rng);
    }
  return c;
}

ShapeProblem problemFor(const Cluster &c, int layers, int64_t globalBatch) {
  ShapeProblem p;
  p.cluster = &c;
  ChainBlock block{3e11, 2e7, 1e7};
  block.backwardFlops = 2e11;
  block.inputBytes = 2e6;
  p.workload.blocks.assign(layers, block);
  p.workload.boundaryBytes = 4e6;
  p.workload.gradientBytesPerParameterByte = 1;
  p.workload.microBatchSize = 1;
  p.globalBatch = globalBatch;
  p.microBatchSizes = {1, 2, 4};
  p.training.stages.stateBytesPerParameterByte = 4;
  return p;
}

/// The best the hetero model predicts over every plan: each subset of the
/// devices in each order, cut into D_PP consecutive groups of D_DP (stage
/// k: group k; the order inside a group is the ring's), at each micro-batch
/// size; both stage splits (evaluate's rebalance).
double bruteForce(const ShapeProblem &problem, int64_t syncEvery) {
  const Cluster &cluster = *problem.cluster;
  int n = static_cast<int>(cluster.size());
  double best = std::numeric_limits<double>::infinity();
  for (int mask = 1; mask < (1 << n); ++mask) {
    std::vector<int> used;
    for (int d = 0; d < n; ++d)
      if (mask >> d & 1)
        used.push_back(d);
    int k = static_cast<int>(used.size());
    for (int pp = 1; pp <= k; ++pp) {
      if (k % pp != 0 || pp > static_cast<int>(problem.workload.blocks.size()))
        continue;
      int dp = k / pp;
      if ((problem.fixedDataParallel > 0 && dp != problem.fixedDataParallel) ||
          (problem.fixedPipelineParallel > 0 &&
           pp != problem.fixedPipelineParallel))
        continue;
      for (int64_t size : problem.microBatchSizes) {
        if (problem.globalBatch % (dp * size) != 0)
          continue;
        HeteroProblem hp;
        hp.cluster = &cluster;
        hp.workload = problem.workload.withMicroBatchSize(size);
        hp.training = problem.training;
        hp.training.syncEvery = syncEvery;
        hp.training.stages.microBatches =
            static_cast<int>(problem.globalBatch / (dp * size));
        hp.dataParallel = dp;
        hp.pipelineParallel = pp;
        HeteroModel model(hp);
        std::vector<int> order = used;
        do {
          Partition stages(pp);
          for (int i = 0; i < k; ++i)
            stages[i / dp].push_back(order[i]);
          HeteroCost cost = model.evaluate(stages);
          if (cost.feasible)
            best = std::min(best, cost.iterationSeconds());
        } while (std::next_permutation(order.begin(), order.end()));
      }
    }
  }
  return best;
}

} // namespace

TEST(LowerBound, NoPlanBeatsItOnSmallClusters) {
  std::mt19937_64 rng(11);
  int cases = 0;
  for (int trial = 0; trial < 12; ++trial) {
    int n = 3 + trial % 3; // 3-5 devices; six in the next test
    // Some clusters hold the model on one device, some need a pipeline.
    double memory = trial % 2 ? 2e9 : 6e8;
    Cluster c = randomRegions(n, memory, rng);
    ShapeProblem p = problemFor(c, 4, 16);
    if (trial % 3 == 1) {
      p.training.stages.schedule = PipelineSchedule::GPipe;
      p.training.dpCompression.automatic = true;
    }
    if (trial % 4 == 2) {
      p.training.compression.linkCodec.automatic = true;
      p.training.sync = GradientSync::Ring;
    }
    if (trial % 4 == 3)
      p.training.stages.shardState = MemoryOption::WhenNeeded;
    LowerBoundModel bounds;
    std::string error;
    ASSERT_TRUE(LowerBoundModel::create(p, bounds, error)) << error;
    for (int64_t h : {0, 5}) {
      double best = bruteForce(p, h);
      LowerBound bound = bounds.bound(h);
      if (!std::isfinite(best)) {
        // No plan fits: the bound may still be finite (it relaxes memory).
        continue;
      }
      ASSERT_TRUE(bound.feasible()) << "trial " << trial;
      EXPECT_LE(bound.seconds, best * (1 + 1e-9))
          << "trial " << trial << " H " << h << ": "
          << describeLowerBound(bound);
      // Not vacuous: within a small factor of the best plan.
      EXPECT_GT(bound.seconds, best / 20) << "trial " << trial;
      ++cases;
    }
  }
  EXPECT_GE(cases, 16);
}

TEST(LowerBound, NoPlanBeatsItOnSixDevicesAndTheSearchIsAboveIt) {
  std::mt19937_64 rng(5);
  Cluster c = randomRegions(6, 8e8, rng);
  ShapeProblem p = problemFor(c, 6, 24);
  p.microBatchSizes = {1, 2};
  LowerBoundModel bounds;
  std::string error;
  ASSERT_TRUE(LowerBoundModel::create(p, bounds, error)) << error;
  double best = bruteForce(p, 0);
  ASSERT_TRUE(std::isfinite(best));
  LowerBound bound = bounds.bound(0);
  EXPECT_LE(bound.seconds, best * (1 + 1e-9)) << describeLowerBound(bound);
  ShapeSearchResult result;
  ASSERT_TRUE(searchShapes(p, {}, result, error)) << error;
  EXPECT_GE(result.best.iterationSeconds(), best * (1 - 1e-9));
}

TEST(LowerBound, OneDeviceMeetsIt) {
  // A single device: n_b micro-batches one after another, nothing else.
  Cluster c;
  c.name = "one";
  c.devices = {{"gpu", "r", 2e12, 1, 1e12}};
  c.delayMs = c.bandwidthGbps = SquareMatrix(1);
  ShapeProblem p = problemFor(c, 4, 8);
  LowerBoundModel bounds;
  std::string error;
  ASSERT_TRUE(LowerBoundModel::create(p, bounds, error)) << error;
  LowerBound bound = bounds.bound(0);
  EXPECT_NEAR(bound.seconds, bruteForce(p, 0), 1e-12);
  EXPECT_EQ(bound.syncSeconds, 0);
}

TEST(LowerBound, APipelineForcedByMemoryMeetsIt) {
  // Two identical devices that each hold half the model: the two-stage
  // pipeline's fill and its 1F1B window are the bound.
  Cluster c;
  c.name = "two";
  c.devices = {{"a", "r", 1e12, 1, 1e8}, {"b", "r", 1e12, 1, 1e8}};
  c.delayMs = SquareMatrix(2, 20);
  c.bandwidthGbps = SquareMatrix(2, 1);
  ShapeProblem p = problemFor(c, 2, 8);
  p.workload.blocks = {ChainBlock{1e12, 2e7, 0}, ChainBlock{1e12, 2e7, 0}};
  p.microBatchSizes = {1};
  LowerBoundModel bounds;
  std::string error;
  ASSERT_TRUE(LowerBoundModel::create(p, bounds, error)) << error;
  LowerBound bound = bounds.bound(0);
  double best = bruteForce(p, 0);
  EXPECT_EQ(bound.pipelineParallel, 2);
  EXPECT_NEAR(bound.seconds, best, best * 1e-12) << describeLowerBound(bound);
}

TEST(LowerBound, LocalStepsOnUniformLinksMeetIt) {
  // Four identical devices on identical links, data parallel with local
  // steps: the compute and 1/H of the parameter server's exchange.
  Cluster c;
  c.name = "four";
  for (int i = 0; i < 4; ++i)
    c.devices.push_back({"d" + std::to_string(i), "r", 1e12, 1, 1e12});
  c.delayMs = SquareMatrix(4, 30);
  c.bandwidthGbps = SquareMatrix(4, 0.5);
  ShapeProblem p = problemFor(c, 4, 16);
  p.microBatchSizes = {4};
  p.fixedDataParallel = 4;
  p.fixedPipelineParallel = 1;
  p.training.sync = GradientSync::ParameterServer;
  LowerBoundModel bounds;
  std::string error;
  ASSERT_TRUE(LowerBoundModel::create(p, bounds, error)) << error;
  LowerBound bound = bounds.bound(10);
  double best = bruteForce(p, 10);
  EXPECT_NEAR(bound.seconds, best, best * 1e-12) << describeLowerBound(bound);
  EXPECT_GT(bound.syncSeconds, 0);
  // Overlapping the steps may hide the exchange entirely.
  EXPECT_EQ(bounds.bound(10, 1).syncSeconds, 0);
  // Synchronous, the last backward may hide the exchange: still a bound.
  EXPECT_LE(bounds.bound(0).seconds, bruteForce(p, 0) * (1 + 1e-9));
}

TEST(LowerBound, ThresholdsOfTwoRegions) {
  // Devices 0-2 and 3-4: 1 ms inside, 50 ms between.
  auto latency = [](int a, int b) { return (a < 3) == (b < 3) ? 1e-3 : 50e-3; };
  LinkThresholds t(5, latency);
  EXPECT_DOUBLE_EQ(t.cheapest(), 1e-3);
  EXPECT_DOUBLE_EQ(t.bottleneck(3), 1e-3);
  EXPECT_DOUBLE_EQ(t.bottleneck(4), 50e-3);
  // A chain through four devices crosses between the regions once.
  EXPECT_NEAR(t.chain(4), 1e-3 * 3 + 49e-3 * 1, 1e-15);
  // A group of five: each member's links average at least 4 x 1 ms plus
  // (5 - 3) x 49 ms above it.
  EXPECT_NEAR(t.spread(5), 4e-3 + 2 * 49e-3, 1e-15);
  EXPECT_EQ(t.bottleneck(6), std::numeric_limits<double>::infinity());
}

TEST(LowerBound, RefusesBadProblems) {
  Cluster c;
  c.devices = {{"gpu", "r", 1e12, 1, 1e12}};
  c.delayMs = c.bandwidthGbps = SquareMatrix(1);
  LowerBoundModel bounds;
  std::string error;
  ShapeProblem p = problemFor(c, 2, 8);
  p.globalBatch = 0;
  EXPECT_FALSE(LowerBoundModel::create(p, bounds, error));
  EXPECT_NE(error.find("global batch"), std::string::npos) << error;
  p = problemFor(c, 2, 8);
  p.microBatchSizes = {1, -2};
  EXPECT_FALSE(LowerBoundModel::create(p, bounds, error));
  EXPECT_NE(error.find("-2"), std::string::npos) << error;
  p = problemFor(c, 2, 8);
  p.cluster = nullptr;
  EXPECT_FALSE(LowerBoundModel::create(p, bounds, error));
  c.devices[0].efficiency = 0;
  p = problemFor(c, 2, 8);
  EXPECT_FALSE(LowerBoundModel::create(p, bounds, error));
  EXPECT_NE(error.find("'gpu' has no speed"), std::string::npos) << error;
}

TEST(LowerBound, SlowerLinksNeverLowerIt) {
  // Two machines of two devices, 100 Gbps inside and 0.1 Gbps between; a
  // model that needs two stages: four devices cross the slow link with
  // their pipelines or with their gradient exchange.
  Cluster c;
  c.name = "two-machines";
  for (int i = 0; i < 4; ++i)
    c.devices.push_back(
        {"d" + std::to_string(i), "r" + std::to_string(i / 2), 1e12, 1, 2.5e8});
  c.delayMs = SquareMatrix(4);
  c.bandwidthGbps = SquareMatrix(4);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      c.bandwidthGbps(i, j) = i / 2 == j / 2 ? 100 : 0.1;
      c.delayMs(i, j) = i / 2 == j / 2 ? 0.01 : 5;
    }
  Cluster fast = c;
  fast.bandwidthGbps = SquareMatrix(4, 100);
  fast.delayMs = SquareMatrix(4, 0.01);
  for (int64_t h : {0, 4}) {
    ShapeProblem p = problemFor(c, 4, 16);
    ShapeProblem q = problemFor(fast, 4, 16);
    LowerBoundModel slowBounds, fastBounds;
    std::string error;
    ASSERT_TRUE(LowerBoundModel::create(p, slowBounds, error)) << error;
    ASSERT_TRUE(LowerBoundModel::create(q, fastBounds, error)) << error;
    LowerBound slow = slowBounds.bound(h);
    double best = bruteForce(p, h);
    EXPECT_LE(slow.seconds, best * (1 + 1e-9)) << describeLowerBound(slow);
    EXPECT_GT(slow.seconds, best / 2) << describeLowerBound(slow);
    EXPECT_GE(slow.seconds, fastBounds.bound(h).seconds);
    EXPECT_LE(fastBounds.bound(h).seconds, bruteForce(q, h) * (1 + 1e-9));
  }
}
