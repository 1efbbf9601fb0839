//===- Elementwise.cpp - CPU broadcasting, math and shape ops -------------===//
//
// Part of dtfm. The NumPy-broadcasting binary ops, unary math, reductions and
// the shape ops (concat, slice, transpose, gather, where), forward and
// backward.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

using namespace dtfm::runtime::cpu;
namespace math = dtfm::math;

//===----------------------------------------------------------------------===//
// binary math (broadcasting)
//===----------------------------------------------------------------------===//

/// Index into a broadcast operand for each element of the result.
static std::vector<int64_t> broadcastIndex(const std::vector<int64_t> &out,
                                           const std::vector<int64_t> &in) {
  size_t rank = out.size(), offset = rank - in.size();
  return indexMap(out, [&](const std::vector<int64_t> &coord) {
    int64_t pos = 0;
    for (size_t d = offset; d < rank; ++d)
      pos = pos * in[d - offset] + (in[d - offset] == 1 ? 0 : coord[d]);
    return pos;
  });
}

static std::vector<int64_t> broadcastShape(const std::vector<int64_t> &a,
                                           const std::vector<int64_t> &b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> shape(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t x = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t y = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    shape[i] = std::max(x, y);
  }
  return shape;
}

/// Whether `small` is a suffix of `full`'s shape (the operand repeats over
/// the leading dimensions: a bias, a position table).
static bool isSuffix(const std::vector<int64_t> &full,
                     const std::vector<int64_t> &small) {
  return small.size() <= full.size() &&
         std::equal(small.begin(), small.end(),
                    full.end() - static_cast<long>(small.size()));
}

namespace {

Tensor add(const Tensor &a, const Tensor &b) {
  // Common cases without index tables: equal shapes, or one operand
  // repeating over the other's leading dimensions.
  if (a.shape == b.shape || isSuffix(a.shape, b.shape) ||
      isSuffix(b.shape, a.shape)) {
    const Tensor &big = a.numel() >= b.numel() ? a : b;
    const Tensor &small = &big == &a ? b : a;
    Tensor out = big;
    int64_t n = small.numel(), total = out.numel();
    float *o = out.data.data();
    const float *x = small.data.data();
    for (int64_t base = 0; base < total; base += n)
      for (int64_t i = 0; i < n; ++i)
        o[base + i] += x[i];
    return out;
  }
  Tensor out(broadcastShape(a.shape, b.shape));
  std::vector<int64_t> ia = broadcastIndex(out.shape, a.shape);
  std::vector<int64_t> ib = broadcastIndex(out.shape, b.shape);
  for (int64_t i = 0; i < out.numel(); ++i)
    out.data[i] = a.data[ia[i]] + b.data[ib[i]];
  return out;
}

void addBackward(const Tensor &dOut, Tensor *da, Tensor *db) {
  for (Tensor *d : {da, db}) {
    if (!d)
      continue;
    if (isSuffix(dOut.shape, d->shape)) {
      int64_t n = d->numel(), total = dOut.numel();
      float *g = d->data.data();
      const float *x = dOut.data.data();
      for (int64_t base = 0; base < total; base += n)
        for (int64_t i = 0; i < n; ++i)
          g[i] += x[base + i];
      continue;
    }
    std::vector<int64_t> index = broadcastIndex(dOut.shape, d->shape);
    for (int64_t i = 0; i < dOut.numel(); ++i)
      d->data[index[i]] += dOut.data[i];
  }
}

/// out[i] = a[ia[i]] op b[ib[i]] over the broadcast shape.
Tensor broadcastBinary(const Tensor &a, const Tensor &b, math::BinaryOp op) {
  Tensor out(broadcastShape(a.shape, b.shape));
  std::vector<int64_t> ia = broadcastIndex(out.shape, a.shape);
  std::vector<int64_t> ib = broadcastIndex(out.shape, b.shape);
  for (int64_t i = 0; i < out.numel(); ++i)
    out.data[i] = math::applyBinary(op, a.data[ia[i]], b.data[ib[i]]);
  return out;
}

/// da[ia[i]] += dOut[i] * d(a op b)/da, and the same for b.
void broadcastBinaryBackward(const Tensor &a, const Tensor &b,
                             math::BinaryOp op, const Tensor &dOut, Tensor *da,
                             Tensor *db) {
  std::vector<int64_t> ia = broadcastIndex(dOut.shape, a.shape);
  std::vector<int64_t> ib = broadcastIndex(dOut.shape, b.shape);
  if (da)
    ensure(da, a.shape);
  if (db)
    ensure(db, b.shape);
  for (int64_t i = 0; i < dOut.numel(); ++i) {
    float x = a.data[ia[i]], y = b.data[ib[i]], g = dOut.data[i];
    if (da)
      da->data[ia[i]] += g * math::binaryPartial(op, 0, x, y);
    if (db)
      db->data[ib[i]] += g * math::binaryPartial(op, 1, x, y);
  }
}

} // namespace

