//===- DtfmInterfaces.cpp - dtfm op interfaces ----------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Dialect/Dtfm/IR/DtfmInterfaces.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

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
