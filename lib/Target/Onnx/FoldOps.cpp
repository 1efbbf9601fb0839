//===- FoldOps.cpp - The constant folder's evaluators ---------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// One evaluator per family of ONNX ops that PyTorch's exports compute shapes,
// masks and index tensors with: each checks its inputs (ranks, axes,
// indices, overflow) and bounds its result's size before making it.
//
//===----------------------------------------------------------------------===//

#include "FoldValue.h"

#include <algorithm>
#include <set>

using namespace mlir::dtfm::fold;

namespace {

std::vector<int64_t> stridesOf(const std::vector<int64_t> &dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * dims[i + 1];
  return strides;
}

/// NumPy broadcasting of several shapes; false when they do not broadcast.
bool broadcast(const std::vector<const std::vector<int64_t> *> &shapes,
               std::vector<int64_t> &out) {
  size_t rank = 0;
  for (const auto *s : shapes)
    rank = std::max(rank, s->size());
  out.assign(rank, 1);
  for (const auto *s : shapes)
    for (size_t i = 0; i < s->size(); ++i) {
      int64_t d = (*s)[s->size() - 1 - i];
      int64_t &o = out[rank - 1 - i];
      if (d == o || d == 1)
        continue;
      if (o != 1)
        return false;
      o = d;
    }
  return true;
}

/// The flat index into `dims` (broadcast to `to`) of flat index i of `to`.
int64_t broadcastIndex(int64_t i, const std::vector<int64_t> &to,
                       const std::vector<int64_t> &dims) {
  int64_t index = 0, stride = 1;
  for (int k = static_cast<int>(to.size()) - 1,
           j = static_cast<int>(dims.size()) - 1;
       k >= 0; --k, --j) {
    int64_t coordinate = i % to[k];
    i /= to[k];
    if (j >= 0) {
      if (dims[j] != 1)
        index += coordinate * stride;
      stride *= dims[j];
    }
  }
  return index;
}

int64_t normalizedAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

const onnx::AttributeProto *attribute(const onnx::NodeProto &node,
                                      const char *name) {
  for (const onnx::AttributeProto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t intAttribute(const onnx::NodeProto &node, const char *name,
                     int64_t fallback) {
  const onnx::AttributeProto *a = attribute(node, name);
  return a ? a->i() : fallback;
}

/// The shape of a value (Shape) or its element count (Size).
bool shapeOf(const FoldCall &call, Value &out, std::string &error) {
  const std::string &type = call.node.op_type();
  std::vector<int64_t> dims = call.dimsOf(0);
  out.kind = Value::Int;
  if (type == "Size") {
    int64_t n = 1;
    for (int64_t d : dims)
      n *= d;
    out.ints = {n};
    return true;
  }
  int64_t rank = static_cast<int64_t>(dims.size());
  int64_t start = normalizedAxis(intAttribute(call.node, "start", 0), rank);
  int64_t end = normalizedAxis(intAttribute(call.node, "end", rank), rank);
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  out.ints.assign(dims.begin() + start, dims.begin() + end);
  out.dims = {end - start};
  return true;
}

/// A tensor of one value.
bool constantOfShape(const FoldCall &call, Value &out, std::string &error) {
  const Value *shape = call.need(0, error);
  if (!shape)
    return false;
  out.dims = shape->ints;
  if (!call.sized(out.dims, error))
    return false;
  out.kind = Value::Float;
  double fill = 0;
  if (const onnx::AttributeProto *a = attribute(call.node, "value")) {
    Value v;
    if (!decode(a->t(), v, error)) {
      error = "its value " + error;
      return false;
    }
    if (v.numel() != 1)
      return fail(error, "its value is not one element");
    out.kind = v.kind;
    fill = v.at(0);
  }
  out.resize(out.numel());
  for (int64_t i = 0; i < out.numel(); ++i)
    out.set(i, fill);
  return true;
}

/// Start, start + delta, ... up to limit.
bool range(const FoldCall &call, Value &out, std::string &error) {
  const Value *start = call.need(0, error), *limit = call.need(1, error),
              *delta = call.need(2, error);
  if (!start || !limit || !delta)
    return false;
  if (start->numel() != 1 || limit->numel() != 1 || delta->numel() != 1)
    return fail(error, "start, limit and delta must be scalars");
  if (start->kind != Value::Float && limit->kind != Value::Float &&
      delta->kind != Value::Float) { // exact in int64
    int64_t s = start->ints[0], l = limit->ints[0], d = delta->ints[0];
    int64_t span = 0;
    if (d == 0 || __builtin_sub_overflow(d > 0 ? l : s, d > 0 ? s : l, &span))
      return fail(error, "a zero delta or a span beyond int64");
    uint64_t step =
        d > 0 ? static_cast<uint64_t>(d) : 0 - static_cast<uint64_t>(d);
    int64_t count =
        span > 0
            ? static_cast<int64_t>((static_cast<uint64_t>(span) - 1) / step + 1)
            : 0;
    if (count > call.maxElements)
      return fail(error, "a result of more than " +
                             std::to_string(call.maxElements) + " elements");
    out.kind = Value::Int;
    out.dims = {count};
    out.ints.resize(count);
    for (int64_t i = 0; i < count; ++i) // within [start, limit): no overflow
      out.ints[i] = static_cast<int64_t>(static_cast<uint64_t>(s) +
                                         static_cast<uint64_t>(i) *
                                             static_cast<uint64_t>(d));
    return true;
  }
  double s = start->at(0), l = limit->at(0), d = delta->at(0);
  if (d == 0 || !std::isfinite(s) || !std::isfinite(l) || !std::isfinite(d))
    return fail(error, "a zero or non-finite delta or bound");
  double count = std::max(0.0, std::ceil((l - s) / d));
  if (count > static_cast<double>(call.maxElements))
    return fail(error, "a result of more than " +
                           std::to_string(call.maxElements) + " elements");
  out.kind = start->kind;
  out.dims = {static_cast<int64_t>(count)};
  out.resize(out.dims[0]);
  for (int64_t i = 0; i < out.dims[0]; ++i)
    out.set(i, s + static_cast<double>(i) * d);
  return true;
}

/// A value as it is (Identity) or in another element type (Cast).
bool cast(const FoldCall &call, Value &out, std::string &error) {
  const std::string &type = call.node.op_type();
  const Value *x = call.need(0, error);
  if (!x)
    return false;
  out = *x;
  if (type == "Cast") {
    int64_t to = intAttribute(call.node, "to", 0);
    Value::Kind kind =
        to == onnx::TensorProto::FLOAT || to == onnx::TensorProto::DOUBLE
            ? Value::Float
        : to == onnx::TensorProto::BOOL ? Value::Bool
        : to == onnx::TensorProto::INT64 || to == onnx::TensorProto::INT32
            ? Value::Int
            : Value::Kind(-1);
    if (kind == Value::Kind(-1))
      return fail(error, "a cast to element type " + std::to_string(to));
    out.kind = kind;
    out.ints.clear();
    out.floats.clear();
    out.resize(x->numel());
    for (int64_t i = 0; i < x->numel(); ++i)
      out.set(i, x->at(i));
  }
  return true;
}

/// A value with other dimensions: Unsqueeze, Squeeze, Reshape.
bool reshape(const FoldCall &call, Value &out, std::string &error) {
  const std::string &type = call.node.op_type();
  const Value *x = call.need(0, error);
  if (!x)
    return false;
  std::vector<int64_t> axes;
  if (const Value *a = call.input(1))
    axes = a->ints;
  else if (const onnx::AttributeProto *attr = attribute(call.node, "axes"))
    axes.assign(attr->ints().begin(), attr->ints().end());
  out = *x;
  int64_t rank = static_cast<int64_t>(x->dims.size());
  if (type == "Reshape") {
    if (!call.input(1))
      return fail(error, "the shape is not a constant");
    std::vector<int64_t> dims = axes;
    int64_t known = 1, infer = -1;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] == 0 && !intAttribute(call.node, "allowzero", 0))
        dims[i] = i < x->dims.size() ? x->dims[i] : 1;
      if (dims[i] == -1) {
        if (infer >= 0)
          return fail(error, "more than one -1 in the shape");
        infer = static_cast<int64_t>(i);
      } else if (dims[i] < 0) {
        return fail(error, "a negative dimension in the shape");
      } else {
        known *= dims[i];
      }
    }
    if (infer >= 0)
      dims[infer] = known == 0 ? 0 : x->numel() / known;
    out.dims = dims;
    if (!call.sized(dims, error) || out.numel() != x->numel())
      return fail(error, "the shape does not hold its " +
                             std::to_string(x->numel()) + " elements");
    return true;
  }
  int64_t outRank =
      type == "Unsqueeze" ? rank + static_cast<int64_t>(axes.size()) : rank;
  std::set<int64_t> chosen;
  for (int64_t a : axes) {
    int64_t axis = normalizedAxis(a, outRank);
    if (axis < 0 || axis >= outRank || !chosen.insert(axis).second)
      return fail(error, "axis " + std::to_string(a) + " out of range");
  }
  out.dims.clear();
  if (type == "Unsqueeze") {
    for (int64_t i = 0, next = 0; i < outRank; ++i)
      out.dims.push_back(chosen.count(i) ? 1 : x->dims[next++]);
  } else {
    for (int64_t i = 0; i < rank; ++i) {
      bool drop = chosen.empty() ? x->dims[i] == 1 : chosen.count(i) > 0;
      if (drop && x->dims[i] != 1)
        return fail(error, "squeezes a dimension of size " +
                               std::to_string(x->dims[i]));
      if (!drop)
        out.dims.push_back(x->dims[i]);
    }
  }
  return true;
}