Tensor dtfm::runtime::cpu::binaryMath(const Tensor &a, const Tensor &b,
                                      math::BinaryOp op) {
  return op == math::BinaryOp::Add ? add(a, b) : broadcastBinary(a, b, op);
}

void dtfm::runtime::cpu::binaryMathBackward(const Tensor &a, const Tensor &b,
                                            math::BinaryOp op,
                                            const Tensor &dOut, Tensor *da,
                                            Tensor *db) {
  if (op == math::BinaryOp::Add) {
    ensure(da, a.shape);
    ensure(db, b.shape);
    addBackward(dOut, da, db);
  } else
    broadcastBinaryBackward(a, b, op, dOut, da, db);
}

Tensor dtfm::runtime::cpu::unaryMath(const Tensor &x, math::UnaryOp op,
                                     math::UnaryParams params) {
  Tensor out(x.shape);
  for (int64_t i = 0; i < x.numel(); ++i)
    out.data[i] = math::applyUnary(op, x.data[i], params);
  return out;
}

void dtfm::runtime::cpu::unaryMathBackward(const Tensor &x, math::UnaryOp op,
                                           math::UnaryParams params,
                                           const Tensor &dOut, Tensor *dx) {
  ensure(dx, x.shape);
  for (int64_t i = 0; i < x.numel(); ++i)
    dx->data[i] += math::unaryGradient(op, x.data[i], dOut.data[i], params);
}

namespace {

/// For each element of x, the index of its mean in the keepdims result;
/// and how many elements each mean averages.
std::vector<int64_t> reducedIndex(const std::vector<int64_t> &shape,
                                  const std::vector<int64_t> &axes,
                                  int64_t &count) {
  int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<bool> reduced(rank, false);
  for (int64_t a : axes)
    reduced[a < 0 ? a + rank : a] = true;
  std::vector<int64_t> kept(shape);
  count = 1;
  for (int64_t i = 0; i < rank; ++i)
    if (reduced[i]) {
      count *= shape[i];
      kept[i] = 1;
    }
  return indexMap(shape, [&](const std::vector<int64_t> &coord) {
    int64_t at = 0;
    for (int64_t i = 0; i < rank; ++i)
      at = at * kept[i] + (reduced[i] ? 0 : coord[i]);
    return at;
  });
}

/// The shape of a reduction's result: `shape` without `axes`, or with them
/// as 1 (keepdims).
std::vector<int64_t> reducedShape(const std::vector<int64_t> &shape,
                                  const std::vector<int64_t> &axes,
                                  bool keepdims) {
  int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<bool> reduced(rank, false);
  for (int64_t a : axes)
    reduced[a < 0 ? a + rank : a] = true;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < rank; ++i)
    if (!reduced[i])
      out.push_back(shape[i]);
    else if (keepdims)
      out.push_back(1);
  return out;
}

} // namespace

