//===- DataSourceTest.cpp - Synthetic micro-batches ------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/DataSource.h"
#include "dtfm/Format/TensorFile.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <set>

using namespace dtfm::runtime;

TEST(DataSource, DrawsEachKindOfInputInItsRange) {
  DataSource source;
  std::string error;
  ASSERT_TRUE(source.open("", "", 7, 50, error)) << error;
  std::vector<InputSpec> specs = {
      {"tokens", {2, 8}, false, true, false},
      {"labels", {2, 8}, true, true, false},
      {"mask", {64}, false, true, true},
      {"images", {16}, false, false, false}};
  MicroBatch batch, again;
  ASSERT_TRUE(source.microBatch(3, specs, batch, error)) << error;
  ASSERT_TRUE(source.microBatch(3, specs, again, error)) << error;
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
  ASSERT_TRUE(source.open("", "", 11, 50, error)) << error;
  auto specs = [](int64_t rows) {
    return std::vector<InputSpec>{{"tokens", {rows, 8}, false, true, false},
                                  {"labels", {rows, 8}, true, true, false},
                                  {"images", {rows, 3}, false, false, false}};
  };
  MicroBatch two, three, four;
  ASSERT_TRUE(source.microBatch(2, specs(2), two, error)) << error;
  ASSERT_TRUE(source.microBatch(3, specs(2), three, error)) << error;
  ASSERT_TRUE(source.microBatch(1, specs(4), four, error)) << error;
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
  ASSERT_TRUE(source.open("", path, 7, 10, error)) << error;
  std::vector<InputSpec> specs = {{"images", {2, 3}, false, false, false},
                                  {"noise", {2, 3}, false, false, false}};
  MicroBatch batch;
  ASSERT_TRUE(source.microBatch(1, specs, batch, error)) << error;
  EXPECT_EQ(batch["images"].data, std::vector<float>(6, 0.5f));
  EXPECT_EQ(batch["noise"].data.size(), 6u);
  EXPECT_FALSE(source.microBatch(2, specs, batch, error));
  EXPECT_EQ(error, path + ": no 'images@2' for micro-batch 2 (the file gives "
                          "'images' for 2 micro-batches; a step reads one per "
                          "pipeline and micro-batch)");
  std::remove(path.c_str());
}
