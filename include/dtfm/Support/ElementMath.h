//===- ElementMath.h - Per-element math and index maps of both backends -===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The index arithmetic and per-element math of the ops that broadcast,
// permute, slice, concatenate, reduce, gather, convolve and pool, written
// once as plain C++ that compiles for the device (the CUDA kernels in
// kernels/ are grid-stride loops over these functions) and for the host
// (the CPU kernels walk the same convolution and pooling geometry).
// unittests/Support/ElementMathTest checks every map against the CPU
// kernels on machines without a GPU.
//
// No CUDA headers here: this file is part of every build.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_SUPPORT_ELEMENTMATH_H
#define DTFM_SUPPORT_ELEMENTMATH_H

#include "dtfm/Support/HostDevice.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace dtfm::math {

/// Ranks the strided kernels take (the dialect's tensors stay far below).
constexpr int kMaxRank = 8;

/// An operand read or written along an iteration shape: element `flat`
/// (row-major over `shape`) lives at offset + sum(coord[d] * stride[d]).
/// Stride 0 repeats an operand along a dimension (broadcasting).
struct StridedView {
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t stride[kMaxRank] = {};
  int64_t offset = 0;

  DTFM_HOST_DEVICE int64_t at(int64_t flat) const {
    int64_t position = offset;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t size = shape[d];
      position += (flat % size) * stride[d];
      flat /= size;
    }
    return position;
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d)
      n *= shape[d];
    return n;
  }
};

/// Row-major strides of `shape`.
inline std::vector<int64_t>
contiguousStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

/// A dense tensor of `shape` read in its own order.
inline StridedView contiguousView(const std::vector<int64_t> &shape) {
  StridedView v;
  v.rank = static_cast<int>(shape.size());
  std::vector<int64_t> strides = contiguousStrides(shape);
  for (int d = 0; d < v.rank; ++d) {
    v.shape[d] = shape[d];
    v.stride[d] = strides[d];
  }
  return v;
}

/// NumPy broadcasting: `operand` (aligned to the right, size-1 dimensions
/// repeating) read along `out`.
inline StridedView broadcastView(const std::vector<int64_t> &operand,
                                 const std::vector<int64_t> &out) {
  StridedView v = contiguousView(out);
  std::vector<int64_t> strides = contiguousStrides(operand);
  size_t lead = out.size() - operand.size();
  for (size_t d = 0; d < out.size(); ++d)
    v.stride[d] = d < lead || operand[d - lead] == 1 ? 0 : strides[d - lead];
  return v;
}

/// dtfm.transpose: result dimension i is input dimension perm[i]; reads the
/// input in the result's order.
inline StridedView permutedView(const std::vector<int64_t> &input,
                                const std::vector<int64_t> &perm) {
  StridedView v;
  v.rank = static_cast<int>(perm.size());
  std::vector<int64_t> strides = contiguousStrides(input);
  for (int d = 0; d < v.rank; ++d) {
    v.shape[d] = input[perm[d]];
    v.stride[d] = strides[perm[d]];
  }
  return v;
}

/// dtfm.slice: elements start, start + step, ... of `input` along each
/// dimension, in the result's (`out`) order.
inline StridedView sliceView(const std::vector<int64_t> &input,
                             const std::vector<int64_t> &out,
                             const std::vector<int64_t> &starts,
                             const std::vector<int64_t> &steps) {
  StridedView v = contiguousView(out);
  std::vector<int64_t> strides = contiguousStrides(input);
  for (int d = 0; d < v.rank; ++d) {
    v.stride[d] = strides[d] * steps[d];
    v.offset += starts[d] * strides[d];
  }
  return v;
}

/// The block of a tensor of shape `whole` holding `part` at `begin` along
/// `axis` (one operand of a dtfm.concat), in the part's order.
inline StridedView axisBlockView(const std::vector<int64_t> &whole,
                                 int64_t axis, int64_t begin,
                                 const std::vector<int64_t> &part) {
  StridedView v = contiguousView(part);
  std::vector<int64_t> strides = contiguousStrides(whole);
  for (int d = 0; d < v.rank; ++d)
    v.stride[d] = strides[d];
  v.offset = begin * strides[axis];
  return v;
}