Tensor dtfm::runtime::cpu::reduceMean(const Tensor &x,
                                      const std::vector<int64_t> &axes,
                                      bool keepdims) {
  int64_t count = 1;
  std::vector<int64_t> index = reducedIndex(x.shape, axes, count);
  Tensor out(reducedShape(x.shape, axes, keepdims));
  std::vector<double> sums(out.numel(), 0);
  for (int64_t i = 0; i < x.numel(); ++i)
    sums[index[i]] += x.data[i];
  for (int64_t i = 0; i < out.numel(); ++i)
    out.data[i] = static_cast<float>(sums[i] / count);
  return out;
}

void dtfm::runtime::cpu::reduceMeanBackward(const Tensor &x,
                                            const std::vector<int64_t> &axes,
                                            const Tensor &dOut, Tensor *dx) {
  int64_t count = 1;
  std::vector<int64_t> index = reducedIndex(x.shape, axes, count);
  ensure(dx, x.shape);
  for (int64_t i = 0; i < x.numel(); ++i)
    dx->data[i] += dOut.data[index[i]] / static_cast<float>(count);
}

namespace {
/// The extremum each result element of a reduce_max/min holds, from x, and
/// for each element of x the index of its result (reducedIndex).
std::vector<float> extrema(const Tensor &x, const std::vector<int64_t> &index,
                           int64_t results, bool maximum) {
  std::vector<float> out(results);
  std::vector<bool> seen(results, false);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t at = index[i];
    out[at] = seen[at] ? math::extremumStep(maximum, out[at], x.data[i])
                       : x.data[i];
    seen[at] = true;
  }
  return out;
}
} // namespace

Tensor dtfm::runtime::cpu::reduceExtremum(const Tensor &x,
                                          const std::vector<int64_t> &axes,
                                          bool keepdims, bool maximum) {
  int64_t count = 1;
  std::vector<int64_t> index = reducedIndex(x.shape, axes, count);
  Tensor out(reducedShape(x.shape, axes, keepdims));
  std::vector<float> values = extrema(x, index, out.numel(), maximum);
  std::copy(values.begin(), values.end(), out.data.begin());
  return out;
}

void dtfm::runtime::cpu::reduceExtremumBackward(
    const Tensor &x, const std::vector<int64_t> &axes, bool maximum,
    const Tensor &dOut, Tensor *dx) {
  int64_t count = 1;
  std::vector<int64_t> index = reducedIndex(x.shape, axes, count);
  std::vector<float> values = extrema(x, index, dOut.numel(), maximum);
  std::vector<int64_t> ties(values.size(), 0);
  for (int64_t i = 0; i < x.numel(); ++i)
    ties[index[i]] += x.data[i] == values[index[i]];
  ensure(dx, x.shape);
  for (int64_t i = 0; i < x.numel(); ++i)
    if (x.data[i] == values[index[i]])
      dx->data[i] += dOut.data[index[i]] / static_cast<float>(ties[index[i]]);
}

Tensor dtfm::runtime::cpu::concat(const std::vector<const Tensor *> &inputs,
                                  int64_t axis) {
  std::vector<int64_t> shape = inputs[0]->shape;
  shape[axis] = 0;
  for (const Tensor *t : inputs)
    shape[axis] += t->shape[axis];
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= shape[i];
  for (size_t i = axis + 1; i < shape.size(); ++i)
    inner *= shape[i];
  Tensor out(shape);
  int64_t offset = 0;
  for (const Tensor *t : inputs) {
    int64_t block = t->shape[axis] * inner;
    for (int64_t o = 0; o < outer; ++o)
      std::copy(t->data.begin() + o * block, t->data.begin() + (o + 1) * block,
                out.data.begin() + o * shape[axis] * inner + offset);
    offset += block;
  }
  return out;
}

