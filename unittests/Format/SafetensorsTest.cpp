//===- SafetensorsTest.cpp - The safetensors weight format ----------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/Safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace dtfm::format;

namespace {

uint32_t bitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits;
}

/// A file of `header` (the JSON as given) and `data` bytes.
std::string file(const std::string &header, const std::string &data) {
  std::string out(8, '\0');
  uint64_t length = header.size();
  std::memcpy(out.data(), &length, 8);
  return out + header + data;
}

TensorMap sample() {
  TensorMap tensors;
  Tensor a({2, 3});
  float values[] = {1.0f, -0.0f, 3.14159265f, 1e-7f, -65504.0f, 2.5e-41f};
  std::copy(std::begin(values), std::end(values), a.data.begin());
  tensors["h.0.weight"] = a;
  Tensor b({4});
  b.data = {std::numeric_limits<float>::infinity(), -1.5f, 0.1f,
            std::numeric_limits<float>::quiet_NaN()};
  tensors["bias"] = b;
  tensors["empty"] = Tensor({0, 5});
  tensors["scalar"] = Tensor(std::vector<int64_t>{}, 7.0f);
  return tensors;
}

} // namespace

TEST(Safetensors, F32RoundTripIsBitExact) {
  TensorMap tensors = sample(), back;
  WeightMetadata metadata;
  std::string error;
  std::string bytes =
      encodeSafetensors(tensors, WeightDtype::F32, {{"dtfm.model", "tiny"}});
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  EXPECT_EQ((8 + length) % 8, 0u); // the data is aligned
  ASSERT_TRUE(looksLikeSafetensors(bytes));
  ASSERT_TRUE(decodeSafetensors(bytes, "w", back, metadata, error)) << error;
  EXPECT_EQ(metadata.at("format"), "pt");
  EXPECT_EQ(metadata.at("dtfm.model"), "tiny");
  ASSERT_EQ(back.size(), tensors.size());
  for (const auto &[name, t] : tensors) {
    ASSERT_EQ(back[name].shape, t.shape) << name;
    for (size_t i = 0; i < t.data.size(); ++i)
      EXPECT_EQ(bitsOf(back[name].data[i]), bitsOf(t.data[i])) << name << i;
  }
}

TEST(Safetensors, HalfAndBfloat16RoundTripEveryValueThatTheyHold) {
  // Every 16-bit pattern that is not a NaN comes back as itself: widening
  // is exact and narrowing a representable value keeps it.
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    uint16_t h = static_cast<uint16_t>(bits);
    float wide = halfToFloat(h);
    if (std::isnan(wide))
      EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(wide))));
    else
      EXPECT_EQ(floatToHalf(wide), h) << bits;
    float brain = bfloat16ToFloat(h);
    if (std::isnan(brain))
      EXPECT_TRUE(std::isnan(bfloat16ToFloat(floatToBfloat16(brain))));
    else
      EXPECT_EQ(floatToBfloat16(brain), h) << bits;
  }
  // A file of each keeps the values exactly.
  TensorMap tensors, back;
  Tensor t({3});
  t.data = {1.5f, -0.25f, 65504.0f};
  tensors["x"] = t;
  WeightMetadata metadata;
  std::string error;
  for (WeightDtype dtype : {WeightDtype::F16, WeightDtype::BF16}) {
    ASSERT_TRUE(decodeSafetensors(encodeSafetensors(tensors, dtype), "w",
                                  back, metadata, error))
        << error;
    EXPECT_EQ(back["x"].data[0], 1.5f);
    EXPECT_EQ(back["x"].data[1], -0.25f);
  }
}

