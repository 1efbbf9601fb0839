//===- Kernels.cpp - CPU kernels of the dtfm ops, forward and backward ----===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Cpu/Kernels.h"

#include <cblas.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

using namespace dtfm::runtime::cpu;

void dtfm::runtime::cpu::gemm(const float *a, const float *b, float *c,
                              int64_t m, int64_t n, int64_t k, bool transposeA,
                              bool transposeB, bool accumulate) {
  cblas_sgemm(CblasRowMajor, transposeA ? CblasTrans : CblasNoTrans,
              transposeB ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a,
              transposeA ? m : k, b, transposeB ? k : n,
              accumulate ? 1.0f : 0.0f, c, n);
}

/// Makes `t` a zero tensor of `shape` unless it already has that shape
/// (gradients accumulate into caller-provided tensors).
static void ensure(Tensor *t, const std::vector<int64_t> &shape) {
  if (t && t->shape != shape)
    *t = Tensor(shape);
}

//===----------------------------------------------------------------------===//
// matmul, linear
//===----------------------------------------------------------------------===//

Tensor dtfm::runtime::cpu::matmul(const Tensor &lhs, const Tensor &rhs,
                                  bool transposeRhs) {
  int64_t k = lhs.dim(-1), m = lhs.dim(-2);
  int64_t n = transposeRhs ? rhs.dim(-2) : rhs.dim(-1);
  int64_t batch = lhs.numel() / (m * k);
  bool shared = rhs.shape.size() == 2;
  std::vector<int64_t> shape(lhs.shape.begin(), lhs.shape.end() - 1);
  shape.push_back(n);
  Tensor out(shape);
  if (shared) // one GEMM over all rows
    gemm(lhs.data.data(), rhs.data.data(), out.data.data(), batch * m, n, k,
         false, transposeRhs, false);
  else
    for (int64_t i = 0; i < batch; ++i)
      gemm(lhs.data.data() + i * m * k, rhs.data.data() + i * k * n,
           out.data.data() + i * m * n, m, n, k, false, transposeRhs, false);
  return out;
}

void dtfm::runtime::cpu::matmulBackward(const Tensor &lhs, const Tensor &rhs,
                                        bool transposeRhs, const Tensor &dOut,
                                        Tensor *dLhs, Tensor *dRhs) {
  int64_t k = lhs.dim(-1), m = lhs.dim(-2);
  int64_t n = transposeRhs ? rhs.dim(-2) : rhs.dim(-1);
  int64_t batch = lhs.numel() / (m * k);
  bool shared = rhs.shape.size() == 2;
  ensure(dLhs, lhs.shape);
  ensure(dRhs, rhs.shape);
  int64_t rows = shared ? batch * m : m;
  int64_t steps = shared ? 1 : batch;
  for (int64_t i = 0; i < steps; ++i) {
    const float *a = lhs.data.data() + i * m * k;
    const float *b = rhs.data.data() + (shared ? 0 : i * k * n);
    const float *g = dOut.data.data() + i * m * n;
    // dA = dC * B^T (B [K,N]) or dC * B (B [N,K]).
    if (dLhs)
      gemm(g, b, dLhs->data.data() + i * m * k, rows, k, n, false,
           !transposeRhs, true);
    // dB = A^T * dC [K,N], or dC^T * A [N,K].
    if (dRhs) {
      float *db = dRhs->data.data() + (shared ? 0 : i * k * n);
      if (transposeRhs)
        gemm(g, a, db, n, k, rows, true, false, true);
      else
        gemm(a, g, db, k, n, rows, true, false, true);
    }
  }
}

Tensor dtfm::runtime::cpu::linear(const Tensor &x, const Tensor &w,
                                  const Tensor *bias) {
  int64_t k = x.dim(-1), n = w.dim(1), rows = x.numel() / k;
  std::vector<int64_t> shape(x.shape.begin(), x.shape.end() - 1);
  shape.push_back(n);
  Tensor out(shape);
  gemm(x.data.data(), w.data.data(), out.data.data(), rows, n, k, false,
       false, false);
  if (bias)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j)
        out.data[r * n + j] += bias->data[j];
  return out;
}

void dtfm::runtime::cpu::linearBackward(const Tensor &x, const Tensor &w,
                                        const Tensor &dOut, Tensor *dx,
                                        Tensor *dw, Tensor *dBias) {
  int64_t k = x.dim(-1), n = w.dim(1), rows = x.numel() / k;
  ensure(dx, x.shape);
  ensure(dw, w.shape);
  ensure(dBias, {n});
  if (dx)
    gemm(dOut.data.data(), w.data.data(), dx->data.data(), rows, k, n, false,
         true, true);
  if (dw)
    gemm(x.data.data(), dOut.data.data(), dw->data.data(), k, n, rows, true,
         false, true);
  if (dBias)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j)
        dBias->data[j] += dOut.data[r * n + j];
}

//===----------------------------------------------------------------------===//
// add (broadcasting)
//===----------------------------------------------------------------------===//

/// Index into a broadcast operand for each element of the result.
static std::vector<int64_t> broadcastIndex(const std::vector<int64_t> &out,
                                           const std::vector<int64_t> &in) {
  int64_t total = 1;
  for (int64_t d : out)
    total *= d;
  std::vector<int64_t> index(total);
  size_t rank = out.size(), offset = rank - in.size();
  std::vector<int64_t> coord(rank, 0);
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t pos = 0;
    for (size_t d = offset; d < rank; ++d)
      pos = pos * in[d - offset] + (in[d - offset] == 1 ? 0 : coord[d]);
    index[flat] = pos;
    for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
      if (++coord[d] < out[d])
        break;
      coord[d] = 0;
    }
  }
  return index;
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

