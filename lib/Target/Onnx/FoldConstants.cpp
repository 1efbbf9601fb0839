//===- FoldConstants.cpp - Shape computations evaluated at import ---------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// A small evaluator of ONNX's integer, boolean and float tensor ops, for the
// subgraphs PyTorch exports to compute shapes, masks and index tensors from
// static shapes (x.view(x.size(0), -1), a class token expanded to the batch,
// Swin's window masks). Every result is bounded in size before it is made.
//
//===----------------------------------------------------------------------===//

#include "FoldConstants.h"
#include "ExternalData.h"

#include "onnx/onnx_pb.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <set>

using namespace mlir::dtfm;

/// The bytes of `t` when they are raw (in the model or in a file beside it):
/// `raw` points at them (into `storage` for a file's). Null `raw` when the
/// data are in the typed fields; false with `error` when a file fails.
static bool rawBytes(const onnx::TensorProto &t, std::string &storage,
                     const std::string *&raw, std::string &error) {
  raw = nullptr;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    if (!readExternalData(t, storage, error))
      return false;
    raw = &storage;
  } else if (t.has_raw_data()) {
    raw = &t.raw_data();
  }
  return true;
}

bool mlir::dtfm::readTensorInts(const onnx::TensorProto &t,
                                std::vector<int64_t> &out, std::string &error) {
  int type = t.data_type();
  if (type != onnx::TensorProto::INT64 && type != onnx::TensorProto::INT32 &&
      type != onnx::TensorProto::BOOL) {
    error = "is not an int64, int32 or bool tensor";
    return false;
  }
  std::string storage;
  const std::string *bytes = nullptr;
  if (!rawBytes(t, storage, bytes, error))
    return false;
  out.clear();
  if (bytes) {
    const std::string &raw = *bytes;
    size_t width = type == onnx::TensorProto::INT64   ? 8
                   : type == onnx::TensorProto::INT32 ? 4
                                                      : 1;
    if (raw.size() % width != 0) {
      error = "has " + std::to_string(raw.size()) +
              " bytes of data, not a multiple of " + std::to_string(width);
      return false;
    }
    if (type == onnx::TensorProto::INT64) {
      out.resize(raw.size() / 8);
      std::memcpy(out.data(), raw.data(), raw.size());
    } else if (type == onnx::TensorProto::INT32) {
      std::vector<int32_t> narrow(raw.size() / 4);
      std::memcpy(narrow.data(), raw.data(), raw.size());
      out.assign(narrow.begin(), narrow.end());
    } else {
      for (char c : raw)
        out.push_back(c != 0);
    }
  } else if (type == onnx::TensorProto::INT64) {
    out.assign(t.int64_data().begin(), t.int64_data().end());
  } else { // int32 and bool are stored in int32_data
    for (int32_t v : t.int32_data())
      out.push_back(type == onnx::TensorProto::BOOL ? v != 0 : v);
  }
  int64_t n = 1;
  for (int64_t d : t.dims())
    n *= d;
  if (static_cast<int64_t>(out.size()) != n) {
    error = "has " + std::to_string(out.size()) + " elements for " +
            std::to_string(n);
    return false;
  }
  return true;
}

bool mlir::dtfm::readTensorFloats(const onnx::TensorProto &t,
                                  std::vector<float> &out, std::string &error) {
  // The data must be there, and be as large as the dims say, before
  // anything is allocated from the dims (the importer has bounded them).
  int64_t n = 1;
  for (int64_t d : t.dims())
    n *= d;
  if (t.data_type() != onnx::TensorProto::FLOAT) {
    error = "is not float32";
    return false;
  }
  std::string storage;
  const std::string *bytes = nullptr;
  if (!rawBytes(t, storage, bytes, error))
    return false;
  if (bytes) {
    if (bytes->size() % 4 != 0 || bytes->size() / 4 != static_cast<size_t>(n)) {
      error = "has " + std::to_string(bytes->size()) + " bytes of data for " +
              std::to_string(n) + " floats";
      return false;
    }
    out.assign(n, 0);
    std::memcpy(out.data(), bytes->data(), n * 4);
  } else if (t.float_data_size() == n) {
    out.assign(t.float_data().begin(), t.float_data().end());
  } else {
    error = "has " + std::to_string(t.float_data_size()) +
            " floats of data for " + std::to_string(n);
    return false;
  }
  return true;
}

