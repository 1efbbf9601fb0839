//===- Int4.h - Values on the wire in 4 bits with block scales ---*- C++
//-*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The 4-bit wire format of local steps' outer exchange (dp-compression=int4
// with sync-every=H; Streaming DiLoCo sends its outer gradients in 4 bits):
// a vector of floats in blocks of kInt4Block, each block one float scale
// (its largest magnitude / 7; 0 for an all-zero block) and the block's
// values rounded to the nearest multiple of the scale in [-7, 7], two to a
// byte (the even index in the low nibble, two's complement). The scales
// come first, then the packed values: ceil(count / kInt4Block) * 4 +
// ceil(count / 2) bytes, 4.5 bits a value. A value comes back within half
// its block's scale; the rounding math is int8's (Int8Math.h) at 7 levels.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_FORMAT_INT4_H
#define DTFM_FORMAT_INT4_H

#include <cstddef>
#include <vector>

namespace dtfm::format {

inline constexpr size_t kInt4Block = 64;
inline constexpr int kInt4Levels = 7;

/// Bytes of `count` floats in the 4-bit format.
constexpr size_t int4Bytes(size_t count) {
  return (count + kInt4Block - 1) / kInt4Block * sizeof(float) +
         (count + 1) / 2;
}

/// Encodes x[0, count) into `out` (resized to int4Bytes(count)).
void encodeInt4(const float *x, size_t count, std::vector<char> &out);

/// Whether `size` bytes are a well-formed message of `count` floats: the
/// size is int4Bytes(count) and every scale is finite and >= 0.
bool validInt4(const char *bytes, size_t size, size_t count);

/// Decodes `size` bytes holding `count` floats into out[0, count) (added
/// to it when `add`); false, having written nothing, when the message is
/// not validInt4.
bool decodeInt4(const char *bytes, size_t size, size_t count, float *out,
                bool add = false);

/// With error feedback: `sent` gets pending[0, count) as the format carries
/// it; `pending` keeps the rounding error, the residual.
void moveInt4(float *pending, size_t count, float *sent);

} // namespace dtfm::format

#endif // DTFM_FORMAT_INT4_H
