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

#include "dtfm/Support/ElementMath.h"

#include <cstddef>
#include <cstdint>

typedef struct CUstream_st *cudaStream_t;

namespace dtfm::runtime::flash {
struct Layout;
} // namespace dtfm::runtime::flash

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
/// y = x rounded to fp16 (or bf16) to the nearest, as raw 16-bit values
/// (the operands of mixed-precision matmuls).
void roundToHalf(const float *x, uint16_t *y, int64_t n, bool bfloat16,
                 cudaStream_t stream);
/// dst[i] += src[i].
void accumulate(const float *src, float *dst, int64_t n, cudaStream_t stream);
/// x[i] *= factor.
void scale(float *x, int64_t n, float factor, cudaStream_t stream);
/// `count` elements from src to dst (device pointers; segments must not
/// overlap each other's destinations).
struct CopySegment {
  const float *src;
  float *dst;
  int64_t count;
};
/// Every segment, in a few launches (ZeRO-1's packing of shards into
/// member chunks and back).
void copySegments(const CopySegment *segments, size_t count,
                  cudaStream_t stream);

//===--- strided: broadcasting, permuting, slicing, reducing -----------===//
// (views and per-element math in ElementMath.h)

/// dst[dstView.at(i)] = alpha * src[srcView.at(i)] (+= with `accumulate`)
/// over the views' common iteration shape. A destination element must be
/// written at most once (true of permutations, slices and blocks).
void copyStrided(const float *src, const math::StridedView &srcView, float *dst,
                 const math::StridedView &dstView, float alpha, bool accumulate,
                 cudaStream_t stream);
/// out[i] = op(a[aView.at(i)], b[bView.at(i)]), out dense over the views'
/// iteration shape (NumPy broadcasting through stride-0 views).
void binaryStrided(math::BinaryOp op, const float *a,
                   const math::StridedView &aView, const float *b,
                   const math::StridedView &bView, float *out,
                   cudaStream_t stream);
/// out[i] = condition != 0 ? a : b, each through its view.
void whereStrided(const float *condition,
                  const math::StridedView &conditionView, const float *a,
                  const math::StridedView &aView, const float *b,
                  const math::StridedView &bView, float *out,
                  cudaStream_t stream);
/// out[result.at(j)] (+)= alpha * sum of term(operands) over the reduced
/// part, for every kept element j: gradients of broadcast operands, means.
/// Deterministic (no atomics).
void reduceStrided(math::ReduceTerm term, const float *const operands[3],
                   const math::ReductionViews &views, float *out, float alpha,
                   bool accumulate, cudaStream_t stream);
/// out[result.at(j)] = the largest (maximum) or smallest element of x over
/// the reduced part (math::extremumStep), for every kept element j; views
/// has x's view as operand 0.
void reduceExtremum(bool maximum, const float *x,
                    const math::ReductionViews &views, float *out,
                    cudaStream_t stream);
/// dx += dy where x equals its extremum, split evenly among ties.
void reduceExtremumBackward(bool maximum, const float *x, const float *dy,
                            const math::ReductionViews &views, float *dx,
                            cudaStream_t stream);
/// y = op(x) elementwise (sqrt, tanh, erf, exp, sigmoid, pow with its
/// exponent, clip to its bounds).
void unary(math::UnaryOp op, const float *x, float *y, int64_t n,
           math::UnaryParams params, cudaStream_t stream);
/// dx += dy * op'(x).
void unaryBackward(math::UnaryOp op, const float *x, const float *dy, float *dx,
                   int64_t n, math::UnaryParams params, cudaStream_t stream);
/// ONNX Gather; an index outside [-size, size) sets *badIndex (a device
/// int the caller clears and reads) and writes 0.
void gather(const float *x, const float *indices, const math::GatherGeometry &g,
            float *out, int *badIndex, cudaStream_t stream);