/// Values joined along an axis.
bool concat(const FoldCall &call, Value &out, std::string &error) {
  int64_t axis = intAttribute(call.node, "axis", 0);
  std::vector<const Value *> parts;
  for (int i = 0; i < call.node.input_size(); ++i) {
    const Value *v = call.need(i, error);
    if (!v)
      return false;
    parts.push_back(v);
  }
  if (parts.empty())
    return fail(error, "no inputs");
  const Value &first = *parts[0];
  int64_t rank = static_cast<int64_t>(first.dims.size());
  axis = normalizedAxis(axis, rank);
  if (axis < 0 || axis >= rank)
    return fail(error, "axis out of range");
  out.kind = first.kind;
  out.dims = first.dims;
  out.dims[axis] = 0;
  for (const Value *p : parts) {
    if (p->dims.size() != first.dims.size() || p->kind != first.kind)
      return fail(error, "inputs of different ranks or types");
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && p->dims[d] != first.dims[d])
        return fail(error, "inputs of different shapes");
    out.dims[axis] += p->dims[axis];
  }
  if (!call.sized(out.dims, error))
    return false;
  out.resize(out.numel());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= first.dims[d];
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= first.dims[d];
  int64_t at = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (const Value *p : parts) {
      int64_t block = p->dims[axis] * inner;
      for (int64_t i = 0; i < block; ++i)
        out.copy(at++, *p, o * block + i);
    }
  return true;
}