/// A reduction of views sharing one iteration shape: result element j
/// (row-major over the kept dimensions) combines every element whose kept
/// coordinates are j's. Each view splits in two: its kept part (numbered by
/// j) and its reduced part (numbered by the position in the reduction).
struct ReductionViews {
  static constexpr int kOperands = 3;
  StridedView kept[kOperands], reduced[kOperands];
  /// Where result j is written.
  StridedView result;
  int64_t keptCount = 1, reducedCount = 1;
};

/// Splits `views` (operands, same iteration shape) and `result` (the
/// result's view along the same shape; its strides on reduced dimensions
/// are ignored) at the dimensions marked in `reducedDims`.
inline ReductionViews splitReduction(const std::vector<StridedView> &views,
                                     const StridedView &result,
                                     const std::vector<bool> &reducedDims) {
  ReductionViews r;
  auto split = [&](const StridedView &v, StridedView &kept,
                   StridedView &reduced) {
    kept = StridedView();
    reduced = StridedView();
    kept.offset = v.offset;
    for (int d = 0; d < v.rank; ++d) {
      StridedView &to = reducedDims[d] ? reduced : kept;
      to.shape[to.rank] = v.shape[d];
      to.stride[to.rank] = v.stride[d];
      ++to.rank;
    }
  };
  for (size_t i = 0; i < views.size() && i < ReductionViews::kOperands; ++i)
    split(views[i], r.kept[i], r.reduced[i]);
  StridedView ignored;
  split(result, r.result, ignored);
  r.keptCount = r.result.numel();
  r.reducedCount = ignored.numel();
  return r;
}

/// The dimensions along which `operand` repeats when broadcast to `out`:
/// the ones its gradient sums over.
inline std::vector<bool> broadcastDims(const std::vector<int64_t> &operand,
                                       const std::vector<int64_t> &out) {
  std::vector<bool> reduced(out.size(), false);
  size_t lead = out.size() - operand.size();
  for (size_t d = 0; d < out.size(); ++d)
    reduced[d] = out[d] != 1 && (d < lead || operand[d - lead] == 1);
  return reduced;
}

/// The reduction of `views` (operands along `out`) onto an operand of shape
/// `operand` broadcast to `out`: what that operand's gradient sums.
inline ReductionViews reductionOnto(const std::vector<int64_t> &operand,
                                    const std::vector<int64_t> &out,
                                    const std::vector<StridedView> &views) {
  return splitReduction(views, broadcastView(operand, out),
                        broadcastDims(operand, out));
}

/// Means over `axes` (negative from the end; repeats count once) of a
/// tensor of some shape: that shape with those dimensions kept as 1, and
/// how many elements each mean averages.
struct MeanShape {
  std::vector<int64_t> kept;
  int64_t count = 1;
};

inline MeanShape meanShape(const std::vector<int64_t> &shape,
                           const std::vector<int64_t> &axes) {
  MeanShape m{shape, 1};
  int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<bool> reduced(shape.size(), false);
  for (int64_t a : axes) {
    int64_t d = a < 0 ? a + rank : a;
    if (d < 0 || d >= rank || reduced[d])
      continue;
    reduced[d] = true;
    m.count *= shape[d];
    m.kept[d] = 1;
  }
  return m;
}

/// One step of reduce_max (maximum) or reduce_min: the extremum of `acc`
/// and `v`, NaN if either is (PyTorch's amax and amin propagate NaN).
DTFM_HOST_DEVICE inline float extremumStep(bool maximum, float acc, float v) {
  if (acc != acc || v != v)
    return acc != acc ? acc : v;
  return maximum ? (v > acc ? v : acc) : (v < acc ? v : acc);
}

//===--- per-element math -------------------------------------------------===//

enum class BinaryOp { Add, Sub, Mul, Div, Maximum, Minimum, Prelu };

