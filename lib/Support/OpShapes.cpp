//===- OpShapes.cpp - The dtfm ops' type rules, in plain C++ --------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The rules of the tensor ops (TensorOps.cpp's); the training ops' (the
// gradients, updates, transfers, compression, syncs, custom ops) are in
// TrainingShapes.cpp.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Support/OpShapes.h"
#include "ShapeMessages.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>

using namespace dtfm::shapes;
using namespace dtfm::shapes::detail;

namespace {

std::vector<int64_t> dropBack(const std::vector<int64_t> &dims, size_t n = 1) {
  return {dims.begin(), dims.end() - static_cast<std::ptrdiff_t>(
                                         std::min(n, dims.size()))};
}

int64_t product(const std::vector<int64_t> &dims, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end && i < dims.size(); ++i)
    n *= dims[i];
  return n;
}

/// All of `types` have the element type of the first one.
std::string sameElement(const std::vector<const TensorType *> &types,
                        const std::vector<const char *> &names) {
  for (size_t i = 0; i < types.size(); ++i)
    if (types[i]->element != types.front()->element)
      return std::string("expected ") + names[i] + " element type '" +
             types.front()->element + "', found '" + types[i]->element + "'";
  return "";
}

/// Input, weight and (when given) bias of one element type.
std::string sameElementWithBias(const TensorType &input,
                                const TensorType &weight,
                                const TensorType *bias) {
  if (bias)
    return sameElement({&input, &weight, bias}, {"input", "weight", "bias"});
  return sameElement({&input, &weight}, {"input", "weight"});
}

/// A 1-D tensor of `size` elements.
std::string vectorOf(const TensorType &type, const char *name, int64_t size) {
  if (type.rank() != 1 || type.shape[0] != size)
    return std::string("expected ") + name + " of shape [" +
           std::to_string(size) + "], found " + shapeText(type.shape);
  return "";
}

std::string positive(const std::vector<int64_t> &values, size_t count,
                     const char *name) {
  if (values.size() != count)
    return "expected " + std::to_string(count) + " " + name + ", found " +
           std::to_string(values.size());
  for (int64_t v : values)
    if (v <= 0)
      return std::string("expected positive ") + name + ", found " +
             shapeText(values);
  return "";
}

std::string paddingOf(const std::vector<int64_t> &padding) {
  if (padding.size() != 4)
    return "expected 4 padding values [top, left, bottom, right], found " +
           std::to_string(padding.size());
  for (int64_t p : padding)
    if (p < 0)
      return "expected non-negative padding, found " + shapeText(padding);
  return "";
}

/// The first non-empty message.
template <typename... Rest>
std::string firstOf(std::string first, Rest &&...rest) {
  if (!first.empty())
    return first;
  if constexpr (sizeof...(rest) == 0)
    return "";
  else
    return firstOf(std::forward<Rest>(rest)...);
}

/// Window sizes above this could overflow the output-size arithmetic; no
/// real tensor has them (kMaxTensorBytes bounds the dimensions anyway).
constexpr int64_t kMaxWindow = int64_t(1) << 40;

std::string windowFits(const std::vector<int64_t> &values, const char *name) {
  for (int64_t v : values)
    if (v > kMaxWindow)
      return std::string(name) + " " + shapeText(values) + " exceeds 2^40";
  return "";
}

} // namespace

int64_t TensorType::numElements() const {
  return product(shape, 0, shape.size());
}

int64_t dtfm::shapes::elementBytes(const std::string &element) {
  if (element == "f32" || element == "i32")
    return 4;
  if (element == "f16" || element == "bf16")
    return 2;
  if (element == "i64")
    return 8;
  if (element == "i1")
    return 1;
  return 0;
}

