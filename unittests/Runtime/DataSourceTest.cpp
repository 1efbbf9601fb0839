//===- DataSourceTest.cpp - Micro-batches from shards and the seed --------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/DataSource.h"
#include "dtfm/Format/TensorFile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <unistd.h>

using namespace dtfm::runtime;
using dtfm::format::TokenDtype;

/// Global micro-batch `index` of micro-batches of `rows` samples.
static BatchPosition at(int64_t index, int64_t rows) {
  return {index, index * rows};
}

static bool draw(const DataSource &source, BatchPosition position,
                 const std::vector<InputSpec> &specs, MicroBatch &batch,
                 std::string &error) {
  uint64_t hash = 0;
  return source.microBatch(position, specs, batch, hash, error);
}

TEST(DataSource, DrawsEachKindOfInputInItsRange) {
  DataSource source;
  std::string error;
  ASSERT_TRUE(source.open({}, 7, 50, error)) << error;
  std::vector<InputSpec> specs = {
      {"tokens", {2, 8}, false, true, false},
      {"labels", {2, 8}, true, true, false},
      {"mask", {64}, false, true, true},
      {"images", {16}, false, false, false}};
  MicroBatch batch, again;
  ASSERT_TRUE(draw(source, at(3, 2), specs, batch, error)) << error;
  ASSERT_TRUE(draw(source, at(3, 2), specs, again, error)) << error;
  std::set<float> maskValues(batch["mask"].data.begin(),
                             batch["mask"].data.end());
  EXPECT_EQ(maskValues, (std::set<float>{0, 1}));
  for (float t : batch["tokens"].data)
    EXPECT_TRUE(t >= 0 && t < 50 && t == static_cast<int>(t));
  // Labels are the tokens shifted by one within a row.
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j + 1 < 8; ++j)
      EXPECT_EQ(batch["labels"].data[r * 8 + j],
                batch["tokens"].data[r * 8 + j + 1]);
  bool fractional = false;
  for (float x : batch["images"].data)
    fractional = fractional || x != static_cast<int>(x);
  EXPECT_TRUE(fractional);
  for (const auto &[name, tensor] : batch)
    EXPECT_EQ(tensor.data, again[name].data) << name;
}

TEST(DataSource, SamplesDoNotDependOnTheMicroBatchSize) {
  // Micro-batches 2 and 3 of 2 rows are micro-batch 1 of 4 rows: a plan
  // with another micro-batch size (a re-plan) sees the same samples.
  DataSource source;
  std::string error;
  ASSERT_TRUE(source.open({}, 11, 50, error)) << error;
  auto specs = [](int64_t rows) {
    return std::vector<InputSpec>{{"tokens", {rows, 8}, false, true, false},
                                  {"labels", {rows, 8}, true, true, false},
                                  {"images", {rows, 3}, false, false, false}};
  };
  MicroBatch two, three, four;
  ASSERT_TRUE(draw(source, at(2, 2), specs(2), two, error)) << error;
  ASSERT_TRUE(draw(source, at(3, 2), specs(2), three, error)) << error;
  ASSERT_TRUE(draw(source, at(1, 4), specs(4), four, error)) << error;
  for (const char *name : {"tokens", "labels", "images"}) {
    std::vector<float> joined = two[name].data;
    joined.insert(joined.end(), three[name].data.begin(),
                  three[name].data.end());
    EXPECT_EQ(four[name].data, joined) << name;
  }
}

// An input the --inputs file gives runs out with an error naming the
// missing entry, never with synthetic data in its place; an input the file
// never names is drawn as before.
TEST(DataSource, RunningOutOfGivenInputsIsAnError) {
  std::string path = ::testing::TempDir() + "/dtfm-data-source-inputs.bin";
  dtfm::format::TensorMap tensors;
  for (const char *name : {"images@0", "images@1"})
    tensors[name] = dtfm::format::Tensor({2, 3}, 0.5f);
  std::string error;
  ASSERT_TRUE(dtfm::format::writeTensorFile(path, tensors, error)) << error;
  DataSource source;
  DataOptions options;
  options.inputsPath = path;
  ASSERT_TRUE(source.open(options, 7, 10, error)) << error;
  std::vector<InputSpec> specs = {{"images", {2, 3}, false, false, false},
                                  {"noise", {2, 3}, false, false, false}};
  MicroBatch batch;
  ASSERT_TRUE(draw(source, at(1, 2), specs, batch, error)) << error;
  EXPECT_EQ(batch["images"].data, std::vector<float>(6, 0.5f));
  EXPECT_EQ(batch["noise"].data.size(), 6u);
  EXPECT_FALSE(draw(source, at(2, 2), specs, batch, error));
  EXPECT_EQ(error, path + ": no 'images@2' for micro-batch 2 (the file gives "
                          "'images' for 2 micro-batches; a step reads one per "
                          "pipeline and micro-batch)");
  std::remove(path.c_str());
}

