//===- OpShapes.h - The dtfm ops' type rules, in plain C++ ------*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
//
// What each dtfm op requires of its operands, attributes and results, written
// once: the dialect's op verifiers (lib/Dialect/Dtfm/IR) and the runtime's
// plan verifier (lib/Plan/Verifier.cpp) both call these functions, so
// a plan the runtime accepts is one the dialect would accept and the two say
// the same thing about one that is not. Each rule returns "" when the op is
// well formed, else a one-line message without the op's name (the caller
// adds where: "'dtfm.linear' op ..." or "device 'a': op #3 dtfm.linear: ...").
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_SUPPORT_OPSHAPES_H
#define DTFM_SUPPORT_OPSHAPES_H

#include "dtfm/Format/WireCodec.h"
#include "dtfm/Support/LrSchedule.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dtfm {
struct CustomOpCall;
} // namespace dtfm

namespace dtfm::shapes {

/// The largest tensor a dtfm op may read or make, in bytes (and so in
/// elements): sizes and costs computed from verified ops cannot wrap.
inline constexpr int64_t kMaxTensorBytes = int64_t(1) << 50;

/// A statically shaped tensor type: its dimensions and element type as MLIR
/// spells it ("f32", "f16", "bf16", "i1", "i32", "i64").
struct TensorType {
  std::vector<int64_t> shape;
  std::string element = "f32";

