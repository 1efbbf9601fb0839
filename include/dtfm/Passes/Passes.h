//===- Passes.h - dtfm passes -----------------------------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PASSES_PASSES_H
#define DTFM_PASSES_PASSES_H

#include "dtfm/Dialect/Dtfm/IR/DtfmOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::dtfm {

#define GEN_PASS_DECL
#include "dtfm/Passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dtfm/Passes/Passes.h.inc"

} // namespace mlir::dtfm

#endif // DTFM_PASSES_PASSES_H