Tensor dtfm::runtime::cpu::add(const Tensor &a, const Tensor &b) {
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

void dtfm::runtime::cpu::addBackward(const Tensor &dOut, Tensor *da,
                                     Tensor *db) {
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

namespace {

/// out[i] = f(a[ia[i]], b[ib[i]]) over the broadcast shape.
template <typename F>
Tensor broadcastBinary(const Tensor &a, const Tensor &b, F f) {
  Tensor out(broadcastShape(a.shape, b.shape));
  std::vector<int64_t> ia = broadcastIndex(out.shape, a.shape);
  std::vector<int64_t> ib = broadcastIndex(out.shape, b.shape);
  for (int64_t i = 0; i < out.numel(); ++i)
    out.data[i] = f(a.data[ia[i]], b.data[ib[i]]);
  return out;
}

/// da[ia[i]] += dOut[i] * ga(a, b); db[ib[i]] += dOut[i] * gb(a, b).
template <typename GA, typename GB>
void broadcastBinaryBackward(const Tensor &a, const Tensor &b,
                             const Tensor &dOut, Tensor *da, Tensor *db, GA ga,
                             GB gb) {
  std::vector<int64_t> ia = broadcastIndex(dOut.shape, a.shape);
  std::vector<int64_t> ib = broadcastIndex(dOut.shape, b.shape);
  if (da)
    ensure(da, a.shape);
  if (db)
    ensure(db, b.shape);
  for (int64_t i = 0; i < dOut.numel(); ++i) {
    float x = a.data[ia[i]], y = b.data[ib[i]], g = dOut.data[i];
    if (da)
      da->data[ia[i]] += g * ga(x, y);
    if (db)
      db->data[ib[i]] += g * gb(x, y);
  }
}

} // namespace

Tensor dtfm::runtime::cpu::elementwiseMath(const Tensor &x,
                                           const std::string &kind) {
  Tensor out(x.shape);
  for (int64_t i = 0; i < x.numel(); ++i) {
    float v = x.data[i];
    out.data[i] = kind == "sqrt"   ? std::sqrt(v)
                  : kind == "tanh" ? std::tanh(v)
                  : kind == "erf"  ? std::erf(v)
                                   : std::exp(v);
  }
  return out;
}

void dtfm::runtime::cpu::elementwiseMathBackward(const Tensor &x,
                                                 const std::string &kind,
                                                 const Tensor &dOut,
                                                 Tensor *dx) {
  ensure(dx, x.shape);
  const float twoOverSqrtPi = 1.12837917f;
  for (int64_t i = 0; i < x.numel(); ++i) {
    float v = x.data[i], d;
    if (kind == "sqrt")
      d = 0.5f / std::sqrt(v);
    else if (kind == "tanh") {
      float t = std::tanh(v);
      d = 1 - t * t;
    } else if (kind == "erf")
      d = twoOverSqrtPi * std::exp(-v * v);
    else
      d = std::exp(v);
    dx->data[i] += dOut.data[i] * d;
  }
}

Tensor dtfm::runtime::cpu::power(const Tensor &x, double exponent) {
  Tensor out(x.shape);
  for (int64_t i = 0; i < x.numel(); ++i)
    out.data[i] = static_cast<float>(std::pow(x.data[i], exponent));
  return out;
}

void dtfm::runtime::cpu::powerBackward(const Tensor &x, double exponent,
                                       const Tensor &dOut, Tensor *dx) {
  ensure(dx, x.shape);
  for (int64_t i = 0; i < x.numel(); ++i)
    dx->data[i] += static_cast<float>(
        dOut.data[i] * exponent * std::pow(x.data[i], exponent - 1));
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
  int64_t total = 1;
  for (int64_t d : shape)
    total *= d;
  std::vector<int64_t> index(total), coord(rank, 0);
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t at = 0;
    for (int64_t i = 0; i < rank; ++i)
      at = at * kept[i] + (reduced[i] ? 0 : coord[i]);
    index[flat] = at;
    for (int64_t d = rank; d-- > 0;) {
      if (++coord[d] < shape[d])
        break;
      coord[d] = 0;
    }
  }
  return index;
}

} // namespace

