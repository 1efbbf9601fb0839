//===- ImportOnnx.cpp - ONNX models into the dtfm dialect -----------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Target/Onnx/ImportOnnx.h"

#include "FusePatterns.h"

#include "dtfm/Dialect/Dtfm/IR/DtfmDialect.h"
#include "dtfm/Dialect/Dtfm/IR/DtfmOps.h"
#include "dtfm/Format/TensorFile.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include <cmath>
#include <fstream>
#include <functional>
#include <set>

using namespace mlir;
using namespace mlir::dtfm;

bool mlir::dtfm::parseShapeOverride(
    const std::string &text, std::map<std::string, std::vector<int64_t>> &shapes,
    std::string &error) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    error = "--shape: expected name=d0,d1,..., got '" + text + "'";
    return false;
  }
  std::vector<int64_t> dims;
  std::string rest = text.substr(eq + 1);
  size_t at = 0;
  while (at <= rest.size()) {
    size_t comma = rest.find(',', at);
    std::string item = rest.substr(at, comma == std::string::npos
                                           ? std::string::npos
                                           : comma - at);
    char *end = nullptr;
    long long d = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || !end || *end != '\0' || d <= 0) {
      error = "--shape " + text + ": '" + item +
              "' is not a positive dimension";
      return false;
    }
    dims.push_back(d);
    if (comma == std::string::npos)
      break;
    at = comma + 1;
  }
  shapes[text.substr(0, eq)] = dims;
  return true;
}

namespace {

/// The op types this importer maps (see convert()).
const std::set<std::string> kSupported = {
    "Add",        "AveragePool", "BatchNormalization", "Constant", "Div",
    "Mul",        "Sub",         "Squeeze",            "Unsqueeze",
    "Cast",       "Transpose",   "Sqrt",               "Tanh",
    "Erf",        "Exp",         "Pow",                "ReduceMean",
    "Neg",        "Concat",      "Slice",              "Split",
    "Gather",     "Where",
    "Conv",       "Dropout",     "Flatten",            "Gemm",
    "GlobalAveragePool", "Identity", "MatMul",         "MaxPool",
    "Relu",       "Reshape",     "Softmax",
    // Recognised chains (FusePatterns.cpp).
    "dtfm.CausalAttention", "dtfm.Embedding", "dtfm.Gelu", "dtfm.LayerNorm",
    "dtfm.Linear"};

class OnnxImporter {
public:
  OnnxImporter(MLIRContext *context, const std::string &path,
               const OnnxImportOptions &options)
      : b(context), path(path), options(options) {}

  OwningOpRef<ModuleOp> run(std::string &error);

private:
  bool fail(const std::string &message) {
    if (problem.empty())
      problem = path + ": " + message;
    return false;
  }
  bool failAt(const onnx::NodeProto &node, const std::string &message) {
    return fail("node '" + node.name() + "' (" + node.op_type() +
                "): " + message);
  }

  bool load();
  bool mapGraph();
  bool convert(const onnx::NodeProto &node);

  /// Shape and element type of a named value, from the inferred graph.
  bool typeOf(const std::string &name, RankedTensorType &type);
  RankedTensorType floatType(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, b.getF32Type());
  }
  /// The value of `name`: a computed one, a graph input, or an initializer
  /// as a parameter (made on first use).
  Value valueOf(const std::string &name, bool frozen = false);
  /// A `dtfm.param init(external)` whose values go to the weights file.
  ParamOp externalParam(const std::string &name,
                        ::dtfm::format::Tensor tensor, bool frozen);
  /// A frozen scalar parameter holding `value` (Neg's -1, Gemm's alpha),
  /// placed in the layer of the op that reads it.
  Value scalarConstant(const std::string &name, double value);
  /// An initializer or a Constant's tensor, if `name` is one.
  const onnx::TensorProto *constantTensor(const std::string &name);
  /// An initializer or Constant's integers (int64, int32 or bool as 0/1).
  bool constantInts(const std::string &name, std::vector<int64_t> &values);
  /// An integer or boolean operand: a computed value or graph input, or a
  /// constant as a dtfm.constant (made on first use).
  Value integerValueOf(const std::string &name);
  const onnx::TensorProto *initializer(const std::string &name) {
    auto it = initializers.find(name);
    return it == initializers.end() ? nullptr : it->second;
  }
  bool floats(const onnx::TensorProto &t, std::vector<float> &out);

  Value tag(Operation *op, const onnx::NodeProto &node);
  Location at(const onnx::NodeProto &node) {
    return NameLoc::get(b.getStringAttr(node.name().empty() ? node.op_type()
                                                             : node.name()));
  }

  OpBuilder b;
  const std::string &path;
  const OnnxImportOptions &options;
  onnx::ModelProto model;
  std::string problem;

  std::map<std::string, const onnx::TensorProto *> initializers;
  std::map<std::string, const onnx::TensorProto *> constants; // Constant ops
  std::map<std::string, RankedTensorType> types;
  std::map<std::string, std::string> badTypes; // value -> ONNX type name
  std::map<std::string, Value> values;
  std::map<std::string, std::string> layerOfValue;
  std::map<std::string, ::dtfm::format::Tensor> weights;
  std::map<std::string, std::string> renamed; // Identity / Dropout outputs
  std::set<std::string> consumed; // values some node or the graph reads
  std::map<std::string, Operation *> unplaced; // params awaiting a layer
};

