//===- TopKSelectTest.cpp - The GPU's top-k steps against the CPU's -------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The kernels of kernels/TopK.cu follow TopKSelect.h's steps; here the host
// run of those steps must pick exactly format::largestMagnitudes's entries
// (the CPU AdaTopK kernel's) on inputs chosen to break them.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/TopKSelect.h"
#include "dtfm/Format/Sparse.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace dtfm::format;

namespace {

void expectSameAsCpu(const std::vector<float> &x, uint64_t k,
                     const std::string &what) {
  std::vector<uint64_t> want = largestMagnitudes(x.data(), x.size(), k);
  std::vector<uint64_t> got = topk::selectReference(x.data(), x.size(), k);
  EXPECT_EQ(got, want) << what << ", n " << x.size() << ", k " << k;
}

TEST(TopKSelect, PicksTheCpuKernelsEntriesOnHostileInputs) {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> gaussian(50000);
  for (float &v : gaussian)
    v = normal(rng);
  for (uint64_t k : {1, 2, 17, 500, 12345, 49999, 50000, 70000})
    expectSameAsCpu(gaussian, k, "gaussian");

  // Ascending and descending: the largest at one end.
  std::vector<float> sorted = gaussian;
  std::sort(sorted.begin(), sorted.end(),
            [](float a, float b) { return std::fabs(a) < std::fabs(b); });
  expectSameAsCpu(sorted, 300, "ascending magnitudes");
  std::reverse(sorted.begin(), sorted.end());
  expectSameAsCpu(sorted, 300, "descending magnitudes");

  // Everything equal (every entry a tie at the threshold), zeros, and signs.
  expectSameAsCpu(std::vector<float>(1000, 0.5f), 10, "all equal");
  expectSameAsCpu(std::vector<float>(1000, 0.0f), 10, "all zero");
  std::vector<float> signs(1000);
  for (size_t i = 0; i < signs.size(); ++i)
    signs[i] = i % 2 ? -0.25f : 0.25f;
  expectSameAsCpu(signs, 333, "equal magnitudes of both signs");

  // A few large values and mostly zeros: k beyond the nonzeros takes the
  // first zeros by index; -0 is a zero.
  std::vector<float> sparse(5000, 0.0f);
  sparse[4999] = 3;
  sparse[10] = -2;
  sparse[2000] = -0.0f;
  for (uint64_t k : {1, 2, 3, 50})
    expectSameAsCpu(sparse, k, "mostly zeros");

  // Ties straddling each digit: values that differ only in the low key
  // bits, so that every refining digit decides.
  std::vector<float> close(4096);
  std::uniform_int_distribution<uint32_t> low(0, 63);
  for (float &v : close) {
    uint32_t bits = 0x3f800000u + low(rng) * 0x801u; // 1.0 plus low bits
    std::memcpy(&v, &bits, sizeof v);
    if (rng() % 2)
      v = -v;
  }
  for (uint64_t k : {1, 64, 100, 2048, 4095})
    expectSameAsCpu(close, k, "ties in the low bits");

  // Infinities and the extremes of the range.
  std::vector<float> extremes = {std::numeric_limits<float>::infinity(),
                                 -std::numeric_limits<float>::max(),
                                 std::numeric_limits<float>::denorm_min(),
                                 -std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::min(),
                                 1,
                                 -1};
  for (uint64_t k = 1; k <= extremes.size(); ++k)
    expectSameAsCpu(extremes, k, "extremes");

  // Nothing to pick.
  EXPECT_TRUE(topk::selectReference(gaussian.data(), 0, 5).empty());
  EXPECT_TRUE(topk::selectReference(gaussian.data(), 10, 0).empty());
}

// The rule pickBin implements, on its own: the bin where the count from
// the top reaches the rank, and what lies above it.
TEST(TopKSelect, PickBinCountsFromTheTop) {
  uint32_t counts[4] = {5, 0, 3, 2}; // bin 3 holds the largest keys
  topk::BinPick p = topk::pickBin(counts, 4, 1);
  EXPECT_EQ(p.bin, 3u);
  EXPECT_EQ(p.above, 0u);
  p = topk::pickBin(counts, 4, 3);
  EXPECT_EQ(p.bin, 2u);
  EXPECT_EQ(p.above, 2u);
  p = topk::pickBin(counts, 4, 6);
  EXPECT_EQ(p.bin, 0u); // bin 1 is empty
  EXPECT_EQ(p.above, 5u);
  p = topk::pickBin(counts, 4, 99);
  EXPECT_EQ(p.bin, 0u);
}

} // namespace
