//===- MlirFuzzSupport.h - What the MLIR fuzz targets share ------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_FUZZ_MLIRFUZZSUPPORT_H
#define DTFM_FUZZ_MLIRFUZZSUPPORT_H

#include "dtfm/InitAll.h"
#include "dtfm/Passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"

namespace dtfm::fuzz {

/// A fresh single-threaded context with the dtfm dialects whose diagnostics
/// go nowhere (an input's errors are expected, not news).
class QuietContext {
public:
  QuietContext()
      : context(makeRegistry(), mlir::MLIRContext::Threading::DISABLED),
        quiet(&context,
              [](mlir::Diagnostic &) { return mlir::success(); }) {
    context.printOpOnDiagnostic(false);
  }
  mlir::MLIRContext *get() { return &context; }

private:
  static mlir::DialectRegistry makeRegistry() {
    mlir::DialectRegistry registry;
    mlir::dtfm::registerAllDialects(registry);
    return registry;
  }
  mlir::MLIRContext context;
  mlir::ScopedDiagnosticHandler quiet;
};

/// What dtfm-opt does to any module it reads: verify it and, when it
/// verifies, annotate every op's cost (the cost interface's checked
/// arithmetic).
inline void verifyAndAnnotateCosts(mlir::ModuleOp module) {
  if (mlir::failed(mlir::verify(module)))
    return;
  mlir::PassManager passes(module.getContext());
  passes.addPass(mlir::dtfm::createAnnotateCosts());
  (void)passes.run(module);
}

} // namespace dtfm::fuzz

#endif // DTFM_FUZZ_MLIRFUZZSUPPORT_H
