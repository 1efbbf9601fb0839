//===- LrScheduleTest.cpp - Learning-rate schedules -----------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The schedules' rates at the steps where their formulas are known by hand
// (PyTorch's LambdaLR convention: the update at 0-based step s), and every
// refusal of LrSchedule::check.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Support/LrSchedule.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace dtfm::optim;

namespace {
LrSchedule make(LrScheduleKind kind, double lr, double minLr, int64_t warmup,
                int64_t total, int64_t decay = 0) {
  LrSchedule s;
  s.kind = kind;
  s.lr = lr;
  s.minLr = minLr;
  s.warmupSteps = warmup;
  s.totalSteps = total;
  s.decaySteps = decay;
  return s;
}
} // namespace

TEST(LrScheduleTest, WarmupNeverTrainsAtZero) {
  LrSchedule s = make(LrScheduleKind::Constant, 0.3, 0, 2, 0);
  EXPECT_EQ(s.check(), "");
  EXPECT_DOUBLE_EQ(s.at(0), 0.1); // (0 + 1) / (2 + 1)
  EXPECT_DOUBLE_EQ(s.at(1), 0.2);
  EXPECT_DOUBLE_EQ(s.at(2), 0.3);
  EXPECT_DOUBLE_EQ(s.at(1000), 0.3);
  EXPECT_TRUE(s.varies());
  EXPECT_FALSE(make(LrScheduleKind::Constant, 0.3, 0, 0, 0).varies());
}

TEST(LrScheduleTest, CosineGoesFromLrToMinLr) {
  // Warmup 2, then 4 steps of cosine (p = 0, 1/4, 1/2, 3/4), then min-lr.
  LrSchedule s = make(LrScheduleKind::Cosine, 1.0, 0.2, 2, 6);
  EXPECT_EQ(s.check(), "");
  EXPECT_DOUBLE_EQ(s.at(1), 2.0 / 3);
  EXPECT_DOUBLE_EQ(s.at(2), 1.0);
  EXPECT_NEAR(s.at(3), 0.2 + 0.8 * (1 + std::cos(M_PI / 4)) / 2, 1e-15);
  EXPECT_NEAR(s.at(4), 0.6, 1e-15);
  EXPECT_NEAR(s.at(5), 0.2 + 0.8 * (1 + std::cos(3 * M_PI / 4)) / 2, 1e-15);
  EXPECT_DOUBLE_EQ(s.at(6), 0.2);
  EXPECT_DOUBLE_EQ(s.at(60), 0.2);
  // Never rises after the warmup.
  for (int64_t step = 2; step < 10; ++step)
    EXPECT_LE(s.at(step + 1), s.at(step));
}

TEST(LrScheduleTest, LinearAndWsd) {
  LrSchedule linear = make(LrScheduleKind::Linear, 1.0, 0, 0, 4);
  EXPECT_DOUBLE_EQ(linear.at(0), 1.0);
  EXPECT_DOUBLE_EQ(linear.at(1), 0.75);
  EXPECT_DOUBLE_EQ(linear.at(3), 0.25);
  EXPECT_DOUBLE_EQ(linear.at(4), 0.0);
  // Warmup 1, stable until step 6, then 4 decay steps to 0.1.
  LrSchedule wsd = make(LrScheduleKind::Wsd, 1.0, 0.1, 1, 10, 4);
  EXPECT_EQ(wsd.check(), "");
  EXPECT_DOUBLE_EQ(wsd.at(0), 0.5);
  for (int64_t step = 1; step < 6; ++step)
    EXPECT_DOUBLE_EQ(wsd.at(step), 1.0);
  EXPECT_DOUBLE_EQ(wsd.at(6), 1.0);
  EXPECT_DOUBLE_EQ(wsd.at(7), 0.1 + 0.9 * 0.75);
  EXPECT_DOUBLE_EQ(wsd.at(9), 0.1 + 0.9 * 0.25);
  EXPECT_DOUBLE_EQ(wsd.at(10), 0.1);
}

TEST(LrScheduleTest, NamesRoundTrip) {
  for (LrScheduleKind kind : {LrScheduleKind::Constant, LrScheduleKind::Cosine,
                              LrScheduleKind::Linear, LrScheduleKind::Wsd})
    EXPECT_EQ(lrScheduleOf(lrScheduleName(kind)), kind);
  EXPECT_EQ(lrScheduleOf("exponential"), std::nullopt);
  EXPECT_EQ(lrScheduleNames(), "constant, cosine, linear or wsd");
}

TEST(LrScheduleTest, BadSchedulesAreRefused) {
  using K = LrScheduleKind;
  EXPECT_EQ(make(K::Constant, 0, 0, 0, 0).check(),
            "lr must be positive and finite, got 0");
  EXPECT_EQ(make(K::Constant, NAN, 0, 0, 0).check(),
            "lr must be positive and finite, got nan");
  EXPECT_EQ(make(K::Cosine, 1, 2, 0, 10).check(),
            "min-lr must be in [0, lr] (lr 1), got 2");
  EXPECT_EQ(make(K::Cosine, 1, -1, 0, 10).check(),
            "min-lr must be in [0, lr] (lr 1), got -1");
  EXPECT_EQ(make(K::Constant, 1, 0, -1, 0).check(),
            "warmup-steps must be in [0, 1e12], got -1");
  EXPECT_EQ(make(K::Constant, 1, 0.5, 0, 0).check(),
            "min-lr needs a decaying lr-schedule (cosine, linear or wsd)");
  EXPECT_EQ(make(K::Constant, 1, 0, 5, 3).check(),
            "total-steps 3 is shorter than warmup-steps 5");
  EXPECT_EQ(make(K::Cosine, 1, 0, 0, 0).check(),
            "lr-schedule=cosine needs total-steps greater than warmup-steps "
            "(0), got 0");
  EXPECT_EQ(make(K::Linear, 1, 0, 10, 10).check(),
            "lr-schedule=linear needs total-steps greater than warmup-steps "
            "(10), got 10");
  EXPECT_EQ(make(K::Wsd, 1, 0, 2, 10, 0).check(),
            "lr-schedule=wsd needs decay-steps in [1, total-steps - "
            "warmup-steps] = [1, 8], got 0");
  EXPECT_EQ(make(K::Wsd, 1, 0, 2, 10, 9).check(),
            "lr-schedule=wsd needs decay-steps in [1, total-steps - "
            "warmup-steps] = [1, 8], got 9");
  EXPECT_EQ(make(K::Cosine, 1, 0, 0, 10, 3).check(),
            "decay-steps needs lr-schedule=wsd");
}
