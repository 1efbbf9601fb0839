//===- RooflineTest.cpp - Memory-bound work against per-op maxima ---------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Roofline.h"
#include "ChainCuts.h"
#include "dtfm/Planner/StagePartition.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <random>

using namespace dtfm::planner;

namespace {

struct Op {
  double flops, bytes;
};

/// The oracle: each op on its own, max(f / S, b / M) (f / S without M).
double perOpSeconds(const std::vector<Op> &ops, double speed,
                    double bandwidth) {
  double seconds = 0;
  for (const Op &op : ops)
    seconds +=
        std::max(op.flops / speed, bandwidth > 0 ? op.bytes / bandwidth : 0.0);
  return seconds;
}

std::vector<Op> randomOps(std::mt19937_64 &rng, int count) {
  std::uniform_real_distribution<double> flops(0, 100), bytes(0, 50);
  std::uniform_int_distribution<int> kind(0, 3);
  std::vector<Op> ops;
  for (int i = 0; i < count; ++i) {
    Op op{flops(rng), bytes(rng)};
    if (kind(rng) == 0)
      op.bytes = 0; // pure compute
    else if (kind(rng) == 0)
      op.flops = 0; // a copy
    else if (kind(rng) == 0)
      op = ops.empty() ? op : Op{2 * ops.back().flops, 2 * ops.back().bytes};
    ops.push_back(op);
  }
  return ops;
}

TEST(Roofline, EqualsThePerOpMaximaOnRandomOps) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> speed(1, 10), bandwidth(0.1, 10);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<Op> ops = randomOps(rng, 1 + trial % 30);
    RooflineWork work;
    double flops = 0;
    for (const Op &op : ops) {
      work.add(op.flops, op.bytes);
      flops += op.flops;
    }
    EXPECT_NEAR(work.flops(), flops, 1e-9 * flops);
    EXPECT_NEAR(work.flopsAt(0), flops, 1e-9 * flops);
    double s = speed(rng), m = bandwidth(rng);
    double expected = perOpSeconds(ops, s, m);
    EXPECT_NEAR(work.flopsAt(ridgeOf(s, m)) / s, expected, 1e-9 * expected);
    // The terms stay in order of intensity (merged ones may round to
    // their neighbour's).
    const auto &terms = work.opTerms();
    for (size_t i = 1; i < terms.size(); ++i)
      EXPECT_LE(terms[i - 1].first * terms[i].second,
                terms[i].first * terms[i - 1].second);
    // Scaling scales the time; adding work adds it.
    RooflineWork twice = work;
    twice.scale(2);
    EXPECT_NEAR(twice.flopsAt(ridgeOf(s, m)) / s, 2 * expected,
                2e-9 * expected);
    RooflineWork both = work;
    both.add(work);
    EXPECT_NEAR(both.flopsAt(ridgeOf(s, m)) / s, 2 * expected, 2e-9 * expected);
  }
}

TEST(Roofline, IgnoresNegativeAndNonFiniteTerms) {
  RooflineWork work;
  work.add(-1, 5);
  work.add(1, std::numeric_limits<double>::infinity());
  work.add(std::nan(""), 1);
  work.add(0, 0);
  EXPECT_TRUE(work.empty());
  EXPECT_EQ(work.flopsAt(3), 0);
  EXPECT_EQ(ridgeOf(10, 0), 0);
  EXPECT_EQ(ridgeOf(10, 4), 2.5);
}

/// Blocks of random ops, forward and backward, as the cost analysis makes
/// them; `ops[i]` keeps block i's ops for the oracle.
std::vector<ChainBlock> randomChain(std::mt19937_64 &rng, int n,
                                    std::vector<std::vector<Op>> &ops) {
  std::vector<ChainBlock> blocks(n);
  ops.assign(n, {});
  for (int i = 0; i < n; ++i) {
    std::vector<Op> forward = randomOps(rng, 4), backward = randomOps(rng, 4);
    for (const Op &op : forward) {
      blocks[i].forwardWork.add(op.flops, op.bytes);
      blocks[i].flops += op.flops;
    }
    for (const Op &op : backward) {
      blocks[i].backwardWork.add(op.flops, op.bytes);
      blocks[i].flops += op.flops;
      blocks[i].backwardFlops += op.flops;
    }
    ops[i] = forward;
    ops[i].insert(ops[i].end(), backward.begin(), backward.end());
  }
  return blocks;
}