std::string dtfm::shapes::shapeText(const std::vector<int64_t> &dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

std::string dtfm::shapes::typeText(const TensorType &type) {
  std::string text = "'tensor<";
  for (int64_t d : type.shape)
    text += std::to_string(d) + "x";
  return text + type.element + ">'";
}

std::string dtfm::shapes::inRange(const TensorType &type,
                                  const std::string &what) {
  int64_t bytes = elementBytes(type.element);
  if (bytes == 0)
    return what + " has unknown element type '" + type.element + "'";
  int64_t elements = 1;
  for (int64_t d : type.shape) {
    if (d < 0)
      return what + " (" + typeText(type) + ") has a negative dimension";
    if (__builtin_mul_overflow(elements, d, &elements) ||
        elements > kMaxTensorBytes / bytes)
      return what + " (" + typeText(type) + ") has more than " +
             std::to_string(kMaxTensorBytes) + " bytes";
  }
  return "";
}

int64_t dtfm::shapes::windowOutputSize(int64_t in, int64_t kernel,
                                       int64_t stride, int64_t padBegin,
                                       int64_t padEnd, int64_t dilation) {
  int64_t span = dilation * (kernel - 1) + 1;
  int64_t padded = in + padBegin + padEnd;
  if (padded < span)
    return 0;
  return (padded - span) / stride + 1;
}

std::string dtfm::shapes::param(const std::string &name, int64_t init,
                                const double *scale) {
  static const char *const kInits[] = {"zeros",  "ones",    "constant",
                                       "normal", "uniform", "external"};
  if (name.empty())
    return "expected a non-empty parameter name";
  if (init < 0 || init >= static_cast<int64_t>(std::size(kInits)))
    return "initializer " + std::to_string(init) + " is none of zeros, ones, "
           "constant, normal, uniform, external";
  const char *kind = kInits[init];
  bool takesScale = init == 2 || init == 3 || init == 4;
  if (takesScale && !scale)
    return std::string("initializer '") + kind + "' expects a scale, found none";
  if (!takesScale && scale)
    return std::string("initializer '") + kind + "' takes no scale, found " +
           num(*scale);
  if (scale && !std::isfinite(*scale))
    return std::string("initializer '") + kind +
           "' expects a finite scale, found " + num(*scale);
  if ((init == 3 || init == 4) && *scale <= 0)
    return std::string("initializer '") + kind +
           "' expects a positive scale, found " + num(*scale);
  return "";
}

std::string dtfm::shapes::pow(const TensorType &input, double exponent,
                              const TensorType &result) {
  if (!std::isfinite(exponent))
    return "expected a finite exponent, found " + num(exponent);
  return sameType(input, result);
}

std::string dtfm::shapes::clip(const TensorType &input, double min, double max,
                               const TensorType &result) {
  if (std::isnan(min) || std::isnan(max) || !(min <= max))
    return "expected bounds min <= max, neither NaN, found min " + num(min) +
           " and max " + num(max);
  return sameType(input, result);
}

std::string dtfm::shapes::embedding(const TensorType &table,
                                    const TensorType &indices,
                                    const TensorType &result) {
  if (table.rank() != 2)
    return "expected a rank-2 table [vocab, hidden], found " +
           shapeText(table.shape);
  std::vector<int64_t> shape = indices.shape;
  shape.push_back(table.shape[1]);
  return resultIs(result, shape, table.element);
}

std::string dtfm::shapes::matmul(const TensorType &lhs, const TensorType &rhs,
                                 bool transposeRhs, const TensorType &result) {
  if (lhs.rank() < 2)
    return "expected lhs of rank >= 2, found " + shapeText(lhs.shape);
  if (rhs.rank() != 2 && rhs.rank() != lhs.rank())
    return "expected rhs of rank 2 or " + std::to_string(lhs.rank()) +
           " (the lhs rank), found " + shapeText(rhs.shape);
  if (std::string e = sameElement({&lhs, &rhs}, {"lhs", "rhs"}); !e.empty())
    return e;
  size_t rank = rhs.shape.size();
  int64_t rhsK = rhs.shape[transposeRhs ? rank - 1 : rank - 2];
  int64_t n = rhs.shape[transposeRhs ? rank - 2 : rank - 1];
  int64_t k = lhs.shape.back();
  if (rhsK != k)
    return "contracting dimensions differ: lhs " + shapeText(lhs.shape) +
           " has " + std::to_string(k) + ", rhs " + shapeText(rhs.shape) +
           " has " + std::to_string(rhsK);
  if (rank > 2 && dropBack(lhs.shape, 2) != dropBack(rhs.shape, 2))
    return "batch dimensions differ: lhs " + shapeText(lhs.shape) + ", rhs " +
           shapeText(rhs.shape);
  std::vector<int64_t> shape = dropBack(lhs.shape);
  shape.push_back(n);
  return resultIs(result, shape, lhs.element);
}

std::string dtfm::shapes::linear(const TensorType &input,
                                 const TensorType &weight,
                                 const TensorType *bias,
                                 const TensorType &result) {
  if (input.rank() < 1)
    return "expected input of rank >= 1, found a scalar";
  if (weight.rank() != 2)
    return "expected a rank-2 weight [in, out], found " +
           shapeText(weight.shape);
  if (std::string e = sameElementWithBias(input, weight, bias); !e.empty())
    return e;
  if (input.shape.back() != weight.shape[0])
    return "expected weight with " + std::to_string(input.shape.back()) +
           " input features (the last dimension of input " +
           shapeText(input.shape) + "), found weight " +
           shapeText(weight.shape);
  int64_t out = weight.shape[1];
  if (bias)
    if (std::string e = vectorOf(*bias, "bias", out); !e.empty())
      return e;
  std::vector<int64_t> shape = dropBack(input.shape);
  shape.push_back(out);
  return resultIs(result, shape, input.element);
}

bool dtfm::shapes::broadcastShape(const std::vector<int64_t> &lhs,
                                  const std::vector<int64_t> &rhs,
                                  std::vector<int64_t> &shape) {
  size_t rank = std::max(lhs.size(), rhs.size());
  shape.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    size_t lo = rank - lhs.size(), ro = rank - rhs.size();
    int64_t a = i < lo ? 1 : lhs[i - lo];
    int64_t b = i < ro ? 1 : rhs[i - ro];
    if (a != b && a != 1 && b != 1)
      return false;
    shape[i] = std::max(a, b);
  }
  return true;
}

