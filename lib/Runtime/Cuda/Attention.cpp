//===- Attention.cpp - Causal self-attention on the GPU -------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Cuda/Attention.h"
#include "dtfm/Runtime/Cuda/Kernels.h"
#include "dtfm/Runtime/FlashAttention.h"

#include <cuda_runtime.h>

#include <cmath>

using namespace dtfm::runtime;
using namespace dtfm::runtime::cuda;

namespace {

/// [count] matrices, row-major, dense: C = op(A) op(B) (+ C).
MatmulShape batched(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                    int64_t count, bool accumulate) {
  MatmulShape s;
  s.transA = transA;
  s.transB = transB;
  s.m = m;
  s.n = n;
  s.k = k;
  s.batch = count;
  s.strideA = m * k;
  s.strideB = k * n;
  s.strideC = m * n;
  s.accumulate = accumulate;
  return s;
}

flash::Layout layoutOf(const AttentionShape &shape) {
  flash::Layout l;
  l.batch = shape.batch;
  l.seq = shape.seq;
  l.heads = shape.heads;
  l.kvHeads = shape.kvHeads;
  l.headDim = shape.headDim();
  return l;
}

} // namespace

bool dtfm::runtime::cuda::useFusedAttention(GpuAttention choice,
                                            const AttentionShape &shape) {
  return choice != GpuAttention::Unfused &&
         flash::supportsHeadDim(shape.headDim()) &&
         flash::supportsSequence(shape.seq);
}

namespace {

HalfType halfOf(cuda::ElementType type) {
  return type == cuda::ElementType::BF16 ? HalfType::BF16 : HalfType::F16;
}

/// The tensor cores where the plan's type asks for them and the device's
/// shared memory holds their tiles; the fp32 fused kernels otherwise.
cuda::ElementType fusedType(cuda::ElementType type, int64_t headDim) {
  return type != cuda::ElementType::F32 && tensorCoreAttentionFits(headDim)
             ? type
             : cuda::ElementType::F32;
}

} // namespace

void dtfm::runtime::cuda::fusedCausalAttention(const AttentionShape &shape,
                                               cuda::ElementType type,
                                               const float *q, const float *k,
                                               const float *v, float *out,
                                               cudaStream_t stream) {
  flash::Layout l = layoutOf(shape);
  type = fusedType(type, l.headDim);
  if (type == cuda::ElementType::F32)
    flashAttention(l, q, k, v, out, nullptr, nullptr, nullptr, stream);
  else
    flashAttentionTensorCores(l, halfOf(type), q, k, v, out, nullptr, nullptr,
                              nullptr, stream);
}

void dtfm::runtime::cuda::fusedCausalAttentionBackward(
    const AttentionShape &shape, cuda::ElementType type, const float *q,
    const float *k, const float *v, const float *dOut, float *dq, float *dk,
    float *dv, float *scratch, cudaStream_t stream) {
  flash::Layout l = layoutOf(shape);
  float *logSumExp = scratch, *delta = scratch + l.rows();
  type = fusedType(type, l.headDim);
  if (type == cuda::ElementType::F32) {
    flashAttention(l, q, k, v, nullptr, logSumExp, dOut, delta, stream);
    flashAttentionBackward(l, q, k, v, dOut, logSumExp, delta, dq, dk, dv,
                           stream);
    return;
  }
  flashAttentionTensorCores(l, halfOf(type), q, k, v, nullptr, logSumExp, dOut,
                            delta, stream);
  flashAttentionBackwardTensorCores(l, halfOf(type), q, k, v, dOut, logSumExp,
                                    delta, dq, dk, dv, stream);
}

bool dtfm::runtime::cuda::causalAttentionProbabilities(
    Matmul &matmul, const AttentionShape &shape, const float *q, const float *k,
    float *probs, float *scratch, cudaStream_t stream, std::string &error) {
  int64_t b = shape.batch, s = shape.seq, heads = shape.heads,
          dh = shape.headDim(), count = b * heads, n = b * s * shape.hidden;
  float *qs = scratch, *ks = qs + n;
  splitHeads(q, qs, b, s, heads, dh, 1, stream);
  splitHeads(k, ks, b, s, heads, dh, shape.group(), stream);
  // S = Q K^T per (batch row, head).
  if (!matmul.run(batched(false, true, s, s, dh, count, false), qs, ks, probs,
                  stream, error))
    return false;
  causalSoftmax(probs, count, s,
                static_cast<float>(1.0 / std::sqrt(static_cast<double>(dh))),
                stream);
  return true;
}

bool dtfm::runtime::cuda::causalAttention(
    Matmul &matmul, const AttentionShape &shape, const float *q, const float *k,
    const float *v, float *out, float *probs, float *scratch,
    cudaStream_t stream, std::string &error) {
  int64_t b = shape.batch, s = shape.seq, heads = shape.heads,
          dh = shape.headDim(), count = b * heads, n = b * s * shape.hidden;
  float *vs = scratch + 2 * n, *os = vs + n;
  if (!causalAttentionProbabilities(matmul, shape, q, k, probs, scratch,
                                    stream, error))
    return false;
  splitHeads(v, vs, b, s, heads, dh, shape.group(), stream);
  // O = P V.
  if (!matmul.run(batched(false, false, s, dh, s, count, false), probs, vs, os,
                  stream, error))
    return false;
  mergeHeads(os, out, b, s, heads, dh, 1, stream);
  return true;
}

bool dtfm::runtime::cuda::causalAttentionBackward(
    Matmul &matmul, const AttentionShape &shape, const float *q, const float *k,
    const float *v, const float *probs, const float *dOut, float *dq, float *dk,
    float *dv, float *scratch, cudaStream_t stream, std::string &error) {
  int64_t b = shape.batch, s = shape.seq, heads = shape.heads,
          dh = shape.headDim(), count = b * heads, n = b * s * shape.hidden;
  float *qs = scratch, *ks = qs + n, *vs = ks + n, *gs = vs + n;
  float *dp = gs + n, *grad = dp + count * s * s;
  int64_t group = shape.group();
  splitHeads(q, qs, b, s, heads, dh, 1, stream);
  splitHeads(k, ks, b, s, heads, dh, group, stream);
  splitHeads(v, vs, b, s, heads, dh, group, stream);
  splitHeads(dOut, gs, b, s, heads, dh, 1, stream);
  // dV = P^T dO (summed over each key/value head's group by the merge).
  if (dv) {
    if (!matmul.run(batched(true, false, s, dh, s, count, false), probs, gs,
                    grad, stream, error))
      return false;
    mergeHeads(grad, dv, b, s, heads, dh, group, stream);
  }
  // dP = dO V^T, then dS in place.
  if (!matmul.run(batched(false, true, s, s, dh, count, false), gs, vs, dp,
                  stream, error))
    return false;
  causalSoftmaxBackward(
      probs, dp, count, s,
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(dh))), stream);
  // dQ = dS K; dK = dS^T Q.
  if (dq) {
    if (!matmul.run(batched(false, false, s, dh, s, count, false), dp, ks, grad,
                    stream, error))
      return false;
    mergeHeads(grad, dq, b, s, heads, dh, 1, stream);
  }
  if (dk) {
    if (!matmul.run(batched(true, false, s, dh, s, count, false), dp, qs, grad,
                    stream, error))
      return false;
    mergeHeads(grad, dk, b, s, heads, dh, group, stream);
  }
  return true;
}
