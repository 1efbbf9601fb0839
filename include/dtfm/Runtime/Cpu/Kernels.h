//===- Kernels.h - CPU kernels of the dtfm ops, forward and backward -*- C++ -*-===//
//
// Part of dtfm. Plain C++ (fp32), no MLIR: the CPU backend of the runtime
// (Kernels.cpp: dense, normalisation, attention, losses, optimizers;
// Elementwise.cpp; Convolution.cpp).
//
//===----------------------------------------------------------------------===//
//
// Layouts and conventions follow the dialect (docs/CostModel.md): linear
// weights are [in, out], images NCHW, attention over [B, S, H] split into
// heads, losses averaged over rows. Every backward takes the gradient of the
// forward's result and accumulates (+=) into the gradients it is given, so
// that values used several times sum their gradients; callers zero them.
// Matmuls go through OpenBLAS's sgemm; everything else is plain loops,
// deterministic for a given input.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_CPU_KERNELS_H
#define DTFM_RUNTIME_CPU_KERNELS_H

#include "dtfm/Format/TensorFile.h"
#include "dtfm/Support/ElementMath.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace dtfm::runtime::cpu {

/// A dense fp32 tensor (dtfm/Format/TensorFile.h).
using Tensor = format::Tensor;

// C[M,N] (+)= A[M,K] * B[K,N] (or B^T when transposeB, B being [N,K]).
void gemm(const float *a, const float *b, float *c, int64_t m, int64_t n,
          int64_t k, bool transposeA, bool transposeB, bool accumulate);

//===--- dense --------------------------------------------------------===//

/// [.., M, K] x [K, N] or batched [.., K, N] (rhs [N, K] when transposeRhs).
Tensor matmul(const Tensor &lhs, const Tensor &rhs, bool transposeRhs);
void matmulBackward(const Tensor &lhs, const Tensor &rhs, bool transposeRhs,
                    const Tensor &dOut, Tensor *dLhs, Tensor *dRhs);

/// a op b with NumPy broadcasting (math::applyBinary); the backward adds
/// dOut times each side's partial derivative (math::binaryPartial) into that
/// operand's gradient, summed over the dimensions it repeats along. add
/// takes a path without index tables when one shape is a suffix of the
/// other (a bias, a position table).
Tensor binaryMath(const Tensor &a, const Tensor &b, math::BinaryOp op);
void binaryMathBackward(const Tensor &a, const Tensor &b, math::BinaryOp op,
                        const Tensor &dOut, Tensor *da, Tensor *db);

/// Unary math of every element (sqrt, tanh, erf, exp, sigmoid, silu, pow,
/// clip: math::applyUnary, the CUDA kernels' too); the backward adds dOut
/// times the derivative into dx (math::unaryGradient; clip's is PyTorch's
/// hardtanh: dOut where low < x < high, nothing else).
Tensor unaryMath(const Tensor &x, math::UnaryOp op, math::UnaryParams params);
void unaryMathBackward(const Tensor &x, math::UnaryOp op,
                       math::UnaryParams params, const Tensor &dOut,
                       Tensor *dx);
/// Mean over `axes` (negative from the end); dimensions kept as 1 with
/// keepdims. The backward spreads dOut evenly over the reduced elements.
Tensor reduceMean(const Tensor &x, const std::vector<int64_t> &axes,
                  bool keepdims);
void reduceMeanBackward(const Tensor &x, const std::vector<int64_t> &axes,
                        const Tensor &dOut, Tensor *dx);
/// Largest (maximum) or smallest element over `axes` (math::extremumStep:
/// NaN propagates). The backward adds dOut into the elements equal to the
/// result, split evenly among ties (PyTorch's amax / amin).
Tensor reduceExtremum(const Tensor &x, const std::vector<int64_t> &axes,
                      bool keepdims, bool maximum);
void reduceExtremumBackward(const Tensor &x, const std::vector<int64_t> &axes,
                            bool maximum, const Tensor &dOut, Tensor *dx);

/// Operands joined along `axis`; the backward adds each operand's slice of
/// dOut into grads[i] (null ones skipped).
Tensor concat(const std::vector<const Tensor *> &inputs, int64_t axis);
void concatBackward(const Tensor &dOut, int64_t axis,
                    const std::vector<Tensor *> &grads);