std::string dtfm::shapes::broadcastBinary(const TensorType &lhs,
                                          const TensorType &rhs,
                                          const TensorType &result) {
  if (std::string e = sameElement({&lhs, &rhs}, {"lhs", "rhs"}); !e.empty())
    return e;
  std::vector<int64_t> shape;
  if (!broadcastShape(lhs.shape, rhs.shape, shape))
    return "operand shapes " + shapeText(lhs.shape) + " and " +
           shapeText(rhs.shape) + " do not broadcast";
  return resultIs(result, shape, lhs.element);
}

std::string dtfm::shapes::layerNorm(const TensorType &input,
                                    const TensorType &gamma,
                                    const TensorType &beta, double epsilon,
                                    const TensorType &result) {
  if (input.rank() < 1)
    return "expected input of rank >= 1, found a scalar";
  if (std::string e = sameElement({&input, &gamma, &beta},
                                  {"input", "gamma", "beta"});
      !e.empty())
    return e;
  int64_t d = input.shape.back();
  if (std::string e = firstOf(vectorOf(gamma, "gamma", d),
                              vectorOf(beta, "beta", d));
      !e.empty())
    return e;
  if (!(epsilon > 0 && std::isfinite(epsilon)))
    return "expected a positive epsilon, found " + num(epsilon);
  return resultIs(result, input.shape, input.element);
}

std::string dtfm::shapes::rmsNorm(const TensorType &input,
                                  const TensorType &gamma, double epsilon,
                                  const TensorType &result) {
  if (input.rank() < 1)
    return "expected input of rank >= 1, found a scalar";
  if (std::string e = sameElement({&input, &gamma}, {"input", "gamma"});
      !e.empty())
    return e;
  if (std::string e = vectorOf(gamma, "gamma", input.shape.back()); !e.empty())
    return e;
  if (!(epsilon > 0 && std::isfinite(epsilon)))
    return "expected a positive epsilon, found " + num(epsilon);
  return resultIs(result, input.shape, input.element);
}

std::string dtfm::shapes::sameType(const TensorType &input,
                                   const TensorType &result) {
  return resultIs(result, input.shape, input.element);
}

