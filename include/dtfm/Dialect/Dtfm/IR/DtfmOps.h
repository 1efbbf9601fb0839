//===- DtfmOps.h - dtfm operators -------------------------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_DIALECT_DTFM_IR_DTFMOPS_H
#define DTFM_DIALECT_DTFM_IR_DTFMOPS_H

#include "dtfm/Dialect/Dtfm/IR/DtfmAttrs.h"
#include "dtfm/Dialect/Dtfm/IR/DtfmDialect.h"
#include "dtfm/Dialect/Dtfm/IR/DtfmInterfaces.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dtfm/Dialect/Dtfm/IR/DtfmEnums.h.inc"

namespace mlir::dtfm {
namespace OpTrait {
template <typename ConcreteType>
class TensorsInRange
    : public ::mlir::OpTrait::TraitBase<ConcreteType, TensorsInRange> {
public:
  static LogicalResult verifyTrait(Operation *op) {
    return verifyTensorsInRange(op);
  }
};
} // namespace OpTrait
} // namespace mlir::dtfm

#define GET_OP_CLASSES
#include "dtfm/Dialect/Dtfm/IR/DtfmOps.h.inc"

#endif // DTFM_DIALECT_DTFM_IR_DTFMOPS_H