/// Entries along an axis, by index.
bool gather(const FoldCall &call, Value &out, std::string &error) {
  const Value *x = call.need(0, error), *indices = call.need(1, error);
  if (!x || !indices)
    return false;
  int64_t rank = static_cast<int64_t>(x->dims.size());
  int64_t axis = normalizedAxis(intAttribute(call.node, "axis", 0), rank);
  if (axis < 0 || axis >= rank)
    return fail(error, "axis out of range");
  out.kind = x->kind;
  out.dims.assign(x->dims.begin(), x->dims.begin() + axis);
  out.dims.insert(out.dims.end(), indices->dims.begin(), indices->dims.end());
  out.dims.insert(out.dims.end(), x->dims.begin() + axis + 1, x->dims.end());
  if (!call.sized(out.dims, error))
    return false;
  out.resize(out.numel());
  int64_t outer = 1, inner = 1, size = x->dims[axis];
  for (int64_t d = 0; d < axis; ++d)
    outer *= x->dims[d];
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= x->dims[d];
  int64_t at = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < indices->numel(); ++k) {
      int64_t index = indices->intAt(k);
      if (index < 0)
        index += size;
      if (index < 0 || index >= size)
        return fail(error, "index " + std::to_string(indices->intAt(k)) +
                               " out of range for size " +
                               std::to_string(size));
      for (int64_t i = 0; i < inner; ++i)
        out.copy(at++, *x, (o * size + index) * inner + i);
    }
  return true;
}

