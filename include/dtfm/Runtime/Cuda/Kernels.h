//===- Kernels.h - CUDA kernels of the dtfm ops -------------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Host entry points of the CUDA kernels in kernels/: each enqueues its work
// on `stream` and returns at once. Pointers are device pointers; tensors are
// row-major fp32 (integer tensors -- tokens, labels, top-k indices -- are
// fp32 holding integers, as on the CPU backend, so the two backends share
// plans and checkpoints). The conventions are the CPU kernels'
// (include/dtfm/Runtime/Cpu/Kernels.h), which the GPU tests compare against:
// backward kernels *add* into their gradient outputs.
//
// Matmuls are not here: they go through cuBLASLt (Cuda/Matmul.h).
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_CUDA_KERNELS_H
#define DTFM_RUNTIME_CUDA_KERNELS_H

#include <cstddef>
#include <cstdint>

typedef struct CUstream_st *cudaStream_t;

namespace dtfm::runtime::cuda {

//===--- elementwise ---------------------------------------------------===//

/// out[i] = a[i % na] + b[i % nb] for i < n (n a multiple of both: equal
/// shapes, or one operand repeating over the other's leading dimensions).
void addRepeated(const float *a, int64_t na, const float *b, int64_t nb,
                 float *out, int64_t n, cudaStream_t stream);
/// grad[j] += sum over i = j (mod m) of dOut[i], i < n.
void sumRepeated(const float *dOut, int64_t n, float *grad, int64_t m,
                 cudaStream_t stream);
void gelu(const float *x, float *y, int64_t n, bool tanhApproximation,
          cudaStream_t stream);
void geluBackward(const float *x, const float *dy, float *dx, int64_t n,
                  bool tanhApproximation, cudaStream_t stream);
void relu(const float *x, float *y, int64_t n, cudaStream_t stream);
void reluBackward(const float *y, const float *dy, float *dx, int64_t n,
                  cudaStream_t stream);
/// dst[i] += src[i].
void accumulate(const float *src, float *dst, int64_t n, cudaStream_t stream);
/// x[i] *= factor.
void scale(float *x, int64_t n, float factor, cudaStream_t stream);

//===--- rows: layernorm, softmax, cross-entropy ----------------------===//

/// Over the last dimension d of `rows` rows; mean and rstd per row kept for
/// the backward.
void layerNorm(const float *x, const float *gamma, const float *beta,
               float *y, float *mean, float *rstd, int64_t rows, int64_t d,
               float epsilon, cudaStream_t stream);
/// dx, dgamma, dbeta may be null.
void layerNormBackward(const float *x, const float *gamma, const float *mean,
                       const float *rstd, const float *dy, float *dx,
                       float *dgamma, float *dbeta, int64_t rows, int64_t d,
                       cudaStream_t stream);
void softmax(const float *x, float *y, int64_t rows, int64_t d,
             cudaStream_t stream);
void softmaxBackward(const float *y, const float *dy, float *dx, int64_t rows,
                     int64_t d, cudaStream_t stream);
/// Mean cross-entropy of `rows` rows of logits against integer labels:
/// writes softmax probabilities and the loss (one float on the device).
void crossEntropy(const float *logits, const float *labels, float *probs,
                  float *loss, int64_t rows, int64_t classes,
                  cudaStream_t stream);
/// dlogits += scale (probs - onehot(labels)) / rows.
void crossEntropyBackward(const float *probs, const float *labels,
                          float *dlogits, int64_t rows, int64_t classes,
                          float scale, cudaStream_t stream);

//===--- attention helpers (the matmuls go through cuBLASLt) ----------===//

/// [b, s, heads * dh] <-> [b, heads, s, dh].
void splitHeads(const float *x, float *y, int64_t b, int64_t s,
                int64_t heads, int64_t dh, cudaStream_t stream);
/// y += merged x.
void mergeHeads(const float *x, float *y, int64_t b, int64_t s,
                int64_t heads, int64_t dh, cudaStream_t stream);
/// In place on `count` s x s score matrices: scale, causal mask, softmax.
void causalSoftmax(float *scores, int64_t count, int64_t s, float scale,
                   cudaStream_t stream);
/// dP (in place) -> dS = P (dP - rowsum(P dP)) scale, zero above the
/// diagonal.
void causalSoftmaxBackward(const float *probs, float *grad, int64_t count,
                           int64_t s, float scale, cudaStream_t stream);

//===--- embedding ----------------------------------------------------===//

void embedding(const float *indices, const float *table, float *out,
               int64_t n, int64_t h, cudaStream_t stream);
/// dTable[indices[i]] += dOut[i] (atomic: repeated tokens add up).
void embeddingBackward(const float *indices, const float *dOut,
                       float *dTable, int64_t n, int64_t h,
                       cudaStream_t stream);

//===--- optimizers ---------------------------------------------------===//

void sgdStep(float *param, const float *grad, float *velocity, int64_t n,
             float lr, float momentum, float weightDecay, cudaStream_t stream);
void adamwStep(float *param, const float *grad, float *m, float *v, int64_t n,
               int64_t step, float lr, float beta1, float beta2, float epsilon,
               float weightDecay, cudaStream_t stream);

//===--- AdaTopK ------------------------------------------------------===//

/// Workspace bytes topK needs for n elements.
size_t topKWorkspaceBytes(int64_t n);
/// The k entries of largest magnitude (ties to the lower index), in index
/// order, as the CPU kernel: a radix select on the magnitudes' bits (four
/// 8-bit passes, no sort), then an order-preserving compaction.
void topK(const float *x, int64_t n, int64_t k, float *values,
          float *indices, void *workspace, cudaStream_t stream);
/// out = zeros(n) with values scattered at indices.
void scatterTopK(const float *values, const float *indices, int64_t k,
                 float *out, int64_t n, cudaStream_t stream);

} // namespace dtfm::runtime::cuda

#endif // DTFM_RUNTIME_CUDA_KERNELS_H
