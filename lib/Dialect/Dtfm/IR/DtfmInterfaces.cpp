//===- DtfmInterfaces.cpp - dtfm op interfaces ----------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Dialect/Dtfm/IR/DtfmInterfaces.h"
#include "mlir/IR/BuiltinTypes.h"

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

#include "dtfm/Dialect/Dtfm/IR/DtfmInterfaces.cpp.inc"