TEST(Safetensors, NarrowingRoundsToNearestEven) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff); // the largest half
  EXPECT_EQ(floatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00); // the tie rounds to infinity
  EXPECT_EQ(floatToHalf(-1e9f), 0xfc00);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001); // least subnormal
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000); // tie to even: 0
  EXPECT_EQ(floatToHalf(std::ldexp(3.0f, -25)), 0x0002); // tie to even: 2
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00); // tie: even
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(3.0f, -11)), 0x3c02); // tie: even
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::quiet_NaN()) & 0x7e00,
            0x7e00);
  EXPECT_EQ(floatToBfloat16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBfloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80); // tie
  EXPECT_EQ(floatToBfloat16(1.0f + std::ldexp(3.0f, -8)), 0x3f82); // tie
  EXPECT_EQ(floatToBfloat16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_TRUE(std::isnan(
      bfloat16ToFloat(floatToBfloat16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Safetensors, ReadsWhatOthersWrite) {
  // F64 and padding spaces after the JSON, as other writers may leave.
  double values[] = {0.5, -2.0};
  std::string data(reinterpret_cast<const char *>(values), 16);
  TensorMap tensors;
  WeightMetadata metadata;
  std::string error;
  ASSERT_TRUE(decodeSafetensors(
      file(R"({"w":{"dtype":"F64","shape":[2],"data_offsets":[0,16]}}   )",
           data),
      "w", tensors, metadata, error))
      << error;
  EXPECT_EQ(tensors["w"].data, (std::vector<float>{0.5f, -2.0f}));
  EXPECT_TRUE(metadata.empty());
}

TEST(Safetensors, RefusesHeadersThatLie) {
  std::string four(4, '\0'), eight(8, '\0');
  auto entry = [](const char *name, const char *dtype, const char *shape,
                  const char *offsets) {
    return std::string("\"") + name + "\":{\"dtype\":\"" + dtype +
           "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
  };
  std::string huge(8, '\0');
  uint64_t big = kMaxSafetensorsHeader + 1;
  std::memcpy(huge.data(), &big, 8);
  std::string past(8, '\0');
  uint64_t ten = 10;
  std::memcpy(past.data(), &ten, 8);
  std::pair<std::string, std::string> cases[] = {
      {"abc", "w: not a safetensors file (3 bytes"},
      {huge + "{}", "w: a header of 100000001 bytes, over the 100 MB"},
      {past + "{}", "w: a header of 10 bytes runs past the end of the file"},
      {file("{\"a\":1,}", ""), "w: the header: at byte"},
      {file("[]", ""), "w: the header is an array, not an object"},
      {file("{" + entry("a", "F32", "[2]", "[0,4]") + "}", eight),
       "tensor 'a': shape [2] of F32 needs 8 bytes, its data_offsets give 4"},
      {file("{" + entry("a", "F32", "[1]", "[0,12]") + "}", eight),
       "tensor 'a': data_offsets [0, 12] run past the data (8 bytes)"},
      {file("{" + entry("a", "F32", "[1]", "[4,0]") + "}", eight),
       "tensor 'a': \"data_offsets\" is not [begin, end] with begin <= end"},
      {file("{" + entry("a", "F32", "[1]", "[0,4]") + "," +
                entry("b", "F32", "[1]", "[2,6]") + "}",
            eight),
       "tensors 'a' and 'b' overlap in the data"},
      {file("{" + entry("a", "F32", "[1]", "[4,8]") + "}", eight),
       "bytes [0, 4) of the data belong to no tensor"},
      {file("{" + entry("a", "F32", "[1]", "[0,4]") + "}", eight),
       "bytes [4, 8) of the data belong to no tensor"},
      {file("{" + entry("a", "I64", "[1]", "[0,8]") + "}", eight),
       "tensor 'a': dtype I64: dtfm reads weights of F32, F16, BF16 and F64"},
      {file("{" + entry("a", "F32", "[-1]", "[0,4]") + "}", four),
       "\"shape\" holds something other than a non-negative integer"},
      {file("{" +
                entry("a", "F32", "[4294967296,4294967296,4294967296]",
                      "[0,4]") +
                "}",
            four),
       "shape [4294967296, 4294967296, 4294967296] of F32 needs more bytes "
       "than the file has"},
      {file("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", four),
       "tensor 'a': no \"data_offsets\""},
      {file("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],"
            "\"x\":1}}",
            four),
       "tensor 'a': unknown key \"x\""},
      {file("{\"__metadata__\":{\"n\":1}}", ""),
       "\"__metadata__\": \"n\" is a number, not a string"},
      {file("{\"a\":{},\"a\":{}}", ""), "w: the header: at byte"},
      {file("{" + entry("", "F32", "[1]", "[0,4]") + "}", four),
       "a tensor with an empty name"}};
  for (const auto &[bytes, message] : cases) {
    TensorMap tensors;
    WeightMetadata metadata;
    std::string error;
    EXPECT_FALSE(decodeSafetensors(bytes, "w", tensors, metadata, error))
        << message;
    EXPECT_NE(error.find(message), std::string::npos)
        << "expected: " << message << "\ngot: " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    EXPECT_TRUE(tensors.empty());
  }
}
