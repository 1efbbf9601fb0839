//===- BucketsTest.cpp - Gradient buckets and their timeline --------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Buckets.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

using namespace dtfm::planner;

namespace {

TEST(Buckets, ConsecutiveGradientsFillABucketUpToTheCap) {
  // 10 + 10 fit 20 exactly; 25 is over the cap and travels alone; the
  // three 5s share the next bucket.
  EXPECT_EQ(assignBuckets({10, 10, 25, 5, 5, 5}, 20),
            (std::vector<int>{0, 0, 1, 2, 2, 2}));
  EXPECT_EQ(assignBuckets({30, 1}, 20), (std::vector<int>{0, 1}));
  EXPECT_EQ(assignBuckets({}, 20), std::vector<int>{});
}

TEST(Buckets, NoCapMeansOneBucket) {
  EXPECT_EQ(assignBuckets({10, 10, 25}, 0), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(assignBuckets({10, 10, 25}, -1), (std::vector<int>{0, 0, 0}));
}

TEST(Buckets, HandComputedTimeline) {
  // The last backward runs 10-18. b0 is complete a quarter of the way
  // (at 12): all-reduce 12-14; b1 at the end (18): 18-19. The optimizer
  // (4 s, half each) steps b0 at 18-20 (the compute slot is free at 18),
  // b1 at 20-22.
  std::vector<SyncBucket> buckets = {{0.25, 2, 0.5}, {1.0, 1, 0.5}};
  BucketTimeline t = layOutBuckets(buckets, 10, 18, 18, 4, 0);
  EXPECT_EQ(t.syncStart, (std::vector<double>{12, 18}));
  EXPECT_EQ(t.syncEnd, (std::vector<double>{14, 19}));
  EXPECT_EQ(t.stepStart, (std::vector<double>{18, 20}));
  EXPECT_EQ(t.stepEnd, (std::vector<double>{20, 22}));
  EXPECT_DOUBLE_EQ(t.end, 22);

  // Values that must arrive first (a tied weight's gradient, at 25) hold
  // every step back.
  t = layOutBuckets(buckets, 10, 18, 18, 4, 25);
  EXPECT_EQ(t.stepStart, (std::vector<double>{25, 27}));
  EXPECT_DOUBLE_EQ(t.end, 29);
}

TEST(Buckets, AnAllReduceLongerThanTheBackwardQueuesTheRest) {
  // b0 (ready at once) takes 10 s; b1, ready at 2, waits for the link.
  BucketTimeline t =
      layOutBuckets({{0, 10, 0.5}, {1, 1, 0.5}}, 0, 2, 2, 2, 0);
  EXPECT_EQ(t.syncStart, (std::vector<double>{0, 10}));
  EXPECT_EQ(t.syncEnd, (std::vector<double>{10, 11}));
  EXPECT_EQ(t.stepEnd, (std::vector<double>{11, 12}));
}

TEST(Buckets, AutoPicksTheCapThatLeavesLeastAfterTheBackward) {
  // Three 1 MiB gradients complete at 1/3, 2/3 and 1 of a 3 s backward;
  // a bucket takes 0.1 s + 1 s per MiB. One bucket: 3.1 s after the
  // backward. 2 MiB: 2-4.1, then 4.1-5.2: 2.2 s. 1 MiB: 1-2.1, 2.1-3.2,
  // 3.2-4.3: 1.3 s, the least. Far links (100 s a bucket) favour one.
  const double mib = 1024 * 1024;
  std::vector<double> bytes(3, mib), ready = {1.0 / 3, 2.0 / 3, 1};
  auto seconds = [&](double b) { return 0.1 + b / mib; };
  BucketPlan plan = planBuckets(bytes, ready, -1, seconds, 3);
  EXPECT_DOUBLE_EQ(plan.capBytes, mib);
  EXPECT_EQ(plan.bucketOf, (std::vector<int>{0, 1, 2}));
  EXPECT_NEAR(plan.exposedSeconds, 1.3, 1e-12);
  EXPECT_NEAR(plan.oneBucketExposedSeconds, 3.1, 1e-12);
  ASSERT_EQ(plan.buckets.size(), 3u);
  EXPECT_DOUBLE_EQ(plan.buckets[0].readyFraction, 1.0 / 3);
  EXPECT_DOUBLE_EQ(plan.buckets[0].seconds, 1.1);
  EXPECT_DOUBLE_EQ(plan.buckets[0].optimizerShare, 1.0 / 3);
  EXPECT_NEAR(planBuckets(bytes, ready, 2 * mib, seconds, 3).exposedSeconds,
              2.2, 1e-12);

  auto farAway = [&](double b) { return 100 + b / mib; };
  plan = planBuckets(bytes, ready, -1, farAway, 3);
  EXPECT_DOUBLE_EQ(plan.capBytes, 0);
  EXPECT_EQ(plan.bucketOf, (std::vector<int>{0, 0, 0}));

  // A fixed cap is kept even when it loses.
  plan = planBuckets(bytes, ready, mib, farAway, 3);
  EXPECT_EQ(plan.bucketOf, (std::vector<int>{0, 1, 2}));
  EXPECT_NEAR(plan.exposedSeconds, 301, 1e-9);
  EXPECT_NEAR(plan.oneBucketExposedSeconds, 103, 1e-9);
}

// The shape search's exposedSyncSeconds (no plan built) is planBuckets'
// figure; auto's is the least over every candidate cap, each planned alone.
TEST(Buckets, ExposedSecondsWithoutAPlanEqualPlanBuckets) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> mib(0.05, 80), unit(0, 1);
  for (int trial = 0; trial < 200; ++trial) {
    int count = static_cast<int>(rng() % 12);
    std::vector<double> bytes(count), ready(count);
    double done = 0;
    for (int i = 0; i < count; ++i) {
      bytes[i] = mib(rng) * 1024 * 1024;
      done = std::min(1.0, done + unit(rng) / 4);
      ready[i] = done;
    }
    double latency = trial % 3 ? 0.001 : 2.0;
    auto seconds = [&](double b) { return latency + b / 2e8; };
    double backward = unit(rng) * 2;
    for (double cap : {-1.0, 0.0, 3.0 * 1024 * 1024, 40.0 * 1024 * 1024}) {
      BucketPlan plan = planBuckets(bytes, ready, cap, seconds, backward);
      EXPECT_EQ(exposedSyncSeconds(bytes, ready, cap, seconds, backward),
                plan.exposedSeconds)
          << "trial " << trial << " cap " << cap;
      if (cap >= 0)
        continue;
      double least = planBuckets(bytes, ready, 0, seconds, backward)
                         .exposedSeconds;
      for (double candidate : kBucketCapCandidatesMiB)
        if (candidate > 0)
          least = std::min(least, planBuckets(bytes, ready,
                                              candidate * 1024 * 1024,
                                              seconds, backward)
                                      .exposedSeconds);
      EXPECT_EQ(plan.exposedSeconds, least) << "trial " << trial;
    }
  }
}

TEST(Buckets, CapOptionIsAutoOrMiB) {
  double cap = 0;
  std::string error;
  EXPECT_TRUE(parseBucketCap("auto", cap, error));
  EXPECT_DOUBLE_EQ(cap, -1);
  EXPECT_TRUE(parseBucketCap("25", cap, error));
  EXPECT_DOUBLE_EQ(cap, 25.0 * 1024 * 1024);
  EXPECT_TRUE(parseBucketCap("0", cap, error));
  EXPECT_DOUBLE_EQ(cap, 0);
  for (const char *bad : {"", "-1", "nan", "inf", "25MB", "2e6", " 1"}) {
    EXPECT_FALSE(parseBucketCap(bad, cap, error)) << bad;
    EXPECT_EQ(error, std::string("bucket-mb must be auto or a number of MiB "
                                 "in [0, 1e6] (0: one bucket), got '") +
                         bad + "'");
  }
}

} // namespace