/// A strided window.
bool slice(const FoldCall &call, Value &out, std::string &error) {
  const Value *x = call.need(0, error), *starts = call.need(1, error),
              *ends = call.need(2, error);
  if (!x || !starts || !ends)
    return false;
  int64_t rank = static_cast<int64_t>(x->dims.size());
  const Value *axesIn = call.input(3), *stepsIn = call.input(4);
  size_t n = starts->ints.size();
  if (ends->ints.size() != n || (axesIn && axesIn->ints.size() != n) ||
      (stepsIn && stepsIn->ints.size() != n))
    return fail(error, "starts, ends, axes and steps of different lengths");
  std::vector<int64_t> begin(rank, 0), step(rank, 1), count = x->dims;
  for (size_t i = 0; i < n; ++i) {
    int64_t axis = normalizedAxis(
        axesIn ? axesIn->ints[i] : static_cast<int64_t>(i), rank);
    if (axis < 0 || axis >= rank)
      return fail(error, "axis out of range");
    int64_t size = x->dims[axis], s = stepsIn ? stepsIn->ints[i] : 1;
    if (s == 0)
      return fail(error, "a zero step");
    int64_t b = starts->ints[i], e = ends->ints[i];
    if (b < 0)
      b += size;
    if (e < 0 && e > std::numeric_limits<int64_t>::min() + size)
      e += size;
    if (s > 0) {
      b = std::clamp<int64_t>(b, 0, size);
      e = std::clamp<int64_t>(e, 0, size);
      count[axis] = e > b ? 1 + (e - b - 1) / s : 0;
    } else {
      b = std::clamp<int64_t>(b, 0, size - 1);
      e = std::clamp<int64_t>(e, -1, size - 1);
      int64_t stride = s == std::numeric_limits<int64_t>::min()
                           ? std::numeric_limits<int64_t>::max()
                           : -s;
      count[axis] = b > e ? 1 + (b - e - 1) / stride : 0;
    }
    begin[axis] = b;
    step[axis] = s;
  }
  out.kind = x->kind;
  out.dims = count;
  out.resize(out.numel());
  std::vector<int64_t> strides = stridesOf(x->dims);
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t rest = i, source = 0;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t c = rest % count[d];
      rest /= count[d];
      source += (begin[d] + c * step[d]) * strides[d];
    }
    out.copy(i, *x, source);
  }
  return true;
}

/// The dimensions permuted.
bool transpose(const FoldCall &call, Value &out, std::string &error) {
  const Value *x = call.need(0, error);
  if (!x)
    return false;
  int64_t rank = static_cast<int64_t>(x->dims.size());
  std::vector<int64_t> perm;
  if (const onnx::AttributeProto *a = attribute(call.node, "perm"))
    perm.assign(a->ints().begin(), a->ints().end());
  else
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t d = 0; d < static_cast<int64_t>(sorted.size()); ++d)
    if (sorted[d] != d || static_cast<int64_t>(perm.size()) != rank)
      return fail(error, "perm is not a permutation of the dimensions");
  out.kind = x->kind;
  out.dims.clear();
  for (int64_t p : perm)
    out.dims.push_back(x->dims[p]);
  out.resize(out.numel());
  std::vector<int64_t> strides = stridesOf(x->dims);
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t rest = i, source = 0;
    for (int64_t d = rank - 1; d >= 0; --d) {
      source += (rest % out.dims[d]) * strides[perm[d]];
      rest /= out.dims[d];
    }
    out.copy(i, *x, source);
  }
  return true;
}

/// A value broadcast to a shape.
bool expand(const FoldCall &call, Value &out, std::string &error) {
  const Value *x = call.need(0, error), *shape = call.need(1, error);
  if (!x || !shape)
    return false;
  if (!broadcast({&x->dims, &shape->ints}, out.dims))
    return fail(error, "the shape does not broadcast");
  if (!call.sized(out.dims, error))
    return false;
  out.kind = x->kind;
  out.resize(out.numel());
  for (int64_t i = 0; i < out.numel(); ++i)
    out.copy(i, *x, broadcastIndex(i, out.dims, x->dims));
  return true;
}