bool OnnxImporter::load() {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return fail("cannot open the model");
  if (!model.ParseFromIstream(&in))
    return fail("not an ONNX model (protobuf does not parse)");
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception &e) {
    return fail("ONNX checker: " + std::string(e.what()));
  }
  // Static shapes: overrides first, then every graph input must be static.
  onnx::GraphProto *graph = model.mutable_graph();
  std::set<std::string> initializerNames;
  for (const onnx::TensorProto &t : graph->initializer())
    initializerNames.insert(t.name());
  std::set<std::string> inputNames;
  for (const onnx::ValueInfoProto &input : graph->input())
    if (!initializerNames.count(input.name()))
      inputNames.insert(input.name());
  for (const auto &[name, dims] : options.shapes)
    if (!inputNames.count(name))
      return fail("--shape " + name + ": the model has no such input");
  for (onnx::ValueInfoProto &input : *graph->mutable_input()) {
    if (initializerNames.count(input.name()))
      continue;
    onnx::TensorShapeProto *shape =
        input.mutable_type()->mutable_tensor_type()->mutable_shape();
    auto given = options.shapes.find(input.name());
    if (given != options.shapes.end()) {
      if (given->second.size() != static_cast<size_t>(shape->dim_size()))
        return fail("--shape " + input.name() + ": the input has rank " +
                    std::to_string(shape->dim_size()) + ", not " +
                    std::to_string(given->second.size()));
      for (int i = 0; i < shape->dim_size(); ++i)
        shape->mutable_dim(i)->set_dim_value(given->second[i]);
      continue;
    }
    for (int i = 0; i < shape->dim_size(); ++i)
      if (!shape->dim(i).has_dim_value() || shape->dim(i).dim_value() <= 0)
        return fail("input '" + input.name() + "' has a dynamic dimension " +
                    std::to_string(i) +
                    (shape->dim(i).dim_param().empty()
                         ? ""
                         : " ('" + shape->dim(i).dim_param() + "')") +
                    "; give its shape with --shape " + input.name() +
                    "=d0,d1,...");
  }
  // Outputs' dynamic dimensions are re-inferred from the inputs.
  for (onnx::ValueInfoProto &output : *graph->mutable_output())
    output.mutable_type()->mutable_tensor_type()->clear_shape();
  graph->clear_value_info();
  try {
    onnx::ShapeInferenceOptions inference{true, 1, true};
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(),
                                       inference);
  } catch (const std::exception &e) {
    return fail("ONNX shape inference: " + std::string(e.what()));
  }
  fuseOnnxPatterns(*model.mutable_graph());
  return true;
}

bool OnnxImporter::typeOf(const std::string &name, RankedTensorType &type) {
  auto bad = badTypes.find(name);
  if (bad != badTypes.end())
    return fail("value '" + name + "' has element type " + bad->second +
                " (dtfm takes float32, int32/int64 indices and bool masks)");
  auto it = types.find(name);
  if (it == types.end())
    return fail("no inferred shape for value '" + name + "'");
  type = it->second;
  return true;
}

bool OnnxImporter::floats(const onnx::TensorProto &t,
                          std::vector<float> &out) {
  int64_t n = 1;
  for (int64_t d : t.dims())
    n *= d;
  out.assign(n, 0);
  if (t.data_type() != onnx::TensorProto::FLOAT)
    return fail("initializer '" + t.name() + "' is not float32");
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    return fail("initializer '" + t.name() +
                "' has external data (export with the weights inside)");
  if (t.has_raw_data()) {
    if (t.raw_data().size() != static_cast<size_t>(n) * 4)
      return fail("initializer '" + t.name() + "' has the wrong byte size");
    std::memcpy(out.data(), t.raw_data().data(), n * 4);
  } else if (t.float_data_size() == n) {
    std::copy(t.float_data().begin(), t.float_data().end(), out.begin());
  } else {
    return fail("initializer '" + t.name() + "' has no data");
  }
  return true;
}

const onnx::TensorProto *
OnnxImporter::constantTensor(const std::string &name) {
  if (const onnx::TensorProto *t = initializer(name))
    return t;
  auto it = constants.find(name);
  return it == constants.end() ? nullptr : it->second;
}

bool OnnxImporter::constantInts(const std::string &name,
                                std::vector<int64_t> &out) {
  const onnx::TensorProto *t = constantTensor(name);
  int type = t ? t->data_type() : onnx::TensorProto::UNDEFINED;
  if (type != onnx::TensorProto::INT64 && type != onnx::TensorProto::INT32 &&
      type != onnx::TensorProto::BOOL)
    return fail("value '" + name +
                "' must be a constant int64, int32 or bool tensor");
  out.clear();
  if (t->has_raw_data()) {
    const std::string &raw = t->raw_data();
    if (type == onnx::TensorProto::INT64) {
      out.resize(raw.size() / 8);
      std::memcpy(out.data(), raw.data(), out.size() * 8);
    } else if (type == onnx::TensorProto::INT32) {
      std::vector<int32_t> narrow(raw.size() / 4);
      std::memcpy(narrow.data(), raw.data(), narrow.size() * 4);
      out.assign(narrow.begin(), narrow.end());
    } else {
      for (char c : raw)
        out.push_back(c != 0);
    }
  } else if (type == onnx::TensorProto::INT64) {
    out.assign(t->int64_data().begin(), t->int64_data().end());
  } else { // int32 and bool are stored in int32_data
    for (int32_t v : t->int32_data())
      out.push_back(type == onnx::TensorProto::BOOL ? v != 0 : v);
  }
  int64_t n = 1;
  for (int64_t d : t->dims())
    n *= d;
  if (static_cast<int64_t>(out.size()) != n)
    return fail("constant '" + name + "' has " + std::to_string(out.size()) +
                " elements for " + std::to_string(n));
  return true;
}

ParamOp OnnxImporter::externalParam(const std::string &name,
                                    ::dtfm::format::Tensor tensor,
                                    bool frozen) {
  auto type = floatType(tensor.shape);
  weights[name] = std::move(tensor);
  return b.create<ParamOp>(
      NameLoc::get(b.getStringAttr(name)), type, b.getStringAttr(name),
      InitKindAttr::get(b.getContext(), InitKind::external), FloatAttr(),
      frozen ? b.getUnitAttr() : UnitAttr());
}

Value OnnxImporter::scalarConstant(const std::string &name, double value) {
  ParamOp op = externalParam(
      name,
      ::dtfm::format::Tensor(std::vector<int64_t>{},
                                   static_cast<float>(value)),
      /*frozen=*/true);
  unplaced[name] = op;
  layerOfValue[name] = "";
  values[name] = op.getResult();
  return op.getResult();
}