namespace {

/// Token files in a fresh temporary directory, removed afterwards.
class TokenData : public ::testing::Test {
protected:
  void SetUp() override {
    char pattern[] = "/tmp/dtfm-data-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir = pattern;
  }
  void TearDown() override {
    std::string command = "rm -rf '" + dir + "'";
    ASSERT_EQ(std::system(command.c_str()), 0);
  }
  /// `tokens` as a raw file of `width` bytes per token (no sidecar).
  std::string raw(const std::string &name, const std::vector<uint32_t> &tokens,
                  int width) {
    std::string path = dir + "/" + name;
    std::FILE *f = std::fopen(path.c_str(), "wb");
    for (uint32_t t : tokens)
      std::fwrite(&t, width, 1, f); // little-endian host
    std::fclose(f);
    return path;
  }
  std::string dir;
};

std::vector<InputSpec> tokenPair(int64_t rows, int64_t seq) {
  return {{"tokens", {rows, seq}, false, true, false},
          {"labels", {rows, seq}, true, true, false}};
}

std::vector<uint32_t> counting(size_t n, uint32_t modulo) {
  std::vector<uint32_t> tokens(n);
  for (size_t i = 0; i < n; ++i)
    tokens[i] = static_cast<uint32_t>((i * 7 + i / 13) % modulo);
  return tokens;
}

} // namespace

// The same tokens as uint16, uint32 and int32 files give the same batches,
// in either order; with a sidecar no --data-dtype is needed.
TEST_F(TokenData, EveryDtypeGivesTheSameBatches) {
  std::vector<uint32_t> tokens = counting(1000, 500);
  std::string error;
  std::string u16 = dir + "/u16.bin";
  ASSERT_TRUE(dtfm::format::writeTokenShard(u16, TokenDtype::UInt16, tokens,
                                            500, error))
      << error;
  std::string u32 = raw("u32.bin", tokens, 4);
  for (DataOrder order : {DataOrder::Shuffled, DataOrder::Sequential}) {
    DataSource a, b, c;
    DataOptions options;
    options.order = order;
    options.paths = {u16};
    ASSERT_TRUE(a.open(options, 5, 500, error)) << error;
    options.paths = {u32};
    options.dtype = TokenDtype::UInt32;
    ASSERT_TRUE(b.open(options, 5, 500, error)) << error;
    options.dtype = TokenDtype::Int32;
    ASSERT_TRUE(c.open(options, 5, 500, error)) << error;
    for (int64_t index : {0, 3, 40}) {
      MicroBatch x, y, z;
      ASSERT_TRUE(draw(a, at(index, 4), tokenPair(4, 16), x, error)) << error;
      ASSERT_TRUE(draw(b, at(index, 4), tokenPair(4, 16), y, error)) << error;
      ASSERT_TRUE(draw(c, at(index, 4), tokenPair(4, 16), z, error)) << error;
      EXPECT_EQ(x["tokens"].data, y["tokens"].data);
      EXPECT_EQ(x["tokens"].data, z["tokens"].data);
      EXPECT_EQ(x["labels"].data, z["labels"].data);
    }
  }
}

// Sequential order is the stream of the shards in order, wrapping around:
// sample i is tokens [i (S + 1), (i + 1)(S + 1)).
TEST_F(TokenData, SequentialOrderReadsTheStreamInOrder) {
  std::vector<uint32_t> first = counting(50, 97), second = counting(30, 89);
  std::string error;
  DataOptions options;
  options.paths = {raw("a.bin", first, 2), raw("b.bin", second, 2)};
  options.dtype = TokenDtype::UInt16;
  options.order = DataOrder::Sequential;
  DataSource source;
  ASSERT_TRUE(source.open(options, 1, 100, error)) << error;
  std::vector<uint32_t> stream = first;
  stream.insert(stream.end(), second.begin(), second.end());
  MicroBatch batch;
  // Samples 6..8 of 9 tokens: positions 54..80 of 80, then 0..
  ASSERT_TRUE(draw(source, {0, 6}, tokenPair(3, 8), batch, error)) << error;
  for (int r = 0; r < 3; ++r)
    for (int j = 0; j < 8; ++j) {
      size_t position = (6 + r) * 9 + j;
      EXPECT_EQ(batch["tokens"].data[r * 8 + j], stream[position % 80]);
      EXPECT_EQ(batch["labels"].data[r * 8 + j], stream[(position + 1) % 80]);
    }
}