/// Per dimension elements start, start + step, ... below end; the backward
/// scatters dOut back into dx.
Tensor slice(const Tensor &x, const std::vector<int64_t> &starts,
             const std::vector<int64_t> &ends,
             const std::vector<int64_t> &steps);
void sliceBackward(const Tensor &x, const std::vector<int64_t> &starts,
                   const std::vector<int64_t> &steps, const Tensor &dOut,
                   Tensor *dx);

/// ONNX Gather: entries of x along `axis` picked by `indices` (negative
/// ones count from the end); false with `error` set for an index outside
/// [-size, size). The backward scatter-adds dOut into dx.
bool gather(const Tensor &x, const Tensor &indices, int64_t axis, Tensor &out,
            std::string &error);
void gatherBackward(const Tensor &x, const Tensor &indices, int64_t axis,
                    const Tensor &dOut, Tensor *dx);
/// condition ? a : b elementwise with NumPy broadcasting of the three; the
/// backward sends each element's gradient to the chosen side.
Tensor where(const Tensor &condition, const Tensor &a, const Tensor &b);
void whereBackward(const Tensor &condition, const Tensor &dOut, Tensor *da,
                   Tensor *db);

/// Result dim i = input dim perm[i]; the backward adds the inverse
/// permutation of dOut into dx.
Tensor transpose(const Tensor &x, const std::vector<int64_t> &perm);
void transposeBackward(const Tensor &dOut, const std::vector<int64_t> &perm,
                       Tensor *dx);

/// x [.., K] * w [K, N] + b [N].
Tensor linear(const Tensor &x, const Tensor &w, const Tensor *bias);
void linearBackward(const Tensor &x, const Tensor &w, const Tensor &dOut,
                    Tensor *dx, Tensor *dw, Tensor *dBias);

/// Over the last dimension; `mean` and `rstd` (one per row) are kept.
/// x / sqrt(mean(x^2) + epsilon) * gamma over the last dimension; the
/// reciprocal root mean square per row is kept for the backward.
Tensor rmsNorm(const Tensor &x, const Tensor &gamma, double epsilon,
               std::vector<float> &rstd);
void rmsNormBackward(const Tensor &x, const Tensor &gamma,
                     const std::vector<float> &rstd, const Tensor &dOut,
                     Tensor *dx, Tensor *dGamma);
Tensor layerNorm(const Tensor &x, const Tensor &gamma, const Tensor &beta,
                 double epsilon, std::vector<float> &mean,
                 std::vector<float> &rstd);
void layerNormBackward(const Tensor &x, const Tensor &gamma,
                       const std::vector<float> &mean,
                       const std::vector<float> &rstd, const Tensor &dOut,
                       Tensor *dx, Tensor *dGamma, Tensor *dBeta);

Tensor gelu(const Tensor &x, bool tanhApproximation);
void geluBackward(const Tensor &x, bool tanhApproximation, const Tensor &dOut,
                  Tensor *dx);

Tensor relu(const Tensor &x);
void reluBackward(const Tensor &out, const Tensor &dOut, Tensor *dx);

/// Along the last axis.
Tensor softmax(const Tensor &x);
void softmaxBackward(const Tensor &out, const Tensor &dOut, Tensor *dx);
/// Log-softmax along the last axis; its backward from the result:
/// dx += dOut - exp(out) * sum(dOut).
Tensor logSoftmax(const Tensor &x);
void logSoftmaxBackward(const Tensor &out, const Tensor &dOut, Tensor *dx);

/// dtfm.rotary of x [B, S, heads * d]: each head's pairs (i, i + d/2)
/// turned by position * theta^(-2i/d); `inverse` turns back. The backward
/// adds the inverse turn of dOut into dx.
Tensor rotary(const Tensor &x, int64_t heads, double theta,
              bool inverse = false);
void rotaryBackward(const Tensor &dOut, int64_t heads, double theta,
                    Tensor *dx);

/// softmax(mask(Q K^T / sqrt(d))) V per head; `probs` [B, heads, S, S] kept.
/// K and V have kvHeads heads (grouped-query attention; kvHeads divides
/// heads, and query head h reads key/value head h / (heads / kvHeads)).
Tensor causalAttention(const Tensor &q, const Tensor &k, const Tensor &v,
                       int64_t heads, int64_t kvHeads, Tensor &probs);