Value OnnxImporter::integerValueOf(const std::string &name) {
  auto alias = renamed.find(name);
  if (alias != renamed.end())
    return integerValueOf(alias->second);
  auto it = values.find(name);
  if (it != values.end())
    return it->second;
  std::vector<int64_t> elements;
  if (!constantInts(name, elements))
    return Value();
  const onnx::TensorProto *t = constantTensor(name);
  Type element = t->data_type() == onnx::TensorProto::BOOL
                     ? b.getI1Type()
                     : b.getI64Type();
  std::vector<int64_t> shape(t->dims().begin(), t->dims().end());
  auto op = b.create<ConstantOp>(NameLoc::get(b.getStringAttr(name)),
                                 RankedTensorType::get(shape, element),
                                 b.getDenseI64ArrayAttr(elements));
  unplaced[name] = op; // takes the layer of the op that reads it (tag())
  layerOfValue[name] = "";
  values[name] = op.getResult();
  return op.getResult();
}

/// The layer of a parameter from its module path: up to the first numeric
/// component (a block of a sequence: "layer1.0.downsample.0.weight" ->
/// "layer1.0", "h.3.attn.c_attn.weight" -> "h.3"), else without the last
/// component ("conv1.weight" -> "conv1"). Keeps a block's branches in one
/// layer, so layers stay contiguous in the graph's order.
std::string layerOfParameter(const std::string &name) {
  std::vector<std::string> parts;
  size_t at = 0;
  while (true) {
    size_t dot = name.find('.', at);
    parts.push_back(name.substr(at, dot == std::string::npos ? dot : dot - at));
    if (dot == std::string::npos)
      break;
    at = dot + 1;
  }
  size_t keep = std::max<size_t>(1, parts.size() - 1);
  for (size_t i = 1; i + 1 < parts.size(); ++i)
    if (!parts[i].empty() &&
        parts[i].find_first_not_of("0123456789") == std::string::npos) {
      keep = i + 1;
      break;
    }
  std::string layer;
  for (size_t i = 0; i < keep; ++i)
    layer += (i ? "." : "") + parts[i];
  return layer;
}

Value OnnxImporter::valueOf(const std::string &name, bool frozen) {
  auto alias = renamed.find(name);
  if (alias != renamed.end())
    return valueOf(alias->second, frozen);
  auto it = values.find(name);
  if (it != values.end())
    return it->second;
  const onnx::TensorProto *t = initializer(name);
  bool constant = false;
  if (!t) {
    auto c = constants.find(name);
    if (c != constants.end() &&
        c->second->data_type() == onnx::TensorProto::FLOAT) {
      t = c->second; // a float Constant: a frozen parameter
      constant = true;
    }
  }
  if (!t) {
    fail("value '" + name + "' is used before it is defined");
    return Value();
  }
  frozen = frozen || constant;
  std::vector<float> data;
  if (!floats(*t, data))
    return Value();
  ::dtfm::format::Tensor tensor(
      std::vector<int64_t>(t->dims().begin(), t->dims().end()));
  tensor.data = std::move(data);
  ParamOp op = externalParam(name, std::move(tensor), frozen);
  // A name that is no module path ("onnx::MatMul_267", an exported
  // transposed copy) takes the layer of the op that reads it (tag()).
  bool modulePath = name.find('.') != std::string::npos &&
                    name.find(':') == std::string::npos;
  std::string layer = modulePath ? layerOfParameter(name) : "";
  if (modulePath)
    op->setAttr(kLayerAttrName, b.getStringAttr(layer));
  else
    unplaced[name] = op;
  layerOfValue[name] = layer;
  values[name] = op.getResult();
  return op.getResult();
}

Value OnnxImporter::tag(Operation *op, const onnx::NodeProto &node) {
  // The node's layer: from its first parameter's module path, else from the
  // node's scope (PyTorch names nodes "/h.0/Add", "/layer1/layer1.1/relu/
  // Relu": the module path starts at the last dotted component), else that
  // of its first input.
  std::string layer;
  for (const std::string &input : node.input())
    if (initializer(input) && input.find('.') != std::string::npos &&
        input.find(':') == std::string::npos) {
      layer = layerOfParameter(input);
      break;
    }
  if (layer.empty() && node.name().size() > 1 && node.name()[0] == '/') {
    std::vector<std::string> scopes;
    size_t at = 1;
    for (size_t slash; (slash = node.name().find('/', at)) != std::string::npos;
         at = slash + 1)
      scopes.push_back(node.name().substr(at, slash - at));
    size_t start = 0;
    for (size_t i = 0; i < scopes.size(); ++i)
      if (scopes[i].find('.') != std::string::npos)
        start = i;
    std::string path;
    for (size_t i = start; i < scopes.size(); ++i)
      path += (path.empty() ? "" : ".") + scopes[i];
    if (!path.empty())
      layer = layerOfParameter(path + ".op");
  }
  if (layer.empty())
    for (const std::string &input : node.input()) {
      auto it = layerOfValue.find(input);
      if (it != layerOfValue.end() && !it->second.empty()) {
        layer = it->second;
        break;
      }
    }
  if (layer.empty())
    layer = "input";
  op->setAttr(kLayerAttrName, b.getStringAttr(layer));
  // Parameters and constants awaiting a layer join their first reader's.
  for (auto it = unplaced.begin(); it != unplaced.end();) {
    if (!llvm::is_contained(op->getOperands(), it->second->getResult(0))) {
      ++it;
      continue;
    }
    it->second->setAttr(kLayerAttrName, b.getStringAttr(layer));
    layerOfValue[it->first] = layer;
    it = unplaced.erase(it);
  }
  for (const std::string &output : node.output())
    layerOfValue[output] = layer;
  for (const std::string &input : node.input())
    if (!layerOfValue.count(input))
      layerOfValue[input] = layer;
  return op->getNumResults() ? op->getResult(0) : Value();
}

std::map<std::string, const onnx::AttributeProto *>
attributesOf(const onnx::NodeProto &node) {
  std::map<std::string, const onnx::AttributeProto *> out;
  for (const onnx::AttributeProto &a : node.attribute())
    out[a.name()] = &a;
  return out;
}

