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

#include "dtfm/InitAll.h"
#include "dtfm/Passes/Passes.h"
#include "dtfm/Target/Onnx/ImportOnnx.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string model = ::dtfm::fuzz::writeScratch("model.onnx", data, size);
  mlir::dtfm::OnnxImportOptions options;
  options.weightsPath = ::dtfm::fuzz::scratchDir() + "/weights.bin";
  if (size % 2)
    options.loss = "cross-entropy";
  DialectRegistry registry;
  mlir::dtfm::registerAllDialects(registry);
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
  context.printOpOnDiagnostic(false);
  ScopedDiagnosticHandler quiet(&context,
                                [](Diagnostic &) { return success(); });
  std::string error;
  OwningOpRef<ModuleOp> module =
      mlir::dtfm::importOnnx(&context, model, options, error);
  if (!module || failed(verify(*module)))
    return 0;
  PassManager passes(&context);
  passes.addPass(mlir::dtfm::createAnnotateCosts());
  (void)passes.run(*module);
  return 0;
}