  bool operator==(const TensorType &o) const {
    return shape == o.shape && element == o.element;
  }
  bool operator!=(const TensorType &o) const { return !(*this == o); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  /// Elements; for a type that passed inRange.
  int64_t numElements() const;
};

/// Bytes of one element of `element` (i1: 1); 0 for a name that is none of
/// the above.
int64_t elementBytes(const std::string &element);

/// "[2, 3, 4]".
std::string shapeText(const std::vector<int64_t> &dims);
/// "'tensor<2x3xf32>'", as MLIR prints it in a diagnostic.
std::string typeText(const TensorType &type);

/// A known element type, no negative dimension, and at most kMaxTensorBytes
/// with the element count computed without wrapping. `what` names the value
/// in the message ("operand #0", "result #1").
std::string inRange(const TensorType &type, const std::string &what);

/// Output size of a window op along one spatial dimension (0: the kernel
/// does not fit). For positive kernel, stride and dilation and
/// non-negative padding.
int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride,
                         int64_t padBegin, int64_t padEnd, int64_t dilation);

//===----------------------------------------------------------------------===//
// The rules, one per op (or family of ops)
//===----------------------------------------------------------------------===//

/// dtfm.param: a name, an initializer of the dialect's numbering (zeros,
/// ones, constant, normal, uniform, external) and a finite scale exactly
/// when the initializer takes one (positive for normal and uniform).
std::string param(const std::string &name, int64_t init,
                  const double *scale);
/// dtfm.pow: a finite exponent; the result has the input's type.
std::string pow(const TensorType &input, double exponent,
                const TensorType &result);
/// Bounds min <= max, neither NaN; the result has the input's type.
std::string clip(const TensorType &input, double min, double max,
                 const TensorType &result);
std::string embedding(const TensorType &table, const TensorType &indices,
                      const TensorType &result);
std::string matmul(const TensorType &lhs, const TensorType &rhs,
                   bool transposeRhs, const TensorType &result);
/// `bias` may be null.
std::string linear(const TensorType &input, const TensorType &weight,
                   const TensorType *bias, const TensorType &result);
/// The NumPy broadcast of two shapes into `shape`; false when they do not
/// broadcast.
bool broadcastShape(const std::vector<int64_t> &lhs,
                    const std::vector<int64_t> &rhs,
                    std::vector<int64_t> &shape);
/// add, sub, mul, div: one element type, NumPy broadcasting.
std::string broadcastBinary(const TensorType &lhs, const TensorType &rhs,
                            const TensorType &result);
/// dtfm.rms_norm: gamma [D] for input [..., D], a positive epsilon.
std::string rmsNorm(const TensorType &input, const TensorType &gamma,
                    double epsilon, const TensorType &result);
/// dtfm.rotary: input [B, S, heads * d] with d even, theta > 1 and finite.
std::string rotary(const TensorType &input, int64_t numHeads, double theta,
                   const TensorType &result);
std::string layerNorm(const TensorType &input, const TensorType &gamma,
                      const TensorType &beta, double epsilon,
                      const TensorType &result);
/// Elementwise functions of one tensor (gelu, relu, sqrt, tanh, erf, exp,
/// pow): the result has the input's type.
std::string sameType(const TensorType &input, const TensorType &result);
std::string softmax(const TensorType &input, int64_t axis,
                    const TensorType &result);
/// Query [B, S, numHeads * d]; key and value of one type [B, S,
/// numKvHeads * d], numKvHeads dividing numHeads.
std::string causalAttention(const TensorType &query, const TensorType &key,
                            const TensorType &value, int64_t numHeads,
                            int64_t numKvHeads, const TensorType &result);
std::string crossEntropy(const TensorType &logits, const TensorType &labels);
/// cross_entropy's `classes` (0: absent): between 1 and the classes of the
/// whole vocabulary, the logits' last dimension times `vocabShard` (0 or 1:
/// not sharded).
std::string crossEntropyClasses(int64_t classes, const TensorType &logits,
                                int64_t vocabShard);
/// The floats per row that a vocabulary-parallel dtfm.cross_entropy over a
/// group of `degree` sums over the group, once in its forward and once in
/// its backward: each member's maximum and sum of exponentials, and the
/// label's logit.
constexpr int64_t vocabParallelLossSumWidth(int64_t degree) {
  return 2 * degree + 1;
}
std::string conv2d(const TensorType &input, const TensorType &weight,
                   const TensorType *bias, const std::vector<int64_t> &strides,
                   const std::vector<int64_t> &dilations,
                   const std::vector<int64_t> &padding, int64_t groups,
                   const TensorType &result);
/// conv_transpose2d: input [N, C, H, W], weight [C, O/groups, kH, kW] (the
/// convolution it transposes maps [N, O, Ho, Wo] to the input), bias [O];
/// 0 <= output_padding < stride per dimension.
std::string convTranspose2d(const TensorType &input, const TensorType &weight,
                            const TensorType *bias,
                            const std::vector<int64_t> &strides,
                            const std::vector<int64_t> &dilations,
                            const std::vector<int64_t> &padding,
                            const std::vector<int64_t> &outputPadding,
                            int64_t groups, const TensorType &result);
std::string batchNorm(const TensorType &input, const TensorType &gamma,
                      const TensorType &beta, const TensorType &runningMean,
                      const TensorType &runningVar, double epsilon,
                      double momentum, const TensorType &result);
/// max_pool2d and avg_pool2d.
std::string pool2d(const TensorType &input, const std::vector<int64_t> &kernel,
                   const std::vector<int64_t> &strides,
                   const std::vector<int64_t> &padding,
                   const TensorType &result);
/// avg_pool2d's divisor_padding: four entries, each between 0 and the
/// padding on its side.
std::string divisorPadding(const std::vector<int64_t> &divisorPadding,
                           const std::vector<int64_t> &padding);
std::string globalAvgPool(const TensorType &input, const TensorType &result);
std::string flatten(const TensorType &input, int64_t axis,
                    const TensorType &result);
std::string reshape(const TensorType &input, const TensorType &result);
std::string concat(const std::vector<TensorType> &inputs, int64_t axis,
                   const TensorType &result);
std::string constant(const std::vector<int64_t> &values,
                     const TensorType &result);
std::string gather(const TensorType &input, const TensorType &indices,
                   int64_t axis, const TensorType &result);
std::string where(const TensorType &condition, const TensorType &lhs,
                  const TensorType &rhs, const TensorType &result);
std::string slice(const TensorType &input, const std::vector<int64_t> &starts,
                  const std::vector<int64_t> &ends,
                  const std::vector<int64_t> &steps, const TensorType &result);
std::string reduceMean(const TensorType &input,
                       const std::vector<int64_t> &axes, bool keepdims,
                       const TensorType &result);
/// reduce_max, reduce_min: reduce_mean's rule, and no reduced axis empty
/// (the extremum of nothing is undefined).
std::string reduceExtremum(const TensorType &input,
                           const std::vector<int64_t> &axes, bool keepdims,
                           const TensorType &result);
std::string transpose(const TensorType &input,
                      const std::vector<int64_t> &perm,
                      const TensorType &result);

/// dtfm.backward: one gradient per `wrt` index (each index once), each of
/// its input's type.
std::string backward(const std::vector<TensorType> &inputs,
                     const std::vector<TensorType> &grads,
                     const std::vector<int64_t> &wrt, int64_t flops);
std::string accumulate(const std::vector<TensorType> &grads,
                       const TensorType &result);
/// sgd_update and adamw_update: gradient and result of the parameter's type
/// and their hyperparameters in range (betas only for AdamW; the learning
/// rate's schedule by LrSchedule::check; clip_grad_norm >= 0).
std::string sgdUpdate(const TensorType &param, const TensorType &grad,
                      const TensorType &result,
                      const optim::LrSchedule &schedule, double clipGradNorm,
                      double momentum, double weightDecay);
std::string adamwUpdate(const TensorType &param, const TensorType &grad,
                        const TensorType &result,
                        const optim::LrSchedule &schedule, double clipGradNorm,
                        double beta1, double beta2, double epsilon,
                        double weightDecay);
/// dtfm.send / dtfm.recv of a value of `type`: `bytes` is its size in its
/// wire codec (dtfm.wire, format/WireCodec.h), the peer is a stage, the
/// link is real.
std::string transfer(const TensorType &type, int64_t peer, int64_t bytes,
                     format::WireCodec wire, bool oncePerIteration,
                     double latency, double bandwidth);
std::string topkCompress(const TensorType &input, int64_t k,
                         const TensorType &values, const TensorType &indices);
std::string topkDecompress(const TensorType &values, const TensorType &indices,
                           const TensorType &result);
/// dtfm.tp_all_reduce: a float tensor summed over a group of `degree` >= 2.
std::string tpAllReduce(const TensorType &input, int64_t degree,
                        const TensorType &result);
std::string gradSync(const TensorType &grad, const TensorType &result,
                     int64_t bytes, size_t groupSize, double seconds);
/// dtfm.custom: `call`'s kind is registered (CustomOpRegistry) and the
/// results it infers for `call` (its operands filled in) are `results`, in
/// number and type.
std::string custom(const CustomOpCall &call,
                   const std::vector<TensorType> &results);

} // namespace dtfm::shapes

#endif // DTFM_SUPPORT_OPSHAPES_H