void dtfm::runtime::cpu::concatBackward(const Tensor &dOut, int64_t axis,
                                        const std::vector<Tensor *> &grads) {
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= dOut.shape[i];
  for (size_t i = axis + 1; i < dOut.shape.size(); ++i)
    inner *= dOut.shape[i];
  int64_t offset = 0;
  for (Tensor *g : grads) {
    int64_t block = g->shape[axis] * inner;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < block; ++j)
        g->data[o * block + j] +=
            dOut.data[o * dOut.shape[axis] * inner + offset + j];
    offset += block;
  }
}

namespace {

/// Flat input index of every result element of a slice.
std::vector<int64_t> sliceIndex(const std::vector<int64_t> &inShape,
                                const std::vector<int64_t> &outShape,
                                const std::vector<int64_t> &starts,
                                const std::vector<int64_t> &steps) {
  size_t rank = inShape.size();
  std::vector<int64_t> stride(rank, 1);
  for (size_t i = rank; i-- > 1;)
    stride[i - 1] = stride[i] * inShape[i];
  return indexMap(outShape, [&](const std::vector<int64_t> &coord) {
    int64_t at = 0;
    for (size_t i = 0; i < rank; ++i)
      at += (starts[i] + coord[i] * steps[i]) * stride[i];
    return at;
  });
}

std::vector<int64_t> sliceShape(const std::vector<int64_t> &starts,
                                const std::vector<int64_t> &ends,
                                const std::vector<int64_t> &steps) {
  std::vector<int64_t> shape;
  for (size_t i = 0; i < starts.size(); ++i)
    shape.push_back((ends[i] - starts[i] + steps[i] - 1) / steps[i]);
  return shape;
}

} // namespace

Tensor dtfm::runtime::cpu::slice(const Tensor &x,
                                 const std::vector<int64_t> &starts,
                                 const std::vector<int64_t> &ends,
                                 const std::vector<int64_t> &steps) {
  Tensor out(sliceShape(starts, ends, steps));
  std::vector<int64_t> index = sliceIndex(x.shape, out.shape, starts, steps);
  for (int64_t i = 0; i < out.numel(); ++i)
    out.data[i] = x.data[index[i]];
  return out;
}

void dtfm::runtime::cpu::sliceBackward(const Tensor &x,
                                       const std::vector<int64_t> &starts,
                                       const std::vector<int64_t> &steps,
                                       const Tensor &dOut, Tensor *dx) {
  ensure(dx, x.shape);
  std::vector<int64_t> index = sliceIndex(x.shape, dOut.shape, starts, steps);
  for (int64_t i = 0; i < dOut.numel(); ++i)
    dx->data[index[i]] += dOut.data[i];
}

/// x viewed as [outer, size, inner] around `axis`.
static void splitAround(const std::vector<int64_t> &shape, int64_t axis,
                        int64_t &outer, int64_t &size, int64_t &inner) {
  outer = 1;
  inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= shape[i];
  size = shape[axis];
  for (size_t i = axis + 1; i < shape.size(); ++i)
    inner *= shape[i];
}

bool dtfm::runtime::cpu::gather(const Tensor &x, const Tensor &indices,
                                int64_t axis, Tensor &out, std::string &error) {
  int64_t outer, size, inner;
  splitAround(x.shape, axis, outer, size, inner);
  std::vector<int64_t> rows(indices.numel());
  for (int64_t i = 0; i < indices.numel(); ++i) {
    int64_t index = static_cast<int64_t>(indices.data[i]);
    if (index < -size || index >= size) {
      error = "index " + std::to_string(index) + " outside [" +
              std::to_string(-size) + ", " + std::to_string(size) +
              ") on axis " + std::to_string(axis);
      return false;
    }
    rows[i] = index < 0 ? index + size : index;
  }
  std::vector<int64_t> shape(x.shape.begin(), x.shape.begin() + axis);
  shape.insert(shape.end(), indices.shape.begin(), indices.shape.end());
  shape.insert(shape.end(), x.shape.begin() + axis + 1, x.shape.end());
  out = Tensor(shape);
  int64_t count = static_cast<int64_t>(rows.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < count; ++i)
      std::copy_n(x.data.begin() + (o * size + rows[i]) * inner, inner,
                  out.data.begin() + (o * count + i) * inner);
  return true;
}

