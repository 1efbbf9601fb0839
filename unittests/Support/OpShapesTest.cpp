//===- OpShapesTest.cpp - The shared op rules -----------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The rules the dialect verifiers and the runtime's plan verifier share
// (test/Dialect/Dtfm/invalid.mlir checks them through the dialect,
// test/Runtime/verify-plan-hostile.test through plan files); here the values
// that crashed the runtime before it had them.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Transfers.h"
#include "dtfm/Support/OpShapes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace dtfm;
using shapes::TensorType;

TEST(OpShapesTest, TypeTextIsMlirs) {
  EXPECT_EQ(shapes::typeText({{2, 3}, "f32"}), "'tensor<2x3xf32>'");
  EXPECT_EQ(shapes::typeText({{}, "i1"}), "'tensor<i1>'");
  EXPECT_EQ(shapes::shapeText({}), "[]");
}

TEST(OpShapesTest, InRangeRefusesWrappingAndHugeAndUnknown) {
  EXPECT_EQ(shapes::inRange({{4, 8}, "f32"}, "result #0"), "");
  // 6579642004965823102 x 1087609157802800189 wraps to 6 elements.
  EXPECT_NE(shapes::inRange({{6579642004965823102, 1087609157802800189}, "f32"},
                            "result #0"),
            "");
  EXPECT_NE(shapes::inRange({{int64_t(1) << 62}, "f32"}, "x"), "");
  EXPECT_NE(shapes::inRange({{-1, 8}, "f32"}, "x"), "");
  EXPECT_EQ(shapes::inRange({{4}, "f33"}, "result #0"),
            "result #0 has unknown element type 'f33'");
}

TEST(OpShapesTest, AttentionRefusesZeroHeads) {
  TensorType q{{1, 4, 8}, "f32"};
  EXPECT_EQ(shapes::causalAttention(q, q, q, 0, 0, q),
            "expected a positive num_heads, found 0");
  EXPECT_EQ(shapes::causalAttention(q, q, q, 2, -2, q),
            "expected a positive num_kv_heads, found -2");
  EXPECT_EQ(shapes::causalAttention(q, q, q, 2, 2, q), "");
  EXPECT_EQ(shapes::causalAttention(q, q, q, 3, 3, q),
            "expected hidden size 8 divisible by num_heads 3");
}

TEST(OpShapesTest, GroupedQueryAttentionAndRotary) {
  TensorType q{{1, 4, 8}, "f32"}, kv{{1, 4, 4}, "f32"};
  EXPECT_EQ(shapes::causalAttention(q, kv, kv, 4, 2, q), "");
  EXPECT_EQ(shapes::causalAttention(q, kv, kv, 4, 3, q),
            "expected num_kv_heads 3 dividing num_heads 4");
  EXPECT_EQ(shapes::causalAttention(q, q, q, 4, 2, q),
            "expected key and value of shape [1, 4, 4] (2 heads of 2) and "
            "query's element type, found 'tensor<1x4x8xf32>' and "
            "'tensor<1x4x8xf32>'");
  EXPECT_EQ(shapes::rotary(q, 4, 1e4, q), "");
  EXPECT_EQ(shapes::rotary(q, 8, 1e4, q),
            "expected an even head dimension, found 1");
  EXPECT_EQ(shapes::rotary(q, 4, 1.0, q),
            "expected a finite theta > 1, found 1");
}

TEST(OpShapesTest, LinearInfersItsResult) {
  TensorType x{{2, 3}, "f32"}, w{{3, 5}, "f32"}, b{{5}, "f32"};
  EXPECT_EQ(shapes::linear(x, w, &b, {{2, 5}, "f32"}), "");
  EXPECT_EQ(shapes::linear(x, w, &b, {{2, 4}, "f32"}),
            "expected result type 'tensor<2x5xf32>', found 'tensor<2x4xf32>'");
  EXPECT_EQ(shapes::linear(x, b, nullptr, {{2, 5}, "f32"}),
            "expected a rank-2 weight [in, out], found [5]");
}

