//===- FoldValue.h - The constant folder's values, evaluators ---*- C++ -*-===//
//
// Part of dtfm. Private to lib/Target/Onnx: what FoldConstants.cpp's folder
// and FoldOps.cpp's evaluators share.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_LIB_TARGET_ONNX_FOLDVALUE_H
#define DTFM_LIB_TARGET_ONNX_FOLDVALUE_H

#include "onnx/onnx_pb.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace mlir::dtfm::fold {

/// `v` as an int64, saturating (NaN: 0): hostile values convert without
/// undefined behaviour.
inline int64_t saturate(double v) {
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
bool decode(const onnx::TensorProto &t, Value &v, std::string &error);

inline bool fail(std::string &error, const std::string &message) {
  error = message;
  return false;
}

/// A node to evaluate, with what the folder knows of its inputs.
struct FoldCall {
  const onnx::NodeProto &node;
  const std::map<std::string, Value> &known;
  /// The shapes of values that are not constants (Shape and Size read them).
  const std::map<std::string, std::vector<int64_t>> &shapes;
  /// The most elements a result may have.
  int64_t maxElements;

  /// Input i when it is a constant, else null.
  const Value *input(int i) const {
    if (i >= node.input_size() || node.input(i).empty())
      return nullptr;
    auto it = known.find(node.input(i));
    return it == known.end() ? nullptr : &it->second;
  }
  /// Input i, or null with `error` saying it is missing.
  const Value *need(int i, std::string &error) const {
    const Value *v = input(i);
    if (!v)
      error = "input " + std::to_string(i) + " is missing";
    return v;
  }
  /// The dimensions of input i: a constant's, or the shape given.
  std::vector<int64_t> dimsOf(int i) const {
    auto it = known.find(node.input(i));
    return it != known.end() ? it->second.dims : shapes.at(node.input(i));
  }
  /// False with `error` when `dims` has a negative dimension or more than
  /// maxElements elements.
  bool sized(const std::vector<int64_t> &dims, std::string &error) const {
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
};

/// Evaluates a node of its type; false with a one-line `error`.
using Evaluator = bool (*)(const FoldCall &call, Value &out,
                           std::string &error);
/// The evaluator of each ONNX op type the folder folds (FoldOps.cpp).
const std::map<std::string, Evaluator> &evaluators();

} // namespace mlir::dtfm::fold

#endif // DTFM_LIB_TARGET_ONNX_FOLDVALUE_H
