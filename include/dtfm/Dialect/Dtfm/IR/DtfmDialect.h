//===- DtfmDialect.h - dtfm dialect -----------------------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_DIALECT_DTFM_IR_DTFMDIALECT_H
#define DTFM_DIALECT_DTFM_IR_DTFMDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Dialect.h"

#include "dtfm/Dialect/Dtfm/IR/DtfmOpsDialect.h.inc"

namespace mlir::dtfm {

/// Discardable attribute naming the layer an op belongs to ("layer.3",
/// "embedding", ...); used to group costs per layer.
inline constexpr llvm::StringLiteral kLayerAttrName = "dtfm.layer";

} // namespace mlir::dtfm

#endif // DTFM_DIALECT_DTFM_IR_DTFMDIALECT_H
