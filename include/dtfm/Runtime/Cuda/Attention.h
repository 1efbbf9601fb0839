//===- Attention.h - Causal self-attention on the GPU ------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// dtfm.causal_attention and its backward from the kernels and cuBLASLt:
// heads split to [b, heads, s, dh], S = Q K^T and O = P V as batched
// strided matmuls, the scale, mask and softmax in one kernel; the backward
// runs the same products transposed, from the probabilities it recomputes
// (causalAttentionProbabilities). Numerically the CPU kernel's algorithm:
// the reference, and the fallback where the fused kernels
// (kernels/FlashAttention.cu, FlashAttention.h's math) have no head size.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_CUDA_ATTENTION_H
#define DTFM_RUNTIME_CUDA_ATTENTION_H

#include "dtfm/Runtime/Backend.h"
#include "dtfm/Runtime/Cuda/Device.h"

namespace dtfm::runtime::cuda {

/// Q is [batch, seq, hidden] in `heads` heads; K and V have `kvHeads`
/// heads of the same size (grouped-query attention when fewer).
struct AttentionShape {
  int64_t batch = 0, seq = 0, hidden = 0, heads = 1, kvHeads = 1;
  int64_t headDim() const { return hidden / heads; }
  int64_t group() const { return heads / kvHeads; }
  /// Floats of scratch the forward and the backward need.
  int64_t scratchFloats() const {
    return 5 * batch * seq * hidden + batch * heads * seq * seq;
  }
};

/// out = attention(q, k, v) (q and out [b, s, h], out zero-filled by the
/// caller; k and v [b, s, kvHeads * dh]); probs [b, heads, s, s] kept. K and
/// V are expanded to every query head in the scratch.
bool causalAttention(Matmul &matmul, const AttentionShape &shape,
                     const float *q, const float *k, const float *v,
                     float *out, float *probs, float *scratch,
                     cudaStream_t stream, std::string &error);

/// The probabilities alone (what the backward needs of the forward):
/// probs [b, heads, s, s]; the heads of q and k split into the scratch.
bool causalAttentionProbabilities(Matmul &matmul, const AttentionShape &shape,
                                  const float *q, const float *k, float *probs,
                                  float *scratch, cudaStream_t stream,
                                  std::string &error);

/// The one rule (--gpu-attention, Backend.h): the fused kernels when
/// `choice` is not Unfused and the heads' size has them.
bool useFusedAttention(GpuAttention choice, const AttentionShape &shape);

/// out = attention(q, k, v) by the fused kernels (no probabilities):
/// `type` F32 on the CUDA cores in fp32, F16/BF16 on tensor cores with the
/// products' inputs in that type (the plan's, as its matmuls).
void fusedCausalAttention(const AttentionShape &shape, ElementType type,
                          const float *q, const float *k, const float *v,
                          float *out, cudaStream_t stream);

/// Floats of scratch the fused backward needs (each row's L and D).
inline int64_t fusedBackwardScratchFloats(const AttentionShape &shape) {
  return 2 * shape.batch * shape.heads * shape.seq;
}

/// dq, dk, dv += the gradients by the fused kernels (each may be null):
/// the forward again for L and D, then the dK/dV and dQ passes.
void fusedCausalAttentionBackward(const AttentionShape &shape,
                                  ElementType type, const float *q,
                                  const float *k, const float *v,
                                  const float *dOut, float *dq, float *dk,
                                  float *dv, float *scratch,
                                  cudaStream_t stream);

/// dq, dk, dv += the gradients (each may be null).
bool causalAttentionBackward(Matmul &matmul, const AttentionShape &shape,
                             const float *q, const float *k, const float *v,
                             const float *probs, const float *dOut, float *dq,
                             float *dk, float *dv, float *scratch,
                             cudaStream_t stream, std::string &error);

} // namespace dtfm::runtime::cuda

#endif // DTFM_RUNTIME_CUDA_ATTENTION_H