/// Explicit [top, left, bottom, right] pads for auto_pad SAME_UPPER or
/// SAME_LOWER (VALID and NOTSET: the given pads).
bool explicitPads(const std::string &autoPad, ArrayRef<int64_t> inputShape,
                  ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                  ArrayRef<int64_t> dilations, std::vector<int64_t> &pads) {
  if (autoPad.empty() || autoPad == "NOTSET")
    return true;
  if (autoPad == "VALID") {
    pads = {0, 0, 0, 0};
    return true;
  }
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    return false;
  pads.assign(4, 0);
  for (int i = 0; i < 2; ++i) {
    int64_t in = inputShape[2 + i];
    int64_t out = (in + strides[i] - 1) / strides[i];
    int64_t span = (kernel[i] - 1) * dilations[i] + 1;
    int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + span - in);
    int64_t small = total / 2, large = total - small;
    pads[i] = autoPad == "SAME_UPPER" ? small : large;
    pads[i + 2] = autoPad == "SAME_UPPER" ? large : small;
  }
  return true;
}

bool OnnxImporter::convert(const onnx::NodeProto &node) {
  const std::string &type = node.op_type();
  auto attrs = attributesOf(node);
  auto ints = [&](const char *name, std::vector<int64_t> fallback) {
    auto it = attrs.find(name);
    return it == attrs.end() ? fallback
                             : std::vector<int64_t>(it->second->ints().begin(),
                                                    it->second->ints().end());
  };
  auto integer = [&](const char *name, int64_t fallback) {
    auto it = attrs.find(name);
    return it == attrs.end() ? fallback : it->second->i();
  };
  auto real = [&](const char *name, double fallback) {
    auto it = attrs.find(name);
    return it == attrs.end() ? fallback : static_cast<double>(it->second->f());
  };
  auto input = [&](int i, bool frozen = false) {
    return i < node.input_size() && !node.input(i).empty()
               ? valueOf(node.input(i), frozen)
               : Value();
  };
  if (type == "Reshape" && !initializer(node.input(1)) &&
      !constants.count(node.input(1)))
    return failAt(node, "the shape must be a constant (an initializer or a "
                        "Constant)");
  RankedTensorType result;
  if (node.output_size() > 0 && type != "Constant" && type != "Identity" &&
      type != "Dropout" && type != "Reshape" && type != "Squeeze" &&
      type != "Unsqueeze" && type != "Slice" && type != "Split" &&
      !typeOf(node.output(0), result))
    return false;
  Location loc = at(node);
  Value out;

  if (type == "Constant") {
    auto it = attrs.find("value");
    if (it == attrs.end())
      return failAt(node, "only 'value' constants are supported");
    constants[node.output(0)] = &it->second->t();
    return true;
  }
  if (type == "Identity" || type == "Dropout") {
    renamed[node.output(0)] = node.input(0);
    return true;
  }
  if (type == "Conv") {
    Value x = input(0), w = input(1), bias = input(2);
    if (!x || !w || (node.input_size() > 2 && !bias))
      return false;
    auto wType = cast<RankedTensorType>(w.getType());
    auto xType = cast<RankedTensorType>(x.getType());
    std::vector<int64_t> kernel =
        ints("kernel_shape", std::vector<int64_t>(wType.getShape().drop_front(2)));
    if (kernel.size() != 2 || xType.getRank() != 4)
      return failAt(node, "only 2-D convolutions are supported");
    std::vector<int64_t> strides = ints("strides", {1, 1}),
                         dilations = ints("dilations", {1, 1}),
                         pads = ints("pads", {0, 0, 0, 0});
    if (attrs.count("auto_pad") &&
        !explicitPads(attrs["auto_pad"]->s(), xType.getShape(), kernel,
                      strides, dilations, pads))
      return failAt(node, "unknown auto_pad '" + attrs["auto_pad"]->s() + "'");
    out = tag(b.create<Conv2dOp>(loc, result, x, w, bias,
                                 b.getDenseI64ArrayAttr(strides),
                                 b.getDenseI64ArrayAttr(pads),
                                 b.getDenseI64ArrayAttr(dilations),
                                 b.getI64IntegerAttr(integer("group", 1))),
              node);
  } else if (type == "BatchNormalization") {
    // A training-mode export lists the updated running statistics (and the
    // batch's) as outputs; dtfm.batchnorm updates its running statistics
    // itself, so they are fine as long as nothing reads them.
    for (int i = 1; i < node.output_size(); ++i)
      if (!node.output(i).empty() && consumed.count(node.output(i)))
        return failAt(node, "output '" + node.output(i) +
                                "' (a running statistic) is read by the "
                                "graph; dtfm.batchnorm keeps them internal");
    Value x = input(0), gamma = input(1), beta = input(2),
          mean = input(3, true), var = input(4, true);
    if (!x || !gamma || !beta || !mean || !var)
      return false;
    // ONNX's momentum weighs the running statistic; dtfm's (PyTorch's)
    // weighs the batch statistic.
    out = tag(b.create<BatchNormOp>(
                  loc, result, x, gamma, beta, mean, var,
                  b.getF64FloatAttr(real("epsilon", 1e-5)),
                  b.getF64FloatAttr(1.0 - real("momentum", 0.9))),
              node);
  } else if (type == "Relu") {
    Value x = input(0);
    if (!x)
      return false;
    out = tag(b.create<ReluOp>(loc, result, x), node);
  } else if (type == "MaxPool" || type == "AveragePool") {
    if (integer("ceil_mode", 0) != 0)
      return failAt(node, "ceil_mode=1 is not supported");
    if (ints("dilations", {1, 1}) != std::vector<int64_t>{1, 1})
      return failAt(node, "dilated pooling is not supported");
    Value x = input(0);
    if (!x)
      return false;
    auto xType = cast<RankedTensorType>(x.getType());
    if (xType.getRank() != 4)
      return failAt(node, "only 2-D pooling is supported");
    std::vector<int64_t> pads = ints("pads", {0, 0, 0, 0}),
                         kernelShape = ints("kernel_shape", {}),
                         strides = ints("strides", {1, 1});
    if (attrs.count("auto_pad") &&
        !explicitPads(attrs["auto_pad"]->s(), xType.getShape(), kernelShape,
                      strides, {1, 1}, pads))
      return failAt(node, "unknown auto_pad '" + attrs["auto_pad"]->s() + "'");
    bool padded = pads != std::vector<int64_t>{0, 0, 0, 0};
    if (type == "AveragePool" && padded &&
        integer("count_include_pad", 0) != 1)
      return failAt(node, "padded average pooling must count the padding "
                          "(count_include_pad=1)");
    auto kernel = b.getDenseI64ArrayAttr(kernelShape);
    auto strideAttr = b.getDenseI64ArrayAttr(strides);
    auto padding = b.getDenseI64ArrayAttr(pads);
    out = type == "MaxPool"
              ? tag(b.create<MaxPool2dOp>(loc, result, x, kernel, strideAttr,
                                          padding),
                    node)
              : tag(b.create<AvgPool2dOp>(loc, result, x, kernel, strideAttr,
                                          padding),
                    node);
  } else if (type == "GlobalAveragePool") {
    Value x = input(0);
    if (!x)
      return false;
    out = tag(b.create<GlobalAvgPoolOp>(loc, result, x), node);
  } else if (type == "Add" || type == "Sub" || type == "Mul" ||
             type == "Div") {
    Value lhs = input(0), rhs = input(1);
    if (!lhs || !rhs)
      return false;
    Operation *op =
        type == "Add"   ? b.create<AddOp>(loc, result, lhs, rhs).getOperation()
        : type == "Sub" ? b.create<SubOp>(loc, result, lhs, rhs).getOperation()
        : type == "Mul" ? b.create<MulOp>(loc, result, lhs, rhs).getOperation()
                        : b.create<DivOp>(loc, result, lhs, rhs).getOperation();
    out = tag(op, node);
  } else if (type == "Flatten") {
    Value x = input(0);
    if (!x)
      return false;
    int64_t axis = integer("axis", 1);
    if (axis < 0)
      axis += cast<RankedTensorType>(x.getType()).getRank();
    out = tag(b.create<FlattenOp>(loc, result, x, b.getI64IntegerAttr(axis)),
              node);
  } else if (type == "Reshape") {
    std::vector<int64_t> shape;
    if (!constantInts(node.input(1), shape))
      return false;
    Value x = input(0);
    if (!x)
      return false;
    // The result from the constant shape: 0 copies the input's dimension
    // (unless allowzero), -1 takes what is left.
    auto xType = cast<RankedTensorType>(x.getType());
    int64_t known = 1, unknown = -1;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] == 0 && integer("allowzero", 0) == 0) {
        if (i >= static_cast<size_t>(xType.getRank()))
          return failAt(node, "shape copies a dimension the input lacks");
        shape[i] = xType.getDimSize(i);
      }
      if (shape[i] == -1) {
        if (unknown >= 0)
          return failAt(node, "shape has two -1 dimensions");
        unknown = static_cast<int64_t>(i);
      } else if (shape[i] <= 0) {
        return failAt(node, "shape has a dimension " +
                                std::to_string(shape[i]));
      } else {
        known *= shape[i];
      }
    }
    if (unknown >= 0) {
      if (xType.getNumElements() % known != 0)
        return failAt(node, "shape does not divide the input's elements");
      shape[unknown] = xType.getNumElements() / known;
    }
    result = RankedTensorType::get(shape, xType.getElementType());
    out = tag(b.create<ReshapeOp>(loc, result, x), node);
  } else if (type == "Squeeze" || type == "Unsqueeze") {
    // Only the shape changes: a reshape. The axes: an attribute (opset
    // < 13) or a constant second input.
    Value x = input(0);
    if (!x)
      return false;
    std::vector<int64_t> axes = ints("axes", {});
    if (node.input_size() > 1 && !node.input(1).empty()) {
      if (!initializer(node.input(1)) && !constants.count(node.input(1)))
        return failAt(node, "the axes must be a constant");
      if (!constantInts(node.input(1), axes))
        return false;
    }
    auto xType = cast<RankedTensorType>(x.getType());
    std::vector<int64_t> shape(xType.getShape().begin(),
                               xType.getShape().end());
    int64_t rank = type == "Squeeze"
                       ? xType.getRank()
                       : xType.getRank() + static_cast<int64_t>(axes.size());
    std::set<int64_t> chosen;
    for (int64_t a : axes) {
      if (a < -rank || a >= rank)
        return failAt(node, "axis " + std::to_string(a) + " out of range");
      chosen.insert(a < 0 ? a + rank : a);
    }
    std::vector<int64_t> dims;
    if (type == "Squeeze") {
      for (int64_t i = 0; i < xType.getRank(); ++i) {
        bool drop = axes.empty() ? shape[i] == 1 : chosen.count(i) > 0;
        if (drop && shape[i] != 1)
          return failAt(node, "squeezes dimension " + std::to_string(i) +
                                  " of size " + std::to_string(shape[i]));
        if (!drop)
          dims.push_back(shape[i]);
      }
    } else {
      size_t next = 0;
      for (int64_t i = 0; i < rank; ++i)
        dims.push_back(chosen.count(i) ? 1 : shape[next++]);
    }
    result = RankedTensorType::get(dims, xType.getElementType());
    out = tag(b.create<ReshapeOp>(loc, result, x), node);
  } else if (type == "Sqrt" || type == "Tanh" || type == "Erf" ||
             type == "Exp") {
    Value x = input(0);
    if (!x)
      return false;
    Operation *op =
        type == "Sqrt"   ? b.create<SqrtOp>(loc, result, x).getOperation()
        : type == "Tanh" ? b.create<TanhOp>(loc, result, x).getOperation()
        : type == "Erf"  ? b.create<ErfOp>(loc, result, x).getOperation()
                         : b.create<ExpOp>(loc, result, x).getOperation();
    out = tag(op, node);
  } else if (type == "Neg") {
    // x * -1, the constant a frozen parameter of its own.
    Value x = input(0);
    if (!x)
      return false;
    Value minusOne = scalarConstant(node.output(0) + ".minus_one", -1);
    out = tag(b.create<MulOp>(loc, result, x, minusOne), node);
  } else if (type == "Pow") {
    const onnx::TensorProto *e = initializer(node.input(1));
    if (!e) {
      auto c = constants.find(node.input(1));
      e = c == constants.end() ? nullptr : c->second;
    }
    std::vector<float> exponent;
    if (!e || !floats(*e, exponent) || exponent.size() != 1)
      return failAt(node, "the exponent must be one float constant");
    Value x = input(0);
    if (!x)
      return false;
    out = tag(b.create<PowOp>(loc, result, x,
                              b.getF64FloatAttr(exponent[0])),
              node);
  } else if (type == "ReduceMean") {
    std::vector<int64_t> axes = ints("axes", {});
    if (node.input_size() > 1 && !node.input(1).empty() &&
        !constantInts(node.input(1), axes))
      return false;
    Value x = input(0);
    if (!x)
      return false;
    if (axes.empty()) // all of them
      for (int64_t i = 0; i < cast<RankedTensorType>(x.getType()).getRank();
           ++i)
        axes.push_back(i);
    out = tag(b.create<ReduceMeanOp>(
                  loc, result, x, b.getDenseI64ArrayAttr(axes),
                  integer("keepdims", 1) ? b.getUnitAttr() : UnitAttr()),
              node);
  } else if (type == "Gather") {
    Value x = input(0);
    Value indices = x ? integerValueOf(node.input(1)) : Value();
    if (!indices)
      return false;
    if (!cast<RankedTensorType>(indices.getType()).getElementType().isInteger(
            64))
      return failAt(node, "indices must be int64 or int32");
    int64_t axis = integer("axis", 0);
    if (axis < 0)
      axis += cast<RankedTensorType>(x.getType()).getRank();
    out = tag(b.create<GatherOp>(loc, result, x, indices,
                                 b.getI64IntegerAttr(axis)),
              node);
  } else if (type == "Where") {
    Value condition = integerValueOf(node.input(0));
    if (!condition)
      return false;
    if (!cast<RankedTensorType>(condition.getType())
             .getElementType()
             .isInteger(1))
      return failAt(node, "the condition must be bool");
    Value lhs = input(1), rhs = input(2);
    if (!lhs || !rhs)
      return false;
    out = tag(b.create<WhereOp>(loc, result, condition, lhs, rhs), node);
  } else if (type == "Concat") {
    SmallVector<Value> parts;
    for (int i = 0; i < node.input_size(); ++i) {
      Value v = input(i);
      if (!v)
        return false;
      parts.push_back(v);
    }
    int64_t axis = integer("axis", 0);
    if (axis < 0)
      axis += result.getRank();
    out = tag(b.create<ConcatOp>(loc, result, parts,
                                 b.getI64IntegerAttr(axis)),
              node);
  } else if (type == "Slice" || type == "Split") {
    Value x = input(0);
    if (!x)
      return false;
    auto xType = cast<RankedTensorType>(x.getType());
    int64_t rank = xType.getRank();
    auto makeSlice = [&](std::vector<int64_t> starts, std::vector<int64_t> ends,
                         std::vector<int64_t> steps) {
      std::vector<int64_t> shape;
      for (int64_t i = 0; i < rank; ++i)
        shape.push_back((ends[i] - starts[i] + steps[i] - 1) / steps[i]);
      return tag(b.create<SliceOp>(
                     loc, RankedTensorType::get(shape, xType.getElementType()),
                     x, b.getDenseI64ArrayAttr(starts),
                     b.getDenseI64ArrayAttr(ends),
                     b.getDenseI64ArrayAttr(steps)),
                 node);
    };
    std::vector<int64_t> full(xType.getShape().begin(), xType.getShape().end());
    if (type == "Split") {
      int64_t axis = integer("axis", 0);
      if (axis < 0)
        axis += rank;
      std::vector<int64_t> sizes = ints("split", {});
      if (node.input_size() > 1 && !node.input(1).empty() &&
          !constantInts(node.input(1), sizes))
        return false;
      int parts = node.output_size();
      if (sizes.empty()) {
        if (full[axis] % parts != 0)
          return failAt(node, "an even split of " +
                                  std::to_string(full[axis]) + " into " +
                                  std::to_string(parts));
        sizes.assign(parts, full[axis] / parts);
      }
      if (static_cast<int>(sizes.size()) != parts)
        return failAt(node, "split sizes and outputs differ in number");
      int64_t begin = 0;
      for (int i = 0; i < parts; ++i) {
        std::vector<int64_t> starts(rank, 0), ends = full,
                             steps(rank, 1);
        starts[axis] = begin;
        ends[axis] = begin + sizes[i];
        begin += sizes[i];
        if (sizes[i] <= 0 || ends[axis] > full[axis])
          return failAt(node, "split sizes do not fit the axis");
        values[node.output(i)] = makeSlice(starts, ends, steps);
      }
      return true;
    }
    std::vector<int64_t> starts, ends, axes, steps;
    if (!constantInts(node.input(1), starts) ||
        !constantInts(node.input(2), ends))
      return false;
    if (node.input_size() > 3 && !node.input(3).empty() &&
        !constantInts(node.input(3), axes))
      return false;
    if (node.input_size() > 4 && !node.input(4).empty() &&
        !constantInts(node.input(4), steps))
      return false;
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i)
        axes.push_back(static_cast<int64_t>(i));
    if (steps.empty())
      steps.assign(starts.size(), 1);
    std::vector<int64_t> s0(rank, 0), e0 = full, st0(rank, 1);
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
      if (a < 0 || a >= rank || steps[i] < 1)
        return failAt(node, "only slices with positive steps on valid axes");
      auto clampIndex = [&](int64_t v) {
        if (v < 0)
          v += full[a];
        return std::max<int64_t>(0, std::min(v, full[a]));
      };
      s0[a] = clampIndex(starts[i]);
      e0[a] = clampIndex(ends[i]);
      st0[a] = steps[i];
      if (s0[a] >= e0[a])
        return failAt(node, "an empty slice");
    }
    out = makeSlice(s0, e0, st0);
  } else if (type == "Transpose") {
    Value x = input(0);
    if (!x)
      return false;
    int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
    std::vector<int64_t> perm = ints("perm", {});
    if (perm.empty()) // default: reverse the dimensions
      for (int64_t i = rank; i-- > 0;)
        perm.push_back(i);
    out = tag(b.create<TransposeOp>(loc, result, x,
                                    b.getDenseI64ArrayAttr(perm)),
              node);
  } else if (type == "Cast") {
    Value x = input(0);
    if (!x)
      return false;
    if (cast<RankedTensorType>(x.getType()).getElementType() !=
        result.getElementType())
      return failAt(node, "casts between float and integer tensors are not "
                          "supported");
    out = x; // float to float, or integer to integer: the same tensor here
    layerOfValue[node.output(0)] = layerOfValue[node.input(0)];
  } else if (type == "Softmax") {
    Value x = input(0);
    if (!x)
      return false;
    int64_t rank = result.getRank(), axis = integer("axis", -1);
    if (axis < 0)
      axis += rank;
    if (axis == rank - 1) {
      out = tag(b.create<SoftmaxOp>(loc, result, x, b.getI64IntegerAttr(-1)),
                node);
    } else { // swap the axis with the last, softmax, swap back
      SmallVector<int64_t> perm, swapped(result.getShape());
      for (int64_t i = 0; i < rank; ++i)
        perm.push_back(i);
      std::swap(perm[axis], perm[rank - 1]);
      std::swap(swapped[axis], swapped[rank - 1]);
      auto swappedType = floatType(swapped);
      Value t = tag(b.create<TransposeOp>(loc, swappedType, x,
                                          b.getDenseI64ArrayAttr(perm)),
                    node);
      t = tag(b.create<SoftmaxOp>(loc, swappedType, t, b.getI64IntegerAttr(-1)),
              node);
      out = tag(b.create<TransposeOp>(loc, result, t,
                                      b.getDenseI64ArrayAttr(perm)),
                node);
    }
  } else if (type == "MatMul") {
    Value lhs = input(0), rhs = input(1);
    if (!lhs || !rhs)
      return false;
    out = tag(b.create<MatmulOp>(loc, result, lhs, rhs, UnitAttr()), node);
  } else if (type == "Gemm") {
    double alpha = real("alpha", 1), beta = real("beta", 1);
    const onnx::TensorProto *weight = initializer(node.input(1));
    bool transB = integer("transB", 0) != 0;
    Value x = input(0);
    if (!x)
      return false;
    if (integer("transA", 0) != 0) { // A^T as a transpose of its own
      auto a = cast<RankedTensorType>(x.getType());
      x = tag(b.create<TransposeOp>(
                  loc, floatType({a.getDimSize(1), a.getDimSize(0)}), x,
                  b.getDenseI64ArrayAttr({1, 0})),
              node);
    }
    Value w;
    if (weight && transB) {
      // A Linear layer: store W^T ([K, N]) as the parameter, as
      // dtfm.linear wants it.
      std::vector<float> data;
      if (!floats(*weight, data))
        return false;
      int64_t n = weight->dims(0), k = weight->dims(1);
      ::dtfm::format::Tensor t({k, n});
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < k; ++j)
          t.data[j * n + i] = data[i * k + j];
      std::string name = node.input(1);
      ParamOp param = externalParam(name, std::move(t), /*frozen=*/false);
      param->setAttr(kLayerAttrName,
                     b.getStringAttr(layerOfParameter(name)));
      w = param.getResult();
    } else {
      w = input(1);
    }
    Value bias = input(2);
    if (!w || (node.input_size() > 2 && !bias))
      return false;
    bool vectorBias =
        !bias || cast<RankedTensorType>(bias.getType()).getShape() ==
                     ArrayRef<int64_t>{result.getShape().back()};
    if (weight && transB && vectorBias && alpha == 1 && beta == 1) {
      out = tag(b.create<LinearOp>(loc, result, x, w, bias), node);
    } else {
      // B used as it is (transposed by the matmul), any broadcastable C.
      bool transposed = transB && !weight;
      Value product = tag(b.create<MatmulOp>(loc, result, x, w,
                                             transposed ? b.getUnitAttr()
                                                        : UnitAttr()),
                          node);
      if (weight && transB) // W^T was stored: a plain product
        product.getDefiningOp()->removeAttr("transpose_rhs");
      // alpha * A B + beta * C, each scale a frozen scalar of its own.
      if (alpha != 1)
        product = tag(b.create<MulOp>(loc, result, product,
                                      scalarConstant(node.output(0) + ".alpha",
                                                     alpha)),
                      node);
      if (bias && beta != 1)
        bias = tag(b.create<MulOp>(loc, bias.getType(), bias,
                                   scalarConstant(node.output(0) + ".beta",
                                                  beta)),
                   node);
      out = bias ? tag(b.create<AddOp>(loc, result, product, bias), node)
                 : product;
    }
  } else if (type == "dtfm.LayerNorm") {
    Value x = input(0), gamma = input(1), beta = input(2);
    if (!x || !gamma || !beta)
      return false;
    out = tag(b.create<LayerNormOp>(loc, result, x, gamma, beta,
                                    b.getF64FloatAttr(real("epsilon", 1e-5))),
              node);
  } else if (type == "dtfm.Gelu") {
    Value x = input(0);
    if (!x)
      return false;
    out = tag(b.create<GeluOp>(loc, result, x, UnitAttr()), node);
  } else if (type == "dtfm.Linear") {
    Value x = input(0), w = input(1), bias = input(2);
    if (!x || !w || !bias)
      return false;
    out = tag(b.create<LinearOp>(loc, result, x, w, bias), node);
  } else if (type == "dtfm.Embedding") {
    Value indices = input(0), table = input(1);
    if (!indices || !table)
      return false;
    out = tag(b.create<EmbeddingOp>(loc, result, indices, table), node);
  } else if (type == "dtfm.CausalAttention") {
    Value q = input(0), k = input(1), v = input(2);
    if (!q || !k || !v)
      return false;
    int64_t heads = integer("num_heads", 1);
    int64_t hidden = cast<RankedTensorType>(q.getType()).getShape().back();
    double expected = std::sqrt(static_cast<double>(hidden / heads));
    if (std::fabs(real("divisor", 0) - expected) > 1e-4 * expected)
      return failAt(node, "attention scores scaled by " +
                              std::to_string(real("divisor", 0)) +
                              ", not sqrt(head dim) = " +
                              std::to_string(expected));
    out = tag(b.create<CausalAttentionOp>(loc, result, q, k, v,
                                          b.getI64IntegerAttr(heads)),
              node);
  } else {
    return failAt(node, "unsupported op"); // filtered before; kept safe
  }
  if (!out)
    return false;
  values[node.output(0)] = out;
  return true;
}