/// A value with index tuples overwritten.
bool scatterND(const FoldCall &call, Value &out, std::string &error) {
  const Value *x = call.need(0, error), *indices = call.need(1, error),
              *updates = call.need(2, error);
  if (!x || !indices || !updates)
    return false;
  if (indices->dims.empty() || updates->kind != x->kind)
    return fail(error, "indices of rank 0, or updates of another type");
  int64_t depth = indices->dims.back();
  int64_t rank = static_cast<int64_t>(x->dims.size());
  if (depth < 1 || depth > rank)
    return fail(error, "index tuples of length " + std::to_string(depth));
  int64_t tuples = indices->numel() / depth, slice = 1;
  for (int64_t d = depth; d < rank; ++d)
    slice *= x->dims[d];
  if (updates->numel() != tuples * slice)
    return fail(error, "updates of the wrong size");
  out = *x;
  std::vector<int64_t> strides = stridesOf(x->dims);
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t base = 0;
    for (int64_t k = 0; k < depth; ++k) {
      int64_t index = indices->ints[t * depth + k], size = x->dims[k];
      if (index < 0)
        index += size;
      if (index < 0 || index >= size)
        return fail(error, "index out of range");
      base += index * strides[k];
    }
    for (int64_t i = 0; i < slice; ++i)
      out.copy(base + i, *updates, t * slice + i);
  }
  return true;
}

/// Elementwise, broadcasting: Not; Equal, Less, Greater, LessOrEqual,
/// GreaterOrEqual, And, Or, Xor, Mod, Add, Sub, Mul, Div, Min, Max, Pow;
/// Where.
bool elementwise(const FoldCall &call, Value &out, std::string &error) {
  const std::string &type = call.node.op_type();
  int arity = type == "Not" ? 1 : type == "Where" ? 3 : 2;
  if ((type == "Min" || type == "Max") && call.node.input_size() != 2)
    return fail(error, "folds " + type + " of two inputs, not " +
                           std::to_string(call.node.input_size()));
  std::vector<const Value *> in;
  std::vector<const std::vector<int64_t> *> dims;
  for (int i = 0; i < arity; ++i) {
    const Value *v = call.need(i, error);
    if (!v)
      return false;
    in.push_back(v);
    dims.push_back(&v->dims);
  }
  if (!broadcast(dims, out.dims))
    return fail(error, "the inputs do not broadcast");
  if (!call.sized(out.dims, error))
    return false;
  bool comparison = type == "Equal" || type == "Less" || type == "Greater" ||
                    type == "LessOrEqual" || type == "GreaterOrEqual" ||
                    type == "Not" || type == "And" || type == "Or" ||
                    type == "Xor";
  out.kind = comparison ? Value::Bool : in[arity == 3 ? 1 : 0]->kind;
  if (arity == 3 &&
      (in[1]->kind == Value::Float) != (in[2]->kind == Value::Float))
    return fail(error, "the two sides are of different types");
  bool allIntegers = std::none_of(in.begin(), in.end(), [](const Value *v) {
    return v->kind == Value::Float;
  });
  out.resize(out.numel());
  bool fmod = intAttribute(call.node, "fmod", 0) != 0;
  for (int64_t i = 0; i < out.numel(); ++i) {
    auto at = [&](int k) {
      return in[k]->at(broadcastIndex(i, out.dims, in[k]->dims));
    };
    auto intAt = [&](int k) {
      return in[k]->intAt(broadcastIndex(i, out.dims, in[k]->dims));
    };
    double a = at(0);
    double r = 0;
    if (type == "Not")
      r = a == 0;
    else if (type == "Where") { // copied exactly, as int64 or float
      int k = a != 0 ? 1 : 2;
      out.copy(i, *in[k], broadcastIndex(i, out.dims, in[k]->dims));
      continue;
    } else {
      double b = at(1);
      bool integers = out.kind != Value::Float && !comparison;
      if (type == "Equal")
        r = allIntegers ? intAt(0) == intAt(1) : a == b;
      else if (type == "Less")
        r = allIntegers ? intAt(0) < intAt(1) : a < b;
      else if (type == "Greater")
        r = allIntegers ? intAt(0) > intAt(1) : a > b;
      else if (type == "LessOrEqual")
        r = allIntegers ? intAt(0) <= intAt(1) : a <= b;
      else if (type == "GreaterOrEqual")
        r = allIntegers ? intAt(0) >= intAt(1) : a >= b;
      else if (type == "And")
        r = a != 0 && b != 0;
      else if (type == "Or")
        r = a != 0 || b != 0;
      else if (type == "Xor")
        r = (a != 0) != (b != 0);
      else if ((type == "Min" || type == "Max") && integers) {
        int64_t x = intAt(0), y = intAt(1);
        out.ints[i] = type == "Min" ? std::min(x, y) : std::max(x, y);
        continue;
      } else if (type == "Min" || type == "Max")
        r = std::isnan(a) || std::isnan(b) ? std::nan("")
            : type == "Min"                ? std::min(a, b)
                                           : std::max(a, b);
      else if (type == "Pow") // integers: saturated, as a Cast would
        r = std::pow(a, b);
      else if (integers) { // exact in int64, overflow refused
        int64_t x = intAt(0), y = intAt(1), z = 0;
        bool overflow = false;
        if (type == "Add")
          overflow = __builtin_add_overflow(x, y, &z);
        else if (type == "Sub")
          overflow = __builtin_sub_overflow(x, y, &z);
        else if (type == "Mul")
          overflow = __builtin_mul_overflow(x, y, &z);
        else if (y == 0)
          return fail(error, "an integer division by zero");
        else if (y == -1) // x / -1 overflows for the least x; x % -1 is 0
          overflow = type == "Div" && __builtin_sub_overflow(int64_t(0), x, &z);
        else if (type == "Div")
          z = x / y;
        else {
          z = x % y; // fmod: the dividend's sign; else the divisor's
          if (!fmod && z != 0 && ((z < 0) != (y < 0)))
            z += y;
        }
        if (overflow)
          return fail(error, "an integer " + type + " overflows int64");
        out.ints[i] = z;
        continue;
      } else if (type == "Add")
        r = a + b;
      else if (type == "Sub")
        r = a - b;
      else if (type == "Mul")
        r = a * b;
      else if (type == "Div")
        r = a / b;
      else
        r = fmod ? std::fmod(a, b) : a - b * std::floor(a / b);
    }
    // Float arithmetic rounds to float32 at each op, as the graph's own
    // would: a floor or an integer cast after it (T5's position buckets)
    // must see what PyTorch saw.
    out.set(i, out.kind == Value::Float ? static_cast<float>(r) : r);
  }
  return true;
}