namespace {

/// `v` as an int64, saturating (NaN: 0): hostile values convert without
/// undefined behaviour.
int64_t saturate(double v) {
  if (std::isnan(v))
    return 0;
  if (v >= 9.2233720368547758e18)
    return std::numeric_limits<int64_t>::max();
  if (v <= -9.2233720368547758e18)
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

/// A constant tensor: integers (int64, and bools as 0/1) or floats.
struct Value {
  enum Kind { Int, Bool, Float } kind = Int;
  std::vector<int64_t> dims;
  std::vector<int64_t> ints;
  std::vector<double> floats;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims)
      n *= d;
    return n;
  }
  double at(int64_t i) const {
    return kind == Float ? floats[i] : static_cast<double>(ints[i]);
  }
  int64_t intAt(int64_t i) const {
    return kind == Float ? saturate(floats[i]) : ints[i];
  }
  void resize(int64_t n) {
    if (kind == Float)
      floats.assign(n, 0);
    else
      ints.assign(n, 0);
  }
  void set(int64_t i, double v) {
    if (kind == Float)
      floats[i] = v;
    else
      ints[i] = kind == Bool ? (v != 0) : saturate(v);
  }
  /// Element i of `from` (same kind) into element j.
  void copy(int64_t j, const Value &from, int64_t i) {
    if (kind == Float)
      floats[j] = from.floats[i];
    else
      ints[j] = from.ints[i];
  }
};

/// `t` (float32, or integers and bools) as a Value; false with `error`.
bool decode(const onnx::TensorProto &t, Value &v, std::string &error) {
  v = Value();
  v.dims.assign(t.dims().begin(), t.dims().end());
  if (t.data_type() == onnx::TensorProto::FLOAT) {
    std::vector<float> f;
    if (!readTensorFloats(t, f, error))
      return false;
    v.kind = Value::Float;
    v.floats.assign(f.begin(), f.end());
    return true;
  }
  if (t.data_type() == onnx::TensorProto::DOUBLE) {
    // A double constant (F.normalize's eps in a training export) computes
    // in the folder's doubles; what it folds into is float32 or integer.
    int64_t n = 1;
    for (int64_t d : t.dims())
      n *= d;
    std::string storage;
    const std::string *bytes = nullptr;
    if (!rawBytes(t, storage, bytes, error))
      return false;
    v.kind = Value::Float;
    if (bytes) {
      if (bytes->size() != static_cast<size_t>(n) * 8) {
        error = "has " + std::to_string(bytes->size()) + " bytes of data for " +
                std::to_string(n) + " doubles";
        return false;
      }
      v.floats.resize(n);
      std::memcpy(v.floats.data(), bytes->data(), bytes->size());
    } else if (t.double_data_size() == n) {
      v.floats.assign(t.double_data().begin(), t.double_data().end());
    } else {
      error = "has " + std::to_string(t.double_data_size()) +
              " doubles of data for " + std::to_string(n);
      return false;
    }
    return true;
  }
  v.kind = t.data_type() == onnx::TensorProto::BOOL ? Value::Bool : Value::Int;
  return readTensorInts(t, v.ints, error);
}

class Folder {
public:
  Folder(const std::map<std::string, std::vector<int64_t>> &shapes,
         int64_t maxElements)
      : shapes(shapes), maxElements(maxElements) {}

  /// Records a constant (an initializer of integers or bools, or a
  /// Constant node's value).
  bool record(const std::string &name, const onnx::TensorProto &t,
              std::string &error) {
    Value v;
    if (!decode(t, v, error))
      return false;
    known[name] = std::move(v);
    return true;
  }