DTFM_HOST_DEVICE inline float applyBinary(BinaryOp op, float a, float b) {
  switch (op) {
  case BinaryOp::Add:
    return a + b;
  case BinaryOp::Sub:
    return a - b;
  case BinaryOp::Mul:
    return a * b;
  case BinaryOp::Div:
    return a / b;
  // NaN wins, as in PyTorch's maximum and minimum (fmaxf would drop it).
  case BinaryOp::Maximum:
    return a != a || a > b ? a : b;
  case BinaryOp::Minimum:
    return a != a || a < b ? a : b;
  case BinaryOp::Prelu: // a: the input, b: its slope where a < 0
    break;
  }
  return a > 0 ? a : a * b;
}

/// The partial derivative of `a op b` in operand 0 (a) or 1 (b). Maximum
/// and minimum split a tie evenly between the operands, as PyTorch's
/// maximum/minimum do.
DTFM_HOST_DEVICE inline float binaryPartial(BinaryOp op, int operand, float a,
                                            float b) {
  switch (op) {
  case BinaryOp::Add:
    return 1.0f;
  case BinaryOp::Sub:
    return operand == 0 ? 1.0f : -1.0f;
  case BinaryOp::Mul:
    return operand == 0 ? b : a;
  case BinaryOp::Div:
    return operand == 0 ? 1.0f / b : -a / (b * b);
  case BinaryOp::Maximum:
  case BinaryOp::Minimum: {
    float mine = operand == 0 ? a : b, theirs = operand == 0 ? b : a;
    if (mine == theirs)
      return 0.5f;
    return (op == BinaryOp::Maximum ? mine > theirs : mine < theirs) ? 1.0f
                                                                     : 0.0f;
  }
  case BinaryOp::Prelu:
    break;
  }
  return operand == 0 ? (a > 0 ? 1.0f : b) : (a > 0 ? 0.0f : a);
}

enum class UnaryOp { Sqrt, Tanh, Erf, Exp, Sigmoid, Silu, Pow, Clip, Abs, Log };

/// The constants of a unary op: pow's exponent, clip's bounds.
struct UnaryParams {
  double exponent = 1;
  double low = 0, high = 0;
};

DTFM_HOST_DEVICE inline float applyUnary(UnaryOp op, float x,
                                         UnaryParams params) {
  switch (op) {
  case UnaryOp::Sqrt:
    return sqrtf(x);
  case UnaryOp::Tanh:
    return tanhf(x);
  case UnaryOp::Erf:
    return erff(x);
  case UnaryOp::Exp:
    return expf(x);
  case UnaryOp::Sigmoid:
    return 1 / (1 + expf(-x));
  case UnaryOp::Silu:
    return x / (1 + expf(-x));
  case UnaryOp::Clip:
    return fminf(fmaxf(x, static_cast<float>(params.low)),
                 static_cast<float>(params.high));
  case UnaryOp::Abs:
    return fabsf(x);
  case UnaryOp::Log:
    return logf(x);
  case UnaryOp::Pow:
    break;
  }
  return static_cast<float>(pow(static_cast<double>(x), params.exponent));
}

/// dOut times the derivative at x (what the backward adds into dx).
DTFM_HOST_DEVICE inline float unaryGradient(UnaryOp op, float x, float dOut,
                                            UnaryParams params) {
  switch (op) {
  case UnaryOp::Sqrt:
    return dOut * (0.5f / sqrtf(x));
  case UnaryOp::Tanh: {
    float t = tanhf(x);
    return dOut * (1 - t * t);
  }
  case UnaryOp::Erf:
    return dOut * (1.12837917f * expf(-x * x));
  case UnaryOp::Exp:
    return dOut * expf(x);
  case UnaryOp::Sigmoid: {
    float s = 1 / (1 + expf(-x));
    return dOut * (s * (1 - s));
  }
  case UnaryOp::Silu: {
    float s = 1 / (1 + expf(-x));
    return dOut * (s * (1 + x * (1 - s)));
  }
  case UnaryOp::Clip: // PyTorch's hardtanh: nothing at or beyond the bounds
    return x > static_cast<float>(params.low) &&
                   x < static_cast<float>(params.high)
               ? dOut
               : 0.0f;
  case UnaryOp::Abs: // PyTorch's sign: 0 at 0
    return x > 0 ? dOut : x < 0 ? -dOut : 0.0f;
  case UnaryOp::Log:
    return dOut / x;
  case UnaryOp::Pow:
    break;
  }
  return static_cast<float>(dOut * params.exponent *
                            pow(static_cast<double>(x), params.exponent - 1));
}