bool OnnxImporter::mapGraph() {
  const onnx::GraphProto &graph = model.graph();
  for (const onnx::TensorProto &t : graph.initializer())
    initializers[t.name()] = &t;
  auto record = [&](const onnx::ValueInfoProto &info) {
    const auto &tensor = info.type().tensor_type();
    if (!tensor.has_shape())
      return;
    std::vector<int64_t> shape;
    for (const auto &d : tensor.shape().dim()) {
      if (!d.has_dim_value())
        return;
      shape.push_back(d.dim_value());
    }
    Type element;
    switch (tensor.elem_type()) {
    case onnx::TensorProto::FLOAT:
      element = b.getF32Type();
      break;
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::INT32:
      element = b.getI64Type();
      break;
    case onnx::TensorProto::BOOL:
      element = b.getI1Type();
      break;
    default: // refused when the value is used (typeOf)
      badTypes[info.name()] = onnx::TensorProto::DataType_Name(
          static_cast<onnx::TensorProto::DataType>(tensor.elem_type()));
      return;
    }
    types[info.name()] = RankedTensorType::get(shape, element);
  };
  for (const auto &v : graph.input())
    record(v);
  for (const auto &v : graph.value_info())
    record(v);
  for (const auto &v : graph.output()) {
    record(v);
    consumed.insert(v.name());
  }
  for (const onnx::NodeProto &node : graph.node())
    consumed.insert(node.input().begin(), node.input().end());
  return true;
}

