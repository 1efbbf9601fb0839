//===- FlashAttention.h - Fused causal attention's per-row math -*- C++ -*-===//
//
// Part of dtfm. Plain C++, compiled for the host and, inside the CUDA
// kernels (kernels/FlashAttention.cu), for the device.
//
//===----------------------------------------------------------------------===//
//
// dtfm.causal_attention without its [heads, s, s] probabilities (the
// FlashAttention-2 algorithm, Dao 2023): a query row takes the keys a chunk
// at a time, keeping the largest score so far, the sum of exponentials
// below it and the output's numerator, rescaled whenever the largest score
// grows; the forward leaves each row's log-sum-exp L. The backward
// recomputes the forward (L, and D = rowsum(dO * O) from the output it does
// not store), then runs two passes, each thread row owning what it writes:
// a key row sums dK and dV over the queries that see it (every head of its
// group, in order), a query row sums dQ over its keys. No atomics: the
// gradients do not depend on the scheduling.
//
// One home for that math: the kernels and the host reference
// (flash::forwardReference / backwardReference, the unit tests' check
// against the CPU kernels) call the same row types. A row is split over
// kLanes adjacent GPU threads, each holding kDims of the head's dimensions;
// laneSum adds the lanes' parts (a shuffle on the device; the host runs a
// row as one lane). The kernels stage each chunk of keys (queries) in shared
// memory padded with zeros to kDims per lane and kChunk rows; the host
// passes the tensors themselves with the exact counts.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_FLASHATTENTION_H
#define DTFM_RUNTIME_FLASHATTENTION_H

#include "dtfm/Support/HostDevice.h"

#include <cmath>
#include <cstdint>

