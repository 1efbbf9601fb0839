//===- HeteroTest.cpp - Mixed-device planning ------------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Hetero.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

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
  p.workload.blocks.assign(layers, ChainBlock{1e12, 1e6, 1e6});
  p.workload.boundaryBytes = 1e6;
  p.dataParallel = dp;
  p.pipelineParallel = pp;
  p.training.stages.microBatches = 8;
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
  // Equal layers on groups of identical pairs leave the slow stages the
  // bottleneck: the search gives the fast devices' stages more layers.
  Partition rank{{0, 1}, {2, 3}, {4, 5}, {6, 7}};
  EXPECT_GE(model.evaluate(rank, false).iterationSeconds() /
                cost.iterationSeconds(),
            1.3);
  // Groups of mixed speeds (one all-fast pipeline, one all-slow) with equal
  // layers: uneven replicas give the fast pipeline 4x the micro-batches,
  // which makes them as good as anything the search found (within 5%).
  Partition mixedPairs{{0, 4}, {1, 5}, {2, 6}, {3, 7}};
  HeteroCost mixed = model.evaluate(mixedPairs, false);
  ASSERT_EQ(mixed.pipelineMicroBatches.size(), 2u);
  EXPECT_GE(mixed.pipelineMicroBatches[0], 3 * mixed.pipelineMicroBatches[1]);
  EXPECT_LE(mixed.iterationSeconds() / cost.iterationSeconds(), 1.05);
  EXPECT_LE(cost.iterationSeconds(), mixed.iterationSeconds());
}

TEST(Hetero, InfeasibleMemoryIsReported) {
  Cluster c = mixedCluster(2, 0, 1.0, /*memory=*/1e3);
  HeteroModel model(problemFor(c, 1, 2, 4));
  HeteroCost cost = model.evaluate({{0}, {1}});
  EXPECT_FALSE(cost.feasible);
  EXPECT_NE(cost.error.find("does not fit"), std::string::npos) << cost.error;
  EXPECT_EQ(cost.iterationSeconds(), std::numeric_limits<double>::infinity());
}

/// Two devices of 1e12 FLOP/s joined by a link of `delayMs` and 8 Gbps
/// (1 GB/s); two blocks of `flops` each, 1e8 bytes at the boundary,
/// 8 micro-batches, one stage per device.
HeteroProblem twoStageProblem(const Cluster &c, double flops) {
  HeteroProblem p;
  p.cluster = &c;
  p.workload.blocks.assign(2, ChainBlock{flops, 1e6, 1e6});
  p.workload.boundaryBytes = 1e8;
  p.dataParallel = 1;
  p.pipelineParallel = 2;
  p.training.stages.microBatches = 8;
  return p;
}

Cluster linkedPair(double delayMs) {
  Cluster c;
  c.name = "pair";
  c.delayMs = SquareMatrix(2, delayMs);
  c.bandwidthGbps = SquareMatrix(2, 8);
  for (int i = 0; i < 2; ++i)
    c.devices.push_back({"gpu" + std::to_string(i), "lan", 1e12, 1, 1e12});
  return c;
}

TEST(Hetero, PipelineTimeOverlapsLatencyAndIsBoundByTheScheduleWindow) {
  // C = 1 s per stage, each transfer 0.1 s latency + 0.1 s on the wire.
  // One micro-batch's round trip from stage 0: 1 + 1 + 2 x 0.2 = 2.4 s.
  // 1F1B keeps 2 in flight at stage 0: steps of max(C 1, send 0.1,
  // 2.4 / 2) = 1.2 s; total 2.4 + 7 x 1.2 = 10.8 s.
  Cluster c = linkedPair(100);
  HeteroProblem p = twoStageProblem(c, 1e12);
  HeteroCost oneF = HeteroModel(p).evaluate({{0}, {1}});
  ASSERT_TRUE(oneF.feasible) << oneF.error;
  EXPECT_NEAR(oneF.pipelineSeconds, 10.8, 1e-9);
  // GPipe keeps all 8 in flight: compute-bound steps of 1 s.
  p.training.stages.schedule = PipelineSchedule::GPipe;
  EXPECT_NEAR(HeteroModel(p).evaluate({{0}, {1}}).pipelineSeconds, 9.4, 1e-9);
  // A 1 s latency with 0.1 s of compute: the round trip is 0.2 + 2 x 1.1 =
  // 2.4 s; GPipe's 8 in flight hide the latency (steps of 2.4 / 8 = 0.3 s,
  // not the 2.2 s a transfer takes end to end).
  Cluster far = linkedPair(1000);
  HeteroProblem q = twoStageProblem(far, 1e11);
  q.training.stages.schedule = PipelineSchedule::GPipe;
  EXPECT_NEAR(HeteroModel(q).evaluate({{0}, {1}}).pipelineSeconds,
              2.4 + 7 * 0.3, 1e-9);
}

