//===- DtfmInterfaces.h - dtfm op interfaces --------------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_DIALECT_DTFM_IR_DTFMINTERFACES_H
#define DTFM_DIALECT_DTFM_IR_DTFMINTERFACES_H

#include "mlir/IR/OpDefinition.h"
#include "dtfm/Support/OpShapes.h"

namespace mlir::dtfm {

/// Bytes of one element of `elementType` (f32/i32: 4, f16/bf16: 2, i64: 8).
int64_t getElementBytes(Type elementType);

/// Elements of a statically shaped tensor type, 1 for a 0-d tensor.
int64_t getNumElements(Type type);

/// Bytes of a statically shaped tensor type, 0 for anything else.
int64_t getTensorBytes(Type type);

/// The cost interface's default bytes moved (CostOpInterface): the forward
/// reads every operand and writes every result once; the backward reads
/// the operands and the results' gradients and writes one gradient per
/// floating-point operand (0 when the op has none). Saturates at INT64_MAX.
int64_t defaultForwardBytes(Operation *op);
int64_t defaultBackwardBytes(Operation *op);

/// The largest tensor a dtfm op may read or make (dtfm/Support/OpShapes.h).
using ::dtfm::shapes::kMaxTensorBytes;

/// Checks that every ranked tensor `op` reads or makes has at most
/// kMaxTensorBytes, its element count computed without wrapping (the
/// verifier of every dtfm op, through its TensorsInRange trait).
LogicalResult verifyTensorsInRange(Operation *op);

} // namespace mlir::dtfm

#include "dtfm/Dialect/Dtfm/IR/DtfmInterfaces.h.inc"

#endif // DTFM_DIALECT_DTFM_IR_DTFMINTERFACES_H
