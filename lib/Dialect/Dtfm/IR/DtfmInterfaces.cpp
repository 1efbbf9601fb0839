//===- DtfmInterfaces.cpp - dtfm op interfaces ----------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Dialect/Dtfm/IR/DtfmInterfaces.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <limits>

using namespace mlir;

int64_t mlir::dtfm::getElementBytes(Type elementType) {
  if (elementType.isIntOrFloat())
    return (elementType.getIntOrFloatBitWidth() + 7) / 8;
  return 0;
}

int64_t mlir::dtfm::getNumElements(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return 0;
  return tensor.getNumElements();
}

int64_t mlir::dtfm::getTensorBytes(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return 0;
  return getNumElements(type) * getElementBytes(tensor.getElementType());
}

/// a + b, or INT64_MAX where it would overflow.
static int64_t saturatingAdd(int64_t a, int64_t b) {
  int64_t sum;
  return llvm::AddOverflow(a, b, sum) ? std::numeric_limits<int64_t>::max()
                                      : sum;
}

static int64_t sumOfTensorBytes(TypeRange types, bool floatsOnly) {
  int64_t sum = 0;
  for (Type type : types) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (tensor && (!floatsOnly || isa<FloatType>(tensor.getElementType())))
      sum = saturatingAdd(sum, mlir::dtfm::getTensorBytes(type));
  }
  return sum;
}

int64_t mlir::dtfm::defaultForwardBytes(Operation *op) {
  return saturatingAdd(sumOfTensorBytes(op->getOperandTypes(), false),
                       sumOfTensorBytes(op->getResultTypes(), false));
}

int64_t mlir::dtfm::defaultBackwardBytes(Operation *op) {
  int64_t gradients = sumOfTensorBytes(op->getOperandTypes(), true);
  if (gradients == 0)
    return 0;
  return saturatingAdd(defaultForwardBytes(op), gradients);
}

LogicalResult mlir::dtfm::verifyTensorsInRange(Operation *op) {
  auto check = [&](Type type, const std::string &what) -> LogicalResult {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.hasStaticShape())
      return success();
    ::dtfm::shapes::TensorType plain;
    plain.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
    plain.element.clear();
    llvm::raw_string_ostream os(plain.element);
    os << tensor.getElementType();
    std::string problem = ::dtfm::shapes::inRange(plain, what);
    if (!problem.empty())
      return op->emitOpError() << problem;
    return success();
  };
  for (auto [i, type] : llvm::enumerate(op->getOperandTypes()))
    if (failed(check(type, "operand #" + std::to_string(i))))
      return failure();
  for (auto [i, type] : llvm::enumerate(op->getResultTypes()))
    if (failed(check(type, "result #" + std::to_string(i))))
      return failure();
  return success();
}

#include "dtfm/Dialect/Dtfm/IR/DtfmInterfaces.cpp.inc"