TEST(Hetero, AdaTopKShrinksThePipelineTransfers) {
  // Communication-bound: C = 0.01 s, transfers 1 ms + 0.1 s. Dense: round
  // trip 0.02 + 2 x 0.101 = 0.222 s, steps 0.111 s (window 2) -> 0.999 s.
  // r = 10: both transfers are the slowest, ratio 3 r = 30, 3 / 30 of the
  // bytes: 1 ms + 0.01 s each; round trip 0.042 s, steps 0.021 s -> 0.189 s.
  Cluster c = linkedPair(1);
  HeteroProblem p = twoStageProblem(c, 1e10);
  EXPECT_NEAR(HeteroModel(p).evaluate({{0}, {1}}).pipelineSeconds, 0.999,
              1e-9);
  p.training.compression.targetRatio = 10;
  EXPECT_NEAR(HeteroModel(p).evaluate({{0}, {1}}).pipelineSeconds, 0.189,
              1e-9);
}

TEST(Hetero, TiedParametersAcrossStagesAreExchangedOncePerIteration) {
  // Block 0 owns 1e9 bytes that block 1 reads: on different stages the
  // weight goes out and its gradient comes back, 0.1 s + 1 s each way (the
  // two directions on the two devices at once).
  Cluster c = linkedPair(100);
  HeteroProblem p = twoStageProblem(c, 1e12);
  HeteroCost untied = HeteroModel(p).evaluate({{0}, {1}});
  p.workload.tied.push_back({0, 1, 1e9});
  HeteroCost tied = HeteroModel(p).evaluate({{0}, {1}});
  EXPECT_DOUBLE_EQ(untied.dataParallelSeconds, 0);
  EXPECT_NEAR(tied.dataParallelSeconds, 1.1, 1e-9);
  EXPECT_DOUBLE_EQ(tied.pipelineSeconds, untied.pipelineSeconds);
  // On one stage they cost nothing.
  p.pipelineParallel = 1;
  p.dataParallel = 2;
  HeteroProblem untiedOneStage = p;
  untiedOneStage.workload.tied.clear();
  EXPECT_DOUBLE_EQ(
      HeteroModel(p).evaluate({{0, 1}}).dataParallelSeconds,
      HeteroModel(untiedOneStage).evaluate({{0, 1}}).dataParallelSeconds);
}

TEST(Hetero, ClippingCostsOneReductionOfTheNorm) {
  // Two stages 100 ms apart at 1 GB/s: the norm (one pipeline: two
  // doubles, 16 bytes) goes to the first device and back, 2 x (0.1 s +
  // 16 ns), on top of the (here no) data-parallel time.
  Cluster c = linkedPair(100);
  HeteroProblem p = twoStageProblem(c, 1e12);
  HeteroCost plain = HeteroModel(p).evaluate({{0}, {1}});
  p.training.clipGradients = true;
  HeteroCost clipped = HeteroModel(p).evaluate({{0}, {1}});
  ASSERT_TRUE(plain.feasible && clipped.feasible);
  EXPECT_NEAR(clipped.dataParallelSeconds - plain.dataParallelSeconds,
              2 * (0.1 + 16 / 1e9), 1e-12);
  EXPECT_DOUBLE_EQ(clipped.pipelineSeconds, plain.pipelineSeconds);
}

