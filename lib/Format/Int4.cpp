//===- Int4.cpp - Values on the wire in 4 bits with block scales ----------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/Int4.h"
#include "dtfm/Format/Int8.h"
#include "dtfm/Format/Int8Math.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

using namespace dtfm::format;

namespace {

size_t blocksOf(size_t count) { return (count + kInt4Block - 1) / kInt4Block; }

/// Value i's nibble, sign-extended.
int nibbleAt(const char *packed, size_t i) {
  unsigned byte = static_cast<unsigned char>(packed[i / 2]);
  unsigned nibble = i % 2 ? byte >> 4 : byte & 0xF;
  return nibble >= 8 ? static_cast<int>(nibble) - 16 : static_cast<int>(nibble);
}

} // namespace

void dtfm::format::encodeInt4(const float *x, size_t count,
                              std::vector<char> &out) {
  out.assign(int4Bytes(count), 0);
  size_t blocks = blocksOf(count);
  char *packed = out.data() + blocks * sizeof(float);
  for (size_t b = 0; b < blocks; ++b) {
    size_t begin = b * kInt4Block, end = std::min(count, begin + kInt4Block);
    float largest = 0;
    for (size_t i = begin; i < end; ++i)
      largest = std::max(largest, int8::magnitude(x[i]));
    float scale = int8::blockScale(largest, kInt4Levels);
    std::memcpy(out.data() + b * sizeof(float), &scale, sizeof(float));
    for (size_t i = begin; i < end; ++i) {
      unsigned nibble =
          static_cast<unsigned>(int8::quantize(x[i], scale, kInt4Levels)) & 0xF;
      packed[i / 2] = static_cast<char>(static_cast<unsigned char>(
          packed[i / 2] | (i % 2 ? nibble << 4 : nibble)));
    }
  }
}

bool dtfm::format::validInt4(const char *bytes, size_t size, size_t count) {
  return size == int4Bytes(count) && validBlockScales(bytes, blocksOf(count));
}

bool dtfm::format::decodeInt4(const char *bytes, size_t size, size_t count,
                              float *out, bool add) {
  // Every scale is checked before anything is written.
  if (!validInt4(bytes, size, count))
    return false;
  size_t blocks = blocksOf(count);
  const char *packed = bytes + blocks * sizeof(float);
  for (size_t b = 0; b < blocks; ++b) {
    float scale = blockScaleAt(bytes, b);
    size_t begin = b * kInt4Block, end = std::min(count, begin + kInt4Block);
    for (size_t i = begin; i < end; ++i) {
      float value =
          int8::dequantize(static_cast<int8_t>(nibbleAt(packed, i)), scale);
      out[i] = add ? out[i] + value : value;
    }
  }
  return true;
}

void dtfm::format::moveInt4(float *pending, size_t count, float *sent) {
  std::vector<char> bytes;
  encodeInt4(pending, count, bytes);
  decodeInt4(bytes.data(), bytes.size(), count, sent);
  for (size_t i = 0; i < count; ++i)
    pending[i] -= sent[i];
}