/// Elementwise on one input: Abs, Neg, Floor, Ceil, Sign keep integers
/// exact; Log, Exp, Sqrt, Sin, Cos, Reciprocal take floats.
bool unary(const FoldCall &call, Value &out, std::string &error) {
  const Value *x = call.need(0, error);
  if (!x)
    return false;
  const std::string &type = call.node.op_type();
  bool keepsIntegers = type == "Abs" || type == "Neg" || type == "Floor" ||
                       type == "Ceil" || type == "Sign";
  if (!keepsIntegers && x->kind != Value::Float)
    return fail(error, "expects a float input");
  out = *x;
  for (int64_t i = 0; i < out.numel(); ++i) {
    if (x->kind != Value::Float) {
      int64_t v = x->ints[i];
      if ((type == "Abs" || type == "Neg") &&
          v == std::numeric_limits<int64_t>::min())
        return fail(error, "an integer " + type + " overflows int64");
      out.ints[i] = type == "Abs"    ? (v < 0 ? -v : v)
                    : type == "Neg"  ? -v
                    : type == "Sign" ? (v > 0) - (v < 0)
                                     : v;
      continue;
    }
    double v = x->floats[i];
    out.floats[i] = static_cast<float>(
                    type == "Abs"          ? std::fabs(v)
                    : type == "Neg"        ? -v
                    : type == "Floor"      ? std::floor(v)
                    : type == "Ceil"       ? std::ceil(v)
                    : type == "Sign"       ? double((v > 0) - (v < 0))
                    : type == "Log"        ? std::log(v)
                    : type == "Exp"        ? std::exp(v)
                    : type == "Sqrt"       ? std::sqrt(v)
                    : type == "Sin"        ? std::sin(v)
                    : type == "Cos"        ? std::cos(v)
                                           : 1.0 / v); // Reciprocal
  }
  return true;
}