  /// Folds `node` when its type is foldable and its inputs are known;
  /// `done` says whether it was. False with `error` when it cannot be
  /// evaluated.
  bool fold(onnx::NodeProto &node, bool &done, std::string &error);

private:
  bool fail(std::string &error, const std::string &message) {
    error = message;
    return false;
  }
  const Value *input(const onnx::NodeProto &node, int i) const {
    if (i >= node.input_size() || node.input(i).empty())
      return nullptr;
    auto it = known.find(node.input(i));
    return it == known.end() ? nullptr : &it->second;
  }
  bool sized(const std::vector<int64_t> &dims, std::string &error) {
    int64_t n = 1;
    for (int64_t d : dims) {
      if (d < 0)
        return fail(error, "a negative dimension " + std::to_string(d));
      if (d != 0 && n > maxElements / d)
        return fail(error, "a result of more than " +
                               std::to_string(maxElements) + " elements");
      n *= d;
    }
    return true;
  }
  bool evaluate(const onnx::NodeProto &node, Value &out, std::string &error);

  const std::map<std::string, std::vector<int64_t>> &shapes;
  int64_t maxElements;
  std::map<std::string, Value> known;
};

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

const std::set<std::string> &foldable() {
  static const std::set<std::string> types = {
      "Shape",   "Size",      "ConstantOfShape",
      "Range",   "Gather",    "Slice",
      "Concat",  "Unsqueeze", "Squeeze",
      "Reshape", "Expand",    "Identity",
      "Cast",    "Equal",     "Less",
      "Greater", "Not",       "And",
      "Or",      "Where",     "Mod",
      "Add",     "Sub",       "Mul",
      "Div",     "ScatterND", "Transpose"};
  return types;
}

bool Folder::fold(onnx::NodeProto &node, bool &done, std::string &error) {
  done = false;
  if (!foldable().count(node.op_type()) ||
      (!node.domain().empty() && node.domain() != "ai.onnx") ||
      node.output_size() != 1)
    return true;
  bool shapeOnly = node.op_type() == "Shape" || node.op_type() == "Size";
  for (int i = 0; i < node.input_size(); ++i) {
    const std::string &name = node.input(i);
    if (name.empty())
      continue;
    if (shapeOnly ? !shapes.count(name) && !known.count(name)
                  : !known.count(name))
      return true;
  }
  Value out;
  std::string why;
  if (!evaluate(node, out, why)) {
    error = "node '" + node.name() + "' (" + node.op_type() +
            "): cannot evaluate it at import: " + why;
    return false;
  }
  // The node becomes a Constant holding its value.
  onnx::TensorProto value;
  value.set_name(node.output(0));
  for (int64_t d : out.dims)
    value.add_dims(d);
  if (out.kind == Value::Float) {
    value.set_data_type(onnx::TensorProto::FLOAT);
    for (double f : out.floats)
      value.add_float_data(static_cast<float>(f));
  } else if (out.kind == Value::Bool) {
    value.set_data_type(onnx::TensorProto::BOOL);
    for (int64_t v : out.ints)
      value.add_int32_data(v != 0);
  } else {
    value.set_data_type(onnx::TensorProto::INT64);
    for (int64_t v : out.ints)
      value.add_int64_data(v);
  }
  std::string output = node.output(0), name = node.name();
  node.Clear();
  node.set_name(name);
  node.set_op_type("Constant");
  node.add_output(output);
  onnx::AttributeProto *attr = node.add_attribute();
  attr->set_name("value");
  attr->set_type(onnx::AttributeProto::TENSOR);
  *attr->mutable_t() = value;
  known[output] = std::move(out);
  done = true;
  return true;
}