namespace dtfm::runtime::flash {

/// Keys per chunk of the forward and the dQ pass, queries per chunk of the
/// dK/dV pass (fewer: its rows hold four vectors).
constexpr int kForwardChunk = 32;
constexpr int kBackwardChunk = 16;
/// A lane's share of a head: up to 32 dimensions, up to 4 lanes a row.
constexpr int kSliceDims = 32;
constexpr int64_t kMaxHeadDim = 128;

/// Whether a head of `headDim` dimensions has a fused kernel (the rule the
/// CUDA executor's choice between fused and unfused attention follows).
inline bool supportsHeadDim(int64_t headDim) {
  return headDim >= 1 && headDim <= kMaxHeadDim;
}
/// Sequences the kernels' grids reach: 65535 blocks of 32 rows or more.
constexpr int64_t kMaxSequence = int64_t(65535) * 32;
inline bool supportsSequence(int64_t seq) {
  return seq >= 1 && seq <= kMaxSequence;
}

/// Where things are: q and the output [batch, seq, heads * headDim], k and v
/// [batch, seq, kvHeads * headDim] (query head h reads key/value head
/// h / group), L and D [batch, heads, seq].
struct Layout {
  int64_t batch = 0, seq = 0, heads = 1, kvHeads = 1, headDim = 0;
  DTFM_HOST_DEVICE int64_t group() const { return heads / kvHeads; }
  DTFM_HOST_DEVICE int64_t queryPitch() const { return heads * headDim; }
  DTFM_HOST_DEVICE int64_t keyPitch() const { return kvHeads * headDim; }
  DTFM_HOST_DEVICE int64_t query(int64_t n, int64_t t, int64_t head) const {
    return (n * seq + t) * queryPitch() + head * headDim;
  }
  DTFM_HOST_DEVICE int64_t key(int64_t n, int64_t t, int64_t kvHead) const {
    return (n * seq + t) * keyPitch() + kvHead * headDim;
  }
  DTFM_HOST_DEVICE int64_t row(int64_t n, int64_t head, int64_t t) const {
    return (n * heads + head) * seq + t;
  }
  DTFM_HOST_DEVICE int64_t rows() const { return batch * heads * seq; }
  /// The scores' scale, 1 / sqrt(headDim) (the CPU kernel's).
  float scale() const {
    return static_cast<float>(1.0 / std::sqrt(static_cast<double>(headDim)));
  }
};

DTFM_HOST_DEVICE inline float expOf(float x) {
#ifdef __CUDA_ARCH__
  return expf(x);
#else
  return std::exp(x);
#endif
}

DTFM_HOST_DEVICE inline float logOf(float x) {
#ifdef __CUDA_ARCH__
  return logf(x);
#else
  return std::log(x);
#endif
}

DTFM_HOST_DEVICE inline float largerOf(float a, float b) {
#ifdef __CUDA_ARCH__
  return fmaxf(a, b);
#else
  return std::fmax(a, b);
#endif
}

DTFM_HOST_DEVICE inline float minusInfinity() {
#ifdef __CUDA_ARCH__
  return -__int_as_float(0x7f800000);
#else
  return -INFINITY;
#endif
}

/// The row's total of a per-lane part: every lane of the row gets it. On the
/// device every thread of the warp must call it (the rows' lanes are
/// adjacent, kLanes a power of two).
template <int kLanes> DTFM_HOST_DEVICE inline float laneSum(float part) {
#ifdef __CUDA_ARCH__
  DTFM_UNROLL
  for (int offset = 1; offset < kLanes; offset *= 2)
    part += __shfl_xor_sync(0xffffffffu, part, offset);
#endif
  return part;
}

/// This lane's part of a dot product: `a` in registers, `b` in memory.
template <int kDims>
DTFM_HOST_DEVICE inline float sliceDot(const float *a, const float *b,
                                       int dims) {
  float sum = 0;
  DTFM_UNROLL
  for (int d = 0; d < kDims; ++d)
    if (d < dims)
      sum += a[d] * b[d];
  return sum;
}

/// A query row of the forward.
template <int kDims, int kLanes, int kChunk> struct ForwardRow {
  float q[kDims];   // this lane's slice of the query, times the scale
  float acc[kDims]; // sum over the keys taken of exp(s - largest) v
  float largest;    // the largest score taken (-inf before any)
  float sum;        // sum over the keys taken of exp(s - largest)

  /// `dims` of this lane's slice at `query` (0: a row past the end).
  DTFM_HOST_DEVICE void begin(const float *query, int dims, float scale) {
    DTFM_UNROLL
    for (int d = 0; d < kDims; ++d) {
      q[d] = d < dims ? query[d] * scale : 0.0f;
      acc[d] = 0;
    }
    largest = minusInfinity();
    sum = 0;
  }

  /// Takes `count` keys (at most kChunk), key c's slice at keys + c * pitch
  /// and its value's at values + c * pitch, key c being the sequence's
  /// `first + c`; the row is query `row` and sees the keys at or before it.
  DTFM_HOST_DEVICE void take(const float *keys, const float *values,
                             int64_t pitch, int count, int64_t first,
                             int64_t row, int dims) {
    float score[kChunk];
    float chunkLargest = minusInfinity();
    DTFM_UNROLL
    for (int c = 0; c < kChunk; ++c) {
      score[c] = minusInfinity();
      if (c < count) { // the same for the whole block: laneSum is safe
        float s = laneSum<kLanes>(sliceDot<kDims>(q, keys + c * pitch, dims));
        if (first + c <= row)
          score[c] = s;
      }
      chunkLargest = largerOf(chunkLargest, score[c]);
    }
    if (chunkLargest == minusInfinity())
      return; // every key of the chunk is after the row
    float grown = largerOf(largest, chunkLargest);
    float rescale = expOf(largest - grown); // 0 before the first key
    largest = grown;
    sum *= rescale;
    DTFM_UNROLL
    for (int d = 0; d < kDims; ++d)
      acc[d] *= rescale;
    DTFM_UNROLL
    for (int c = 0; c < kChunk; ++c) {
      if (c >= count)
        continue;
      float p = expOf(score[c] - largest); // 0 for a masked key
      sum += p;
      const float *value = values + c * pitch;
      DTFM_UNROLL
      for (int d = 0; d < kDims; ++d)
        if (d < dims)
          acc[d] += p * value[d];
    }
  }

  DTFM_HOST_DEVICE float logSumExp() const { return largest + logOf(sum); }

  /// out = this lane's slice of the attention's output.
  DTFM_HOST_DEVICE void finish(float *out, int dims) const {
    float inverse = 1.0f / sum;
    DTFM_UNROLL
    for (int d = 0; d < kDims; ++d)
      if (d < dims)
        out[d] = acc[d] * inverse;
  }

  /// This lane's part of D = rowsum(dOut * output).
  DTFM_HOST_DEVICE float outputDot(const float *dOut, int dims) const {
    float inverse = 1.0f / sum, dot = 0;
    DTFM_UNROLL
    for (int d = 0; d < kDims; ++d)
      if (d < dims)
        dot += dOut[d] * (acc[d] * inverse);
    return dot;
  }
};

/// A key row of the dK/dV pass: sums over the queries that see the key, of
/// every head of its group.
template <int kDims, int kLanes, int kChunk> struct KeyRow {
  float k[kDims], v[kDims], dk[kDims], dv[kDims];

  DTFM_HOST_DEVICE void begin(const float *key, const float *value, int dims) {
    DTFM_UNROLL
    for (int d = 0; d < kDims; ++d) {
      k[d] = d < dims ? key[d] : 0.0f;
      v[d] = d < dims ? value[d] : 0.0f;
      dk[d] = 0;
      dv[d] = 0;
    }
  }

  /// Takes `count` queries of one head (at most kChunk): query c's slice,
  /// times the scale, at queries + c * pitch, its output gradient's at
  /// dOuts + c * pitch, its L and D at logSumExp[c] and delta[c]; query c
  /// is the sequence's `first + c` and sees the row's key when at or after
  /// it.
  DTFM_HOST_DEVICE void take(const float *queries, const float *dOuts,
                             int64_t pitch, const float *logSumExp,
                             const float *delta, int count, int64_t first,
                             int64_t key, int dims) {
    float p[kChunk], ds[kChunk];
    DTFM_UNROLL
    for (int c = 0; c < kChunk; ++c) {
      p[c] = 0;
      ds[c] = 0;
      if (c < count) {
        float s =
            laneSum<kLanes>(sliceDot<kDims>(k, queries + c * pitch, dims));
        float dp = laneSum<kLanes>(sliceDot<kDims>(v, dOuts + c * pitch, dims));
        if (first + c >= key) {
          p[c] = expOf(s - logSumExp[c]);
          ds[c] = p[c] * (dp - delta[c]);
        }
      }
    }
    DTFM_UNROLL
    for (int c = 0; c < kChunk; ++c) {
      if (c >= count)
        continue;
      const float *query = queries + c * pitch, *dOut = dOuts + c * pitch;
      DTFM_UNROLL
      for (int d = 0; d < kDims; ++d)
        if (d < dims) {
          dv[d] += p[c] * dOut[d];
          dk[d] += ds[c] * query[d];
        }
    }
  }

  /// dKey += dK, dValue += dV (either may be null).
  DTFM_HOST_DEVICE void finish(float *dKey, float *dValue, int dims) const {
    DTFM_UNROLL
    for (int d = 0; d < kDims; ++d)
      if (d < dims) {
        if (dKey)
          dKey[d] += dk[d];
        if (dValue)
          dValue[d] += dv[d];
      }
  }
};

/// A query row of the dQ pass.
template <int kDims, int kLanes, int kChunk> struct QueryRow {
  float q[kDims], g[kDims], dq[kDims]; // q times the scale, dOut, dS K
  float logSumExp, delta;

  DTFM_HOST_DEVICE void begin(const float *query, const float *dOut, float lse,
                              float rowDelta, int dims, float scale) {
    DTFM_UNROLL
    for (int d = 0; d < kDims; ++d) {
      q[d] = d < dims ? query[d] * scale : 0.0f;
      g[d] = d < dims ? dOut[d] : 0.0f;
      dq[d] = 0;
    }
    logSumExp = lse;
    delta = rowDelta;
  }

  /// ForwardRow::take's keys and values.
  DTFM_HOST_DEVICE void take(const float *keys, const float *values,
                             int64_t pitch, int count, int64_t first,
                             int64_t row, int dims) {
    float ds[kChunk];
    DTFM_UNROLL
    for (int c = 0; c < kChunk; ++c) {
      ds[c] = 0;
      if (c < count) {
        float s = laneSum<kLanes>(sliceDot<kDims>(q, keys + c * pitch, dims));
        float dp =
            laneSum<kLanes>(sliceDot<kDims>(g, values + c * pitch, dims));
        if (first + c <= row)
          ds[c] = expOf(s - logSumExp) * (dp - delta);
      }
    }
    DTFM_UNROLL
    for (int c = 0; c < kChunk; ++c) {
      if (c >= count)
        continue;
      const float *key = keys + c * pitch;
      DTFM_UNROLL
      for (int d = 0; d < kDims; ++d)
        if (d < dims)
          dq[d] += ds[c] * key[d];
    }
  }

  /// dQuery += dS K times the scale.
  DTFM_HOST_DEVICE void finish(float *dQuery, int dims, float scale) const {
    DTFM_UNROLL
    for (int d = 0; d < kDims; ++d)
      if (d < dims)
        dQuery[d] += dq[d] * scale;
  }
};

/// The algorithm on the host, row by row in the kernels' chunks: out (and,
/// when not null, L; with dOut, D) of the forward.
void forwardReference(const Layout &layout, const float *q, const float *k,
                      const float *v, float *out, float *logSumExp,
                      const float *dOut = nullptr, float *delta = nullptr);
/// dq, dk, dv += the gradients (each may be null), from the forward's L and
/// D (forwardReference with dOut).
void backwardReference(const Layout &layout, const float *q, const float *k,
                       const float *v, const float *dOut,
                       const float *logSumExp, const float *delta, float *dq,
                       float *dk, float *dv);

} // namespace dtfm::runtime::flash

#endif // DTFM_RUNTIME_FLASHATTENTION_H