Tensor dtfm::runtime::cpu::reduceMean(const Tensor &x,
                                      const std::vector<int64_t> &axes,
                                      bool keepdims) {
  int64_t rank = static_cast<int64_t>(x.shape.size()), count = 1;
  std::vector<int64_t> index = reducedIndex(x.shape, axes, count);
  std::vector<bool> reduced(rank, false);
  for (int64_t a : axes)
    reduced[a < 0 ? a + rank : a] = true;
  std::vector<int64_t> shape;
  for (int64_t i = 0; i < rank; ++i)
    if (!reduced[i])
      shape.push_back(x.shape[i]);
    else if (keepdims)
      shape.push_back(1);
  Tensor out(shape);
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
  int64_t total = 1;
  for (int64_t d : outShape)
    total *= d;
  std::vector<int64_t> index(total), coord(rank, 0);
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t at = 0;
    for (size_t i = 0; i < rank; ++i)
      at += (starts[i] + coord[i] * steps[i]) * stride[i];
    index[flat] = at;
    for (size_t d = rank; d-- > 0;) {
      if (++coord[d] < outShape[d])
        break;
      coord[d] = 0;
    }
  }
  return index;
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
                                int64_t axis, Tensor &out,
                                std::string &error) {
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
  Tensor out(broadcastShape(broadcastShape(condition.shape, a.shape),
                            b.shape));
  std::vector<int64_t> ic = broadcastIndex(out.shape, condition.shape);
  std::vector<int64_t> ia = broadcastIndex(out.shape, a.shape);
  std::vector<int64_t> ib = broadcastIndex(out.shape, b.shape);
  for (int64_t i = 0; i < out.numel(); ++i)
    out.data[i] =
        condition.data[ic[i]] != 0 ? a.data[ia[i]] : b.data[ib[i]];
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
  std::vector<int64_t> coord(rank, 0);
  for (int64_t flat = 0; flat < out.numel(); ++flat) {
    int64_t at = 0;
    for (size_t i = 0; i < rank; ++i)
      at += coord[i] * inStride[perm[i]];
    out.data[flat] = x.data[at];
    for (size_t d = rank; d-- > 0;) {
      if (++coord[d] < shape[d])
        break;
      coord[d] = 0;
    }
  }
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

Tensor dtfm::runtime::cpu::sub(const Tensor &a, const Tensor &b) {
  return broadcastBinary(a, b, [](float x, float y) { return x - y; });
}
Tensor dtfm::runtime::cpu::mul(const Tensor &a, const Tensor &b) {
  return broadcastBinary(a, b, [](float x, float y) { return x * y; });
}
Tensor dtfm::runtime::cpu::div(const Tensor &a, const Tensor &b) {
  return broadcastBinary(a, b, [](float x, float y) { return x / y; });
}
void dtfm::runtime::cpu::subBackward(const Tensor &a, const Tensor &b,
                                     const Tensor &dOut, Tensor *da,
                                     Tensor *db) {
  broadcastBinaryBackward(
      a, b, dOut, da, db, [](float, float) { return 1.0f; },
      [](float, float) { return -1.0f; });
}
void dtfm::runtime::cpu::mulBackward(const Tensor &a, const Tensor &b,
                                     const Tensor &dOut, Tensor *da,
                                     Tensor *db) {
  broadcastBinaryBackward(
      a, b, dOut, da, db, [](float, float y) { return y; },
      [](float x, float) { return x; });
}
void dtfm::runtime::cpu::divBackward(const Tensor &a, const Tensor &b,
                                     const Tensor &dOut, Tensor *da,
                                     Tensor *db) {
  broadcastBinaryBackward(
      a, b, dOut, da, db, [](float, float y) { return 1.0f / y; },
      [](float x, float y) { return -x / (y * y); });
}

//===----------------------------------------------------------------------===//
// layernorm, gelu, relu, softmax
//===----------------------------------------------------------------------===//

Tensor dtfm::runtime::cpu::layerNorm(const Tensor &x, const Tensor &gamma,
                                     const Tensor &beta, double epsilon,
                                     std::vector<float> &mean,
                                     std::vector<float> &rstd) {
  int64_t d = x.dim(-1), rows = x.numel() / d;
  Tensor out(x.shape);
  mean.assign(rows, 0);
  rstd.assign(rows, 0);
  for (int64_t r = 0; r < rows; ++r) {
    const float *in = x.data.data() + r * d;
    double m = 0, v = 0;
    for (int64_t j = 0; j < d; ++j)
      m += in[j];
    m /= d;
    for (int64_t j = 0; j < d; ++j)
      v += (in[j] - m) * (in[j] - m);
    v /= d;
    double s = 1.0 / std::sqrt(v + epsilon);
    mean[r] = static_cast<float>(m);
    rstd[r] = static_cast<float>(s);
    for (int64_t j = 0; j < d; ++j)
      out.data[r * d + j] =
          static_cast<float>((in[j] - m) * s) * gamma.data[j] + beta.data[j];
  }
  return out;
}

void dtfm::runtime::cpu::layerNormBackward(
    const Tensor &x, const Tensor &gamma, const std::vector<float> &mean,
    const std::vector<float> &rstd, const Tensor &dOut, Tensor *dx,
    Tensor *dGamma, Tensor *dBeta) {
  int64_t d = x.dim(-1), rows = x.numel() / d;
  ensure(dx, x.shape);
  ensure(dGamma, gamma.shape);
  ensure(dBeta, gamma.shape);
  for (int64_t r = 0; r < rows; ++r) {
    const float *in = x.data.data() + r * d;
    const float *g = dOut.data.data() + r * d;
    double sumDy = 0, sumDyXhat = 0;
    for (int64_t j = 0; j < d; ++j) {
      double xhat = (in[j] - mean[r]) * rstd[r];
      double dy = g[j] * gamma.data[j];
      sumDy += dy;
      sumDyXhat += dy * xhat;
      if (dGamma)
        dGamma->data[j] += static_cast<float>(g[j] * xhat);
      if (dBeta)
        dBeta->data[j] += g[j];
    }
    if (dx)
      for (int64_t j = 0; j < d; ++j) {
        double xhat = (in[j] - mean[r]) * rstd[r];
        double dy = g[j] * gamma.data[j];
        dx->data[r * d + j] += static_cast<float>(
            rstd[r] * (dy - sumDy / d - xhat * sumDyXhat / d));
      }
  }
}

static const double kSqrt2OverPi = 0.7978845608028654;

Tensor dtfm::runtime::cpu::gelu(const Tensor &x, bool tanhApproximation) {
  Tensor out(x.shape);
  const float c = static_cast<float>(kSqrt2OverPi), r = 0.70710678f;
  int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) {
    float v = x.data[i];
    out.data[i] = tanhApproximation
                      ? 0.5f * v * (1 + std::tanh(c * (v + 0.044715f * v * v * v)))
                      : 0.5f * v * (1 + std::erf(v * r));
  }
  return out;
}