std::string dtfm::shapes::tpAllReduce(const TensorType &input, int64_t degree,
                                      const TensorType &result) {
  if (degree < 2)
    return "expected a tensor-parallel degree of at least 2, found " +
           std::to_string(degree);
  return sameType(input, result);
}

std::string dtfm::shapes::softmax(const TensorType &input, int64_t axis,
                                  const TensorType &result) {
  int64_t rank = input.rank();
  if (axis < -rank || axis >= rank || rank == 0)
    return "expected axis in [" + std::to_string(-rank) + ", " +
           std::to_string(rank - 1) + "], found " + std::to_string(axis);
  return sameType(input, result);
}

std::string dtfm::shapes::causalAttention(const TensorType &query,
                                          const TensorType &key,
                                          const TensorType &value,
                                          int64_t numHeads, int64_t numKvHeads,
                                          const TensorType &result) {
  if (query.rank() != 3)
    return "expected query of rank 3 [batch, seq, hidden], found " +
           shapeText(query.shape);
  if (numHeads < 1)
    return "expected a positive num_heads, found " + std::to_string(numHeads);
  if (numKvHeads < 1)
    return "expected a positive num_kv_heads, found " +
           std::to_string(numKvHeads);
  int64_t hidden = query.shape[2];
  if (hidden % numHeads != 0)
    return "expected hidden size " + std::to_string(hidden) +
           " divisible by num_heads " + std::to_string(numHeads);
  if (numHeads % numKvHeads != 0)
    return "expected num_kv_heads " + std::to_string(numKvHeads) +
           " dividing num_heads " + std::to_string(numHeads);
  // Overflow-safe: hidden / numHeads * numKvHeads <= hidden.
  std::vector<int64_t> keyShape = {query.shape[0], query.shape[1],
                                   hidden / numHeads * numKvHeads};
  if (key.shape != keyShape || value != key || key.element != query.element)
    return "expected key and value of shape " + shapeText(keyShape) + " (" +
           std::to_string(numKvHeads) + " heads of " +
           std::to_string(hidden / numHeads) +
           ") and query's element type, "
           "found " +
           typeText(key) + " and " + typeText(value);
  return resultIs(result, query.shape, query.element);
}

std::string dtfm::shapes::rotary(const TensorType &input, int64_t numHeads,
                                 double theta, const TensorType &result) {
  if (input.rank() != 3)
    return "expected input of rank 3 [batch, seq, heads * head_dim], found " +
           shapeText(input.shape);
  if (numHeads < 1 || input.shape[2] % numHeads != 0)
    return "expected num_heads dividing the last dimension " +
           std::to_string(input.shape[2]) + ", found " +
           std::to_string(numHeads);
  if ((input.shape[2] / numHeads) % 2 != 0)
    return "expected an even head dimension, found " +
           std::to_string(input.shape[2] / numHeads);
  if (!(theta > 1 && std::isfinite(theta)))
    return "expected a finite theta > 1, found " + num(theta);
  return sameType(input, result);
}

std::string dtfm::shapes::crossEntropy(const TensorType &logits,
                                       const TensorType &labels) {
  if (logits.rank() < 1)
    return "expected logits of rank >= 1, found a scalar";
  std::vector<int64_t> expected = dropBack(logits.shape);
  if (labels.shape != expected)
    return "expected labels of shape " + shapeText(expected) + " (logits " +
           shapeText(logits.shape) +
           " without the class dimension), found " + shapeText(labels.shape);
  return "";
}

std::string dtfm::shapes::crossEntropyClasses(int64_t classes,
                                              const TensorType &logits,
                                              int64_t vocabShard) {
  if (classes == 0 || logits.rank() < 1)
    return "";
  int64_t whole = logits.shape.back();
  if (vocabShard > 1 && __builtin_mul_overflow(whole, vocabShard, &whole))
    return "the logits' classes times vocab_shard overflow";
  if (classes < 1 || classes > whole)
    return "expected classes between 1 and the " + std::to_string(whole) +
           " of the vocabulary, found " + std::to_string(classes);
  return "";
}