void causalAttentionBackward(const Tensor &q, const Tensor &k, const Tensor &v,
                             int64_t heads, int64_t kvHeads,
                             const Tensor &probs, const Tensor &dOut,
                             Tensor *dq, Tensor *dk, Tensor *dv);

/// The first of `indices` that is not a whole number in [0, limit), as
/// "WHAT V at position P is outside [0, LIMIT)"; "" when all are. The
/// kernels that index with token ids and labels check them first: a bad
/// input is a one-line error, never a read outside a table.
std::string indexRangeProblem(const Tensor &indices, int64_t limit,
                              const char *what);

/// indices [..] (exact integers) x table [V, H] -> [.., H], the table being
/// rows [firstRow, firstRow + V) of the whole one (vocabulary-parallel):
/// indices outside them give zero rows and no gradient.
Tensor embedding(const Tensor &indices, const Tensor &table,
                 int64_t firstRow = 0);
void embeddingBackward(const Tensor &indices, const Tensor &dOut,
                       Tensor *dTable, int64_t firstRow = 0);

/// Mean softmax cross-entropy of logits [.., V] against labels [..];
/// `probs` kept. Only the first `valid` columns are classes (negative: all);
/// the rest are padding, with no probability.
float crossEntropy(const Tensor &logits, const Tensor &labels, Tensor &probs,
                   int64_t valid = -1);
void crossEntropyBackward(const Tensor &probs, const Tensor &labels,
                          float dLoss, Tensor *dLogits);

/// Vocabulary-parallel cross-entropy, in two halves around a sum over the
/// group of `degree`: logits [.., V] are classes [rank * V, (rank + 1) * V)
/// of the whole. The first gives per row (shapes::vocabParallelLossSumWidth
/// floats) this member's maximum and sum of exponentials in its slots and
/// the label's logit when the label is its own, zeros elsewhere; the second,
/// from the summed rows, each row's log-sum-exp over all classes
/// (`logSumExp`) and the mean loss. This member's first `valid` slots are
/// classes (negative: all), the rest padding (lossClassesOf).
Tensor crossEntropySliceSums(const Tensor &logits, const Tensor &labels,
                             int64_t rank, int64_t degree, int64_t valid = -1);
float crossEntropyFromSums(const Tensor &sums, int64_t degree,
                           std::vector<float> &logSumExp);
/// Adds dLoss * (softmax - one-hot) / rows over this member's first
/// `valid` classes (negative: all); padding gets no gradient.
void crossEntropySliceBackward(const Tensor &logits, const Tensor &labels,
                               int64_t rank,
                               const std::vector<float> &logSumExp, float dLoss,
                               Tensor *dLogits, int64_t valid = -1);

//===--- convolutional networks (NCHW) ----------------------------------===//

/// Window geometry (dtfm/Support/ElementMath.h).
using math::Window;

/// x [N, C, H, W] * w [O, C/groups, kH, kW] (+ b [O]).
Tensor conv2d(const Tensor &x, const Tensor &w, const Tensor *bias,
              const Window &window, int64_t groups);
void conv2dBackward(const Tensor &x, const Tensor &w, const Window &window,
                    int64_t groups, const Tensor &dOut, Tensor *dx, Tensor *dw,
                    Tensor *dBias);
/// The transpose of conv2d by w [C, O/groups, kH, kW] (the convolution
/// that maps [N, O, Ho, Wo] to x [N, C, H, W]) (+ b [O]): its input
/// gradient applied to x. The backward is that convolution (dx) and its
/// weight gradient with dOut as the input (dw).
std::vector<int64_t> convTransposedShape(const std::vector<int64_t> &x,
                                         const std::vector<int64_t> &w,
                                         const Window &window,
                                         std::array<int64_t, 2> outputPadding,
                                         int64_t groups);
Tensor convTranspose2d(const Tensor &x, const Tensor &w, const Tensor *bias,
                       const Window &window,
                       std::array<int64_t, 2> outputPadding, int64_t groups);
void convTranspose2dBackward(const Tensor &x, const Tensor &w,
                             const Window &window, int64_t groups,
                             const Tensor &dOut, Tensor *dx, Tensor *dw,
                             Tensor *dBias);