void dtfm::runtime::cpu::geluBackward(const Tensor &x, bool tanhApproximation,
                                      const Tensor &dOut, Tensor *dx) {
  ensure(dx, x.shape);
  const float c = static_cast<float>(kSqrt2OverPi), r = 0.70710678f,
              invSqrt2Pi = 0.39894228f;
  int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) {
    float v = x.data[i], grad;
    if (tanhApproximation) {
      float t = std::tanh(c * (v + 0.044715f * v * v * v));
      grad = 0.5f * (1 + t) +
             0.5f * v * (1 - t * t) * c * (1 + 3 * 0.044715f * v * v);
    } else {
      grad = 0.5f * (1 + std::erf(v * r)) +
             v * std::exp(-0.5f * v * v) * invSqrt2Pi;
    }
    dx->data[i] += grad * dOut.data[i];
  }
}

Tensor dtfm::runtime::cpu::relu(const Tensor &x) {
  Tensor out(x.shape);
  for (int64_t i = 0; i < x.numel(); ++i)
    out.data[i] = std::max(0.0f, x.data[i]);
  return out;
}

void dtfm::runtime::cpu::reluBackward(const Tensor &out, const Tensor &dOut,
                                      Tensor *dx) {
  ensure(dx, out.shape);
  for (int64_t i = 0; i < out.numel(); ++i)
    if (out.data[i] > 0)
      dx->data[i] += dOut.data[i];
}

Tensor dtfm::runtime::cpu::softmax(const Tensor &x) {
  int64_t d = x.dim(-1), rows = x.numel() / d;
  Tensor out(x.shape);
  for (int64_t r = 0; r < rows; ++r) {
    const float *in = x.data.data() + r * d;
    float *o = out.data.data() + r * d;
    float peak = *std::max_element(in, in + d);
    double sum = 0;
    for (int64_t j = 0; j < d; ++j)
      sum += (o[j] = std::exp(in[j] - peak));
    for (int64_t j = 0; j < d; ++j)
      o[j] = static_cast<float>(o[j] / sum);
  }
  return out;
}

void dtfm::runtime::cpu::softmaxBackward(const Tensor &out, const Tensor &dOut,
                                         Tensor *dx) {
  int64_t d = out.dim(-1), rows = out.numel() / d;
  ensure(dx, out.shape);
  for (int64_t r = 0; r < rows; ++r) {
    const float *y = out.data.data() + r * d;
    const float *g = dOut.data.data() + r * d;
    double dot = 0;
    for (int64_t j = 0; j < d; ++j)
      dot += y[j] * g[j];
    for (int64_t j = 0; j < d; ++j)
      dx->data[r * d + j] += static_cast<float>(y[j] * (g[j] - dot));
  }
}

//===----------------------------------------------------------------------===//
// causal attention
//===----------------------------------------------------------------------===//

// Attention per (batch row, head) with sgemm on the head's strided slice
// of Q, K, V (leading dimension h): S = Q K^T scale, causal softmax, O = P V.
Tensor dtfm::runtime::cpu::causalAttention(const Tensor &q, const Tensor &k,
                                           const Tensor &v, int64_t heads,
                                           Tensor &probs) {
  int64_t b = q.dim(0), s = q.dim(1), h = q.dim(2), dh = h / heads;
  float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dh)));
  Tensor out(q.shape);
  probs = Tensor({b, heads, s, s});
  for (int64_t n = 0; n < b; ++n)
    for (int64_t hd = 0; hd < heads; ++hd) {
      float *p = probs.data.data() + ((n * heads + hd) * s) * s;
      size_t offset = static_cast<size_t>(n * s * h + hd * dh);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s, s, dh, scale,
                  q.data.data() + offset, h, k.data.data() + offset, h, 0.0f,
                  p, s);
      for (int64_t i = 0; i < s; ++i) {
        float *row = p + i * s;
        float peak = *std::max_element(row, row + i + 1);
        float sum = 0;
        for (int64_t j = 0; j <= i; ++j)
          sum += (row[j] = std::exp(row[j] - peak));
        float inverse = 1.0f / sum;
        for (int64_t j = 0; j <= i; ++j)
          row[j] *= inverse;
        std::fill(row + i + 1, row + s, 0.0f); // masked
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, dh, s, 1.0f, p,
                  s, v.data.data() + offset, h, 0.0f,
                  out.data.data() + offset, h);
    }
  return out;
}

