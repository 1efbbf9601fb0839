//===- OpSupport.h - Helpers of the dtfm op verifiers and costs -*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Shared by the files that define the dtfm ops' verifiers and costs
// (DtfmOps.cpp, TensorOps.cpp, CustomOp.cpp, TrainingOps.cpp). Private to
// the dialect library.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_LIB_DIALECT_DTFM_IR_OPSUPPORT_H
#define DTFM_LIB_DIALECT_DTFM_IR_OPSUPPORT_H

#include "dtfm/Dialect/Dtfm/IR/DtfmOps.h"
#include "dtfm/Support/OpShapes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"

#include <string>

namespace mlir::dtfm::op_support {

namespace shapes = ::dtfm::shapes;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

inline RankedTensorType tensorOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

inline int64_t numel(Value value) { return getNumElements(value.getType()); }

inline int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

/// Bytes of `value` kept as an activation: parameters are resident anyway and
/// are not counted.
inline int64_t activationBytes(Value value) {
  if (value.getDefiningOp<ParamOp>())
    return 0;
  return getTensorBytes(value.getType());
}

/// The plain description of a static tensor type that the shared op rules
/// (dtfm/Support/OpShapes.h) check.
inline ::dtfm::shapes::TensorType typeOf(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  ::dtfm::shapes::TensorType out;
  out.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
  out.element.clear();
  llvm::raw_string_ostream os(out.element);
  os << tensor.getElementType();
  return out;
}
inline ::dtfm::shapes::TensorType typeOf(Value value) {
  return typeOf(value.getType());
}

/// The verifier's answer for a shared rule's `problem` ("" is success).
inline LogicalResult check(Operation *op, const std::string &problem) {
  if (problem.empty())
    return success();
  return op->emitOpError() << problem;
}

} // namespace mlir::dtfm::op_support

#endif // DTFM_LIB_DIALECT_DTFM_IR_OPSUPPORT_H
