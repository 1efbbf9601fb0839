//===- CompressionTest.cpp - AdaTopK ratios -------------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Compression.h"

#include <gtest/gtest.h>

using namespace dtfm::planner;

namespace {

// 1e8 bytes (8e8 bits) over 10, 1 and 0.1 Gbps, no latency: 0.08, 0.8, 8 s.
std::vector<LinkTransfer> threeLinks() {
  return {{1e8, 0, 10}, {1e8, 0, 1}, {1e8, 0, 0.1}};
}

TEST(AdaTopK, RatiosFollowEquationSeven) {
  CompressionOptions options;
  options.targetRatio = 10;
  std::vector<LinkCompression> plan = planCompression(threeLinks(), options);
  // Slowest: r_i = 3 r = 30, bytes = 3/30 of dense = dense / r.
  EXPECT_TRUE(plan[2].compressed);
  EXPECT_DOUBLE_EQ(plan[2].ratio, 30);
  EXPECT_DOUBLE_EQ(plan[2].bytes, 1e7);
  EXPECT_DOUBLE_EQ(plan[2].seconds, 0.8);
  // Middle: r_i = 3 * 10 * 0.8 / 8 = 3, which would not shrink: dense.
  EXPECT_FALSE(plan[1].compressed);
  EXPECT_DOUBLE_EQ(plan[1].bytes, 1e8);
  // Fastest: r_i = max(1, 0.3) = 1: dense.
  EXPECT_FALSE(plan[0].compressed);
  EXPECT_DOUBLE_EQ(plan[0].seconds, 0.08);
}

TEST(AdaTopK, UniformBaselineAndThreshold) {
  CompressionOptions options;
  options.targetRatio = 10;
  options.uniform = true;
  std::vector<LinkCompression> plan = planCompression(threeLinks(), options);
  for (const LinkCompression &c : plan) {
    EXPECT_TRUE(c.compressed);
    EXPECT_DOUBLE_EQ(c.ratio, 10);
    EXPECT_DOUBLE_EQ(c.bytes, 3e7);
  }
  // Links faster than half the slowest stay dense.
  options.denseBelow = 0.5;
  plan = planCompression(threeLinks(), options);
  EXPECT_FALSE(plan[0].compressed);
  EXPECT_FALSE(plan[1].compressed);
  EXPECT_TRUE(plan[2].compressed);
}

TEST(AdaTopK, NoCompressionWithRatioOne) {
  std::vector<LinkCompression> plan = planCompression(threeLinks(), {});
  for (const LinkCompression &c : plan) {
    EXPECT_FALSE(c.compressed);
    EXPECT_DOUBLE_EQ(c.bytes, 1e8);
  }
}

} // namespace