// An epoch of shuffled order visits every window of every shard exactly
// once (brute force), in an order that is not the file's, another order
// each epoch and each seed.
TEST_F(TokenData, AnEpochVisitsEveryWindowOnce) {
  std::string error;
  DataOptions options;
  options.paths = {raw("a.bin", counting(101, 50), 2),
                   raw("b.bin", counting(37, 50), 2),
                   raw("c.bin", counting(9, 50), 2)};
  options.dtype = TokenDtype::UInt16;
  DataSource source, other;
  ASSERT_TRUE(source.open(options, 3, 50, error)) << error;
  ASSERT_TRUE(other.open(options, 4, 50, error)) << error;
  // Windows of 9 tokens every 8: (101 - 9) / 8 + 1 = 12, 4 and 1.
  int64_t windows = source.windowsPerEpoch(9);
  ASSERT_EQ(windows, 17);
  std::vector<std::pair<size_t, int64_t>> all;
  for (size_t shard = 0; shard < 3; ++shard)
    for (int64_t begin = 0; begin + 9 <= int64_t(shard == 0   ? 101
                                                 : shard == 1 ? 37
                                                              : 9);
         begin += 8)
      all.push_back({shard, begin});
  ASSERT_EQ(static_cast<int64_t>(all.size()), windows);
  std::vector<std::pair<size_t, int64_t>> epochs[2], seeded;
  for (int e = 0; e < 2; ++e)
    for (int64_t i = 0; i < windows; ++i)
      epochs[e].push_back(source.shuffledWindow(e * windows + i, 9));
  for (int64_t i = 0; i < windows; ++i)
    seeded.push_back(other.shuffledWindow(i, 9));
  for (auto *order : {&epochs[0], &epochs[1], &seeded}) {
    std::vector<std::pair<size_t, int64_t>> sorted = *order;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, all);
    EXPECT_NE(*order, all);
  }
  EXPECT_NE(epochs[0], epochs[1]);
  EXPECT_NE(epochs[0], seeded);
}

TEST(DataSource, PermuteIndexIsABijection) {
  for (uint64_t count : {1ull, 2ull, 3ull, 5ull, 64ull, 1000ull, 4097ull}) {
    std::vector<bool> hit(count);
    for (uint64_t i = 0; i < count; ++i) {
      uint64_t j = permuteIndex(i, count, 0x1234 + count);
      ASSERT_LT(j, count);
      EXPECT_FALSE(hit[j]);
      hit[j] = true;
    }
  }
}

// The sample hash sums over samples: the same for a step whichever way its
// samples are split into micro-batches.
TEST_F(TokenData, SampleHashesAddUpOverMicroBatches) {
  std::string error;
  DataOptions options;
  options.paths = {raw("a.bin", counting(4000, 300), 4)};
  options.dtype = TokenDtype::UInt32;
  DataSource source;
  ASSERT_TRUE(source.open(options, 9, 300, error)) << error;
  MicroBatch batch;
  uint64_t whole = 0, first = 0, second = 0, shifted = 0;
  ASSERT_TRUE(source.microBatch({0, 8}, tokenPair(4, 16), batch, whole, error));
  ASSERT_TRUE(source.microBatch({0, 8}, tokenPair(2, 16), batch, first, error));
  ASSERT_TRUE(
      source.microBatch({1, 10}, tokenPair(2, 16), batch, second, error));
  ASSERT_TRUE(
      source.microBatch({0, 9}, tokenPair(4, 16), batch, shifted, error));
  EXPECT_EQ(whole, first + second);
  EXPECT_NE(whole, shifted);
}