bool Folder::evaluate(const onnx::NodeProto &node, Value &out,
                      std::string &error) {
  const std::string &type = node.op_type();
  auto need = [&](int i) -> const Value * {
    const Value *v = input(node, i);
    if (!v)
      error = "input " + std::to_string(i) + " is missing";
    return v;
  };
  if (type == "Shape" || type == "Size") {
    auto it = known.find(node.input(0));
    std::vector<int64_t> dims =
        it != known.end() ? it->second.dims : shapes.at(node.input(0));
    out.kind = Value::Int;
    if (type == "Size") {
      int64_t n = 1;
      for (int64_t d : dims)
        n *= d;
      out.ints = {n};
      return true;
    }
    int64_t rank = static_cast<int64_t>(dims.size());
    int64_t start = normalizedAxis(intAttribute(node, "start", 0), rank);
    int64_t end = normalizedAxis(intAttribute(node, "end", rank), rank);
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, start, rank);
    out.ints.assign(dims.begin() + start, dims.begin() + end);
    out.dims = {end - start};
    return true;
  }
  if (type == "ConstantOfShape") {
    const Value *shape = need(0);
    if (!shape)
      return false;
    out.dims = shape->ints;
    if (!sized(out.dims, error))
      return false;
    out.kind = Value::Float;
    double fill = 0;
    if (const onnx::AttributeProto *a = attribute(node, "value")) {
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
  if (type == "Range") {
    const Value *start = need(0), *limit = need(1), *delta = need(2);
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
      int64_t count = span > 0
                          ? static_cast<int64_t>(
                                (static_cast<uint64_t>(span) - 1) / step + 1)
                          : 0;
      if (count > maxElements)
        return fail(error, "a result of more than " +
                               std::to_string(maxElements) + " elements");
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
    if (count > static_cast<double>(maxElements))
      return fail(error, "a result of more than " +
                             std::to_string(maxElements) + " elements");
    out.kind = start->kind;
    out.dims = {static_cast<int64_t>(count)};
    out.resize(out.dims[0]);
    for (int64_t i = 0; i < out.dims[0]; ++i)
      out.set(i, s + static_cast<double>(i) * d);
    return true;
  }
  if (type == "Identity" || type == "Cast") {
    const Value *x = need(0);
    if (!x)
      return false;
    out = *x;
    if (type == "Cast") {
      int64_t to = intAttribute(node, "to", 0);
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
  if (type == "Unsqueeze" || type == "Squeeze" || type == "Reshape") {
    const Value *x = need(0);
    if (!x)
      return false;
    std::vector<int64_t> axes;
    if (const Value *a = input(node, 1))
      axes = a->ints;
    else if (const onnx::AttributeProto *attr = attribute(node, "axes"))
      axes.assign(attr->ints().begin(), attr->ints().end());
    out = *x;
    int64_t rank = static_cast<int64_t>(x->dims.size());
    if (type == "Reshape") {
      if (!input(node, 1))
        return fail(error, "the shape is not a constant");
      std::vector<int64_t> dims = axes;
      int64_t known = 1, infer = -1;
      for (size_t i = 0; i < dims.size(); ++i) {
        if (dims[i] == 0 && !intAttribute(node, "allowzero", 0))
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
      if (!sized(dims, error) || out.numel() != x->numel())
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
  if (type == "Concat") {
    int64_t axis = intAttribute(node, "axis", 0);
    std::vector<const Value *> parts;
    for (int i = 0; i < node.input_size(); ++i) {
      const Value *v = need(i);
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
    if (!sized(out.dims, error))
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
  if (type == "Gather") {
    const Value *x = need(0), *indices = need(1);
    if (!x || !indices)
      return false;
    int64_t rank = static_cast<int64_t>(x->dims.size());
    int64_t axis = normalizedAxis(intAttribute(node, "axis", 0), rank);
    if (axis < 0 || axis >= rank)
      return fail(error, "axis out of range");
    out.kind = x->kind;
    out.dims.assign(x->dims.begin(), x->dims.begin() + axis);
    out.dims.insert(out.dims.end(), indices->dims.begin(), indices->dims.end());
    out.dims.insert(out.dims.end(), x->dims.begin() + axis + 1, x->dims.end());
    if (!sized(out.dims, error))
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
  if (type == "Slice") {
    const Value *x = need(0), *starts = need(1), *ends = need(2);
    if (!x || !starts || !ends)
      return false;
    int64_t rank = static_cast<int64_t>(x->dims.size());
    const Value *axesIn = input(node, 3), *stepsIn = input(node, 4);
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
  if (type == "Transpose") {
    const Value *x = need(0);
    if (!x)
      return false;
    int64_t rank = static_cast<int64_t>(x->dims.size());
    std::vector<int64_t> perm;
    if (const onnx::AttributeProto *a = attribute(node, "perm"))
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
  if (type == "Expand") {
    const Value *x = need(0), *shape = need(1);
    if (!x || !shape)
      return false;
    if (!broadcast({&x->dims, &shape->ints}, out.dims))
      return fail(error, "the shape does not broadcast");
    if (!sized(out.dims, error))
      return false;
    out.kind = x->kind;
    out.resize(out.numel());
    for (int64_t i = 0; i < out.numel(); ++i)
      out.copy(i, *x, broadcastIndex(i, out.dims, x->dims));
    return true;
  }
  if (type == "ScatterND") {
    const Value *x = need(0), *indices = need(1), *updates = need(2);
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
  // Elementwise, broadcasting: Not; Equal, Less, Greater, And, Or, Mod,
  // Add, Sub, Mul, Div; Where.
  int arity = type == "Not" ? 1 : type == "Where" ? 3 : 2;
  std::vector<const Value *> in;
  std::vector<const std::vector<int64_t> *> dims;
  for (int i = 0; i < arity; ++i) {
    const Value *v = need(i);
    if (!v)
      return false;
    in.push_back(v);
    dims.push_back(&v->dims);
  }
  if (!broadcast(dims, out.dims))
    return fail(error, "the inputs do not broadcast");
  if (!sized(out.dims, error))
    return false;
  bool comparison = type == "Equal" || type == "Less" || type == "Greater" ||
                    type == "Not" || type == "And" || type == "Or";
  out.kind = comparison ? Value::Bool : in[arity == 3 ? 1 : 0]->kind;
  if (arity == 3 &&
      (in[1]->kind == Value::Float) != (in[2]->kind == Value::Float))
    return fail(error, "the two sides are of different types");
  bool allIntegers = std::none_of(in.begin(), in.end(), [](const Value *v) {
    return v->kind == Value::Float;
  });
  out.resize(out.numel());
  bool fmod = intAttribute(node, "fmod", 0) != 0;
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
      else if (type == "And")
        r = a != 0 && b != 0;
      else if (type == "Or")
        r = a != 0 || b != 0;
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
    out.set(i, r);
  }
  return true;
}

} // namespace

bool mlir::dtfm::foldShapeComputations(
    onnx::GraphProto &graph,
    const std::map<std::string, std::vector<int64_t>> &shapes,
    int64_t maxElements, int &folded, std::string &error) {
  Folder folder(shapes, maxElements);
  folded = 0;
  auto integral = [](const onnx::TensorProto &t) {
    return t.data_type() == onnx::TensorProto::INT64 ||
           t.data_type() == onnx::TensorProto::INT32 ||
           t.data_type() == onnx::TensorProto::BOOL;
  };
  // Float initializers are parameters: never folded into. Tensors of other
  // types are left to the importer, which names them where they are used.
  for (const onnx::TensorProto &t : graph.initializer())
    if (integral(t) && !folder.record(t.name(), t, error)) {
      error = "initializer '" + t.name() + "' " + error;
      return false;
    }
  for (onnx::NodeProto &node : *graph.mutable_node()) {
    if (node.op_type() == "Constant" && node.output_size() == 1) {
      for (const onnx::AttributeProto &a : node.attribute())
        if (a.name() == "value" && a.has_t() &&
            (integral(a.t()) || a.t().data_type() == onnx::TensorProto::FLOAT ||
             a.t().data_type() == onnx::TensorProto::DOUBLE) &&
            !folder.record(node.output(0), a.t(), error)) {
          error = "node '" + node.name() + "' (Constant): its value " + error;
          return false;
        }
      continue;
    }
    bool done = false;
    if (!folder.fold(node, done, error))
      return false;
    folded += done;
  }
  return true;
}