void dtfm::runtime::cpu::causalAttentionBackward(
    const Tensor &q, const Tensor &k, const Tensor &v, int64_t heads,
    const Tensor &probs, const Tensor &dOut, Tensor *dq, Tensor *dk,
    Tensor *dv) {
  int64_t b = q.dim(0), s = q.dim(1), h = q.dim(2), dh = h / heads;
  float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dh)));
  ensure(dq, q.shape);
  ensure(dk, k.shape);
  ensure(dv, v.shape);
  std::vector<float> dp(static_cast<size_t>(s * s));
  for (int64_t n = 0; n < b; ++n)
    for (int64_t hd = 0; hd < heads; ++hd) {
      const float *p = probs.data.data() + ((n * heads + hd) * s) * s;
      size_t offset = static_cast<size_t>(n * s * h + hd * dh);
      const float *go = dOut.data.data() + offset;
      // dV += P^T dO; dP = dO V^T.
      if (dv)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s, dh, s, 1.0f, p,
                    s, go, h, 1.0f, dv->data.data() + offset, h);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s, s, dh, 1.0f, go,
                  h, v.data.data() + offset, h, 0.0f, dp.data(), s);
      // dS = P (dP - rowsum(P dP)) scale, zero above the diagonal.
      for (int64_t i = 0; i < s; ++i) {
        const float *pi = p + i * s;
        float *di = dp.data() + i * s;
        float dot = 0;
        for (int64_t j = 0; j <= i; ++j)
          dot += pi[j] * di[j];
        for (int64_t j = 0; j <= i; ++j)
          di[j] = pi[j] * (di[j] - dot) * scale;
        std::fill(di + i + 1, di + s, 0.0f);
      }
      // dQ += dS K; dK += dS^T Q.
      if (dq)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, dh, s, 1.0f,
                    dp.data(), s, k.data.data() + offset, h, 1.0f,
                    dq->data.data() + offset, h);
      if (dk)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s, dh, s, 1.0f,
                    dp.data(), s, q.data.data() + offset, h, 1.0f,
                    dk->data.data() + offset, h);
    }
}

//===----------------------------------------------------------------------===//
// embedding, cross-entropy
//===----------------------------------------------------------------------===//

Tensor dtfm::runtime::cpu::embedding(const Tensor &indices,
                                     const Tensor &table) {
  int64_t h = table.dim(1);
  std::vector<int64_t> shape = indices.shape;
  shape.push_back(h);
  Tensor out(shape);
  for (int64_t i = 0; i < indices.numel(); ++i) {
    int64_t row = static_cast<int64_t>(indices.data[i]);
    std::copy(table.data.begin() + row * h, table.data.begin() + (row + 1) * h,
              out.data.begin() + i * h);
  }
  return out;
}

void dtfm::runtime::cpu::embeddingBackward(const Tensor &indices,
                                           const Tensor &dOut,
                                           Tensor *dTable) {
  if (!dTable)
    return;
  int64_t h = dTable->dim(1);
  for (int64_t i = 0; i < indices.numel(); ++i) {
    int64_t row = static_cast<int64_t>(indices.data[i]);
    for (int64_t c = 0; c < h; ++c)
      dTable->data[row * h + c] += dOut.data[i * h + c];
  }
}

float dtfm::runtime::cpu::crossEntropy(const Tensor &logits,
                                       const Tensor &labels, Tensor &probs) {
  probs = softmax(logits);
  int64_t v = logits.dim(-1), rows = logits.numel() / v;
  double loss = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t label = static_cast<int64_t>(labels.data[r]);
    loss -= std::log(std::max(probs.data[r * v + label], 1e-30f));
  }
  return static_cast<float>(loss / rows);
}

void dtfm::runtime::cpu::crossEntropyBackward(const Tensor &probs,
                                              const Tensor &labels,
                                              float dLoss, Tensor *dLogits) {
  int64_t v = probs.dim(-1), rows = probs.numel() / v;
  ensure(dLogits, probs.shape);
  float scale = dLoss / static_cast<float>(rows);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t label = static_cast<int64_t>(labels.data[r]);
    for (int64_t j = 0; j < v; ++j)
      dLogits->data[r * v + j] +=
          scale * (probs.data[r * v + j] - (j == label ? 1.0f : 0.0f));
  }
}

//===----------------------------------------------------------------------===//
// optimizers
//===----------------------------------------------------------------------===//

void dtfm::runtime::cpu::sgdStep(Tensor &param, const Tensor &grad,
                                 Tensor &velocity, double lr, double momentum,
                                 double weightDecay) {
  ensure(&velocity, param.shape);
  for (int64_t i = 0; i < param.numel(); ++i) {
    double g = grad.data[i] + weightDecay * param.data[i];
    double vel = momentum * velocity.data[i] + g;
    velocity.data[i] = static_cast<float>(vel);
    param.data[i] -= static_cast<float>(lr * vel);
  }
}

void dtfm::runtime::cpu::adamwStep(Tensor &param, const Tensor &grad,
                                   Tensor &m, Tensor &v, int64_t step,
                                   double lr, double beta1, double beta2,
                                   double epsilon, double weightDecay) {
  ensure(&m, param.shape);
  ensure(&v, param.shape);
  double c1 = 1 - std::pow(beta1, static_cast<double>(step));
  double c2 = 1 - std::pow(beta2, static_cast<double>(step));
  for (int64_t i = 0; i < param.numel(); ++i) {
    double g = grad.data[i];
    double mi = beta1 * m.data[i] + (1 - beta1) * g;
    double vi = beta2 * v.data[i] + (1 - beta2) * g * g;
    m.data[i] = static_cast<float>(mi);
    v.data[i] = static_cast<float>(vi);
    double p = param.data[i];
    p -= lr * weightDecay * p;
    p -= lr * (mi / c1) / (std::sqrt(vi / c2) + epsilon);
    param.data[i] = static_cast<float>(p);
  }
}

