//===- CompressionTest.cpp - AdaTopK ratios -------------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Compression.h"
#include "dtfm/Format/Int8.h"

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

// f16 activations: a kept element is its 2-byte value and its 8-byte
// index, 5 dense elements; the slowest link still sends dense / r.
TEST(AdaTopK, KeptElementsCostTheirTypeAndIndex) {
  EXPECT_DOUBLE_EQ(topkKeptElementCost(4), 3);
  EXPECT_DOUBLE_EQ(topkKeptElementCost(2), 5);
  std::vector<LinkTransfer> links = threeLinks();
  for (LinkTransfer &link : links)
    link.elementBytes = 2;
  CompressionOptions options;
  options.targetRatio = 10;
  std::vector<LinkCompression> plan = planCompression(links, options);
  EXPECT_TRUE(plan[2].compressed);
  EXPECT_DOUBLE_EQ(plan[2].ratio, 50);
  EXPECT_DOUBLE_EQ(plan[2].bytes, 1e7);
  // Middle: r_i = 5 * 10 * 0.8 / 8 = 5, which would not shrink: dense.
  EXPECT_FALSE(plan[1].compressed);
  // Uniform r = 4 pays for f32 (3 < 4) but not for f16 (5 > 4).
  options.uniform = true;
  options.targetRatio = 4;
  EXPECT_FALSE(planCompression(links, options)[2].compressed);
  EXPECT_TRUE(planCompression(threeLinks(), options)[2].compressed);
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

// SWARM's 8-bit transfers: f32 activations (4 bytes an element) shrink to
// a byte and a scale per 256; on every link top-k leaves dense, or (auto)
// where they save 20% of the time.
TEST(Int8Links, EveryDenseLinkOrWhereItPays) {
  double int8Bytes = static_cast<double>(dtfm::format::int8Bytes(25000000));
  CompressionOptions options;
  options.linkCodec = {dtfm::format::WireCodec::Int8};
  std::vector<LinkCompression> plan = planCompression(threeLinks(), options);
  for (const LinkCompression &c : plan) {
    EXPECT_EQ(c.wire, dtfm::format::WireCodec::Int8);
    EXPECT_FALSE(c.compressed);
    EXPECT_DOUBLE_EQ(c.bytes, int8Bytes);
  }
  // With AdaTopK the slowest link stays top-k, the others go int8.
  options.targetRatio = 10;
  plan = planCompression(threeLinks(), options);
  EXPECT_TRUE(plan[2].compressed);
  EXPECT_EQ(plan[2].wire, dtfm::format::WireCodec::Dense);
  EXPECT_EQ(plan[1].wire, dtfm::format::WireCodec::Int8);
  EXPECT_EQ(plan[0].wire, dtfm::format::WireCodec::Int8);
  // auto: a latency-bound link (1 s of latency, 0.08 s of bytes) saves
  // under 20% and stays dense; a bandwidth-bound one goes int8.
  std::vector<LinkTransfer> links = {{1e8, 1.0, 10}, {1e8, 0, 10}};
  options = {};
  options.linkCodec.automatic = true;
  plan = planCompression(links, options);
  EXPECT_EQ(plan[0].wire, dtfm::format::WireCodec::Dense);
  EXPECT_DOUBLE_EQ(plan[0].bytes, 1e8);
  EXPECT_EQ(plan[1].wire, dtfm::format::WireCodec::Int8);
  EXPECT_DOUBLE_EQ(plan[1].bytes, int8Bytes);
  // A bf16 tensor (2 bytes an element) shrinks by about half.
  links = {{1e8, 0, 10, 2}};
  options.linkCodec = {dtfm::format::WireCodec::Int8};
  EXPECT_DOUBLE_EQ(planCompression(links, options)[0].bytes,
                   static_cast<double>(dtfm::format::int8Bytes(50000000)));
}

// pp-compression takes the codecs for pipeline transfers and auto; top-k
// on the links is AdaTopK's ops, not a codec of the option.
TEST(Int8Links, Spellings) {
  auto parse = [](const char *name) {
    return parseCodecChoice(name, CodecUse::PipelineTransfers);
  };
  EXPECT_EQ(parse("int8")->codec, dtfm::format::WireCodec::Int8);
  EXPECT_TRUE(parse("auto")->automatic);
  EXPECT_EQ(parse("none")->codec, dtfm::format::WireCodec::Dense);
  EXPECT_FALSE(parse("none")->mayCompress());
  for (const char *bad : {"fp8", "topk", "topk:10", "int8:2", "none:2", ""})
    EXPECT_FALSE(parse(bad)) << bad;
  EXPECT_EQ(codecChoiceName(*parse("int8")), "int8");
  EXPECT_EQ(codecChoiceName(*parse("auto")), "auto");
  EXPECT_EQ(codecChoices(CodecUse::PipelineTransfers), "none, int8 or auto");
}

} // namespace