/// dx[source] += dOut (atomic: repeated indices add up).
void gatherBackward(const float *indices, const float *dOut,
                    const math::GatherGeometry &g, float *dx,
                    cudaStream_t stream);

//===--- convolution, batchnorm, pooling (NCHW) -----------------------===//

/// Column matrices [images][columnRows][spatial] of `images` images from
/// `first`, group `group` (the matmuls with the filters go through
/// cuBLASLt).
void im2col(const float *x, const math::ConvGeometry &g, int64_t first,
            int64_t images, int64_t group, float *columns, cudaStream_t stream);
/// dx += the column-matrix gradients `dcolumns` folded back onto the image.
void col2im(const float *dcolumns, const math::ConvGeometry &g, int64_t first,
            int64_t images, int64_t group, float *dx, cudaStream_t stream);
/// Training-mode batch normalisation over dimension 1 of x viewed as
/// [n, c, inner]: batch mean and biased variance per channel (kept in
/// `mean`, `variance`), y = (x - mean) / sqrt(var + eps) * gamma + beta.
/// With `fixedMean` and `fixedVariance` (inference mode) those are used
/// instead and `mean`, `variance` are not written (may be null).
void batchNorm(const float *x, const float *gamma, const float *beta, float *y,
               float *mean, float *variance, int64_t n, int64_t c,
               int64_t inner, float epsilon, cudaStream_t stream,
               const float *fixedMean = nullptr,
               const float *fixedVariance = nullptr);
/// running = (1 - momentum) running + momentum batch (the variance made
/// unbiased over `count` elements, as PyTorch keeps it); either may be null.
void batchNormRunningStats(float *runningMean, float *runningVariance,
                           const float *mean, const float *variance,
                           int64_t c, int64_t count, float momentum,
                           cudaStream_t stream);
/// dx, dgamma, dbeta += the gradients (each may be null); statistics
/// recomputed from x, or the fixed ones (inference mode: constants).
void batchNormBackward(const float *x, const float *gamma, const float *dy,
                       float *dx, float *dgamma, float *dbeta, int64_t n,
                       int64_t c, int64_t inner, float epsilon,
                       cudaStream_t stream, const float *fixedMean = nullptr,
                       const float *fixedVariance = nullptr);
void maxPool2d(const float *x, const math::PoolGeometry &g, float *y,
               cudaStream_t stream);
void maxPool2dBackward(const float *x, const float *dy,
                       const math::PoolGeometry &g, float *dx,
                       cudaStream_t stream);
void avgPool2d(const float *x, const math::PoolGeometry &g, float *y,
               cudaStream_t stream);
void avgPool2dBackward(const float *dy, const math::PoolGeometry &g, float *dx,
                       cudaStream_t stream);

/// dtfm.rotary of x [b, s, heads * dh] into y (ElementMath.h's rotaryElement);
/// sign -1 turns back, and `accumulate` adds into y (the backward).
void rotary(const float *x, float *y, int64_t b, int64_t s, int64_t heads,
            int64_t dh, double theta, int sign, bool accumulate,
            cudaStream_t stream);

//===--- rows: layernorm, rms_norm, softmax, cross-entropy ---------------===//

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
/// RMSNorm over the last dimension d; rstd per row kept for the backward.
void rmsNorm(const float *x, const float *gamma, float *y, float *rstd,
             int64_t rows, int64_t d, float epsilon, cudaStream_t stream);
/// dx and dgamma may be null.
void rmsNormBackward(const float *x, const float *gamma, const float *rstd,
                     const float *dy, float *dx, float *dgamma, int64_t rows,
                     int64_t d, cudaStream_t stream);
void softmax(const float *x, float *y, int64_t rows, int64_t d,
             cudaStream_t stream);
void softmaxBackward(const float *y, const float *dy, float *dx, int64_t rows,
                     int64_t d, cudaStream_t stream);
/// Log-softmax over the last dimension; the backward from its result y:
/// dx += dy - exp(y) * sum(dy).
void logSoftmax(const float *x, float *y, int64_t rows, int64_t d,
                cudaStream_t stream);
