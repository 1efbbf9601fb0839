//===- CustomOpBridge.h - dtfm.custom <-> plugin registry -------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Converts between MLIR types/attributes and the plain C++ descriptions that
// custom-op definitions (dtfm/Support/CustomOps.h) work on.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_DIALECT_DTFM_IR_CUSTOMOPBRIDGE_H
#define DTFM_DIALECT_DTFM_IR_CUSTOMOPBRIDGE_H

#include "dtfm/Dialect/Dtfm/IR/DtfmOps.h"
#include "dtfm/Support/CustomOps.h"

#include <optional>

namespace mlir::dtfm {

/// The plain description of a static tensor type with a dtfm element type.
std::optional<::dtfm::TensorDesc> toTensorDesc(Type type);

/// The tensor type described by `desc`.
Type fromTensorDesc(MLIRContext *context, const ::dtfm::TensorDesc &desc);

/// The call a custom op makes: its operand types and `params`. Fails (with a
/// one-line `error`) on a param of an unsupported attribute kind.
FailureOr<::dtfm::CustomOpCall> buildCustomOpCall(CustomOp op,
                                                  std::string &error);

} // namespace mlir::dtfm

#endif // DTFM_DIALECT_DTFM_IR_CUSTOMOPBRIDGE_H