/// What conv2d and conv_transpose2d check alike: an NCHW input, a rank-4
/// weight (`layout` says its dimensions), the bias's type and the window.
static std::string windowedProblem(const TensorType &input,
                                   const TensorType &weight,
                                   const TensorType *bias, const char *layout,
                                   const std::vector<int64_t> &strides,
                                   const std::vector<int64_t> &dilations,
                                   const std::vector<int64_t> &padding) {
  if (input.rank() != 4)
    return "expected input of rank 4 [N, C, H, W], found " +
           shapeText(input.shape);
  if (weight.rank() != 4)
    return std::string("expected weight of rank 4 ") + layout + ", found " +
           shapeText(weight.shape);
  return firstOf(sameElementWithBias(input, weight, bias),
                 positive(strides, 2, "strides"),
                 positive(dilations, 2, "dilations"), paddingOf(padding),
                 windowFits(strides, "strides"),
                 windowFits(dilations, "dilations"),
                 windowFits(padding, "padding"));
}

std::string dtfm::shapes::conv2d(const TensorType &input,
                                 const TensorType &weight,
                                 const TensorType *bias,
                                 const std::vector<int64_t> &strides,
                                 const std::vector<int64_t> &dilations,
                                 const std::vector<int64_t> &padding,
                                 int64_t groups, const TensorType &result) {
  if (std::string e =
          windowedProblem(input, weight, bias, "[O, C/groups, kH, kW]",
                          strides, dilations, padding);
      !e.empty())
    return e;
  if (groups <= 0)
    return "expected positive groups, found " + std::to_string(groups);
  int64_t channels = input.shape[1], outChannels = weight.shape[0];
  if (channels % groups != 0 || outChannels % groups != 0)
    return "expected input channels " + std::to_string(channels) +
           " and output channels " + std::to_string(outChannels) +
           " divisible by groups " + std::to_string(groups);
  if (weight.shape[1] * groups != channels)
    return "expected weight dimension 1 = " + std::to_string(channels) + "/" +
           std::to_string(groups) + " = " + std::to_string(channels / groups) +
           ", found " + std::to_string(weight.shape[1]);
  if (bias)
    if (std::string e = vectorOf(*bias, "bias", outChannels); !e.empty())
      return e;
  int64_t h = windowOutputSize(input.shape[2], weight.shape[2], strides[0],
                               padding[0], padding[2], dilations[0]);
  int64_t w = windowOutputSize(input.shape[3], weight.shape[3], strides[1],
                               padding[1], padding[3], dilations[1]);
  if (h <= 0 || w <= 0)
    return "kernel " + shapeText(weight.shape) +
           " does not fit the padded input " + shapeText(input.shape);
  return resultIs(result, {input.shape[0], outChannels, h, w}, input.element);
}