/// The upper (or lower) triangle of the last two axes, from diagonal k,
/// the rest zeros: torch.triu / torch.tril (a causal mask).
bool trilu(const FoldCall &call, Value &out, std::string &error) {
  const Value *x = call.need(0, error);
  if (!x)
    return false;
  if (x->dims.size() < 2)
    return fail(error, "expects an input of rank >= 2");
  int64_t k = 0;
  if (call.node.input_size() > 1 && !call.node.input(1).empty()) {
    const Value *diagonal = call.need(1, error);
    if (!diagonal)
      return false;
    if (diagonal->numel() != 1 || diagonal->kind == Value::Float)
      return fail(error, "k must be one integer");
    k = diagonal->ints[0];
  }
  bool upper = intAttribute(call.node, "upper", 1) != 0;
  int64_t rows = x->dims[x->dims.size() - 2], cols = x->dims.back();
  out = *x;
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t col = i % cols, row = (i / cols) % rows;
    // row and col are small; k may be anything: compare without overflow.
    bool keep = upper ? col - row >= k : col - row <= k;
    if (!keep)
      out.set(i, 0);
  }
  return true;
}

/// The input repeated along each axis.
bool tile(const FoldCall &call, Value &out, std::string &error) {
  const Value *x = call.need(0, error), *repeats = call.need(1, error);
  if (!x || !repeats)
    return false;
  if (repeats->kind == Value::Float ||
      repeats->numel() != static_cast<int64_t>(x->dims.size()))
    return fail(error, "repeats must be one integer per axis");
  out.kind = x->kind;
  out.dims.clear();
  for (size_t d = 0; d < x->dims.size(); ++d) {
    int64_t r = repeats->ints[d], n = 0;
    if (r < 0 || __builtin_mul_overflow(x->dims[d], r, &n))
      return fail(error, "repeats " + std::to_string(r) + " on axis " +
                             std::to_string(d));
    out.dims.push_back(n);
  }
  if (!call.sized(out.dims, error))
    return false;
  out.resize(out.numel());
  std::vector<int64_t> strides = stridesOf(x->dims);
  int64_t rank = static_cast<int64_t>(x->dims.size());
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t rest = i, source = 0;
    for (int64_t d = rank - 1; d >= 0; --d) {
      source += (rest % out.dims[d]) % x->dims[d] * strides[d];
      rest /= out.dims[d];
    }
    out.copy(i, *x, source);
  }
  return true;
}

} // namespace

const std::map<std::string, Evaluator> &mlir::dtfm::fold::evaluators() {
  static const std::map<std::string, Evaluator> table = {
      {"Shape", shapeOf},
      {"Size", shapeOf},
      {"ConstantOfShape", constantOfShape},
      {"Range", range},
      {"Identity", cast},
      {"Cast", cast},
      {"Unsqueeze", reshape},
      {"Squeeze", reshape},
      {"Reshape", reshape},
      {"Concat", concat},
      {"Gather", gather},
      {"Slice", slice},
      {"Transpose", transpose},
      {"Expand", expand},
      {"ScatterND", scatterND},
      {"Equal", elementwise},
      {"Less", elementwise},
      {"Greater", elementwise},
      {"Not", elementwise},
      {"And", elementwise},
      {"Or", elementwise},
      {"Where", elementwise},
      {"Mod", elementwise},
      {"Add", elementwise},
      {"Sub", elementwise},
      {"Mul", elementwise},
      {"Div", elementwise},
      {"LessOrEqual", elementwise},
      {"GreaterOrEqual", elementwise},
      {"Xor", elementwise},
      {"Min", elementwise},
      {"Max", elementwise},
      {"Pow", elementwise},
      {"Abs", unary},
      {"Neg", unary},
      {"Floor", unary},
      {"Ceil", unary},
      {"Sign", unary},
      {"Log", unary},
      {"Exp", unary},
      {"Sqrt", unary},
      {"Sin", unary},
      {"Cos", unary},
      {"Reciprocal", unary},
      {"Trilu", trilu},
      {"Tile", tile},
  };
  return table;
}
