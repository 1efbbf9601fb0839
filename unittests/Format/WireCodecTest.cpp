//===- WireCodecTest.cpp - Every codec of the table keeps its contract ----===//
//
// Table-driven: a codec added to format/WireCodec.cpp is checked here with
// no new test code (docs/Runtime.md, "Adding a wire codec").
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/WireCodec.h"
#include "dtfm/Format/Sparse.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

using namespace dtfm::format;

namespace {

/// A gradient-like vector: mostly small values, a few large ones, zeros.
std::vector<float> sample(size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> x(count);
  for (size_t i = 0; i < count; ++i)
    x[i] = i % 7 == 3 ? 0.0f : normal(rng) * (i % 97 == 5 ? 100.0f : 0.1f);
  return x;
}

constexpr double kRatio = 8; // a sparse codec keeps 1/8

TEST(WireCodec, TableIsInEnumeratorOrderAndNamesParse) {
  std::set<std::string> names;
  for (size_t i = 0; i < wireCodecs().size(); ++i) {
    const WireCodecInfo &info = wireCodecs()[i];
    EXPECT_EQ(static_cast<size_t>(info.codec), i);
    EXPECT_EQ(&wireCodecInfo(info.codec), &info);
    EXPECT_TRUE(names.insert(info.name).second) << info.name;
    EXPECT_EQ(parseWireCodec(info.name), info.codec);
    // The runtime's ring sums partial messages; a sparse message holds
    // entries of one member and cannot be (Transport::allreduceSum).
    EXPECT_FALSE(info.sparse && info.summable) << info.name;
    // Pipeline transfers carry every value (kept = count).
    EXPECT_FALSE(info.pipelineTransfers && info.sparse) << info.name;
  }
  EXPECT_EQ(wireCodecInfo(WireCodec::Dense).name, std::string("none"));
  EXPECT_FALSE(parseWireCodec("fp8"));
  EXPECT_FALSE(parseWireCodec(""));
}

TEST(WireCodec, MessagesRoundTripAsErrorFeedbackAssumes) {
  for (const WireCodecInfo &info : wireCodecs()) {
    for (size_t count : {size_t(1), size_t(255), size_t(600)}) {
      SCOPED_TRACE(std::string(info.name) + " x" + std::to_string(count));
      std::vector<float> x = sample(count, static_cast<unsigned>(count));
      size_t kept = keptEntries(info.codec, count, kRatio);
      EXPECT_EQ(kept, info.sparse ? topkCount(count, kRatio) : count);
      // Error feedback: `sent` is what the codec carries, the residual the
      // rest, and they add up to the input.
      std::vector<float> pending = x, sent(count, -1.0f);
      info.moveWithFeedback(pending.data(), count, kept, sent.data());
      for (size_t i = 0; i < count; ++i)
        EXPECT_NEAR(sent[i] + pending[i], x[i], 1e-6 * (1 + std::fabs(x[i])));
      // `sent` goes through the wire unchanged, in messageBytes.
      std::vector<char> message;
      std::string error;
      ASSERT_TRUE(info.encode(sent.data(), count, kept, message, error))
          << error;
      EXPECT_EQ(message.size(), info.messageBytes(count, kept));
      std::vector<float> decoded(count, 7.0f);
      ASSERT_TRUE(info.decode(message.data(), message.size(), count, kept,
                              decoded.data(), /*add=*/false, error))
          << error;
      for (size_t i = 0; i < count; ++i)
        EXPECT_FLOAT_EQ(decoded[i], sent[i]) << i;
      // Decoding with `add` adds the same values.
      std::vector<float> sum(count, 1.0f);
      ASSERT_TRUE(info.decode(message.data(), message.size(), count, kept,
                              sum.data(), /*add=*/true, error));
      for (size_t i = 0; i < count; ++i)
        EXPECT_FLOAT_EQ(sum[i], 1.0f + sent[i]) << i;
      // The planner counts the same bytes for a dense tensor of them.
      double denseBytes = 4.0 * static_cast<double>(count);
      EXPECT_DOUBLE_EQ(wireBytesOfDense(info.codec, denseBytes, 4, kRatio),
                       info.codec == WireCodec::Dense
                           ? denseBytes
                           : static_cast<double>(message.size()));
    }
  }
}

TEST(WireCodec, HostileMessagesAreRefusedWithoutWriting) {
  for (const WireCodecInfo &info : wireCodecs()) {
    SCOPED_TRACE(info.name);
    size_t count = 300, kept = keptEntries(info.codec, count, kRatio);
    std::vector<float> x = sample(count, 1), sent(count);
    info.moveWithFeedback(x.data(), count, kept, sent.data());
    std::vector<char> message;
    std::string error;
    ASSERT_TRUE(info.encode(sent.data(), count, kept, message, error));
    std::vector<float> out(count, 5.0f);
    for (size_t size : {message.size() - 1, message.size() + 4, size_t(0)}) {
      std::vector<char> wrong(message);
      wrong.resize(size);
      error.clear();
      EXPECT_FALSE(info.decode(wrong.data(), wrong.size(), count, kept,
                               out.data(), /*add=*/true, error))
          << size;
      EXPECT_FALSE(error.empty());
      for (float v : out)
        ASSERT_EQ(v, 5.0f);
    }
  }
}

TEST(WireCodec, ChoicesForErrorsComeFromTheTable) {
  EXPECT_EQ(wireCodecNames(isCompressionAttrCodec), "int8, topk or int4");
  EXPECT_EQ(wireCodecNames(isWireAttrCodec, "\""), "\"int8\"");
  EXPECT_EQ(wireCodecNames([](const WireCodecInfo &) { return true; }),
            "none, int8, topk or int4");
  EXPECT_EQ(wireCodecNames(carriesLocalSteps), "none, int8 or int4");
  EXPECT_EQ(wireCodecNames(carriesGradientSyncs), "none, int8 or topk");
}

} // namespace