/// What a reduction sums, from up to three operands p0, p1, p2 read at the
/// same iteration element.
enum class ReduceTerm {
  Value,           ///< p0 (sums, means, add/sub gradients)
  Product,         ///< p0 * p1 (mul gradients)
  Quotient,        ///< p0 / p1 (div: dividend's gradient)
  DivisorGradient, ///< -p0 * p1 / (p2 * p2) (div: divisor's gradient)
  WhereTrue,       ///< p1 != 0 ? p0 : 0 (where: the true side's gradient)
  WhereFalse,      ///< p1 == 0 ? p0 : 0
  // The gradients of maximum and minimum, symmetric in their operands:
  // p1 is the operand whose gradient is summed, p2 the other.
  MaximumGradient,    ///< p0 * d max(p1, p2) / d p1
  MinimumGradient,    ///< p0 * d min(p1, p2) / d p1
  PreluInputGradient, ///< p0 * d prelu(p1, p2) / d p1 (p1: x, p2: slope)
  PreluSlopeGradient, ///< p0 * d prelu(p1, p2) / d p2
};

DTFM_HOST_DEVICE inline float reduceTerm(ReduceTerm term, float p0, float p1,
                                         float p2) {
  switch (term) {
  case ReduceTerm::Value:
    return p0;
  case ReduceTerm::Product:
    return p0 * p1;
  case ReduceTerm::Quotient:
    return p0 / p1;
  case ReduceTerm::DivisorGradient:
    return -p0 * p1 / (p2 * p2);
  case ReduceTerm::WhereTrue:
    return p1 != 0 ? p0 : 0.0f;
  case ReduceTerm::WhereFalse:
    return p1 == 0 ? p0 : 0.0f;
  case ReduceTerm::MaximumGradient:
    return p0 * binaryPartial(BinaryOp::Maximum, 0, p1, p2);
  case ReduceTerm::MinimumGradient:
    return p0 * binaryPartial(BinaryOp::Minimum, 0, p1, p2);
  case ReduceTerm::PreluInputGradient:
    return p0 * binaryPartial(BinaryOp::Prelu, 0, p1, p2);
  case ReduceTerm::PreluSlopeGradient:
    break;
  }
  return p0 * binaryPartial(BinaryOp::Prelu, 1, p1, p2);
}

/// How the gradient of operand `i` (0: a, 1: b) of `a op b` sums over the
/// result: dOut's elements combined by `term`, whose operands p0, p1, p2
/// are `sources` (0: dOut, 1: a, 2: b; unused past the term's count), the
/// sum scaled by `alpha`. The CUDA executor and the tests read this one
/// table; the CPU applies binaryPartial per element.
struct BinaryGradient {
  ReduceTerm term = ReduceTerm::Value;
  int sources[3] = {0, 0, 0};
  float alpha = 1;
};

inline BinaryGradient binaryGradient(BinaryOp op, int i) {
  int self = 1 + i, other = 2 - i;
  switch (op) {
  case BinaryOp::Add:
    return {ReduceTerm::Value, {0, 0, 0}, 1};
  case BinaryOp::Sub:
    return {ReduceTerm::Value, {0, 0, 0}, i == 0 ? 1.0f : -1.0f};
  case BinaryOp::Mul:
    return {ReduceTerm::Product, {0, other, 0}, 1};
  case BinaryOp::Div:
    return i == 0 ? BinaryGradient{ReduceTerm::Quotient, {0, 2, 0}, 1}
                  : BinaryGradient{ReduceTerm::DivisorGradient, {0, 1, 2}, 1};
  case BinaryOp::Maximum:
    return {ReduceTerm::MaximumGradient, {0, self, other}, 1};
  case BinaryOp::Minimum:
    return {ReduceTerm::MinimumGradient, {0, self, other}, 1};
  case BinaryOp::Prelu:
    break;
  }
  return {i == 0 ? ReduceTerm::PreluInputGradient
                 : ReduceTerm::PreluSlopeGradient,
          {0, 1, 2},
          1};
}