void logSoftmaxBackward(const float *y, const float *dy, float *dx,
                        int64_t rows, int64_t d, cudaStream_t stream);
/// Softmax cross-entropy of `rows` rows of `classes` logits, in three
/// halves (cpu::crossEntropySliceSums and the rest) around the sum over a
/// vocabulary-parallel group of `degree` (none for degree 1): this member's
/// row sums over its first `valid` classes (the rest are padding) into
/// `sums` [rows, 2 degree + 1] (zeroed here), then from the summed rows
/// each row's log-sum-exp and the mean loss (one float), then dlogits +=
/// scale (softmax - onehot) / rows over this member's valid classes.
void crossEntropySliceSums(const float *logits, const float *labels,
                           float *sums, int64_t rows, int64_t classes,
                           int64_t valid, int64_t rank, int64_t degree,
                           cudaStream_t stream);
void crossEntropyFromSums(const float *sums, float *logSumExp, float *loss,
                          int64_t rows, int64_t degree, cudaStream_t stream);
void crossEntropySliceBackward(const float *logits, const float *labels,
                               const float *logSumExp, float *dlogits,
                               int64_t rows, int64_t classes, int64_t valid,
                               int64_t rank, float scale, cudaStream_t stream);

//===--- fused attention (kernels/FlashAttention.cu) ------------------===//

/// The forward: out (when not null) and each row's log-sum-exp L (when
/// not null); with dOut, each row's D = rowsum(dOut * out) into delta.
void flashAttention(const flash::Layout &layout, const float *q,
                    const float *k, const float *v, float *out,
                    float *logSumExp, const float *dOut, float *delta,
                    cudaStream_t stream);
/// dq, dk, dv += the gradients (each may be null) from the forward's L and
/// D.
void flashAttentionBackward(const flash::Layout &layout, const float *q,
                            const float *k, const float *v, const float *dOut,
                            const float *logSumExp, const float *delta,
                            float *dq, float *dk, float *dv,
                            cudaStream_t stream);

/// The same on tensor cores: products in `type` (q, k, v, dOut and the
/// probabilities rounded to it), softmax statistics, L and D in fp32.
enum class HalfType { F16, BF16 };
void flashAttentionTensorCores(const flash::Layout &layout, HalfType type,
                               const float *q, const float *k, const float *v,
                               float *out, float *logSumExp, const float *dOut,
                               float *delta, cudaStream_t stream);
/// Whether this device's shared memory holds the tensor-core kernels' tiles
/// for heads of `headDim` (up to 114 KB: not on sm_86/89 cards past 64).
bool tensorCoreAttentionFits(int64_t headDim);
void flashAttentionBackwardTensorCores(
    const flash::Layout &layout, HalfType type, const float *q, const float *k,
    const float *v, const float *dOut, const float *logSumExp,
    const float *delta, float *dq, float *dk, float *dv, cudaStream_t stream);

//===--- attention helpers (the matmuls go through cuBLASLt) ----------===//

/// [b, s, heads / group * dh] -> [b, heads, s, dh]: each of x's heads goes
/// to `group` consecutive heads of y (1: a plain split).
void splitHeads(const float *x, float *y, int64_t b, int64_t s, int64_t heads,
                int64_t dh, int64_t group, cudaStream_t stream);
/// y [b, s, heads / group * dh] += x [b, heads, s, dh] merged, each of y's
/// heads summing its group.
void mergeHeads(const float *x, float *y, int64_t b, int64_t s, int64_t heads,
                int64_t dh, int64_t group, cudaStream_t stream);
/// In place on `count` s x s score matrices: scale, causal mask, softmax.
void causalSoftmax(float *scores, int64_t count, int64_t s, float scale,
                   cudaStream_t stream);
/// dP (in place) -> dS = P (dP - rowsum(P dP)) scale, zero above the
/// diagonal.
void causalSoftmaxBackward(const float *probs, float *grad, int64_t count,
                           int64_t s, float scale, cudaStream_t stream);

