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

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"

#include <string>

namespace mlir::dtfm::op_support {

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

/// A shape as "[2, 3, 4]".
inline std::string fmtShape(ArrayRef<int64_t> dims) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "[";
  llvm::interleaveComma(dims, os);
  os << "]";
  return text;
}
inline std::string shapeOf(Value value) {
  return fmtShape(tensorOf(value).getShape());
}

/// Bytes of `value` kept as an activation: parameters are resident anyway and
/// are not counted.
inline int64_t activationBytes(Value value) {
  if (value.getDefiningOp<ParamOp>())
    return 0;
  return getTensorBytes(value.getType());
}

/// All of `values` have the element type of the first one.
inline LogicalResult verifySameElementType(Operation *op, ValueRange values,
                                           ArrayRef<StringRef> names) {
  Type expected = tensorOf(values.front()).getElementType();
  for (auto [value, name] : llvm::zip(values, names)) {
    Type found = tensorOf(value).getElementType();
    if (found != expected)
      return op->emitOpError() << "expected " << name << " element type "
                               << expected << ", found " << found;
  }
  return success();
}

/// The result has exactly `shape` and `elementType`.
inline LogicalResult verifyResultType(Operation *op, Value result,
                                      ArrayRef<int64_t> shape,
                                      Type elementType) {
  auto found = tensorOf(result);
  if (found.getShape() != shape || found.getElementType() != elementType)
    return op->emitOpError()
           << "expected result type "
           << RankedTensorType::get(shape, elementType) << ", found " << found;
  return success();
}

/// A 1-D tensor of `size` elements.
inline LogicalResult verifyVector(Operation *op, Value value, StringRef name,
                                  int64_t size) {
  auto type = tensorOf(value);
  if (type.getRank() != 1 || type.getDimSize(0) != size)
    return op->emitOpError() << "expected " << name << " of shape [" << size
                             << "], found " << shapeOf(value);
  return success();
}

inline LogicalResult verifyPositive(Operation *op, ArrayRef<int64_t> values,
                                    size_t count, StringRef name) {
  if (values.size() != count)
    return op->emitOpError() << "expected " << count << " " << name
                             << ", found " << values.size();
  for (int64_t v : values)
    if (v <= 0)
      return op->emitOpError()
             << "expected positive " << name << ", found " << fmtShape(values);
  return success();
}

inline LogicalResult verifyPadding(Operation *op, ArrayRef<int64_t> padding) {
  if (padding.size() != 4)
    return op->emitOpError()
           << "expected 4 padding values [top, left, bottom, right], found "
           << padding.size();
  for (int64_t p : padding)
    if (p < 0)
      return op->emitOpError() << "expected non-negative padding, found "
                               << fmtShape(padding);
  return success();
}

/// Output size of a window op along one spatial dimension.
inline int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride,
                                int64_t padBegin, int64_t padEnd,
                                int64_t dilation) {
  int64_t span = dilation * (kernel - 1) + 1;
  int64_t padded = in + padBegin + padEnd;
  if (padded < span)
    return 0;
  return (padded - span) / stride + 1;
}


} // namespace mlir::dtfm::op_support

#endif // DTFM_LIB_DIALECT_DTFM_IR_OPSUPPORT_H
