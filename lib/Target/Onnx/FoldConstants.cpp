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
// The folder is here; its evaluators, one per family of ops, in FoldOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "FoldConstants.h"
#include "ExternalData.h"
#include "FoldValue.h"

#include "onnx/onnx_pb.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <set>

using namespace mlir::dtfm;
using namespace mlir::dtfm::fold;

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

bool mlir::dtfm::fold::decode(const onnx::TensorProto &t, Value &v,
                              std::string &error) {
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

namespace {

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
  const std::map<std::string, std::vector<int64_t>> &shapes;
  int64_t maxElements;
  std::map<std::string, Value> known;
};

bool Folder::fold(onnx::NodeProto &node, bool &done, std::string &error) {
  done = false;
  auto evaluator = evaluators().find(node.op_type());
  if (evaluator == evaluators().end() ||
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
  if (!evaluator->second(FoldCall{node, known, shapes, maxElements}, out,
                         why)) {
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

} // namespace

bool mlir::dtfm::foldShapeComputations(
    onnx::GraphProto &graph,
    const std::map<std::string, std::vector<int64_t>> &shapes,
    const std::set<std::string> &constantFloats, int64_t maxElements,
    int &folded, std::string &error) {
  Folder folder(shapes, maxElements);
  folded = 0;
  auto integral = [](const onnx::TensorProto &t) {
    return t.data_type() == onnx::TensorProto::INT64 ||
           t.data_type() == onnx::TensorProto::INT32 ||
           t.data_type() == onnx::TensorProto::BOOL;
  };
  // Float initializers are parameters: never folded into, unless frozen
  // (and small: a mask, not a table read whole). Tensors of other types are
  // left to the importer, which names them where they are used.
  auto smallFloat = [&](const onnx::TensorProto &t) {
    if (t.data_type() != onnx::TensorProto::FLOAT ||
        !constantFloats.count(t.name()))
      return false;
    int64_t elements = 1;
    for (int64_t d : t.dims()) // dims checked at load: no overflow
      elements *= d;
    return elements <= maxElements;
  };
  for (const onnx::TensorProto &t : graph.initializer())
    if ((integral(t) || smallFloat(t)) && !folder.record(t.name(), t, error)) {
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
