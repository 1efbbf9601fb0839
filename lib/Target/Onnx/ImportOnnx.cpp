//===- ImportOnnx.cpp - ONNX models into the dtfm dialect -----------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The importer's mapping of a loaded graph (LoadOnnx.cpp) into the dialect:
// values, constants and parameters, layers from the exporter's scopes, and
// each node through its converter (ConvertOps.cpp's table).
//
//===----------------------------------------------------------------------===//

#include "Importer.h"

#include "ExternalData.h"
#include "FoldConstants.h"
#include "FusePatterns.h"

#include "dtfm/Dialect/Dtfm/IR/DtfmDialect.h"
#include "dtfm/Dialect/Dtfm/IR/DtfmOps.h"
#include "dtfm/Format/TensorFile.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <google/protobuf/stubs/logging.h>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <cmath>
#include <fstream>
#include <functional>
#include <set>
#include <sys/wait.h>
#include <unistd.h>

using namespace mlir;
using namespace mlir::dtfm;

namespace mlir::dtfm::onnximport {

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

bool OnnxImporter::floats(const onnx::TensorProto &t, std::vector<float> &out) {
  std::string error;
  return readTensorFloats(t, out, error) ||
         fail("initializer '" + t.name() + "' " + error);
}

const onnx::TensorProto *OnnxImporter::constantTensor(const std::string &name) {
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
  std::string error;
  return readTensorInts(*t, out, error) ||
         fail("constant '" + name + "' " + error);
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
  return filledConstant(name, {}, value);
}

Value OnnxImporter::filledConstant(const std::string &name,
                                   std::vector<int64_t> shape, double value) {
  return tensorConstant(name, ::dtfm::format::Tensor(
                                  std::move(shape), static_cast<float>(value)));
}

Value OnnxImporter::tensorConstant(const std::string &name,
                                   ::dtfm::format::Tensor tensor) {
  ParamOp op = externalParam(name, std::move(tensor), /*frozen=*/true);
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
  Type element = t->data_type() == onnx::TensorProto::BOOL ? b.getI1Type()
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

/// The module path of a node PyTorch named by its scopes: each scope is a
/// child's name, qualified by its parent's when the parent is a sequence
/// ("/h.0/Add" -> "h.0").
std::string modulePathOfScope(const std::string &nodeName) {
  std::string path, previous;
  size_t at = 1;
  for (size_t slash; (slash = nodeName.find('/', at)) != std::string::npos;
       at = slash + 1) {
    std::string scope = nodeName.substr(at, slash - at);
    std::string part = scope;
    if (!previous.empty() && scope.size() > previous.size() &&
        scope.compare(0, previous.size() + 1, previous + ".") == 0)
      part = scope.substr(previous.size() + 1);
    if (!part.empty())
      path += (path.empty() ? "" : ".") + part;
    previous = scope;
  }
  return path;
}

/// Renames each later run of a layer that appeared before another one
/// ("x" -> "x#2"): the partitioner cuts between layers in graph order, so
/// every layer must be one contiguous run of ops.
void keepLayersContiguous(func::FuncOp func) {
  std::map<std::string, int> runs;
  std::string current;
  std::string renamed;
  func.walk([&](Operation *op) {
    auto layer = op->getAttrOfType<StringAttr>(kLayerAttrName);
    if (!layer)
      return;
    if (layer.getValue() != current) {
      current = layer.getValue().str();
      int run = ++runs[current];
      renamed = run == 1 ? "" : current + "#" + std::to_string(run);
    }
    if (!renamed.empty())
      op->setAttr(kLayerAttrName, StringAttr::get(op->getContext(), renamed));
  });
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
  frozen = frozen || constant || frozenByImport(name);
  std::vector<float> data;
  if (!floats(*t, data))
    return Value();
  // An additive mask (-inf above the diagonal) or another non-finite
  // tensor is no parameter: weight decay would make it NaN.
  if (!frozen && !std::all_of(data.begin(), data.end(),
                              [](float v) { return std::isfinite(v); })) {
    frozen = true;
    nonFinite.push_back(name);
  }
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
  if (layer.empty() && node.name().size() > 1 && node.name()[0] == '/')
    if (std::string path = modulePathOfScope(node.name()); !path.empty())
      layer = layerOfParameter(path + ".op");
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

bool OnnxImporter::convert(const onnx::NodeProto &node) {
  const std::string &type = node.op_type();
  auto converter = converters().find(type);
  if (converter == converters().end())
    return failAt(node, "unsupported op"); // filtered before; kept safe
  if (type == "Reshape" && !initializer(node.input(1)) &&
      !constants.count(node.input(1)))
    return failAt(node, "the shape must be a constant (an initializer or a "
                        "Constant)");
  NodeCall c{*this,    node,   attributesOf(node), type, RankedTensorType(),
             at(node), Value()};
  if (node.output_size() > 0 && !node.output(0).empty() &&
      type != "Constant" && type != "Identity" &&
      type != "Dropout" && type != "Reshape" && type != "Squeeze" &&
      type != "Unsqueeze" && type != "Slice" && type != "Split" &&
      !typeOf(node.output(0), c.result))
    return false;
  if (!(this->*converter->second)(node, c))
    return false;
  if (c.done)
    return true;
  if (!c.out)
    return false;
  values[node.output(0)] = c.out;
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
  std::map<std::string, std::string> copies; // Identity / Dropout outputs
  for (const onnx::NodeProto &node : graph.node()) {
    bool copy = node.op_type() == "Identity" || node.op_type() == "Dropout";
    for (int i = 0; i < node.input_size(); ++i) {
      std::string source = node.input(i);
      for (auto it = copies.find(source); it != copies.end();
           it = copies.find(source))
        source = it->second;
      if (copy && i == 0 && node.output_size() > 0)
        copies[node.output(0)] = source;
      else if (!source.empty())
        readers[source].push_back({&node, i});
    }
  }
  return true;
}

bool OnnxImporter::onlyTransposedByGemms(const std::string &name) {
  auto it = readers.find(name);
  return it != readers.end() &&
         llvm::all_of(it->second, [&](const auto &reader) {
           const onnx::NodeProto &node = *reader.first;
           // Read through a copy, it would be looked up as W.
           if (node.op_type() != "Gemm" || reader.second != 1 ||
               node.input(1) != name)
             return false;
           for (const onnx::AttributeProto &a : node.attribute())
             if (a.name() == "transB")
               return a.i() != 0;
           return false;
         });
}

OwningOpRef<ModuleOp> OnnxImporter::run(std::string &error) {
  if (!load() || !mapGraph()) {
    error = problem;
    return nullptr;
  }
  const onnx::GraphProto &graph = model.graph();
  // Every unsupported op type, counted, with the first nodes of each (the
  // fused patterns leave the nodes of a chain they did not match), in one
  // diagnostic.
  std::map<std::string, std::vector<std::string>> unsupported;
  for (const onnx::NodeProto &node : graph.node())
    if (!converters().count(node.op_type()) ||
        (!node.domain().empty() && node.domain() != "ai.onnx"))
      unsupported[node.domain().empty() ? node.op_type()
                                        : node.domain() + "." + node.op_type()]
          .push_back(node.name().empty() ? "(unnamed)" : node.name());
  if (!unsupported.empty()) {
    int64_t opset = 0;
    for (const onnx::OperatorSetIdProto &set : model.opset_import())
      if (set.domain().empty() || set.domain() == "ai.onnx")
        opset = set.version();
    std::string list;
    for (const auto &[op, nodes] : unsupported) {
      list += (list.empty() ? "" : "; ") + op + " x" +
              std::to_string(nodes.size()) + " at ";
      for (size_t i = 0; i < nodes.size() && i < 3; ++i)
        list += (i ? ", '" : "'") + nodes[i] + "'";
      if (nodes.size() > 3)
        list += " and " + std::to_string(nodes.size() - 3) + " more";
    }
    error = path + ": unsupported ONNX ops (opset " + std::to_string(opset) +
            "): " + list;
    return nullptr;
  }
  if (graph.output_size() == 0) {
    error = path + ": the graph has no output";
    return nullptr;
  }
  if (!options.loss.empty() && options.loss != "cross-entropy") {
    error =
        "--loss: unknown loss '" + options.loss + "' (known: cross-entropy)";
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
  auto func =
      b.create<func::FuncOp>(loc, name, b.getFunctionType({}, {returnType}));
  func->setAttr(kModelAttrName, b.getStringAttr(name));
  b.setInsertionPointToStart(func.addEntryBlock());

  for (const onnx::ValueInfoProto &input : graph.input()) {
    if (initializers.count(input.name()))
      continue;
    // Input files name a micro-batch's tensors "name@index"; the loss's
    // labels are an input of their own.
    if (input.name().find('@') != std::string::npos) {
      error = path + ": input '" + input.name() +
              "': '@' is reserved in input names (input files name tensors "
              "'name@micro-batch')";
      return nullptr;
    }
    if (!options.loss.empty() && input.name() == options.labels) {
      error = path + ": input '" + input.name() +
              "' has the name of the loss's labels; give the labels "
              "another with --labels";
      return nullptr;
    }
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
  // Constants a converter read but did not use (InstanceNormalization's
  // scale of ones): no op took them into its layer; they go, with their
  // weights.
  for (auto it = unplaced.begin(); it != unplaced.end();) {
    Operation *op = it->second;
    if (!op->use_empty() || op->getResult(0) == result) {
      ++it;
      continue;
    }
    weights.erase(it->first);
    values.erase(it->first);
    op->erase();
    it = unplaced.erase(it);
  }
  warnExport();
  if (!options.loss.empty()) {
    auto logits = cast<RankedTensorType>(result.getType());
    if (logits.getRank() < 2) {
      error = path +
              ": --loss cross-entropy needs logits of rank >= 2, the "
              "output has rank " +
              std::to_string(logits.getRank());
      return nullptr;
    }
    auto labelShape = logits.getShape().drop_back();
    std::string layer = layerOfValue[graph.output(0).name()];
    auto label =
        b.create<LabelOp>(NameLoc::get(b.getStringAttr(options.labels)),
                          RankedTensorType::get(labelShape, b.getI64Type()),
                          b.getStringAttr(options.labels));
    label->setAttr(kLayerAttrName, b.getStringAttr(layer));
    auto loss =
        b.create<CrossEntropyOp>(NameLoc::get(b.getStringAttr("loss")),
                                 RankedTensorType::get({}, b.getF32Type()),
                                 result, label.getResult(), IntegerAttr(),
                                 IntegerAttr());
    loss->setAttr(kLayerAttrName, b.getStringAttr(layer));
    result = loss.getResult();
  }
  b.create<func::ReturnOp>(loc, result);
  func.setType(b.getFunctionType({}, {result.getType()}));
  keepLayersContiguous(func);

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
    module->getOperation()->setAttr(kWeightsAttrName,
                                    b.getStringAttr(options.weightsPath));
    // Absolute: --export-onnx may run from another folder.
    SmallString<256> absolute(path);
    llvm::sys::fs::make_absolute(absolute);
    llvm::sys::path::remove_dots(absolute, /*remove_dot_dot=*/true);
    module->getOperation()->setAttr(kOnnxModelAttrName,
                                    b.getStringAttr(absolute.str()));
    if (!::dtfm::format::writeTensorFile(options.weightsPath, weights, error))
      return nullptr;
  }
  return module;
}

} // namespace mlir::dtfm::onnximport

OwningOpRef<ModuleOp> mlir::dtfm::importOnnx(MLIRContext *context,
                                             const std::string &path,
                                             const OnnxImportOptions &options,
                                             std::string &error) {
  context->getOrLoadDialect<DtfmDialect>();
  context->getOrLoadDialect<func::FuncDialect>();
  onnximport::OnnxImporter importer(context, path, options);
  return importer.run(error);
}