/// Operands a term reads.
DTFM_HOST_DEVICE inline int reduceTermOperands(ReduceTerm term) {
  switch (term) {
  case ReduceTerm::Value:
    return 1;
  case ReduceTerm::Product:
  case ReduceTerm::Quotient:
  case ReduceTerm::WhereTrue:
  case ReduceTerm::WhereFalse:
    return 2;
  default:
    return 3;
  }
}

//===--- gather (ONNX Gather along an axis)
//--------------------------------===//

/// x viewed as [outer, size, inner], `count` indices: the result is
/// [outer, count, inner].
struct GatherGeometry {
  int64_t outer = 1, size = 1, count = 1, inner = 1;

  /// The element of x that result element `flat` copies, or -1 when its
  /// index lies outside [-size, size).
  DTFM_HOST_DEVICE int64_t source(const float *indices, int64_t flat) const {
    int64_t c = flat % inner;
    int64_t i = (flat / inner) % count;
    int64_t o = flat / (inner * count);
    int64_t row = static_cast<int64_t>(indices[i]);
    if (row < -size || row >= size)
      return -1;
    if (row < 0)
      row += size;
    return (o * size + row) * inner + c;
  }
  int64_t resultCount() const { return outer * count * inner; }
};

/// Gathering `count` indices along `axis` of a tensor of `shape`.
inline GatherGeometry gatherGeometry(const std::vector<int64_t> &shape,
                                     int64_t axis, int64_t count) {
  GatherGeometry g;
  g.size = shape[axis];
  g.count = count;
  for (int64_t d = 0; d < axis; ++d)
    g.outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d)
    g.inner *= shape[d];
  return g;
}

//===--- convolution (im2col) and pooling, NCHW
//----------------------------===//

/// A convolution's or pooling's window geometry, as the plan gives it:
/// strides {sh, sw}, padding {top, left, bottom, right}, dilations {dh, dw}.
struct Window {
  int64_t strideH = 1, strideW = 1;
  int64_t padTop = 0, padLeft = 0, padBottom = 0, padRight = 0;
  int64_t dilationH = 1, dilationW = 1;
  /// Average pooling divides each window's sum by its cells inside the
  /// input extended by this much: the padding that counts (avg_pool2d's
  /// divisor_padding). The rest of the padding does not.
  int64_t countTop = 0, countLeft = 0, countBottom = 0, countRight = 0;
};

struct ConvGeometry {
  int64_t n = 1, c = 1, h = 1, w = 1; ///< input
  int64_t o = 1, kh = 1, kw = 1;      ///< filters [o, c / groups, kh, kw]
  int64_t ho = 1, wo = 1;             ///< output
  int64_t groups = 1;
  int64_t strideH = 1, strideW = 1, padTop = 0, padLeft = 0;
  int64_t dilationH = 1, dilationW = 1;

  DTFM_HOST_DEVICE int64_t channelsPerGroup() const { return c / groups; }
  DTFM_HOST_DEVICE int64_t filtersPerGroup() const { return o / groups; }
  /// Rows of a column matrix: one per (channel of the group, kernel cell).
  DTFM_HOST_DEVICE int64_t columnRows() const {
    return channelsPerGroup() * kh * kw;
  }
  DTFM_HOST_DEVICE int64_t spatial() const { return ho * wo; }

