//===- ImportOnnx.h - ONNX models into the dtfm dialect ----------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// `dtfm-translate --import-onnx model.onnx`: an ONNX graph (as PyTorch
// exports it) becomes one func of dtfm ops. The model is checked with ONNX's
// checker and its shapes inferred with ONNX's shape inference (after any
// --shape overrides); every op must map to the dialect, or the import stops
// with one diagnostic listing each unsupported op type and its count.
//
// Float initializers used as operands become `dtfm.param "<name>"
// init(external)` (running statistics frozen), their values written to a
// weights file (DTFMPAR1) that the module names in `dtfm.weights` and the
// runtime loads. Ops are grouped into layers (`dtfm.layer`) by the module
// path of their parameters ("layer1.0.conv1.weight" -> "layer1.0"); an op
// without parameters joins the layer of its first input.
//
// Which float initializers are trained: the ONNX file cannot say which
// tensors PyTorch holds as parameters and which as buffers, so those no
// gradient reaches (masks, what only feeds comparisons or shapes) and those
// holding an infinity or a NaN are imported frozen, and `paramsFrom` (the
// names of model.named_parameters()) and `freeze` make it exact. A reader
// shared by several layouts stays one parameter: W^T stored only when every
// reader is a Gemm with transB, else W and transposing products.
//
// ONNX exports inference graphs: with `loss = "cross-entropy"` the first
// graph output's logits get a `dtfm.label` (of the given name) and a
// `dtfm.cross_entropy`, and the func returns the loss (what planning needs).
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_TARGET_ONNX_IMPORTONNX_H
#define DTFM_TARGET_ONNX_IMPORTONNX_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace mlir::dtfm {

struct OnnxImportOptions {
  /// Static shapes for inputs with dynamic dimensions ("x" -> {2, 3, 64, 64}).
  std::map<std::string, std::vector<int64_t>> shapes;
  /// "" (the inference graph as it is) or "cross-entropy".
  std::string loss;
  /// The label placeholder's name (with a loss).
  std::string labels = "labels";
  /// Where the initializers' values are written.
  std::string weightsPath;
  /// A file naming PyTorch's parameters, one per line (docs/Onnx.md's
  /// one-liner over model.named_parameters()): every float initializer it
  /// does not name is imported frozen. "" when not given.
  std::string paramsFrom;
  /// Glob patterns ("rope.*"): the float initializers they match are
  /// imported frozen; each must match one.
  std::vector<std::string> freeze;
  /// Receives one-line warnings (signs of an eval-mode export, tensors
  /// trained that look like buffers); null: none are made.
  std::function<void(const std::string &)> warn;
};

/// Parses "name=d0,d1,..." into `shapes`; false with an error otherwise.
bool parseShapeOverride(const std::string &text,
                        std::map<std::string, std::vector<int64_t>> &shapes,
                        std::string &error);

/// Null with a one-line `error` (file and what is wrong) on failure; the
/// weights file is written only on success.
OwningOpRef<ModuleOp> importOnnx(MLIRContext *context, const std::string &path,
                                 const OnnxImportOptions &options,
                                 std::string &error);

} // namespace mlir::dtfm

#endif // DTFM_TARGET_ONNX_IMPORTONNX_H
