//===- ExportOnnx.h - Trained weights back into the ONNX file ----*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// dtfm-translate --export-onnx: the ONNX file a module was imported from
// (dtfm.onnx_model), written again with trained values as its initializers:
// the same graph, nodes, inputs and outputs, byte for byte, and new values
// for every float initializer the module trains (a Gemm's transB weight
// transposed back: dtfm.onnx_transposed).
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_TARGET_ONNX_EXPORTONNX_H
#define DTFM_TARGET_ONNX_EXPORTONNX_H

#include "dtfm/Format/TensorFile.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir::dtfm {

/// The bytes of the ONNX model `module` was imported from with `weights`
/// (whole tensors by parameter name, as --save-params writes them, read
/// from `weightsSource`) as its initializers' values. Every trainable
/// parameter of the module must be in `weights` with its shape, and every
/// tensor of `weights` must be a parameter of the module; false with a
/// one-line `error` otherwise, or when the ONNX file cannot be read, keeps
/// tensors in files beside it, or would outgrow protobuf's 2 GB.
bool exportTrainedOnnx(ModuleOp module, const ::dtfm::format::TensorMap &weights,
                       const std::string &weightsSource, std::string &bytes,
                       std::string &error);

} // namespace mlir::dtfm

#endif // DTFM_TARGET_ONNX_EXPORTONNX_H
