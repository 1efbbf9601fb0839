//===- Sparse.cpp - Top-k gradients on the wire ---------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/Sparse.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

size_t dtfm::format::topkCount(size_t elements, double ratio) {
  if (elements == 0)
    return 0;
  double kept = std::ceil(static_cast<double>(elements) / std::max(1.0, ratio));
  return std::clamp<size_t>(static_cast<size_t>(kept), 1, elements);
}

double dtfm::format::sparseBytesOfDense(double denseBytes, double elementBytes,
                                        double ratio) {
  size_t elements = static_cast<size_t>(denseBytes / elementBytes);
  return static_cast<double>(sparseBytes(topkCount(elements, ratio)));
}

std::vector<uint64_t> dtfm::format::largestMagnitudes(const float *x,
                                                      size_t count, size_t k) {
  k = std::min(k, count);
  std::vector<uint64_t> order(count);
  std::iota(order.begin(), order.end(), uint64_t(0));
  auto larger = [&](uint64_t a, uint64_t b) {
    float ma = std::fabs(x[a]), mb = std::fabs(x[b]);
    return ma != mb ? ma > mb : a < b;
  };
  std::nth_element(order.begin(), order.begin() + k, order.end(), larger);
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

void dtfm::format::moveTopK(float *pending, size_t count, size_t k,
                            float *sent) {
  std::fill(sent, sent + count, 0.0f);
  for (uint64_t i : largestMagnitudes(pending, count, k)) {
    sent[i] = pending[i];
    pending[i] = 0;
  }
}

bool dtfm::format::encodeSparse(const float *x, size_t count, size_t capacity,
                                std::vector<char> &out, std::string &error) {
  if (count > std::numeric_limits<uint32_t>::max()) {
    error = "a top-k exchange of " + std::to_string(count) +
            " values (at most 4294967295)";
    return false;
  }
  out.assign(sparseBytes(capacity), 0);
  uint32_t used = 0;
  char *slot = out.data() + sizeof(uint32_t);
  for (size_t i = 0; i < count; ++i) {
    if (x[i] == 0)
      continue;
    if (used == capacity) {
      error = "a top-k exchange with more than its " +
              std::to_string(capacity) + " entries";
      return false;
    }
    uint32_t index = static_cast<uint32_t>(i);
    std::memcpy(slot, &index, sizeof index);
    std::memcpy(slot + sizeof index, &x[i], sizeof(float));
    slot += sizeof index + sizeof(float);
    ++used;
  }
  std::memcpy(out.data(), &used, sizeof used);
  return true;
}

bool dtfm::format::addSparse(const char *bytes, size_t size, size_t count,
                             size_t capacity, float *sum, std::string &error) {
  if (size != sparseBytes(capacity)) {
    error = "a sparse message of " + std::to_string(size) + " bytes (expected " +
            std::to_string(sparseBytes(capacity)) + ")";
    return false;
  }
  uint32_t used;
  std::memcpy(&used, bytes, sizeof used);
  if (used > capacity) {
    error = "a sparse message of " + std::to_string(used) +
            " entries (at most " + std::to_string(capacity) + ")";
    return false;
  }
  auto entry = [&](uint32_t i, uint32_t &index, float &value) {
    const char *slot = bytes + sizeof(uint32_t) + i * (sizeof index + sizeof value);
    std::memcpy(&index, slot, sizeof index);
    std::memcpy(&value, slot + sizeof index, sizeof value);
  };
  // Checked whole before anything is added.
  for (uint32_t i = 0; i < used; ++i) {
    uint32_t index, previous = 0;
    float value, ignored;
    entry(i, index, value);
    if (i > 0)
      entry(i - 1, previous, ignored);
    if (index >= count || (i > 0 && index <= previous) || !std::isfinite(value)) {
      error = "a sparse message whose entry " + std::to_string(i) +
              (index >= count ? " has index " + std::to_string(index) +
                                    " out of " + std::to_string(count)
               : std::isfinite(value) ? " is out of order"
                                      : " is not finite");
      return false;
    }
  }
  for (uint32_t i = 0; i < used; ++i) {
    uint32_t index;
    float value;
    entry(i, index, value);
    sum[index] += value;
  }
  return true;
}