TEST(Roofline, PartitionEqualsBruteForceOverPerOpMaxima) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> speed(1, 8), bandwidth(0.2, 8);
  for (int trial = 0; trial < 100; ++trial) {
    int n = 2 + trial % 7, stages = 1 + trial % 3;
    if (stages > n)
      stages = n;
    std::vector<std::vector<Op>> ops;
    std::vector<ChainBlock> blocks = randomChain(rng, n, ops);
    std::vector<StageDevice> devices;
    std::vector<double> bandwidths;
    for (int j = 0; j < stages; ++j) {
      double s = speed(rng), m = trial % 4 == 0 ? 0 : bandwidth(rng);
      StageDevice d{"gpu" + std::to_string(j), s, 1e30};
      d.ridge = ridgeOf(s, m);
      devices.push_back(d);
      bandwidths.push_back(m);
    }
    // Every way to cut, each stage timed op by op.
    double best = oracle::bestCut(n, stages, [&](int j, int first, int last) {
      double seconds = 0;
      for (int i = first; i < last; ++i)
        seconds += perOpSeconds(ops[i], devices[j].speed, bandwidths[j]);
      return seconds;
    });
    StagePlan plan;
    std::string error;
    StagePartitionOptions options;
    options.recompute = MemoryOption::Never;
    ASSERT_TRUE(partitionChain(blocks, devices, options, plan, error)) << error;
    EXPECT_NEAR(plan.bottleneckSeconds, best, 1e-9 * best) << "trial " << trial;
    // The plan of those bounds times its stages the same way.
    StagePlan again;
    ASSERT_TRUE(
        planForBounds(blocks, devices, options, plan.bounds, again, error))
        << error;
    EXPECT_NEAR(again.bottleneckSeconds, plan.bottleneckSeconds, 1e-9 * best);
  }
}

TEST(Roofline, MemoryBoundBlocksGoToTheDeviceWithTheBandwidth) {
  // Two memory-bound blocks (10 FLOPs, 100 bytes), then two compute-bound
  // ones (100 FLOPs, 1 byte); both devices do 1 FLOP/s, gpu0 moves 1 byte/s
  // and gpu1 0.1. FLOPs alone split the chain 3 + 1 (120 s against 100);
  // the roofline costs a memory-bound block 100 s on gpu0 and 1000 on gpu1,
  // so gpu0 takes both of them and gpu1 the compute: 200 s each.
  std::vector<ChainBlock> blocks(4);
  for (int i = 0; i < 4; ++i) {
    double flops = i < 2 ? 10 : 100, bytes = i < 2 ? 100 : 1;
    blocks[i].flops = flops;
    blocks[i].forwardWork.add(flops, bytes);
  }
  std::vector<StageDevice> devices{{"gpu0", 1, 1e30}, {"gpu1", 1, 1e30}};
  StagePlan plan;
  std::string error;
  ASSERT_TRUE(partitionChain(blocks, devices, {}, plan, error)) << error;
  EXPECT_EQ(plan.bounds, (std::vector<int>{0, 3, 4}));
  EXPECT_DOUBLE_EQ(plan.bottleneckSeconds, 120);
  devices[0].ridge = ridgeOf(1, 1);
  devices[1].ridge = ridgeOf(1, 0.1);
  ASSERT_TRUE(partitionChain(blocks, devices, {}, plan, error)) << error;
  EXPECT_EQ(plan.bounds, (std::vector<int>{0, 2, 4}));
  EXPECT_DOUBLE_EQ(plan.bottleneckSeconds, 200);
}

TEST(Roofline, SpeedForSecondsInvertsTheTime) {
  std::mt19937_64 rng(23);
  std::uniform_real_distribution<double> speed(1, 10), bandwidth(0.5, 10);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<Op> ops = randomOps(rng, 1 + trial % 20);
    RooflineWork work;
    for (const Op &op : ops)
      work.add(op.flops, op.bytes);
    if (!(work.flops() > 0))
      continue;
    double s = speed(rng), m = trial % 5 == 0 ? 0 : bandwidth(rng);
    double seconds = perOpSeconds(ops, s, m);
    double solved = speedForSeconds(work, seconds, m);
    // The time at the solved speed is the time measured (the speed itself
    // is unique only where some op is compute-bound).
    ASSERT_GT(solved, 0) << "trial " << trial;
    EXPECT_NEAR(perOpSeconds(ops, solved, m), seconds, 1e-9 * seconds);
  }
  // One compute-bound op of 10 FLOPs and one copy of 100 bytes at 100 B/s:
  // 2 s leave 1 s for the FLOPs, 10 FLOP/s.
  RooflineWork work;
  work.add(10, 0);
  work.add(0, 100);
  EXPECT_DOUBLE_EQ(speedForSeconds(work, 2, 100), 10);
  EXPECT_DOUBLE_EQ(speedForSeconds(work, 2, 0), 5);
  // The copy alone takes 1 s: no speed makes it 1 s or less.
  EXPECT_EQ(speedForSeconds(work, 1, 100), 0);
  EXPECT_EQ(speedForSeconds(RooflineWork(), 1, 100), 0);
}

} // namespace