//===----------------------------------------------------------------------===//
// convolution (im2col + sgemm), batchnorm, pooling
//===----------------------------------------------------------------------===//

namespace {
struct ConvShape {
  int64_t n, c, h, w, o, kh, kw, ho, wo, cg, og;
};

ConvShape convShape(const Tensor &x, const Tensor &w, const Window &win,
                    int64_t groups) {
  ConvShape s;
  s.n = x.dim(0), s.c = x.dim(1), s.h = x.dim(2), s.w = x.dim(3);
  s.o = w.dim(0), s.kh = w.dim(2), s.kw = w.dim(3);
  s.ho = (s.h + win.padTop + win.padBottom - win.dilationH * (s.kh - 1) - 1) /
             win.strideH +
         1;
  s.wo = (s.w + win.padLeft + win.padRight - win.dilationW * (s.kw - 1) - 1) /
             win.strideW +
         1;
  s.cg = s.c / groups;
  s.og = s.o / groups;
  return s;
}

/// Column matrix [cg*kh*kw, ho*wo] of image n, group g (zeros for padding).
void im2col(const Tensor &x, const ConvShape &s, const Window &win, int64_t n,
            int64_t g, std::vector<float> &col) {
  col.assign(s.cg * s.kh * s.kw * s.ho * s.wo, 0.0f);
  for (int64_t c = 0; c < s.cg; ++c)
    for (int64_t i = 0; i < s.kh; ++i)
      for (int64_t j = 0; j < s.kw; ++j) {
        float *row = col.data() + ((c * s.kh + i) * s.kw + j) * s.ho * s.wo;
        const float *image =
            x.data.data() + ((n * s.c) + g * s.cg + c) * s.h * s.w;
        for (int64_t y = 0; y < s.ho; ++y) {
          int64_t iy = y * win.strideH - win.padTop + i * win.dilationH;
          if (iy < 0 || iy >= s.h)
            continue;
          for (int64_t xo = 0; xo < s.wo; ++xo) {
            int64_t ix = xo * win.strideW - win.padLeft + j * win.dilationW;
            if (ix >= 0 && ix < s.w)
              row[y * s.wo + xo] = image[iy * s.w + ix];
          }
        }
      }
}

/// Adds a column matrix back into image n, group g of `dx`.
void col2im(const std::vector<float> &col, const ConvShape &s,
            const Window &win, int64_t n, int64_t g, Tensor &dx) {
  for (int64_t c = 0; c < s.cg; ++c)
    for (int64_t i = 0; i < s.kh; ++i)
      for (int64_t j = 0; j < s.kw; ++j) {
        const float *row =
            col.data() + ((c * s.kh + i) * s.kw + j) * s.ho * s.wo;
        float *image = dx.data.data() + ((n * s.c) + g * s.cg + c) * s.h * s.w;
        for (int64_t y = 0; y < s.ho; ++y) {
          int64_t iy = y * win.strideH - win.padTop + i * win.dilationH;
          if (iy < 0 || iy >= s.h)
            continue;
          for (int64_t xo = 0; xo < s.wo; ++xo) {
            int64_t ix = xo * win.strideW - win.padLeft + j * win.dilationW;
            if (ix >= 0 && ix < s.w)
              image[iy * s.w + ix] += row[y * s.wo + xo];
          }
        }
      }
}
} // namespace

Tensor dtfm::runtime::cpu::conv2d(const Tensor &x, const Tensor &w,
                                  const Tensor *bias, const Window &window,
                                  int64_t groups) {
  ConvShape s = convShape(x, w, window, groups);
  Tensor out({s.n, s.o, s.ho, s.wo});
  std::vector<float> col;
  int64_t k = s.cg * s.kh * s.kw, spatial = s.ho * s.wo;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t g = 0; g < groups; ++g) {
      im2col(x, s, window, n, g, col);
      gemm(w.data.data() + g * s.og * k, col.data(),
           out.data.data() + (n * s.o + g * s.og) * spatial, s.og, spatial, k,
           false, false, false);
    }
  if (bias)
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t o = 0; o < s.o; ++o)
        for (int64_t p = 0; p < spatial; ++p)
          out.data[(n * s.o + o) * spatial + p] += bias->data[o];
  return out;
}

void dtfm::runtime::cpu::conv2dBackward(const Tensor &x, const Tensor &w,
                                        const Window &window, int64_t groups,
                                        const Tensor &dOut, Tensor *dx,
                                        Tensor *dw, Tensor *dBias) {
  ConvShape s = convShape(x, w, window, groups);
  ensure(dx, x.shape);
  ensure(dw, w.shape);
  ensure(dBias, {s.o});
  std::vector<float> col, dcol;
  int64_t k = s.cg * s.kh * s.kw, spatial = s.ho * s.wo;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t g = 0; g < groups; ++g) {
      const float *go = dOut.data.data() + (n * s.o + g * s.og) * spatial;
      if (dw) {
        im2col(x, s, window, n, g, col);
        // dW [og, k] += dOut [og, spatial] * col^T [spatial, k]
        gemm(go, col.data(), dw->data.data() + g * s.og * k, s.og, k, spatial,
             false, true, true);
      }
      if (dx) {
        dcol.assign(k * spatial, 0.0f);
        // dcol [k, spatial] = W^T [k, og] * dOut [og, spatial]
        gemm(w.data.data() + g * s.og * k, go, dcol.data(), k, spatial, s.og,
             true, false, false);
        col2im(dcol, s, window, n, g, *dx);
      }
    }
  if (dBias)
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t o = 0; o < s.o; ++o)
        for (int64_t p = 0; p < spatial; ++p)
          dBias->data[o] += dOut.data[(n * s.o + o) * spatial + p];
}