//===--- embedding ----------------------------------------------------===//

/// The table holds rows [firstRow, firstRow + rows) of the whole one
/// (vocabulary-parallel: cpu::embedding): other indices give zero rows and
/// no gradient.
void embedding(const float *indices, const float *table, float *out, int64_t n,
               int64_t h, int64_t firstRow, int64_t rows, cudaStream_t stream);
/// dTable[indices[i]] += dOut[i] (atomic: repeated tokens add up).
void embeddingBackward(const float *indices, const float *dOut, float *dTable,
                       int64_t n, int64_t h, int64_t firstRow, int64_t rows,
                       cudaStream_t stream);

//===--- optimizers ---------------------------------------------------===//

void sgdStep(float *param, const float *grad, float *velocity, int64_t n,
             float lr, float momentum, float weightDecay, cudaStream_t stream);
/// As cpu::adamwStep, `freezeSecondMomentAfter` included (the betas in
/// double, as the CPU kernel takes 1 - beta from them).
void adamwStep(float *param, const float *grad, float *m, float *v, int64_t n,
               int64_t step, float lr, double beta1, double beta2, float epsilon,
               float weightDecay, int64_t freezeSecondMomentAfter,
               cudaStream_t stream);

//===--- AdaTopK ------------------------------------------------------===//

/// Workspace bytes topK needs for n elements.
size_t topKWorkspaceBytes(int64_t n);
/// The most elements topK selects from (CUB counts items in int).
constexpr int64_t kTopKMaxElements = 2147483647;
/// The k entries of largest magnitude (ties to the lower index), in index
/// order, as the CPU kernel, in format/TopKSelect.h's steps: two passes over
/// x (the keys' coarse histogram, the candidates' compaction), then the
/// rest on the candidates. Waits for `stream` once, to read the coarse
/// histogram back (16 KB) and size the candidates' steps.
void topK(const float *x, int64_t n, int64_t k, float *values,
          float *indices, void *workspace, cudaStream_t stream);
/// out = zeros(n) with values scattered at indices.
void scatterTopK(const float *values, const float *indices, int64_t k,
                 float *out, int64_t n, cudaStream_t stream);
/// topK with exact 32-bit indices (float indices lose integers past 2^24).
void topKExact(const float *x, int64_t n, int64_t k, float *values,
               uint32_t *indices, void *workspace, cudaStream_t stream);

//===--- compressed exchanges: error feedback on the device ------------===//

/// Int8 with error feedback (format::moveInt8 on the device): pending =
/// residual + grad (grad alone when `residual` is null); `message` (int8Bytes(n) bytes, 4-aligned) gets pending
/// in the int8 format (format/Int8.h: the scales, then the bytes);
/// residual = pending - what the message carries.
void int8WithFeedback(const float *grad, float *residual, int64_t n,
                      void *message, cudaStream_t stream);
/// x in the int8 format into `message` (format::encodeInt8 on the device;
/// 8-bit pipeline transfers, which keep no residual).
void int8Encode(const float *x, int64_t n, void *message, cudaStream_t stream);
/// out = a message of n floats in the int8 format, decoded
/// (format::decodeInt8 on the device; its scales checked on the host).
void int8Decode(const void *message, int64_t n, float *out,
                cudaStream_t stream);
/// Top-k with error feedback (format::moveTopK on the device): residual +=
/// grad; its k entries of largest magnitude (ties to the lower index) into
/// values / indices, in index order; residual keeps the rest (those k
/// zeroed). `workspace`: topKWorkspaceBytes(n).
void topKWithFeedback(const float *grad, float *residual, int64_t n, int64_t k,
                      float *values, uint32_t *indices, void *workspace,
                      cudaStream_t stream);

} // namespace dtfm::runtime::cuda

#endif // DTFM_RUNTIME_CUDA_KERNELS_H
