//===- ShapeSearchTest.cpp - Choosing the plan's shape ---------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/ShapeSearch.h"

#include <gtest/gtest.h>

#include <set>

using namespace dtfm::planner;

namespace {

/// `regions` regions of `perRegion` devices (100 TFLOP/s, `memory` bytes):
/// 100 Gbps / 0.01 ms inside a region, `crossGbps` / 10 ms across.
Cluster regionalCluster(int regions, int perRegion, double crossGbps,
                        double memory = 16e9) {
  Cluster c;
  c.name = "regional";
  int n = regions * perRegion;
  c.delayMs = SquareMatrix(n);
  c.bandwidthGbps = SquareMatrix(n);
  for (int i = 0; i < n; ++i) {
    c.devices.push_back({"gpu" + std::to_string(i),
                         "r" + std::to_string(i / perRegion), 100e12, 1,
                         memory});
    for (int j = 0; j < n; ++j) {
      bool same = i / perRegion == j / perRegion;
      c.delayMs(i, j) = same ? 0.01 : 10;
      c.bandwidthGbps(i, j) = same ? 100 : crossGbps;
    }
  }
  return c;
}

ShapeProblem problemFor(const Cluster &c, int layers, double parameterBytes,
                        int64_t globalBatch) {
  ShapeProblem p;
  p.cluster = &c;
  p.workload.blocks.assign(layers, ChainBlock{1e12, parameterBytes, 1e8});
  p.workload.boundaryBytes = 1e6;
  p.workload.gradientBytesPerParameterByte = 2;
  p.workload.microBatchSize = 1;
  p.globalBatch = globalBatch;
  p.microBatchSizes = {1, 2, 4};
  // The simple memory model these abstract workloads are sized for.
  p.training.stages.stateBytesPerParameterByte = 4;
  return p;
}

/// Every stage of the choice fits its devices.
void expectFits(const Cluster &c, const ShapeChoice &choice) {
  ASSERT_TRUE(choice.cost.feasible);
  for (size_t s = 0; s < choice.stages.size(); ++s)
    for (int d : choice.stages[s])
      EXPECT_LE(choice.cost.plan.stageMemoryBytes[s],
                c.devices[d].memoryBytes)
          << "stage " << s;
}

} // namespace

TEST(ShapeSearch, LeavesARegionBehindASlowLinkIdle) {
  // Region r2's devices reach the others at 10 Mbit/s and 250 ms.
  Cluster c = regionalCluster(3, 4, 10);
  for (int i = 8; i < 12; ++i)
    for (int j = 0; j < 8; ++j) {
      c.bandwidthGbps(i, j) = c.bandwidthGbps(j, i) = 0.01;
      c.delayMs(i, j) = c.delayMs(j, i) = 250;
    }
  ShapeProblem p = problemFor(c, 8, 1e8, 48);
  ShapeSearchResult r;
  std::string error;
  ASSERT_TRUE(searchShapes(p, {}, r, error)) << error;
  for (int d : r.best.devices)
    EXPECT_LT(d, 8) << "uses a device of the far region";
  ASSERT_EQ(r.idle.size(), 1u);
  EXPECT_EQ(r.idle[0].devices, (std::vector<int>{8, 9, 10, 11}));
  EXPECT_NE(r.idle[0].reason.find("region r2: 0.01 Gbps and 250 ms"),
            std::string::npos)
      << r.idle[0].reason;
  EXPECT_NE(r.idle[0].reason.find("adding them costs"), std::string::npos);
  expectFits(c, r.best);
}

TEST(ShapeSearch, SeedsThePipelineAlongTheShortestPathThroughTheRegions) {
  // r0 and r1 are far apart, r2 is close to both: the pipeline r0, r2, r1
  // crosses no slow link; the regions' name order (r0, r1, r2) crosses it
  // twice per micro-batch. Without refinement only the seeds decide.
  Cluster c = regionalCluster(3, 2, 10);
  for (int i = 0; i < 2; ++i)
    for (int j = 2; j < 4; ++j) {
      c.bandwidthGbps(i, j) = c.bandwidthGbps(j, i) = 0.1;
      c.delayMs(i, j) = c.delayMs(j, i) = 100;
    }
  ShapeProblem p = problemFor(c, 6, 1e8, 8);
  p.fixedDataParallel = 2;
  p.fixedPipelineParallel = 3;
  ShapeSearchOptions options;
  options.refinedShapes = 0;
  ShapeSearchResult r;
  std::string error;
  ASSERT_TRUE(searchShapes(p, options, r, error)) << error;
  ASSERT_EQ(r.best.stages.size(), 3u);
  auto regionOf = [&](int stage) {
    return c.devices[r.best.stages[stage][0]].region;
  };
  EXPECT_EQ(regionOf(0), "r0");
  EXPECT_EQ(regionOf(1), "r2");
  EXPECT_EQ(regionOf(2), "r1");
  for (int s = 0; s < 3; ++s)
    for (int d : r.best.stages[s])
      EXPECT_EQ(c.devices[d].region, regionOf(s)) << "stage " << s;
}