/// Per-channel mean and biased variance over every dimension but 1.
static void channelStats(const Tensor &x, std::vector<double> &mean,
                         std::vector<double> &var) {
  int64_t n = x.dim(0), c = x.dim(1), inner = x.numel() / (n * c);
  mean.assign(c, 0);
  var.assign(c, 0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < inner; ++i)
        mean[ch] += x.data[(b * c + ch) * inner + i];
  for (double &m : mean)
    m /= static_cast<double>(n * inner);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < inner; ++i) {
        double d = x.data[(b * c + ch) * inner + i] - mean[ch];
        var[ch] += d * d;
      }
  for (double &v : var)
    v /= static_cast<double>(n * inner);
}

Tensor dtfm::runtime::cpu::batchNorm(const Tensor &x, const Tensor &gamma,
                                     const Tensor &beta, double epsilon,
                                     Tensor *runningMean, Tensor *runningVar,
                                     double momentum) {
  int64_t n = x.dim(0), c = x.dim(1), inner = x.numel() / (n * c);
  std::vector<double> mean, var;
  channelStats(x, mean, var);
  Tensor out(x.shape);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      double rstd = 1.0 / std::sqrt(var[ch] + epsilon);
      for (int64_t i = 0; i < inner; ++i) {
        int64_t at = (b * c + ch) * inner + i;
        out.data[at] = static_cast<float>((x.data[at] - mean[ch]) * rstd *
                                              gamma.data[ch] +
                                          beta.data[ch]);
      }
    }
  double count = static_cast<double>(n * inner);
  for (int64_t ch = 0; ch < c; ++ch) {
    if (runningMean)
      runningMean->data[ch] = static_cast<float>(
          (1 - momentum) * runningMean->data[ch] + momentum * mean[ch]);
    if (runningVar) // unbiased, as PyTorch keeps it
      runningVar->data[ch] = static_cast<float>(
          (1 - momentum) * runningVar->data[ch] +
          momentum * var[ch] * count / std::max(1.0, count - 1));
  }
  return out;
}

void dtfm::runtime::cpu::batchNormBackward(const Tensor &x,
                                           const Tensor &gamma,
                                           double epsilon, const Tensor &dOut,
                                           Tensor *dx, Tensor *dGamma,
                                           Tensor *dBeta) {
  int64_t n = x.dim(0), c = x.dim(1), inner = x.numel() / (n * c);
  double count = static_cast<double>(n * inner);
  std::vector<double> mean, var;
  channelStats(x, mean, var);
  ensure(dx, x.shape);
  ensure(dGamma, gamma.shape);
  ensure(dBeta, gamma.shape);
  for (int64_t ch = 0; ch < c; ++ch) {
    double rstd = 1.0 / std::sqrt(var[ch] + epsilon);
    double sumDy = 0, sumDyXhat = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t at = (b * c + ch) * inner + i;
        double xhat = (x.data[at] - mean[ch]) * rstd;
        sumDy += dOut.data[at];
        sumDyXhat += dOut.data[at] * xhat;
      }
    if (dGamma)
      dGamma->data[ch] += static_cast<float>(sumDyXhat);
    if (dBeta)
      dBeta->data[ch] += static_cast<float>(sumDy);
    if (dx)
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < inner; ++i) {
          int64_t at = (b * c + ch) * inner + i;
          double xhat = (x.data[at] - mean[ch]) * rstd;
          dx->data[at] += static_cast<float>(
              gamma.data[ch] * rstd *
              (dOut.data[at] - sumDy / count - xhat * sumDyXhat / count));
        }
  }
}

/// Output size of a pooling window along one dimension.
static int64_t pooledSize(int64_t in, int64_t k, int64_t stride, int64_t a,
                          int64_t b) {
  return (in + a + b - k) / stride + 1;
}

Tensor dtfm::runtime::cpu::maxPool2d(const Tensor &x, int64_t kh, int64_t kw,
                                     const Window &win) {
  int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  int64_t ho = pooledSize(h, kh, win.strideH, win.padTop, win.padBottom);
  int64_t wo = pooledSize(w, kw, win.strideW, win.padLeft, win.padRight);
  Tensor out({n, c, ho, wo});
  for (int64_t p = 0; p < n * c; ++p)
    for (int64_t y = 0; y < ho; ++y)
      for (int64_t xo = 0; xo < wo; ++xo) {
        float best = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t j = 0; j < kw; ++j) {
            int64_t iy = y * win.strideH - win.padTop + i;
            int64_t ix = xo * win.strideW - win.padLeft + j;
            if (iy >= 0 && iy < h && ix >= 0 && ix < w)
              best = std::max(best, x.data[(p * h + iy) * w + ix]);
          }
        out.data[(p * ho + y) * wo + xo] = best;
      }
  return out;
}