/// Training mode: batch statistics per channel (dim 1); updates the running
/// statistics with `momentum` when given.
Tensor batchNorm(const Tensor &x, const Tensor &gamma, const Tensor &beta,
                 double epsilon, Tensor *runningMean, Tensor *runningVar,
                 double momentum);
void batchNormBackward(const Tensor &x, const Tensor &gamma, double epsilon,
                       const Tensor &dOut, Tensor *dx, Tensor *dGamma,
                       Tensor *dBeta);
/// Inference mode: normalises with the given running statistics (left as
/// they are); its backward treats them as constants.
Tensor batchNormInference(const Tensor &x, const Tensor &gamma,
                          const Tensor &beta, const Tensor &mean,
                          const Tensor &var, double epsilon);
void batchNormInferenceBackward(const Tensor &x, const Tensor &gamma,
                                const Tensor &mean, const Tensor &var,
                                double epsilon, const Tensor &dOut, Tensor *dx,
                                Tensor *dGamma, Tensor *dBeta);

/// Max pooling (padded cells never win) and average pooling (padding counted
/// in the divisor) over kernel {kH, kW}.
/// Pooling of `planes` H x W planes into ho x wo by a kh x kw window, as
/// the index arithmetic both backends' pooling kernels share sees it
/// (math::PoolGeometry, Support/ElementMath.h).
math::PoolGeometry poolGeometry(int64_t planes, int64_t h, int64_t w,
                                int64_t ho, int64_t wo, int64_t kh, int64_t kw,
                                const Window &window);
Tensor maxPool2d(const Tensor &x, int64_t kh, int64_t kw, const Window &window);
void maxPool2dBackward(const Tensor &x, int64_t kh, int64_t kw,
                       const Window &window, const Tensor &dOut, Tensor *dx);
Tensor avgPool2d(const Tensor &x, int64_t kh, int64_t kw, const Window &window);
void avgPool2dBackward(const Tensor &x, int64_t kh, int64_t kw,
                       const Window &window, const Tensor &dOut, Tensor *dx);
/// Mean over every dimension after the first two: [N, C, ...] -> [N, C, 1..].
Tensor globalAvgPool(const Tensor &x);
void globalAvgPoolBackward(const Tensor &x, const Tensor &dOut, Tensor *dx);

//===--- compression (AdaTopK) -----------------------------------------===//

/// The k entries of largest magnitude (ties: the lower index), in index
/// order: values [k] and flat indices [k] (held as floats, exact below
/// 2^24 elements).
void topK(const Tensor &x, int64_t k, Tensor &values, Tensor &indices);
/// Zeros of `shape` with `values` scattered at `indices`.
Tensor scatterTopK(const Tensor &values, const Tensor &indices,
                   const std::vector<int64_t> &shape);

//===--- optimizers ----------------------------------------------------===//

/// The elements [first, first + count) of a parameter an optimizer step
/// updates (count -1: from `first` to the end, and the state has the
/// parameter's shape); a shard's state is flat, of `count` elements
/// (sharded optimizer state, dtfm.shard_state).
struct ElementSlice {
  int64_t first = 0, count = -1;
};

/// v = momentum v + g + wd p; p -= lr v.
void sgdStep(Tensor &param, const Tensor &grad, Tensor &velocity, double lr,
             double momentum, double weightDecay, ElementSlice slice = {});
/// Decoupled weight decay; `step` counts from 1 (bias correction). With
/// `freezeSecondMomentAfter` = W > 0, steps after W leave `v` (and its bias
/// correction) as they were at step W: top-k's warm-up (OpAttrs::topkWarmup).
void adamwStep(Tensor &param, const Tensor &grad, Tensor &m, Tensor &v,
               int64_t step, double lr, double beta1, double beta2,
               double epsilon, double weightDecay,
               int64_t freezeSecondMomentAfter = 0,
               ElementSlice slice = {});
/// DiLoCo's outer step: Nesterov momentum on the replicas' mean
/// pseudo-gradient `delta` (parameters at the last sync minus now):
/// velocity = momentum * velocity + delta, then
/// anchor -= lr * (delta + momentum * velocity).
void nesterovOuterStep(Tensor &anchor, const Tensor &delta, Tensor &velocity,
                       double lr, double momentum);

} // namespace dtfm::runtime::cpu

#endif // DTFM_RUNTIME_CPU_KERNELS_H
