//===- mlir-fuzzer.cpp - Fuzzes the MLIR parser and the dtfm verifiers ----===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// What dtfm-opt does first with a file: parse it with the dtfm dialects,
// verify it (every dtfm op's verifier: shapes, element counts, attributes),
// and annotate each op's cost (the cost interface's checked arithmetic).
//
//===----------------------------------------------------------------------===//

#include "MlirFuzzSupport.h"

#include "mlir/Parser/Parser.h"

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // The lexer reads the terminating NUL that std::string keeps.
  std::string text(reinterpret_cast<const char *>(data), size);
  dtfm::fuzz::QuietContext context;
  mlir::ParserConfig config(context.get());
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, config);
  if (module)
    dtfm::fuzz::verifyAndAnnotateCosts(*module);
  return 0;
}