void dtfm::runtime::cpu::maxPool2dBackward(const Tensor &x, int64_t kh,
                                           int64_t kw, const Window &win,
                                           const Tensor &dOut, Tensor *dx) {
  int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  int64_t ho = dOut.dim(2), wo = dOut.dim(3);
  ensure(dx, x.shape);
  for (int64_t p = 0; p < n * c; ++p)
    for (int64_t y = 0; y < ho; ++y)
      for (int64_t xo = 0; xo < wo; ++xo) {
        float best = -std::numeric_limits<float>::infinity();
        int64_t arg = -1;
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t j = 0; j < kw; ++j) {
            int64_t iy = y * win.strideH - win.padTop + i;
            int64_t ix = xo * win.strideW - win.padLeft + j;
            if (iy >= 0 && iy < h && ix >= 0 && ix < w &&
                x.data[(p * h + iy) * w + ix] > best) {
              best = x.data[(p * h + iy) * w + ix];
              arg = (p * h + iy) * w + ix;
            }
          }
        if (arg >= 0)
          dx->data[arg] += dOut.data[(p * ho + y) * wo + xo];
      }
}

Tensor dtfm::runtime::cpu::avgPool2d(const Tensor &x, int64_t kh, int64_t kw,
                                     const Window &win) {
  int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  int64_t ho = pooledSize(h, kh, win.strideH, win.padTop, win.padBottom);
  int64_t wo = pooledSize(w, kw, win.strideW, win.padLeft, win.padRight);
  Tensor out({n, c, ho, wo});
  for (int64_t p = 0; p < n * c; ++p)
    for (int64_t y = 0; y < ho; ++y)
      for (int64_t xo = 0; xo < wo; ++xo) {
        double sum = 0;
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t j = 0; j < kw; ++j) {
            int64_t iy = y * win.strideH - win.padTop + i;
            int64_t ix = xo * win.strideW - win.padLeft + j;
            if (iy >= 0 && iy < h && ix >= 0 && ix < w)
              sum += x.data[(p * h + iy) * w + ix];
          }
        out.data[(p * ho + y) * wo + xo] = static_cast<float>(sum / (kh * kw));
      }
  return out;
}

void dtfm::runtime::cpu::avgPool2dBackward(const Tensor &x, int64_t kh,
                                           int64_t kw, const Window &win,
                                           const Tensor &dOut, Tensor *dx) {
  int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  int64_t ho = dOut.dim(2), wo = dOut.dim(3);
  ensure(dx, x.shape);
  for (int64_t p = 0; p < n * c; ++p)
    for (int64_t y = 0; y < ho; ++y)
      for (int64_t xo = 0; xo < wo; ++xo) {
        float share = dOut.data[(p * ho + y) * wo + xo] / (kh * kw);
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t j = 0; j < kw; ++j) {
            int64_t iy = y * win.strideH - win.padTop + i;
            int64_t ix = xo * win.strideW - win.padLeft + j;
            if (iy >= 0 && iy < h && ix >= 0 && ix < w)
              dx->data[(p * h + iy) * w + ix] += share;
          }
      }
}

Tensor dtfm::runtime::cpu::globalAvgPool(const Tensor &x) {
  int64_t n = x.dim(0), c = x.dim(1), inner = x.numel() / (n * c);
  std::vector<int64_t> shape{n, c};
  for (size_t d = 2; d < x.shape.size(); ++d)
    shape.push_back(1);
  Tensor out(shape);
  for (int64_t p = 0; p < n * c; ++p) {
    double sum = 0;
    for (int64_t i = 0; i < inner; ++i)
      sum += x.data[p * inner + i];
    out.data[p] = static_cast<float>(sum / inner);
  }
  return out;
}

void dtfm::runtime::cpu::globalAvgPoolBackward(const Tensor &x,
                                               const Tensor &dOut,
                                               Tensor *dx) {
  int64_t n = x.dim(0), c = x.dim(1), inner = x.numel() / (n * c);
  ensure(dx, x.shape);
  for (int64_t p = 0; p < n * c; ++p)
    for (int64_t i = 0; i < inner; ++i)
      dx->data[p * inner + i] += dOut.data[p] / inner;
}

void dtfm::runtime::cpu::topK(const Tensor &x, int64_t k, Tensor &values,
                              Tensor &indices) {
  int64_t n = x.numel();
  k = std::min(k, n);
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i)
    order[i] = i;
  auto larger = [&](int64_t a, int64_t b) {
    float ma = std::fabs(x.data[a]), mb = std::fabs(x.data[b]);
    return ma != mb ? ma > mb : a < b;
  };
  std::nth_element(order.begin(), order.begin() + k, order.end(), larger);
  std::sort(order.begin(), order.begin() + k);
  values = Tensor({k});
  indices = Tensor({k});
  for (int64_t i = 0; i < k; ++i) {
    values.data[i] = x.data[order[i]];
    indices.data[i] = static_cast<float>(order[i]);
  }
}

Tensor dtfm::runtime::cpu::scatterTopK(const Tensor &values,
                                       const Tensor &indices,
                                       const std::vector<int64_t> &shape) {
  Tensor out(shape);
  int64_t n = out.numel();
  for (int64_t i = 0; i < values.numel() && i < indices.numel(); ++i) {
    int64_t at = static_cast<int64_t>(indices.data[i]);
    if (at >= 0 && at < n)
      out.data[at] = values.data[i];
  }
  return out;
}
