//===- TopKSelect.cpp - The GPU's top-k selection on the host -------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/TopKSelect.h"

#include <algorithm>
#include <array>

using namespace dtfm::format::topk;

std::vector<uint64_t>
dtfm::format::topk::selectReference(const float *x, uint64_t n, uint64_t k) {
  k = std::min(k, n);
  if (k == 0)
    return {};
  // 1. The coarse bins, and the one the k-th largest falls in.
  std::vector<uint32_t> coarse(kCoarseBins, 0);
  for (uint64_t i = 0; i < n; ++i)
    ++coarse[coarseBin(keyOf(x[i]))];
  BinPick pick = pickBin(coarse.data(), kCoarseBins, k);
  // 2. The candidates in index order.
  std::vector<uint64_t> candidates;
  for (uint64_t i = 0; i < n; ++i)
    if (coarseBin(keyOf(x[i])) >= pick.bin)
      candidates.push_back(i);
  // 3. The rest of the key, a digit at a time, among the candidates.
  Threshold t = coarseThreshold(pick, k);
  for (Digit d : kRefineDigits) {
    std::array<uint32_t, kMaxDigitBins + 1> counts{};
    for (uint64_t i : candidates)
      ++counts[t.digitOf(keyOf(x[i]), d)];
    t.fix(counts.data(), d);
  }
  // 4. Above the threshold, then the first ties.
  std::vector<uint64_t> kept;
  uint64_t ties = 0;
  for (uint64_t i : candidates) {
    uint32_t key = keyOf(x[i]);
    if (key > t.prefix || (key == t.prefix && ties++ < t.remaining))
      kept.push_back(i);
  }
  return kept;
}
