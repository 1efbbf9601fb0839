//===- Int8.cpp - Gradients on the wire as int8 with block scales ---------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/Int8.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

void dtfm::format::encodeInt8(const float *x, size_t count,
                              std::vector<char> &out) {
  out.assign(int8Bytes(count), 0);
  size_t blocks = (count + kInt8Block - 1) / kInt8Block;
  char *values = out.data() + blocks * sizeof(float);
  for (size_t b = 0; b < blocks; ++b) {
    size_t begin = b * kInt8Block, end = std::min(count, begin + kInt8Block);
    float largest = 0;
    for (size_t i = begin; i < end; ++i)
      if (std::isfinite(x[i]))
        largest = std::max(largest, std::fabs(x[i]));
    float scale = largest / 127.0f;
    std::memcpy(out.data() + b * sizeof(float), &scale, sizeof(float));
    for (size_t i = begin; i < end; ++i) {
      float q = scale > 0 && std::isfinite(x[i]) ? std::nearbyint(x[i] / scale)
                                                 : 0.0f;
      values[i] = static_cast<char>(
          static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f)));
    }
  }
}

bool dtfm::format::decodeInt8(const char *bytes, size_t size, size_t count,
                              float *out, bool add) {
  if (size != int8Bytes(count))
    return false;
  size_t blocks = (count + kInt8Block - 1) / kInt8Block;
  auto scaleOf = [&](size_t b) {
    float scale;
    std::memcpy(&scale, bytes + b * sizeof(float), sizeof(float));
    return scale;
  };
  // Every scale is checked before anything is written.
  for (size_t b = 0; b < blocks; ++b)
    if (!std::isfinite(scaleOf(b)) || scaleOf(b) < 0)
      return false;
  const char *values = bytes + blocks * sizeof(float);
  for (size_t b = 0; b < blocks; ++b) {
    float scale = scaleOf(b);
    size_t begin = b * kInt8Block, end = std::min(count, begin + kInt8Block);
    for (size_t i = begin; i < end; ++i) {
      float value = static_cast<float>(static_cast<int8_t>(values[i])) * scale;
      out[i] = add ? out[i] + value : value;
    }
  }
  return true;
}

void dtfm::format::moveInt8(float *pending, size_t count, float *sent) {
  std::vector<char> bytes;
  encodeInt8(pending, count, bytes);
  decodeInt8(bytes.data(), bytes.size(), count, sent);
  for (size_t i = 0; i < count; ++i)
    pending[i] -= sent[i];
}