TEST(Hetero, TiedExchangeOverlapsTheDataParallelBuckets) {
  // Two stages of two replicas, 1e9 tied bytes between them (1.1 s each
  // way, as above) and 2e9 gradient bytes per block: the tied exchange
  // runs while the buckets are on the group's links, and the steps wait
  // for both (the simulator's layOutBuckets), so the sync is the longer.
  Cluster c;
  c.name = "four";
  c.delayMs = SquareMatrix(4, 100);
  c.bandwidthGbps = SquareMatrix(4, 8);
  for (int i = 0; i < 4; ++i)
    c.devices.push_back({"gpu" + std::to_string(i), "lan", 1e12, 1, 1e13});
  HeteroProblem p = twoStageProblem(c, 1e12);
  p.workload.blocks.assign(2, ChainBlock{1e12, 2e9, 1e6});
  p.dataParallel = 2;
  HeteroCost untied = HeteroModel(p).evaluate({{0, 1}, {2, 3}});
  p.workload.tied.push_back({0, 1, 1e9});
  HeteroCost tied = HeteroModel(p).evaluate({{0, 1}, {2, 3}});
  ASSERT_TRUE(untied.feasible && tied.feasible);
  EXPECT_GT(untied.dataParallelSeconds, 0);
  EXPECT_NEAR(tied.dataParallelSeconds,
              std::max(untied.dataParallelSeconds, 1.1), 1e-9);
}

TEST(Hetero, OneFOneBCyclesBetweenTwoStagesBoundTheStep) {
  // Four stages, C = 0.01 s each; stages 0-1 and 2-3 on (nearly) free
  // links, stages 1 and 2 10 ms and 0.01 s of bytes apart. One micro-
  // batch's round trip from stage 0 is 0.04 + 2 x 0.02 = 0.08 s (window
  // 4: 0.02 s a step), from stage 1 0.07 s (window 3: 0.0233 s). But 1F1B's
  // fixed orders close a cycle between stages 1 and 2 -- their compute and
  // the slow link both ways, 0.06 s -- that advances 3 - 2 + 1 = 2
  // micro-batches: steps of 0.03 s, 0.08 + 7 x 0.03 = 0.29 s.
  Cluster c;
  c.name = "two-sites";
  c.delayMs = SquareMatrix(4, 0);
  c.bandwidthGbps = SquareMatrix(4, 1e9);
  for (int a : {0, 1})
    for (int b : {2, 3}) {
      c.delayMs(a, b) = c.delayMs(b, a) = 10;
      c.bandwidthGbps(a, b) = c.bandwidthGbps(b, a) = 8;
    }
  for (int i = 0; i < 4; ++i)
    c.devices.push_back({"gpu" + std::to_string(i), "lan", 1e12, 1, 1e12});
  HeteroProblem p = twoStageProblem(c, 1e10);
  p.workload.blocks.assign(4, ChainBlock{1e10, 1e6, 1e6});
  p.workload.boundaryBytes = 1e7;
  p.pipelineParallel = 4;
  HeteroCost cost = HeteroModel(p).evaluate({{0}, {1}, {2}, {3}});
  ASSERT_TRUE(cost.feasible) << cost.error;
  EXPECT_NEAR(cost.pipelineSeconds, 0.08 + 7 * 0.03, 1e-6);
  // GPipe keeps every micro-batch in flight: no such cycle.
  p.training.stages.schedule = PipelineSchedule::GPipe;
  EXPECT_LT(HeteroModel(p).evaluate({{0}, {1}, {2}, {3}}).pipelineSeconds,
            0.08 + 7 * 0.02 + 1e-6);
}