void dtfm::runtime::cpu::gatherBackward(const Tensor &x, const Tensor &indices,
                                        int64_t axis, const Tensor &dOut,
                                        Tensor *dx) {
  if (!dx)
    return;
  ensure(dx, x.shape);
  int64_t outer, size, inner;
  splitAround(x.shape, axis, outer, size, inner);
  int64_t count = indices.numel();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < count; ++i) {
      int64_t row = static_cast<int64_t>(indices.data[i]);
      if (row < 0)
        row += size;
      float *g = dx->data.data() + (o * size + row) * inner;
      const float *d = dOut.data.data() + (o * count + i) * inner;
      for (int64_t c = 0; c < inner; ++c)
        g[c] += d[c];
    }
}

Tensor dtfm::runtime::cpu::where(const Tensor &condition, const Tensor &a,
                                 const Tensor &b) {
  Tensor out(broadcastShape(broadcastShape(condition.shape, a.shape), b.shape));
  std::vector<int64_t> ic = broadcastIndex(out.shape, condition.shape);
  std::vector<int64_t> ia = broadcastIndex(out.shape, a.shape);
  std::vector<int64_t> ib = broadcastIndex(out.shape, b.shape);
  for (int64_t i = 0; i < out.numel(); ++i)
    out.data[i] = condition.data[ic[i]] != 0 ? a.data[ia[i]] : b.data[ib[i]];
  return out;
}

void dtfm::runtime::cpu::whereBackward(const Tensor &condition,
                                       const Tensor &dOut, Tensor *da,
                                       Tensor *db) {
  std::vector<int64_t> ic = broadcastIndex(dOut.shape, condition.shape);
  std::vector<int64_t> ia, ib;
  if (da)
    ia = broadcastIndex(dOut.shape, da->shape);
  if (db)
    ib = broadcastIndex(dOut.shape, db->shape);
  for (int64_t i = 0; i < dOut.numel(); ++i) {
    bool chooseA = condition.data[ic[i]] != 0;
    if (chooseA && da)
      da->data[ia[i]] += dOut.data[i];
    if (!chooseA && db)
      db->data[ib[i]] += dOut.data[i];
  }
}

Tensor dtfm::runtime::cpu::transpose(const Tensor &x,
                                     const std::vector<int64_t> &perm) {
  size_t rank = perm.size();
  std::vector<int64_t> shape(rank), inStride(rank, 1);
  for (size_t i = rank; i-- > 1;)
    inStride[i - 1] = inStride[i] * x.shape[i];
  for (size_t i = 0; i < rank; ++i)
    shape[i] = x.shape[perm[i]];
  Tensor out(shape);
  std::vector<int64_t> source =
      indexMap(shape, [&](const std::vector<int64_t> &coord) {
        int64_t at = 0;
        for (size_t i = 0; i < rank; ++i)
          at += coord[i] * inStride[perm[i]];
        return at;
      });
  for (size_t flat = 0; flat < source.size(); ++flat)
    out.data[flat] = x.data[source[flat]];
  return out;
}

void dtfm::runtime::cpu::transposeBackward(const Tensor &dOut,
                                           const std::vector<int64_t> &perm,
                                           Tensor *dx) {
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[perm[i]] = static_cast<int64_t>(i);
  Tensor back = transpose(dOut, inverse);
  ensure(dx, back.shape);
  for (int64_t i = 0; i < back.numel(); ++i)
    dx->data[i] += back.data[i];
}
