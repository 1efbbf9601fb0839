//===- onnx-fuzzer.cpp - Fuzzes the ONNX importer -------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// dtfm-translate --import-onnx on any bytes: the model is parsed, its
// attributes and initializers checked, ONNX's checker and shape inference
// run and the graph converted (with a cross-entropy loss for inputs of odd
// size); a module that imports is verified and its costs annotated.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"
#include "MlirFuzzSupport.h"

#include "dtfm/Target/Onnx/ImportOnnx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string model = dtfm::fuzz::writeScratch("model.onnx", data, size);
  mlir::dtfm::OnnxImportOptions options;
  options.weightsPath = dtfm::fuzz::scratchDir() + "/weights.bin";
  if (size % 2)
    options.loss = "cross-entropy";
  dtfm::fuzz::QuietContext context;
  std::string error;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::dtfm::importOnnx(context.get(), model, options, error);
  if (module)
    dtfm::fuzz::verifyAndAnnotateCosts(*module);
  return 0;
}