TEST(Hetero, GradientBucketsCountOnlyWhatOutlastsTheBackward) {
  // One stage on two devices (1e12 FLOP/s; 10 ms, 1e9 B/s between them),
  // two blocks of 3e12 FLOPs, 2e12 of them backward, 1e9 gradient bytes
  // each. The backward (4 s) completes block 1's gradients halfway and
  // block 0's at its end. One bucket: 2 * (0.01 + 2e9 / 2e9) = 2.02 s, all
  // after the backward. Buckets (auto): block 1's 1.02 s all-reduce hides
  // behind the rest of the backward, block 0's 1.02 s is left.
  Cluster c = linkedPair(10);
  HeteroProblem p;
  p.cluster = &c;
  p.workload.blocks.assign(2, ChainBlock{3e12, 1e9, 1e6, 2e12});
  p.dataParallel = 2;
  p.pipelineParallel = 1;
  HeteroCost buckets = HeteroModel(p).evaluate({{0, 1}});
  ASSERT_TRUE(buckets.feasible) << buckets.error;
  EXPECT_NEAR(buckets.dataParallelSeconds, 1.02, 1e-9);
  p.training.bucketCapBytes = 0;
  EXPECT_NEAR(HeteroModel(p).evaluate({{0, 1}}).dataParallelSeconds, 2.02,
              1e-9);
  // Local steps every 4 iterations: a quarter of one exchange.
  p.training.syncEvery = 4;
  EXPECT_NEAR(HeteroModel(p).evaluate({{0, 1}}).dataParallelSeconds,
              2.02 / 4, 1e-9);
  // In two fragments (Streaming DiLoCo): two exchanges of half the bytes,
  // 2 * (0.01 + 1e9 / 2e9) = 1.02 s each, every 4 iterations.
  p.training.syncFragments = 2;
  EXPECT_NEAR(HeteroModel(p).evaluate({{0, 1}}).dataParallelSeconds,
              2 * 1.02 / 4, 1e-9);
  // Each overlapping one step of the 6 s pipeline: nothing left exposed;
  // on the 10 s links a fragment takes 2 * (10 + 0.5) = 21 s, 15 s of it
  // exposed.
  p.training.syncOverlap = 1;
  EXPECT_NEAR(HeteroModel(p).evaluate({{0, 1}}).dataParallelSeconds, 0,
              1e-12);
  {
    Cluster slow = linkedPair(10000);
    HeteroProblem far = p;
    far.cluster = &slow;
    EXPECT_NEAR(HeteroModel(far).evaluate({{0, 1}}).dataParallelSeconds,
                2 * (21 - 6) / 4.0, 1e-9);
  }
  p.training.syncFragments = 1;
  p.training.syncOverlap = 0;
  // auto: the pipeline takes 6 s (two blocks of 3e12 FLOPs at 1e12); the
  // buckets leave 1.02 s, over 10% of it; 2.02 / 2 = 1.01 s too, and
  // 2.02 / 5 = 0.404 fits: H = 5.
  p.training.syncEvery = kSyncEveryAuto;
  HeteroCost automatic = HeteroModel(p).evaluate({{0, 1}});
  EXPECT_NEAR(automatic.pipelineSeconds, 6, 1e-9);
  EXPECT_EQ(automatic.syncEvery, 5);
  EXPECT_NEAR(automatic.dataParallelSeconds, 2.02 / 5, 1e-9);
  // On links 100 times faster one bucket leaves 0.0202 s: synchronous.
  Cluster fast = linkedPair(0.1);
  for (size_t a = 0; a < 2; ++a)
    for (size_t b = 0; b < 2; ++b)
      if (a != b)
        fast.bandwidthGbps(a, b) *= 100;
  HeteroProblem quick = p;
  quick.cluster = &fast;
  quick.training.bucketCapBytes = 0;
  HeteroCost synchronous = HeteroModel(quick).evaluate({{0, 1}});
  EXPECT_EQ(synchronous.syncEvery, 0);
  EXPECT_NEAR(synchronous.dataParallelSeconds, 2 * (0.0001 + 0.01), 1e-9);
  p.training.syncEvery = 0;
  // int8 on the wire (f32 gradients: 2.5e8 elements a block): one bucket of
  // 5e8 elements takes 5e8 + 4 * ceil(5e8 / 256) bytes, 2 * (0.01 +
  // bytes / 2e9) s; the buckets leave the last block's half of it.
  p.training.dpCompression = {dtfm::format::WireCodec::Int8};
  p.training.bucketCapBytes = 0;
  double int8Bytes = 5e8 + 4 * std::ceil(5e8 / 256);
  EXPECT_NEAR(HeteroModel(p).evaluate({{0, 1}}).dataParallelSeconds,
              2 * (0.01 + int8Bytes / 2e9), 1e-9);
  // auto: int8 takes 0.528 s of dense's 2.02 s here, well over the 20% bar.
  p.training.dpCompression.automatic = true;
  EXPECT_NEAR(HeteroModel(p).evaluate({{0, 1}}).dataParallelSeconds,
              2 * (0.01 + int8Bytes / 2e9), 1e-9);
  // Far links (10 s latency): int8 would save 0.97 s of 22 s, under 20%.
  Cluster far = linkedPair(10000);
  HeteroProblem q = p;
  q.cluster = &far;
  EXPECT_NEAR(HeteroModel(q).evaluate({{0, 1}}).dataParallelSeconds,
              2 * (10 + 2e9 / 2e9), 1e-9);
  p.training.dpCompression = {};
  p.training.bucketCapBytes = -1;
  // Without backward FLOPs the gradients are complete only at the end.
  p.training.bucketCapBytes = -1;
  p.workload.blocks.assign(2, ChainBlock{3e12, 1e9, 1e6});
  EXPECT_NEAR(HeteroModel(p).evaluate({{0, 1}}).dataParallelSeconds, 2.02,
              1e-9);
}