std::string dtfm::shapes::convTranspose2d(
    const TensorType &input, const TensorType &weight, const TensorType *bias,
    const std::vector<int64_t> &strides, const std::vector<int64_t> &dilations,
    const std::vector<int64_t> &padding,
    const std::vector<int64_t> &outputPadding, int64_t groups,
    const TensorType &result) {
  if (std::string e =
          windowedProblem(input, weight, bias, "[C, O/groups, kH, kW]",
                          strides, dilations, padding);
      !e.empty())
    return e;
  if (outputPadding.size() != 2)
    return "expected 2 output_padding values, found " +
           std::to_string(outputPadding.size());
  for (size_t i = 0; i < 2; ++i)
    if (outputPadding[i] < 0 || outputPadding[i] >= strides[i])
      return "expected 0 <= output_padding < stride, found output_padding " +
             shapeText(outputPadding) + " and strides " + shapeText(strides);
  if (groups <= 0)
    return "expected positive groups, found " + std::to_string(groups);
  int64_t channels = input.shape[1];
  if (channels % groups != 0)
    return "expected input channels " + std::to_string(channels) +
           " divisible by groups " + std::to_string(groups);
  if (weight.shape[0] != channels)
    return "expected weight dimension 0 = " + std::to_string(channels) +
           " (the input channels), found " + std::to_string(weight.shape[0]);
  __int128 outChannels = static_cast<__int128>(weight.shape[1]) * groups;
  if (outChannels > INT64_MAX)
    return "output channels overflow";
  if (bias)
    if (std::string e =
            vectorOf(*bias, "bias", static_cast<int64_t>(outChannels));
        !e.empty())
      return e;
  // (in - 1) stride - pads + dilation (k - 1) + output_padding + 1: the
  // size whose convolution by the same window has `in` positions.
  int64_t size[2];
  for (int i = 0; i < 2; ++i) {
    __int128 s = static_cast<__int128>(input.shape[2 + i] - 1) * strides[i] -
                 padding[i] - padding[i + 2] +
                 static_cast<__int128>(dilations[i]) *
                     (weight.shape[2 + i] - 1) +
                 outputPadding[i] + 1;
    if (input.shape[2 + i] <= 0 || s <= 0 || s > kMaxWindow)
      return "kernel " + shapeText(weight.shape) + " with padding " +
             shapeText(padding) + " leaves no output for input " +
             shapeText(input.shape);
    size[i] = static_cast<int64_t>(s);
  }
  return resultIs(result,
                  {input.shape[0], static_cast<int64_t>(outChannels), size[0],
                   size[1]},
                  input.element);
}

std::string dtfm::shapes::batchNorm(const TensorType &input,
                                    const TensorType &gamma,
                                    const TensorType &beta,
                                    const TensorType &runningMean,
                                    const TensorType &runningVar,
                                    double epsilon, double momentum,
                                    const TensorType &result) {
  if (input.rank() < 2)
    return "expected input of rank >= 2 [N, C, ...], found " +
           shapeText(input.shape);
  if (std::string e = sameElement(
          {&input, &gamma, &beta, &runningMean, &runningVar},
          {"input", "gamma", "beta", "running_mean", "running_var"});
      !e.empty())
    return e;
  int64_t c = input.shape[1];
  if (std::string e = firstOf(vectorOf(gamma, "gamma", c),
                              vectorOf(beta, "beta", c),
                              vectorOf(runningMean, "running_mean", c),
                              vectorOf(runningVar, "running_var", c));
      !e.empty())
    return e;
  if (!(epsilon > 0 && std::isfinite(epsilon)))
    return "expected a positive epsilon, found " + num(epsilon);
  if (!(momentum >= 0 && momentum <= 1))
    return "expected momentum in [0, 1], found " + num(momentum);
  return resultIs(result, input.shape, input.element);
}

std::string dtfm::shapes::pool2d(const TensorType &input,
                                 const std::vector<int64_t> &kernel,
                                 const std::vector<int64_t> &strides,
                                 const std::vector<int64_t> &padding,
                                 const TensorType &result) {
  if (input.rank() != 4)
    return "expected input of rank 4 [N, C, H, W], found " +
           shapeText(input.shape);
  if (std::string e = firstOf(positive(kernel, 2, "kernel"),
                              positive(strides, 2, "strides"),
                              paddingOf(padding),
                              windowFits(kernel, "kernel"),
                              windowFits(strides, "strides"),
                              windowFits(padding, "padding"));
      !e.empty())
    return e;
  for (int i = 0; i < 2; ++i)
    if (padding[i] >= kernel[i] || padding[i + 2] >= kernel[i])
      return "expected padding smaller than the kernel " + shapeText(kernel) +
             ", found " + shapeText(padding);
  int64_t h = windowOutputSize(input.shape[2], kernel[0], strides[0],
                               padding[0], padding[2], 1);
  int64_t w = windowOutputSize(input.shape[3], kernel[1], strides[1],
                               padding[1], padding[3], 1);
  if (h <= 0 || w <= 0)
    return "kernel " + shapeText(kernel) + " does not fit the padded input " +
           shapeText(input.shape);
  return resultIs(result, {input.shape[0], input.shape[1], h, w},
                  input.element);
}

