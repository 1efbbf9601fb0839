//===- Int8Math.h - The int8 format's per-element math ----------*- C++ -*-===//
//
// Part of dtfm. Plain C++, compiled for the host and, inside the CUDA
// kernels, for the device.
//
//===----------------------------------------------------------------------===//
//
// One home for how the int8 wire format (Int8.h) -- and with 7 levels the
// 4-bit one (Int4.h) -- turns a block's values into its scale and bytes and
// back: the host encoder and decoder and the
// GPU's encoder with error feedback (kernels/Codecs.cu) call these, so that
// a gradient compressed on the device is bit for bit the host's.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_FORMAT_INT8MATH_H
#define DTFM_FORMAT_INT8MATH_H

#include "dtfm/Support/HostDevice.h"

#include <cstdint>

#ifndef __CUDACC__
#include <cmath>
#endif

namespace dtfm::format::int8 {

/// Whether `x` counts toward its block's scale (and is sent at all): an
/// infinity or a NaN is sent as 0.
DTFM_HOST_DEVICE inline bool sendable(float x) {
#ifdef __CUDA_ARCH__
  return isfinite(x);
#else
  return std::isfinite(x);
#endif
}

/// The magnitude `x` adds to its block's largest (0 when not sendable).
DTFM_HOST_DEVICE inline float magnitude(float x) {
#ifdef __CUDA_ARCH__
  return sendable(x) ? fabsf(x) : 0.0f;
#else
  return sendable(x) ? std::fabs(x) : 0.0f;
#endif
}

/// The levels either side of 0: int8's 127; the 4-bit format (Int4.h)
/// shares this math with 7.
inline constexpr int kInt8Levels = 127;

/// A block's scale from its largest magnitude.
DTFM_HOST_DEVICE inline float blockScale(float largest,
                                              int levels = kInt8Levels) {
  return largest / static_cast<float>(levels);
}

/// `x` as its block's integer: the nearest multiple of the scale (ties to
/// even), clamped to [-levels, levels]; 0 in an all-zero block.
DTFM_HOST_DEVICE inline int8_t quantize(float x, float scale,
                                             int levels = kInt8Levels) {
  if (!(scale > 0) || !sendable(x))
    return 0;
#ifdef __CUDA_ARCH__
  float q = rintf(x / scale);
#else
  float q = std::nearbyint(x / scale);
#endif
  float most = static_cast<float>(levels);
  q = q < -most ? -most : (q > most ? most : q);
  return static_cast<int8_t>(q);
}

/// A byte back to its value.
DTFM_HOST_DEVICE inline float dequantize(int8_t q, float scale) {
  return static_cast<float>(q) * scale;
}

} // namespace dtfm::format::int8

#endif // DTFM_FORMAT_INT8MATH_H