// Refusals name the file and what is wrong, in one line.
TEST_F(TokenData, BadShardsAreRefusedInOneLine) {
  std::string error;
  auto refusal = [&](DataOptions options, int64_t vocabulary = 256) {
    DataSource source;
    EXPECT_FALSE(source.open(options, 1, vocabulary, error));
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    return error;
  };
  DataOptions options;
  // nanoGPT's uint16 file read as int32: the hint names the dtype.
  options.paths = {raw("gpt.bin", {10, 32, 7, 200}, 2)};
  options.dtype = TokenDtype::Int32;
  EXPECT_EQ(refusal(options),
            dir + "/gpt.bin: token 2097162 at token offset 0 (byte 0) is "
                  "outside the model's vocabulary of 256 (uint16 tokens read "
                  "as int32 look like this: give --data-dtype uint16)");
  options.paths = {raw("odd.bin", {1, 2, 3}, 2)};
  EXPECT_EQ(refusal(options),
            dir + "/odd.bin: its 6 bytes are not a whole number of int32 "
                  "tokens (uint16 tokens? give --data-dtype uint16)");
  options.dtype = TokenDtype::UInt16;
  options.paths = {raw("big.bin", {1, 2, 300, 4}, 2)};
  EXPECT_EQ(refusal(options),
            dir + "/big.bin: token 300 at token offset 2 (byte 4) is outside "
                  "the model's vocabulary of 256");
  options.paths = {raw("empty.bin", {}, 2)};
  EXPECT_EQ(refusal(options), dir + "/empty.bin: the token shard is empty");
  options.dtype.reset();
  options.paths = {raw("plain.bin", {1, 2}, 2)};
  EXPECT_NE(refusal(options).find("plain.bin: no dtype for these tokens: give "
                                  "--data-dtype"),
            std::string::npos)
      << error;
  options.paths = {dir + "/missing.bin"};
  EXPECT_EQ(refusal(options),
            "--data " + dir + "/missing.bin: no such file or directory");
  options.paths = {dir + "/*.none"};
  EXPECT_EQ(refusal(options),
            "--data " + dir + "/*.none: the pattern matches no file");
  options.dtype = TokenDtype::UInt16;
  options.paths = {dir + "/big.bin", dir + "/./big.bin"};
  EXPECT_NE(refusal(options).find("is named twice"), std::string::npos);
  // Sidecars that lie.
  std::string lying = raw("lying.bin", {1, 2, 3}, 2);
  auto sidecar = [&](const std::string &text) {
    std::FILE *f = std::fopen((lying + ".json").c_str(), "w");
    std::fputs(text.c_str(), f);
    std::fclose(f);
  };
  options.paths = {lying};
  options.dtype.reset();
  sidecar(R"({"format": "dtfm-tokens", "dtype": "uint16", "tokens": 4})");
  EXPECT_EQ(refusal(options), lying + ".json: says 4 tokens, but " + lying +
                                  " holds 3 uint16 tokens");
  sidecar(R"({"format": "dtfm-tokens", "dtype": "uint16", "tokens": 3,
              "vocab_size": 50257})");
  EXPECT_EQ(refusal(options), lying + ".json: the data's vocabulary of 50257 "
                                      "is larger than the model's 256");
  sidecar(R"({"format": "dtfm-tokens", "dtype": "uint16", "tokens": 3,)");
  EXPECT_NE(refusal(options).find(".json: at byte"), std::string::npos);
  sidecar(R"({"format": "dtfm-tokens", "dtype": "int8", "tokens": 3})");
  EXPECT_EQ(refusal(options), lying + ".json: \"dtype\" must be \"uint16\", "
                                      "\"uint32\" or \"int32\"");
  options.dtype = TokenDtype::UInt32;
  sidecar(R"({"format": "dtfm-tokens", "dtype": "uint16", "tokens": 3})");
  EXPECT_EQ(refusal(options), lying + ": --data-dtype uint32 but its sidecar " +
                                  lying + ".json says uint16");
}

TEST_F(TokenData, ShortShardsAreRefusedByWindow) {
  std::string error;
  DataOptions options;
  options.paths = {raw("long.bin", counting(100, 50), 2),
                   raw("short.bin", counting(10, 50), 2)};
  options.dtype = TokenDtype::UInt16;
  DataSource source;
  ASSERT_TRUE(source.open(options, 1, 50, error)) << error;
  EXPECT_TRUE(source.checkWindows(10, error));
  EXPECT_FALSE(source.checkWindows(17, error));
  EXPECT_EQ(error, dir + "/short.bin: its 10 tokens are fewer than one "
                         "sample's window of 17 (the plan's sequence and the "
                         "token after it)");
}