std::string
dtfm::shapes::divisorPadding(const std::vector<int64_t> &divisorPadding,
                             const std::vector<int64_t> &padding) {
  if (divisorPadding.size() != 4 || padding.size() != 4)
    return "expected 4 divisor_padding entries [top, left, bottom, right], "
           "found " +
           std::to_string(divisorPadding.size());
  for (size_t i = 0; i < 4; ++i)
    if (divisorPadding[i] < 0 || divisorPadding[i] > padding[i])
      return "expected divisor_padding within the padding " +
             shapeText(padding) + ", found " + shapeText(divisorPadding);
  return "";
}

std::string dtfm::shapes::globalAvgPool(const TensorType &input,
                                        const TensorType &result) {
  if (input.rank() < 3)
    return "expected input of rank >= 3 [N, C, ...], found " +
           shapeText(input.shape);
  std::vector<int64_t> shape = input.shape;
  std::fill(shape.begin() + 2, shape.end(), 1);
  return resultIs(result, shape, input.element);
}

std::string dtfm::shapes::flatten(const TensorType &input, int64_t axis,
                                  const TensorType &result) {
  if (axis < 0 || axis > input.rank())
    return "expected axis in [0, " + std::to_string(input.rank()) +
           "], found " + std::to_string(axis);
  size_t split = static_cast<size_t>(axis);
  return resultIs(result,
                  {product(input.shape, 0, split),
                   product(input.shape, split, input.shape.size())},
                  input.element);
}

std::string dtfm::shapes::reshape(const TensorType &input,
                                  const TensorType &result) {
  if (input.element != result.element)
    return "expected result element type '" + input.element + "', found '" +
           result.element + "'";
  if (input.numElements() != result.numElements())
    return "expected result with " + std::to_string(input.numElements()) +
           " elements (input " + shapeText(input.shape) + "), found " +
           std::to_string(result.numElements()) + " (" +
           shapeText(result.shape) + ")";
  return "";
}

std::string dtfm::shapes::concat(const std::vector<TensorType> &inputs,
                                 int64_t axis, const TensorType &result) {
  if (inputs.empty())
    return "expected at least one operand";
  const TensorType &first = inputs.front();
  int64_t rank = first.rank();
  if (axis < 0 || axis >= rank)
    return "axis " + std::to_string(axis) + " out of range for rank " +
           std::to_string(rank);
  std::vector<int64_t> shape = first.shape;
  shape[axis] = 0;
  for (const TensorType &t : inputs) {
    if (t.element != first.element || t.rank() != rank)
      return "expected operands of rank " + std::to_string(rank) +
             " and element type '" + first.element + "', found " + typeText(t);
    for (int64_t i = 0; i < rank; ++i)
      if (i != axis && t.shape[i] != first.shape[i])
        return "operand shapes " + shapeText(first.shape) + " and " +
               shapeText(t.shape) + " differ outside axis " +
               std::to_string(axis);
    shape[axis] += t.shape[axis];
  }
  return resultIs(result, shape, first.element);
}

std::string dtfm::shapes::constant(const std::vector<int64_t> &values,
                                   const TensorType &result) {
  if (static_cast<int64_t>(values.size()) != result.numElements())
    return "expected " + std::to_string(result.numElements()) +
           " values for " + typeText(result) + ", found " +
           std::to_string(values.size());
  if (result.element == "i1")
    for (int64_t v : values)
      if (v != 0 && v != 1)
        return "expected boolean values 0 or 1, found " + std::to_string(v);
  return "";
}

std::string dtfm::shapes::gather(const TensorType &input,
                                 const TensorType &indices, int64_t axis,
                                 const TensorType &result) {
  int64_t rank = input.rank();
  if (axis < 0 || axis >= rank)
    return "axis " + std::to_string(axis) + " out of range for rank " +
           std::to_string(rank);
  std::vector<int64_t> shape(input.shape.begin(), input.shape.begin() + axis);
  shape.insert(shape.end(), indices.shape.begin(), indices.shape.end());
  shape.insert(shape.end(), input.shape.begin() + axis + 1, input.shape.end());
  return resultIs(result, shape, input.element);
}

