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

#include "dtfm/InitAll.h"
#include "dtfm/Passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <string>

using namespace mlir;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // The lexer reads the terminating NUL that std::string keeps.
  std::string text(reinterpret_cast<const char *>(data), size);
  DialectRegistry registry;
  mlir::dtfm::registerAllDialects(registry);
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
  context.printOpOnDiagnostic(false);
  ScopedDiagnosticHandler quiet(&context,
                                [](Diagnostic &) { return success(); });
  ParserConfig config(&context);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, config);
  if (!module || failed(verify(*module)))
    return 0;
  PassManager passes(&context);
  passes.addPass(mlir::dtfm::createAnnotateCosts());
  (void)passes.run(*module);
  return 0;
}