TEST(ShapeSearch, ComputeBoundOnAFastNetworkIsPureDataParallel) {
  Cluster c = regionalCluster(1, 8, 100);
  ShapeProblem p = problemFor(c, 8, 1e6, 64); // small model: fits anywhere
  ShapeSearchResult r;
  std::string error;
  ASSERT_TRUE(searchShapes(p, {}, r, error)) << error;
  EXPECT_EQ(r.best.pipelineParallel, 1);
  EXPECT_EQ(r.best.dataParallel, 8);
  EXPECT_EQ(r.best.devices.size(), 8u);
  EXPECT_TRUE(r.idle.empty());
  EXPECT_EQ(r.best.microBatchSize * r.best.microBatches * r.best.dataParallel,
            64);
  expectFits(c, r.best);
}

TEST(ShapeSearch, AModelTooBigForOneDeviceIsPipelined) {
  // 8 blocks of 1 GB: 4 x 8 GB of weights, gradients and moments.
  Cluster c = regionalCluster(1, 8, 100);
  ShapeProblem p = problemFor(c, 8, 1e9, 64);
  ShapeSearchResult r;
  std::string error;
  ASSERT_TRUE(searchShapes(p, {}, r, error)) << error;
  EXPECT_GE(r.best.pipelineParallel, 3); // 32 GB over 16 GB devices
  expectFits(c, r.best);
  for (const ShapeChoice &other : r.runnersUp) {
    EXPECT_GE(other.pipelineParallel, 3);
    expectFits(c, other);
  }
}

TEST(ShapeSearch, UsesSomeOfSevenEqualDevicesWhenNoWidthDividesTheBatch) {
  // 7 devices of one kind, 16 samples of size 1, 2 or 4: no D_DP x D_PP
  // uses all 7 (7 x 1 and 1 x 7 divide neither); brute force over every
  // shape on the first k devices says what the best is.
  Cluster c = regionalCluster(1, 7, 100);
  ShapeProblem p = problemFor(c, 4, 1e6, 16);
  ShapeSearchResult r;
  std::string error;
  ASSERT_TRUE(searchShapes(p, {}, r, error)) << error;
  expectFits(c, r.best);
  int used = r.best.dataParallel * r.best.pipelineParallel;
  EXPECT_EQ(static_cast<int>(r.best.devices.size()), used);
  EXPECT_LT(used, 7);
  EXPECT_EQ(r.best.microBatchSize * r.best.microBatches * r.best.dataParallel,
            16);
  // The devices left out are reported idle, with the reason.
  size_t idle = 0;
  for (const IdleDevices &i : r.idle) {
    idle += i.devices.size();
    EXPECT_NE(i.reason.find("no shape using all of them is faster"),
              std::string::npos)
        << i.reason;
  }
  EXPECT_EQ(idle, static_cast<size_t>(7 - used));
  // Among the widest data-parallel shapes per pipeline depth, the best.
  for (int pp = 1; pp <= 4; ++pp)
    for (int dp = 7 / pp; dp >= 1; --dp) {
      if (16 % dp != 0)
        continue;
      ShapeProblem fixed = p;
      fixed.fixedDataParallel = dp;
      fixed.fixedPipelineParallel = pp;
      Cluster first = c;
      first.devices.resize(dp * pp);
      first.delayMs = SquareMatrix(dp * pp, 0.01);
      first.bandwidthGbps = SquareMatrix(dp * pp, 100);
      fixed.cluster = &first;
      ShapeSearchResult alone;
      ASSERT_TRUE(searchShapes(fixed, {}, alone, error)) << error;
      EXPECT_LE(r.best.iterationSeconds(),
                alone.best.iterationSeconds() * (1 + 1e-9))
          << dp << " x " << pp;
      break;
    }
}

TEST(ShapeSearch, LeavesTheWorstConnectedOfEqualDevicesOut) {
  // 6 devices of one kind in one region (one unit: the search cannot drop
  // some by region); gpu0 and gpu1 reach every other device at 10 Mbit/s
  // and 250 ms. 4 samples: no shape on all 6 divides them as dp x pp with
  // dp 4, and the best shapes on 4 devices must not take gpu0 or gpu1 --
  // the first by index would.
  Cluster c = regionalCluster(1, 6, 100);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 6; ++j)
      if (i != j) {
        c.bandwidthGbps(i, j) = c.bandwidthGbps(j, i) = 0.01;
        c.delayMs(i, j) = c.delayMs(j, i) = 250;
      }
  ShapeProblem p = problemFor(c, 4, 1e8, 4);
  std::string error;
  for (bool fixed : {false, true}) {
    ShapeProblem tried = p;
    if (fixed) {
      // A given D_DP x D_PP that leaves devices out is planned too (it
      // was refused: no subset of whole units has 4 devices).
      tried.fixedDataParallel = 4;
      tried.fixedPipelineParallel = 1;
    }
    ShapeSearchResult r;
    ASSERT_TRUE(searchShapes(tried, {}, r, error)) << error;
    expectFits(c, r.best);
    for (int d : r.best.devices)
      EXPECT_GE(d, 2) << "uses a badly connected device (fixed " << fixed
                      << ")";
    if (fixed) {
      EXPECT_EQ(r.best.dataParallel, 4);
      EXPECT_EQ(r.best.devices, (std::vector<int>{2, 3, 4, 5}));
    }
  }
}