TEST(Hetero, AutomaticGradientSyncTakesTheCheaperAlgorithm) {
  Cluster c = mixedCluster(4, 0, 1.0);
  c.delayMs(0, 3) = c.delayMs(3, 0) = 40;
  HeteroProblem p = problemFor(c, 4, 1, 4);
  Partition all{{0, 1, 2, 3}};
  p.training.sync = GradientSync::ParameterServer;
  double ps = HeteroModel(p).evaluate(all).dataParallelSeconds;
  p.training.sync = GradientSync::Ring;
  double ring = HeteroModel(p).evaluate(all).dataParallelSeconds;
  p.training.sync = GradientSync::Auto;
  double automatic = HeteroModel(p).evaluate(all).dataParallelSeconds;
  EXPECT_GT(ps, 0);
  EXPECT_GT(ring, 0);
  EXPECT_NE(ps, ring);
  EXPECT_DOUBLE_EQ(automatic, std::min(ps, ring));
}

} // namespace

/// The least latest finish over every split of `total` micro-batches, at
/// least one per pipeline (brute force).
double bestSplitSeconds(const std::vector<std::function<double(int)>> &finish,
                        int total, size_t pipeline = 0) {
  if (pipeline + 1 == finish.size())
    return finish[pipeline](total);
  double best = std::numeric_limits<double>::infinity();
  int rest = static_cast<int>(finish.size() - pipeline - 1);
  for (int m = 1; m + rest <= total; ++m)
    best = std::min(best, std::max(finish[pipeline](m),
                                   bestSplitSeconds(finish, total - m,
                                                    pipeline + 1)));
  return best;
}

TEST(Hetero, SplitMicroBatchesMatchesBruteForce) {
  // Pipelines of fill f_i and step s_i, as the model times them (f + (m -
  // 1) s), plus windowed ones whose step shrinks until m reaches the
  // window (max(s, f / min(m, w)) per step, non-decreasing overall).
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>((state >> 33) % 1000 + 1) / 100;
  };
  for (int trial = 0; trial < 200; ++trial) {
    int pipelines = 2 + trial % 3;
    int total = pipelines + trial % 9;
    std::vector<std::function<double(int)>> finish;
    for (int i = 0; i < pipelines; ++i) {
      double f = next(), s = next(), w = 1 + trial % 4;
      if (trial % 2)
        finish.push_back([f, s](int m) { return f + (m - 1) * s; });
      else
        finish.push_back([f, s, w](int m) {
          return f + (m - 1) * std::max(s, f / std::min<double>(m, w));
        });
    }
    std::vector<int> shares = splitMicroBatches(
        pipelines, total, [&](int i, int m) { return finish[i](m); });
    ASSERT_EQ(static_cast<int>(shares.size()), pipelines);
    int sum = 0;
    double latest = 0;
    for (int i = 0; i < pipelines; ++i) {
      EXPECT_GE(shares[i], 1);
      sum += shares[i];
      latest = std::max(latest, finish[i](shares[i]));
    }
    EXPECT_EQ(sum, total);
    EXPECT_DOUBLE_EQ(latest, bestSplitSeconds(finish, total)) << trial;
  }
}

