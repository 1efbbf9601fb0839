//===- Int8.h - Gradients on the wire as int8 with block scales -*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The int8 wire format of compressed data-parallel exchanges
// (dp-compression=int8): a vector of floats in blocks of kInt8Block, each
// block one float scale (its largest magnitude / 127; 0 for an all-zero
// block) followed by the block's values rounded to the nearest multiple of
// the scale, as signed bytes. The scales come first, then the bytes:
// ceil(count / kInt8Block) * 4 + count bytes in all. A value comes back
// within half its block's scale.
//
// One home for the format: the runtime's ring all-reduce encodes with it,
// the planner counts its bytes.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_FORMAT_INT8_H
#define DTFM_FORMAT_INT8_H

#include <cstddef>
#include <vector>

namespace dtfm::format {

inline constexpr size_t kInt8Block = 256;

/// Bytes of `count` floats in the int8 format.
constexpr size_t int8Bytes(size_t count) {
  return (count + kInt8Block - 1) / kInt8Block * sizeof(float) + count;
}

/// Bytes in the int8 format of `denseBytes` of values `elementBytes` wide.
inline double int8BytesOfDense(double denseBytes, double elementBytes) {
  return static_cast<double>(
      int8Bytes(static_cast<size_t>(denseBytes / elementBytes)));
}

/// Encodes x[0, count) into `out` (resized to int8Bytes(count)).
void encodeInt8(const float *x, size_t count, std::vector<char> &out);

/// The float scales that lead the block formats (int8 here, 4 bits in
/// Int4.h): scale b of a message, and whether its first `blocks` scales
/// are all finite and >= 0 (what a hostile peer may break).
float blockScaleAt(const char *bytes, size_t b);
bool validBlockScales(const char *bytes, size_t blocks);

/// Whether `size` bytes are a well-formed message of `count` floats: the
/// size is int8Bytes(count) and every scale is finite and >= 0 (what a
/// hostile peer may break; the bytes themselves cannot be wrong).
bool validInt8(const char *bytes, size_t size, size_t count);

/// Decodes `size` bytes holding `count` floats into out[0, count) (added
/// to it when `add`); false, having written nothing, when the message is
/// not validInt8.
bool decodeInt8(const char *bytes, size_t size, size_t count, float *out,
                bool add = false);

/// Int8 with error feedback: `sent` gets pending[0, count) as the format
/// carries it; `pending` keeps the rounding error, the residual.
void moveInt8(float *pending, size_t count, float *sent);

} // namespace dtfm::format

#endif // DTFM_FORMAT_INT8_H