TEST(OpShapesTest, NonFiniteAttributesAreRefused) {
  double nan = std::numeric_limits<double>::quiet_NaN();
  double inf = std::numeric_limits<double>::infinity();
  TensorType t{{4}, "f32"};
  EXPECT_NE(shapes::pow(t, nan, t), "");
  dtfm::optim::LrSchedule nanRate, rate;
  nanRate.lr = nan;
  rate.lr = 1e-3;
  EXPECT_NE(shapes::sgdUpdate(t, t, t, nanRate, 0, 0, 0), "");
  EXPECT_NE(shapes::sgdUpdate(t, t, t, rate, inf, 0, 0), "");
  EXPECT_NE(shapes::sgdUpdate(t, t, t, rate, -1, 0, 0), "");
  EXPECT_NE(shapes::adamwUpdate(t, t, t, rate, 0, 0.9, 0.999, 1e-8, inf), "");
  EXPECT_EQ(shapes::adamwUpdate(t, t, t, rate, 1, 0.9, 0.999, 1e-8, 0), "");
  EXPECT_NE(shapes::layerNorm({{2, 4}, "f32"}, t, t, nan, {{2, 4}, "f32"}),
            "");
  EXPECT_NE(shapes::transfer(t, 1, 16, format::WireCodec::Dense, false, inf, 1),
            "");
  EXPECT_NE(shapes::param("w", 3, &nan), "");
  double scale = 0.02;
  EXPECT_EQ(shapes::param("w", 3, &scale), "");
  EXPECT_NE(shapes::param("w", 7, nullptr), "");
}

TEST(OpShapesTest, WindowsAndSlicesStayInRange) {
  TensorType x{{1, 1, 4, 4}, "f32"};
  EXPECT_EQ(shapes::pool2d(x, {2, 2}, {0, 1}, {0, 0, 0, 0}, x),
            "expected positive strides, found [0, 1]");
  EXPECT_EQ(shapes::pool2d(x, {2, 2}, {2, 2}, {0, 0, 0, 0},
                           {{1, 1, 2, 2}, "f32"}),
            "");
  // Huge strides cannot overflow the output-size arithmetic.
  EXPECT_NE(shapes::pool2d(x, {2, 2}, {int64_t(1) << 62, 1}, {0, 0, 0, 0}, x),
            "");
  EXPECT_EQ(shapes::slice({{10}, "f32"}, {1}, {10}, {4}, {{3}, "f32"}), "");
  EXPECT_EQ(shapes::divisorPadding({0, 1, 1, 0}, {1, 1, 2, 2}), "");
  EXPECT_EQ(shapes::divisorPadding({0, 0, 0, -1}, {1, 1, 2, 2}),
            "expected divisor_padding within the padding [1, 1, 2, 2], found "
            "[0, 0, 0, -1]");
  EXPECT_NE(shapes::divisorPadding({0, 0, 3, 0}, {1, 1, 2, 2}), "");
}

TEST(TransfersTest, PairsEachSendWithOneReceive) {
  using planner::TransferEnd;
  std::vector<TransferEnd> ends = {{true, 0, "a", "b", 16},
                                   {false, 0, "a", "b", 16}};
  EXPECT_TRUE(planner::checkTransfers(ends).empty());
  ends[1].bytes = 8;
  auto problems = planner::checkTransfers(ends);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].end, 1u);
  EXPECT_EQ(problems[0].message,
            "receives 8 bytes but its send (tag 0) sends 16");
  ends.push_back({false, 0, "a", "b", 16});
  ends[1].bytes = 16;
  problems = planner::checkTransfers(ends);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].message, "is a second recv for tag 0 (one per send)");
  problems = planner::checkTransfers({{false, 3, "a", "b", 4}});
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].message, "with tag 3 has no send");
}