std::string dtfm::shapes::where(const TensorType &condition,
                                const TensorType &lhs, const TensorType &rhs,
                                const TensorType &result) {
  if (std::string e = sameElement({&lhs, &rhs}, {"lhs", "rhs"}); !e.empty())
    return e;
  std::vector<int64_t> shape;
  for (const TensorType *t : {&condition, &lhs, &rhs}) {
    const std::vector<int64_t> &dims = t->shape;
    if (dims.size() > shape.size())
      shape.insert(shape.begin(), dims.size() - shape.size(), 1);
    size_t offset = shape.size() - dims.size();
    for (size_t i = 0; i < dims.size(); ++i) {
      int64_t &d = shape[offset + i];
      if (d != dims[i] && d != 1 && dims[i] != 1)
        return "operand shapes " + shapeText(condition.shape) + ", " +
               shapeText(lhs.shape) + " and " + shapeText(rhs.shape) +
               " do not broadcast";
      d = std::max(d, dims[i]);
    }
  }
  return resultIs(result, shape, lhs.element);
}

std::string dtfm::shapes::slice(const TensorType &input,
                                const std::vector<int64_t> &starts,
                                const std::vector<int64_t> &ends,
                                const std::vector<int64_t> &steps,
                                const TensorType &result) {
  size_t rank = input.shape.size();
  if (starts.size() != rank || ends.size() != rank || steps.size() != rank)
    return "expected starts, ends and steps of " + std::to_string(rank) +
           " entries each";
  std::vector<int64_t> shape;
  for (size_t i = 0; i < rank; ++i) {
    if (steps[i] < 1 || starts[i] < 0 || starts[i] >= ends[i] ||
        ends[i] > input.shape[i])
      return "dimension " + std::to_string(i) +
             ": expected 0 <= start < end <= " + std::to_string(input.shape[i]) +
             " and step >= 1, found " + std::to_string(starts[i]) + ", " +
             std::to_string(ends[i]) + ", " + std::to_string(steps[i]);
    // end - start > 0 and step >= 1: no overflow.
    shape.push_back((ends[i] - starts[i] - 1) / steps[i] + 1);
  }
  return resultIs(result, shape, input.element);
}

std::string dtfm::shapes::reduceMean(const TensorType &input,
                                     const std::vector<int64_t> &axes,
                                     bool keepdims, const TensorType &result) {
  int64_t rank = input.rank();
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    if (a < -rank || a >= rank)
      return "axis " + std::to_string(a) + " out of range for rank " +
             std::to_string(rank);
    int64_t axis = a < 0 ? a + rank : a;
    if (reduced[axis])
      return "axis " + std::to_string(a) + " given twice";
    reduced[axis] = true;
  }
  if (axes.empty())
    return "expected at least one axis";
  std::vector<int64_t> shape;
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduced[i])
      shape.push_back(input.shape[i]);
    else if (keepdims)
      shape.push_back(1);
  }
  return resultIs(result, shape, input.element);
}

std::string dtfm::shapes::reduceExtremum(const TensorType &input,
                                         const std::vector<int64_t> &axes,
                                         bool keepdims,
                                         const TensorType &result) {
  if (std::string problem = reduceMean(input, axes, keepdims, result);
      !problem.empty())
    return problem;
  int64_t rank = input.rank();
  for (int64_t a : axes)
    if (input.shape[a < 0 ? a + rank : a] == 0)
      return "axis " + std::to_string(a) + " is empty: no extremum";
  return "";
}

std::string dtfm::shapes::transpose(const TensorType &input,
                                    const std::vector<int64_t> &perm,
                                    const TensorType &result) {
  if (static_cast<int64_t>(perm.size()) != input.rank())
    return "expected a permutation of " + std::to_string(input.rank()) +
           " dimensions, found " + std::to_string(perm.size());
  std::vector<bool> seen(perm.size(), false);
  std::vector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= input.rank() || seen[p])
      return "expected perm to be a permutation of [0, " +
             std::to_string(input.rank()) + "), found " + shapeText(perm);
    seen[p] = true;
    shape.push_back(input.shape[p]);
  }
  return resultIs(result, shape, input.element);
}
