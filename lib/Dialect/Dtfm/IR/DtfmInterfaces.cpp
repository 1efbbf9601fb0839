//===- DtfmInterfaces.cpp - dtfm op interfaces ----------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Dialect/Dtfm/IR/DtfmInterfaces.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/MathExtras.h"

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
  auto check = [&](Type type, StringRef what, unsigned index) -> LogicalResult {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.hasStaticShape())
      return success();
    int64_t elements = 1;
    int64_t bytes = std::max<int64_t>(1, getElementBytes(tensor.getElementType()));
    for (int64_t d : tensor.getShape())
      if (llvm::MulOverflow(elements, d, elements) ||
          elements > kMaxTensorBytes / bytes)
        return op->emitOpError()
               << what << " #" << index << " (" << type << ") has more than "
               << kMaxTensorBytes << " bytes";
    return success();
  };
  for (auto [i, type] : llvm::enumerate(op->getOperandTypes()))
    if (failed(check(type, "operand", i)))
      return failure();
  for (auto [i, type] : llvm::enumerate(op->getResultTypes()))
    if (failed(check(type, "result", i)))
      return failure();
  return success();
}

#include "dtfm/Dialect/Dtfm/IR/DtfmInterfaces.cpp.inc"