  /// Element `flat` of the column matrices [images][columnRows][spatial] of
  /// images first.. and group g: the input pixel under that kernel cell, or
  /// 0 in the padding.
  DTFM_HOST_DEVICE float column(const float *x, int64_t first, int64_t g,
                                int64_t flat) const {
    int64_t p = flat % spatial();
    int64_t row = (flat / spatial()) % columnRows();
    int64_t image = first + flat / (spatial() * columnRows());
    int64_t j = row % kw, i = (row / kw) % kh, ch = row / (kw * kh);
    int64_t iy = (p / wo) * strideH - padTop + i * dilationH;
    int64_t ix = (p % wo) * strideW - padLeft + j * dilationW;
    if (iy < 0 || iy >= h || ix < 0 || ix >= w)
      return 0.0f;
    return x[((image * c + g * channelsPerGroup() + ch) * h + iy) * w + ix];
  }
  /// Input-gradient element of images first.. and group g numbered `flat`
  /// over [images][channelsPerGroup][h][w]: its offset in dx (out) and the
  /// sum of the column-matrix gradients `dcol` that read it (the result).
  DTFM_HOST_DEVICE float columnGradient(const float *dcol, int64_t first,
                                        int64_t g, int64_t flat,
                                        int64_t &out) const {
    int64_t ix = flat % w, iy = (flat / w) % h;
    int64_t ch = (flat / (w * h)) % channelsPerGroup();
    int64_t image = flat / (w * h * channelsPerGroup());
    out =
        (((first + image) * c + g * channelsPerGroup() + ch) * h + iy) * w + ix;
    const float *base = dcol + image * columnRows() * spatial();
    float sum = 0;
    for (int64_t i = 0; i < kh; ++i) {
      int64_t ty = iy + padTop - i * dilationH;
      if (ty < 0 || ty % strideH != 0 || ty / strideH >= ho)
        continue;
      for (int64_t j = 0; j < kw; ++j) {
        int64_t tx = ix + padLeft - j * dilationW;
        if (tx < 0 || tx % strideW != 0 || tx / strideW >= wo)
          continue;
        int64_t row = (ch * kh + i) * kw + j;
        sum += base[row * spatial() + (ty / strideH) * wo + tx / strideW];
      }
    }
    return sum;
  }
};

/// Pooling windows over planes [planes, h, w] -> [planes, ho, wo]: padded
/// cells never win a max; an average divides by its window's cells inside
/// the input extended by count* (the padding that counts). The CPU pooling
/// kernels walk their windows with it too (lib/Runtime/Cpu/Convolution.cpp).
struct PoolGeometry {
  int64_t planes = 1, h = 1, w = 1, ho = 1, wo = 1, kh = 1, kw = 1;
  int64_t strideH = 1, strideW = 1, padTop = 0, padLeft = 0;
  int64_t countTop = 0, countLeft = 0, countBottom = 0, countRight = 0;