TEST(Hetero, UnevenReplicasGiveFasterPipelinesMoreMicroBatches) {
  // Two one-stage pipelines, one device 3x faster: 8 micro-batches each
  // take 8 x 1 s on the slow one; split 12 + 4 both take 4 s.
  Cluster c = mixedCluster(2, 1, 3.0);
  HeteroProblem p = problemFor(c, 2, 1, 1);
  HeteroCost cost = HeteroModel(p).evaluate({{0, 1}});
  ASSERT_TRUE(cost.feasible) << cost.error;
  EXPECT_EQ(cost.pipelineMicroBatches, (std::vector<int>{12, 4}));
  EXPECT_NEAR(cost.evenPipelineSeconds, 8.0, 1e-9);
  EXPECT_NEAR(cost.pipelineSeconds, 4.0, 1e-9);
  // Identical devices keep even shares (and say nothing).
  Cluster same = mixedCluster(2, 0, 1.0);
  HeteroProblem q = problemFor(same, 2, 1, 1);
  HeteroCost even = HeteroModel(q).evaluate({{0, 1}});
  EXPECT_TRUE(even.pipelineMicroBatches.empty());
  EXPECT_NEAR(even.pipelineSeconds, 8.0, 1e-9);
  // GPipe holds every micro-batch's activations: a device that cannot hold
  // 12 keeps the even split. Per block: 1e6 parameter bytes x 4 + 1e6
  // activation bytes per micro-batch in flight.
  Cluster small = mixedCluster(2, 1, 3.0, 4e6 + 1e6 * 10);
  HeteroProblem r = problemFor(small, 2, 1, 1);
  r.training.stages.schedule = PipelineSchedule::GPipe;
  HeteroCost capped = HeteroModel(r).evaluate({{0, 1}});
  ASSERT_TRUE(capped.feasible) << capped.error;
  EXPECT_TRUE(capped.pipelineMicroBatches.empty());
  EXPECT_NEAR(capped.pipelineSeconds, 8.0, 1e-9);
}

TEST(Hetero, UnevenReplicasFollowComputeNotLinks) {
  // Identical devices, two two-stage pipelines, every link of device 2 (so
  // one pipeline's inner link, however they pair) 125000x slower (10 s a
  // transfer): shares stay even. A split by link speed
  // alone misjudged communication-bound pipelines (bench-paper world-wide:
  // predicted 29.5 s, simulated 46.5 s against 30.7 s even).
  Cluster c = mixedCluster(4, 0, 1.0);
  for (int other : {0, 1, 3})
    c.bandwidthGbps(2, other) = c.bandwidthGbps(other, 2) = 0.0008;
  HeteroProblem p = problemFor(c, 2, 2, 2);
  HeteroCost cost = HeteroModel(p).evaluate({{0, 2}, {1, 3}});
  ASSERT_TRUE(cost.feasible) << cost.error;
  EXPECT_TRUE(cost.pipelineMicroBatches.empty());
  EXPECT_DOUBLE_EQ(cost.pipelineSeconds, cost.evenPipelineSeconds);
  // Asked to split by whole pipeline time (--dtfm-plan's hetero:link-shares
  // candidate), the pipeline through device 2 takes fewer micro-batches.
  p.training.unevenByLinks = true;
  HeteroCost byLinks = HeteroModel(p).evaluate({{0, 2}, {1, 3}});
  ASSERT_TRUE(byLinks.feasible) << byLinks.error;
  ASSERT_EQ(byLinks.pipelineMicroBatches.size(), 2u);
  EXPECT_LT(byLinks.pipelineMicroBatches[1], byLinks.pipelineMicroBatches[0]);
  EXPECT_EQ(byLinks.pipelineMicroBatches[0] + byLinks.pipelineMicroBatches[1],
            2 * 8); // D_DP x n_b
  EXPECT_LT(byLinks.pipelineSeconds, byLinks.evenPipelineSeconds);
}