TEST(ShapeSearch, ReportsWhenNothingFits) {
  Cluster c = regionalCluster(1, 2, 100, 1e9);
  ShapeProblem p = problemFor(c, 4, 1e9, 8);
  ShapeSearchResult r;
  std::string error;
  EXPECT_FALSE(searchShapes(p, {}, r, error));
  EXPECT_NE(error.find("no plan shape fits in memory (with 2 of 2 devices"),
            std::string::npos)
      << error;
  p = problemFor(c, 4, 1e3, 7); // 7 samples: no size, no width divides
  p.microBatchSizes = {2};
  EXPECT_FALSE(searchShapes(p, {}, r, error));
  EXPECT_NE(error.find("a micro-batch size that divides the global batch of 7"),
            std::string::npos)
      << error;
}

TEST(ShapeSearch, NeverWorseThanAnyRankOrderShapeOnSmallClusters) {
  // Exhaustive over unit subsets, factorisations and sizes with the
  // region-major rank-order layout: the search (which starts from that
  // layout among others) is at least as good as every one of them.
  for (double cross : {0.05, 1.0, 20.0}) {
    Cluster c = regionalCluster(3, 2, cross);
    c.devices[4].peakFlops = c.devices[5].peakFlops = 25e12; // slow region
    ShapeProblem p = problemFor(c, 6, 3e8, 24);
    ShapeSearchResult r;
    std::string error;
    ASSERT_TRUE(searchShapes(p, {}, r, error)) << error;
    double exhaustive = std::numeric_limits<double>::infinity();
    for (int mask = 1; mask < 8; ++mask) {
      std::vector<int> devices;
      for (int d = 0; d < 6; ++d)
        if (mask >> (d / 2) & 1)
          devices.push_back(d);
      Cluster sub = subCluster(c, devices);
      int n = static_cast<int>(devices.size());
      for (int pp = 1; pp <= n; ++pp) {
        if (n % pp)
          continue;
        int dp = n / pp;
        for (int64_t size : p.microBatchSizes) {
          if (p.globalBatch % (dp * size))
            continue;
          HeteroProblem h;
          h.cluster = &sub;
          for (const ChainBlock &b : p.workload.blocks)
            h.workload.blocks.push_back(
                {b.flops * size, b.parameterBytes, b.activationBytes * size});
          h.workload.boundaryBytes = p.workload.boundaryBytes * size;
          h.workload.gradientBytesPerParameterByte =
              p.workload.gradientBytesPerParameterByte;
          h.dataParallel = dp;
          h.pipelineParallel = pp;
          h.training.stages.microBatches =
              static_cast<int>(p.globalBatch / (dp * size));
          Partition rank(pp);
          for (int i = 0; i < n; ++i)
            rank[i / dp].push_back(i);
          exhaustive = std::min(
              exhaustive, HeteroModel(h).evaluate(rank).iterationSeconds());
        }
      }
    }
    EXPECT_LE(r.best.iterationSeconds(), exhaustive * (1 + 1e-12))
        << "cross-region " << cross << " Gbps";
    expectFits(c, r.best);
    // Deterministic: the same problem gives the same plan.
    ShapeSearchResult again;
    ASSERT_TRUE(searchShapes(p, {}, again, error));
    EXPECT_EQ(again.best.stages, r.best.stages);
    EXPECT_EQ(again.best.microBatchSize, r.best.microBatchSize);
  }
}

TEST(ShapeSearch, PlansForAdaTopKWhenThePlanCompresses) {
  // A model of 4 GB state per device's worth of layers on 8 GB devices in
  // two regions joined at 0.5 Gbps: pipelining across the regions is
  // needed to use both, and its 100 MB activations dominate. Compressed
  // (r = 20) the same search finds a plan at least 5x faster (17x here).
  Cluster c = regionalCluster(2, 4, 0.5, /*memory=*/8e9);
  ShapeProblem p = problemFor(c, 8, 1e9, 32);
  p.workload.boundaryBytes = 1e8;
  ShapeSearchResult dense, compressed;
  std::string error;
  ASSERT_TRUE(searchShapes(p, {}, dense, error)) << error;
  p.training.compression.targetRatio = 20;
  ASSERT_TRUE(searchShapes(p, {}, compressed, error)) << error;
  expectFits(c, compressed.best);
  EXPECT_GE(dense.best.iterationSeconds() / compressed.best.iterationSeconds(),
            5);
}