  /// Calls visit(offset) for every input cell of output `flat`'s window
  /// inside the image, in window order.
  template <typename Visit>
  DTFM_HOST_DEVICE void forEachCell(int64_t flat, Visit visit) const {
    int64_t plane = flat / (ho * wo), y = (flat / wo) % ho, xo = flat % wo;
    for (int64_t i = 0; i < kh; ++i) {
      int64_t iy = y * strideH - padTop + i;
      if (iy < 0 || iy >= h)
        continue;
      for (int64_t j = 0; j < kw; ++j) {
        int64_t ix = xo * strideW - padLeft + j;
        if (ix >= 0 && ix < w)
          visit((plane * h + iy) * w + ix);
      }
    }
  }
  /// The input element (offset) that wins the max of output `flat`, the
  /// first in window order among equals; -1 when the window holds only
  /// padding.
  DTFM_HOST_DEVICE int64_t argMax(const float *x, int64_t flat) const {
    int64_t best = -1;
    float bestValue = 0;
    forEachCell(flat, [&](int64_t at) {
      if (best < 0 || x[at] > bestValue) {
        best = at;
        bestValue = x[at];
      }
    });
    return best;
  }
  /// The cells output `flat`'s average divides by; 0 only for a window
  /// that holds no input (its sum is 0 then).
  DTFM_HOST_DEVICE int64_t divisor(int64_t flat) const {
    int64_t top = ((flat / wo) % ho) * strideH - padTop,
            left = (flat % wo) * strideW - padLeft;
    int64_t rows = (top + kh < h + countBottom ? top + kh : h + countBottom) -
                   (top > -countTop ? top : -countTop);
    int64_t cols = (left + kw < w + countRight ? left + kw : w + countRight) -
                   (left > -countLeft ? left : -countLeft);
    return rows > 0 && cols > 0 ? rows * cols : 0;
  }
  DTFM_HOST_DEVICE float average(const float *x, int64_t flat) const {
    int64_t cells = divisor(flat);
    if (cells == 0)
      return 0.0f;
    double sum = 0;
    forEachCell(flat, [&](int64_t at) { sum += x[at]; });
    return static_cast<float>(sum / static_cast<double>(cells));
  }
  /// The outputs whose windows hold input (iy, ix): rows [y0, y1), columns
  /// [x0, x1).
  DTFM_HOST_DEVICE void covering(int64_t iy, int64_t ix, int64_t &y0,
                                 int64_t &y1, int64_t &x0, int64_t &x1) const {
    // y * strideH - padTop <= iy <= y * strideH - padTop + kh - 1
    int64_t low = iy + padTop - kh + 1, high = iy + padTop;
    y0 = low <= 0 ? 0 : (low + strideH - 1) / strideH;
    y1 = high < 0 ? 0 : high / strideH + 1;
    low = ix + padLeft - kw + 1;
    high = ix + padLeft;
    x0 = low <= 0 ? 0 : (low + strideW - 1) / strideW;
    x1 = high < 0 ? 0 : high / strideW + 1;
    if (y1 > ho)
      y1 = ho;
    if (x1 > wo)
      x1 = wo;
  }
  /// The sum of term(output) over the outputs whose windows hold input
  /// element `flat`, in output order.
  template <typename Term>
  DTFM_HOST_DEVICE float sumOverCovering(int64_t flat, Term term) const {
    int64_t plane = flat / (h * w), iy = (flat / w) % h, ix = flat % w;
    int64_t y0, y1, x0, x1;
    covering(iy, ix, y0, y1, x0, x1);
    float sum = 0;
    for (int64_t y = y0; y < y1; ++y)
      for (int64_t xo = x0; xo < x1; ++xo)
        sum += term((plane * ho + y) * wo + xo);
    return sum;
  }
  /// The gradient of input element `flat` of a max pooling: dOut of every
  /// window it wins.
  DTFM_HOST_DEVICE float maxGradient(const float *x, const float *dOut,
                                     int64_t flat) const {
    return sumOverCovering(flat, [&](int64_t out) {
      return argMax(x, out) == flat ? dOut[out] : 0.0f;
    });
  }
  /// The gradient of input element `flat` of an average pooling.
  DTFM_HOST_DEVICE float averageGradient(const float *dOut,
                                         int64_t flat) const {
    return sumOverCovering(flat, [&](int64_t out) {
      int64_t cells = divisor(out);
      return cells == 0 ? 0.0f : dOut[out] / static_cast<float>(cells);
    });
  }
};

/// Element `flat` of dtfm.rotary of x [b, s, heads * dh] (`hidden` =
/// heads * dh): pair i < dh/2 of a head, (i, i + dh/2), turns by
/// position * theta^(-2i/dh); sign -1 turns back (the backward).
DTFM_HOST_DEVICE inline float rotaryElement(const float *x, int64_t flat,
                                            int64_t seq, int64_t hidden,
                                            int64_t dh, double theta,
                                            int sign) {
  int64_t c = flat % dh, half = dh / 2, position = (flat / hidden) % seq;
  int64_t pair = c < half ? c : c - half;
  double angle =
      sign * static_cast<double>(position) *
      pow(theta, -2.0 * static_cast<double>(pair) / static_cast<double>(dh));
  double cosine = cos(angle), sine = sin(angle);
  const float *head = x + (flat - c);
  return c < half ? static_cast<float>(head[c] * cosine - head[c + half] * sine)
                  : static_cast<float>(head[c] * cosine + head[pair] * sine);
}

} // namespace dtfm::math

#endif // DTFM_SUPPORT_ELEMENTMATH_H
