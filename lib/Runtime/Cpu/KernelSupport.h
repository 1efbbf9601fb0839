//===- KernelSupport.h - Helpers shared by the CPU kernels ------*- C++ -*-===//
//
// Part of dtfm. Private to lib/Runtime/Cpu.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_LIB_RUNTIME_CPU_KERNELSUPPORT_H
#define DTFM_LIB_RUNTIME_CPU_KERNELSUPPORT_H

#include "dtfm/Runtime/Cpu/Kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

/// On x86-64, a kernel so marked is also compiled for AVX2 (8 floats a
/// vector instead of SSE2's 4) and the one the CPU runs is chosen when the
/// program loads. Without FMA, so both give the same bits. Not under
/// ThreadSanitizer: it instruments the resolver that chooses, which runs
/// while the program is loaded, before its runtime is up (every binary
/// crashed at start).
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DTFM_THREAD_SANITIZER 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define DTFM_THREAD_SANITIZER 1
#endif
#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__)) &&      \
    !defined(DTFM_THREAD_SANITIZER)
#define DTFM_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DTFM_VECTOR_CLONES
#endif

namespace dtfm::runtime::cpu {

/// Makes `t` a zero tensor of `shape` unless it already has that shape
/// (gradients accumulate into caller-provided tensors).
inline void ensure(Tensor *t, const std::vector<int64_t> &shape) {
  if (t && t->shape != shape)
    *t = Tensor(shape);
}

/// For every element of a row-major `shape`, in order, `offsetOf(coord)` of
/// its coordinate: the flat index maps of broadcasting, reductions, slices
/// and transposes.
template <typename OffsetOf>
std::vector<int64_t> indexMap(const std::vector<int64_t> &shape,
                              OffsetOf offsetOf) {
  int64_t total = 1;
  for (int64_t d : shape)
    total *= d;
  std::vector<int64_t> index(total), coord(shape.size(), 0);
  for (int64_t flat = 0; flat < total; ++flat) {
    index[flat] = offsetOf(coord);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++coord[d] < shape[d])
        break;
      coord[d] = 0;
    }
  }
  return index;
}

/// e^x in float without a library call, so that loops over it vectorise
/// (libm's expf does not): x = n ln 2 + r with |r| <= ln 2 / 2, e^r by its
/// degree-7 Taylor polynomial (truncation error below 4e-9 relative), times
/// 2^n built in the exponent bits. Within 2 ulp of expf over the range;
/// below -87 it gives about 1e-38 (expf: the same or denormals), above 88
/// about 1.7e38 (expf: inf); callers only pass non-positive arguments or
/// arguments well inside.
inline float expApprox(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  float scaled = x * 1.44269504088896341f; // x / ln 2
  // Round to nearest by truncation: SSE2 has a truncating conversion.
  int32_t n = static_cast<int32_t>(scaled + (scaled >= 0 ? 0.5f : -0.5f));
  float fn = static_cast<float>(n);
  // ln 2 in two parts, so that n ln 2 is subtracted without rounding error.
  float r = (x - fn * 0.693145751953125f) - fn * 1.42860682030941723e-6f;
  float p =
      1.0f +
      r * (1.0f +
           r * (0.5f +
                r * (1.0f / 6 +
                     r * (1.0f / 24 +
                          r * (1.0f / 120 +
                               r * (1.0f / 720 + r * (1.0f / 5040)))))));
  int32_t bits = (n + 127) << 23;
  float twoToN;
  std::memcpy(&twoToN, &bits, sizeof twoToN);
  return p * twoToN;
}

/// erf(x) and, in `gaussian`, e^(-x^2) (which it needs, and GELU's
/// derivative needs too): Abramowitz and Stegun 7.1.26, absolute error
/// below 1.5e-7 -- about one float ulp of 1 + erf. Vectorises like
/// expApprox.
inline float erfApprox(float x, float &gaussian) {
  float a = std::fabs(x);
  float t = 1.0f / (1.0f + 0.3275911f * a);
  float poly =
      t * (0.254829592f +
           t * (-0.284496736f +
                t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  gaussian = expApprox(-x * x);
  float magnitude = 1.0f - poly * gaussian;
  return x < 0 ? -magnitude : magnitude;
}

} // namespace dtfm::runtime::cpu

#endif // DTFM_LIB_RUNTIME_CPU_KERNELSUPPORT_H
