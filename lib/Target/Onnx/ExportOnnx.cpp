//===- ExportOnnx.cpp - Trained weights back into the ONNX file -----------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Target/Onnx/ExportOnnx.h"
#include "dtfm/Dialect/Dtfm/IR/DtfmDialect.h"
#include "dtfm/Dialect/Dtfm/IR/DtfmOps.h"
#include "dtfm/Format/FileIo.h"
#include "dtfm/Support/OpShapes.h"

#include <onnx/onnx_pb.h>
#include <google/protobuf/stubs/logging.h>

#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <unistd.h>

using namespace mlir;
using namespace mlir::dtfm;
using ::dtfm::shapes::shapeText;

namespace {

/// What the module says of one parameter.
struct ModuleParam {
  std::vector<int64_t> shape;
  bool transposed = false, frozen = false, external = false;
};

} // namespace

bool mlir::dtfm::exportTrainedOnnx(ModuleOp module,
                                   const ::dtfm::format::TensorMap &weights,
                                   const std::string &weightsSource,
                                   std::string &bytes, std::string &error) {
  auto source = module->getAttrOfType<StringAttr>(kOnnxModelAttrName);
  if (!source) {
    error = "the module was not imported from ONNX (it has no " +
            kOnnxModelAttrName.str() +
            "): --export-onnx writes an imported model's ONNX file back";
    return false;
  }
  std::string onnxPath = source.str();
  std::map<std::string, ModuleParam> params;
  module.walk([&](ParamOp op) {
    ModuleParam p;
    auto type = cast<RankedTensorType>(op.getResult().getType());
    p.shape.assign(type.getShape().begin(), type.getShape().end());
    p.transposed = op->hasAttr(kOnnxTransposedAttrName);
    p.frozen = op.getFrozen();
    p.external = op.getInit() == InitKind::external;
    params.emplace(op.getName().str(), p);
  });
  for (const auto &[name, t] : weights) {
    auto it = params.find(name);
    if (it == params.end()) {
      error = weightsSource + ": tensor '" + name +
              "' is not a parameter of the module (weights of another model?)";
      return false;
    }
    if (t.shape != it->second.shape) {
      error = weightsSource + ": tensor '" + name + "' has shape " +
              shapeText(t.shape) + ", the module's parameter " +
              shapeText(it->second.shape);
      return false;
    }
  }
  for (const auto &[name, p] : params)
    if (!p.frozen && !weights.count(name)) {
      error = weightsSource + ": no tensor '" + name +
              "', a trained parameter of the module";
      return false;
    }

  onnx::ModelProto model;
  {
    int fd = ::dtfm::format::openRegularFile(onnxPath, error);
    if (fd < 0) {
      error = onnxPath + " (the module's " + kOnnxModelAttrName.str() +
              ")" + error.substr(onnxPath.size());
      return false;
    }
    google::protobuf::LogSilencer noLog;
    bool parsed = model.ParseFromFileDescriptor(fd);
    ::close(fd);
    if (!parsed) {
      error = onnxPath + ": not an ONNX model (protobuf does not parse)";
      return false;
    }
  }
  std::map<std::string, bool> written;
  for (onnx::TensorProto &t : *model.mutable_graph()->mutable_initializer()) {
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
      error = onnxPath + ": initializer '" + t.name() +
              "' is kept in a file beside the model (external data): "
              "--export-onnx writes models that hold their tensors";
      return false;
    }
    auto trained = weights.find(t.name());
    if (trained == weights.end())
      continue;
    const ModuleParam &p = params.at(t.name());
    if (!p.external)
      continue; // not the initializer's values in dtfm (never so today)
    if (t.data_type() != onnx::TensorProto::FLOAT) {
      error = onnxPath + ": initializer '" + t.name() +
              "' is not float32: dtfm trained it as float32";
      return false;
    }
    std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
    std::vector<int64_t> expected = trained->second.shape;
    if (p.transposed && expected.size() == 2)
      std::swap(expected[0], expected[1]);
    if (dims != expected) {
      error = onnxPath + ": initializer '" + t.name() + "' has dims " +
              shapeText(dims) + ", the trained tensor " +
              (p.transposed ? "transposed " : "") + shapeText(expected) +
              ": the module was imported from another file";
      return false;
    }
    const ::dtfm::format::Tensor &values = trained->second;
    std::vector<float> out(values.data.size());
    if (p.transposed && values.shape.size() == 2) {
      int64_t rows = values.shape[0], cols = values.shape[1];
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          out[j * rows + i] = values.data[i * cols + j];
    } else {
      out = values.data;
    }
    t.clear_float_data();
    t.clear_external_data();
    t.set_data_location(onnx::TensorProto::DEFAULT);
    t.set_raw_data(std::string(reinterpret_cast<const char *>(out.data()),
                               out.size() * sizeof(float)));
    written[t.name()] = true;
  }
  // A trained parameter the file has no initializer for: the module came
  // from another file, or the parameter from a Constant node.
  for (const auto &[name, p] : params)
    if (!p.frozen && p.external && !written.count(name)) {
      error = onnxPath + ": no initializer '" + name +
              "' for the module's trained parameter: the module was "
              "imported from another file";
      return false;
    }
  size_t size = model.ByteSizeLong();
  if (size > static_cast<size_t>(std::numeric_limits<int>::max())) {
    error = onnxPath + ": the trained model would be " +
            std::to_string(size) + " bytes, over protobuf's 2 GB";
    return false;
  }
  bytes = model.SerializeAsString();
  return true;
}
