//===- Int8.cpp - Gradients on the wire as int8 with block scales ---------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/Int8.h"
#include "dtfm/Format/Int8Math.h"

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
      largest = std::max(largest, int8::magnitude(x[i]));
    float scale = int8::blockScale(largest);
    std::memcpy(out.data() + b * sizeof(float), &scale, sizeof(float));
    for (size_t i = begin; i < end; ++i)
      values[i] = static_cast<char>(int8::quantize(x[i], scale));
  }
}

float dtfm::format::blockScaleAt(const char *bytes, size_t b) {
  float scale;
  std::memcpy(&scale, bytes + b * sizeof(float), sizeof(float));
  return scale;
}

bool dtfm::format::validBlockScales(const char *bytes, size_t blocks) {
  for (size_t b = 0; b < blocks; ++b) {
    float scale = blockScaleAt(bytes, b);
    if (!std::isfinite(scale) || scale < 0)
      return false;
  }
  return true;
}

bool dtfm::format::validInt8(const char *bytes, size_t size, size_t count) {
  return size == int8Bytes(count) &&
         validBlockScales(bytes, (count + kInt8Block - 1) / kInt8Block);
}

bool dtfm::format::decodeInt8(const char *bytes, size_t size, size_t count,
                              float *out, bool add) {
  // Every scale is checked before anything is written.
  if (!validInt8(bytes, size, count))
    return false;
  size_t blocks = (count + kInt8Block - 1) / kInt8Block;
  const char *values = bytes + blocks * sizeof(float);
  for (size_t b = 0; b < blocks; ++b) {
    float scale = blockScaleAt(bytes, b);
    size_t begin = b * kInt8Block, end = std::min(count, begin + kInt8Block);
    for (size_t i = begin; i < end; ++i) {
      float value = int8::dequantize(static_cast<int8_t>(values[i]), scale);
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
