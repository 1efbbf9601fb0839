//===- InitAll.h - Register every dtfm dialect and pass ---------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_INITALL_H
#define DTFM_INITALL_H

#include "dtfm/Dialect/Dtfm/IR/DtfmDialect.h"
#include "dtfm/Passes/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"

namespace mlir::dtfm {

/// The dialects a dtfm module may contain: dtfm and func (the model is a
/// func.func).
inline void registerAllDialects(DialectRegistry &registry) {
  registry.insert<DtfmDialect, func::FuncDialect>();
}

/// Every dtfm pass and pipeline.
inline void registerAllPasses() {
  registerDtfmPasses();
  registerDtfmPipelines();
}

} // namespace mlir::dtfm

#endif // DTFM_INITALL_H