OwningOpRef<ModuleOp> OnnxImporter::run(std::string &error) {
  if (!load() || !mapGraph()) {
    error = problem;
    return nullptr;
  }
  const onnx::GraphProto &graph = model.graph();
  // Every unsupported op type, counted, in one diagnostic.
  std::map<std::string, int> unsupported;
  for (const onnx::NodeProto &node : graph.node())
    if (!kSupported.count(node.op_type()) ||
        (!node.domain().empty() && node.domain() != "ai.onnx"))
      ++unsupported[node.domain().empty() ? node.op_type()
                                          : node.domain() + "." +
                                                node.op_type()];
  if (!unsupported.empty()) {
    std::string list;
    for (const auto &[op, count] : unsupported)
      list += (list.empty() ? "" : ", ") + op + " x" + std::to_string(count);
    error = path + ": unsupported ONNX ops: " + list;
    return nullptr;
  }
  if (graph.output_size() == 0) {
    error = path + ": the graph has no output";
    return nullptr;
  }
  if (!options.loss.empty() && options.loss != "cross-entropy") {
    error = "--loss: unknown loss '" + options.loss +
            "' (known: cross-entropy)";
    return nullptr;
  }

  Location loc = NameLoc::get(b.getStringAttr(graph.name()));
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  // The result type is set once the output is built.
  RankedTensorType returnType = RankedTensorType::get({}, b.getF32Type());
  std::string name = graph.name().empty() ? "model" : graph.name();
  for (char &c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)))
      c = '_';
  auto func = b.create<func::FuncOp>(loc, name,
                                     b.getFunctionType({}, {returnType}));
  func->setAttr("dtfm.model", b.getStringAttr(name));
  b.setInsertionPointToStart(func.addEntryBlock());

  for (const onnx::ValueInfoProto &input : graph.input()) {
    if (initializers.count(input.name()))
      continue;
    RankedTensorType type;
    if (!typeOf(input.name(), type)) {
      error = problem;
      return nullptr;
    }
    auto op = b.create<InputOp>(NameLoc::get(b.getStringAttr(input.name())),
                                type, b.getStringAttr(input.name()));
    op->setAttr(kLayerAttrName, b.getStringAttr("input"));
    values[input.name()] = op.getResult();
    layerOfValue[input.name()] = "input";
  }
  for (const onnx::NodeProto &node : graph.node())
    if (!convert(node)) {
      error = problem;
      return nullptr;
    }
  Value result = valueOf(graph.output(0).name());
  if (!result) {
    error = problem;
    return nullptr;
  }
  if (!options.loss.empty()) {
    auto logits = cast<RankedTensorType>(result.getType());
    if (logits.getRank() < 2) {
      error = path + ": --loss cross-entropy needs logits of rank >= 2, the "
                     "output has rank " +
              std::to_string(logits.getRank());
      return nullptr;
    }
    auto labelShape = logits.getShape().drop_back();
    std::string layer = layerOfValue[graph.output(0).name()];
    auto label = b.create<LabelOp>(
        NameLoc::get(b.getStringAttr(options.labels)),
        RankedTensorType::get(labelShape, b.getI64Type()),
        b.getStringAttr(options.labels));
    label->setAttr(kLayerAttrName, b.getStringAttr(layer));
    auto loss = b.create<CrossEntropyOp>(
        NameLoc::get(b.getStringAttr("loss")),
        RankedTensorType::get({}, b.getF32Type()), result, label.getResult());
    loss->setAttr(kLayerAttrName, b.getStringAttr(layer));
    result = loss.getResult();
  }
  b.create<func::ReturnOp>(loc, result);
  func.setType(b.getFunctionType({}, {result.getType()}));

  // A variant the dialect does not have (a 1-D convolution, integer
  // operands, ...) fails an op's verifier: reported as one line naming the
  // ONNX node.
  std::string diagnostic;
  {
    ScopedDiagnosticHandler handler(b.getContext(), [&](Diagnostic &d) {
      if (diagnostic.empty()) {
        std::string where;
        if (auto name = dyn_cast<NameLoc>(d.getLocation()))
          where = "node '" + name.getName().str() + "': ";
        diagnostic = where + d.str();
      }
      return success();
    });
    if (failed(verify(*module))) {
      error = path + ": " + diagnostic;
      return nullptr;
    }
  }

  // Only what the module uses goes to the weights file.
  if (!options.weightsPath.empty()) {
    module->getOperation()->setAttr("dtfm.weights",
                                    b.getStringAttr(options.weightsPath));
    if (!::dtfm::format::writeTensorFile(options.weightsPath, weights, error))
      return nullptr;
  }
  return module;
}

} // namespace

OwningOpRef<ModuleOp> mlir::dtfm::importOnnx(MLIRContext *context,
                                             const std::string &path,
                                             const OnnxImportOptions &options,
                                             std::string &error) {
  context->getOrLoadDialect<DtfmDialect>();
  context->getOrLoadDialect<func::FuncDialect>();
  OnnxImporter importer(context, path, options);
  return importer.run(error);
}
