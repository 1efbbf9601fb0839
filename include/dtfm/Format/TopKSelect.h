//===- TopKSelect.h - The GPU's top-k selection, step by step ---*- C++ -*-===//
//
// Part of dtfm. Plain C++, compiled for the host and, inside the CUDA
// kernels (kernels/TopK.cu), for the device.
//
//===----------------------------------------------------------------------===//
//
// How the GPU finds format::largestMagnitudes's entries (the k largest
// magnitudes, ties to the lower index, in index order) in two passes over
// the tensor. A magnitude's IEEE bits order like the magnitude (key), so:
//
//   1. one pass counts the keys by their top 12 bits (4096 coarse bins);
//      the bin where the count from the top reaches k is the threshold
//      bin (pickBin);
//   2. one pass keeps, in index order, every entry whose key is in that bin
//      or above: the candidates, usually a few percent of the tensor;
//   3. on the candidates only, the rest of the key is resolved a digit at a
//      time (kRefineDigits: the keys that share the bits fixed so far are
//      counted by their next digit and pickBin chooses again), which gives
//      the k-th largest key T and how many entries equal to it are kept
//      (the first ones by index);
//   4. the candidates above T, and the first ties at T, in index order.
//
// The host reference (topk::selectReference) runs these steps one after
// another; the unit tests check it against largestMagnitudes on hostile
// inputs (all equal, zeros, ties across the threshold, the tensor sorted),
// so the steps the kernels follow are checked where there is no GPU.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_FORMAT_TOPKSELECT_H
#define DTFM_FORMAT_TOPKSELECT_H

#include "dtfm/Support/HostDevice.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace dtfm::format::topk {

/// |x|'s IEEE bits: they order like the magnitudes (NaNs above infinity).
DTFM_HOST_DEVICE inline uint32_t keyOf(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x) & 0x7fffffffu;
#else
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits & 0x7fffffffu;
#endif
}

/// Step 1's bins: the key's top 12 bits (bit 31 of a key is 0).
constexpr int kCoarseShift = 19;
constexpr int kCoarseBins = 4096;
DTFM_HOST_DEVICE inline uint32_t coarseBin(uint32_t key) {
  return key >> kCoarseShift;
}

/// Step 3's digits, from the high bits down: with the coarse bin they
/// cover the 31 bits of a key.
struct Digit {
  int shift, bits;
};
constexpr int kRefineDigitCount = 3;
constexpr Digit kRefineDigits[kRefineDigitCount] = {{11, 8}, {3, 8}, {0, 3}};
constexpr int kMaxDigitBins = 256;

/// Which bin of counts[0, bins) (bin b holding keys larger than bin b - 1's)
/// holds the `rank`-th largest (rank from 1): the bin, and how many counted
/// keys lie in the bins above it. A rank beyond the total picks bin 0.
struct BinPick {
  uint32_t bin = 0;
  uint64_t above = 0;
};
template <typename Count>
DTFM_HOST_DEVICE inline BinPick pickBin(const Count *counts, int bins,
                                        uint64_t rank) {
  BinPick pick;
  for (int b = bins - 1; b >= 0; --b) {
    uint64_t count = counts[b];
    if (pick.above + count >= rank || b == 0) {
      pick.bin = static_cast<uint32_t>(b);
      return pick;
    }
    pick.above += count;
  }
  return pick;
}

/// What steps 3 and 4 have fixed: the key bits known (`prefix` under
/// `mask`) and how many entries at or below them are still to be taken.
struct Threshold {
  uint32_t prefix = 0, mask = 0;
  uint64_t remaining = 0;
  /// The digit of `key` under `d` when it shares the bits fixed so far,
  /// else `bins` (not counted).
  DTFM_HOST_DEVICE uint32_t digitOf(uint32_t key, Digit d) const {
    return (key & mask) == prefix ? (key >> d.shift) & ((1u << d.bits) - 1u)
                                  : (1u << d.bits);
  }
  /// Fixes digit `d` from its counts among the keys that share the prefix.
  template <typename Count>
  DTFM_HOST_DEVICE void fix(const Count *counts, Digit d) {
    BinPick pick = pickBin(counts, 1 << d.bits, remaining);
    remaining -= pick.above;
    prefix |= pick.bin << d.shift;
    mask |= ((1u << d.bits) - 1u) << d.shift;
  }
};

/// The threshold after step 1: the coarse bin fixed, `rank` of the
/// candidates still to be taken from it.
DTFM_HOST_DEVICE inline Threshold coarseThreshold(BinPick pick, uint64_t k) {
  Threshold t;
  t.prefix = pick.bin << kCoarseShift;
  t.mask = ~((1u << kCoarseShift) - 1u);
  t.remaining = k - pick.above;
  return t;
}

/// The four steps on the host: the indices kept, in increasing order.
std::vector<uint64_t> selectReference(const float *x, uint64_t n, uint64_t k);

} // namespace dtfm::format::topk

#endif // DTFM_FORMAT_TOPKSELECT_H
