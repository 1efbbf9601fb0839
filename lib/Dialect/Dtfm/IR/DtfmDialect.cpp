//===- DtfmDialect.cpp - dtfm dialect -------------------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Dialect/Dtfm/IR/DtfmDialect.h"
#include "dtfm/Dialect/Dtfm/IR/DtfmAttrs.h"
#include "dtfm/Dialect/Dtfm/IR/DtfmOps.h"

using namespace mlir;
using namespace mlir::dtfm;

#include "dtfm/Dialect/Dtfm/IR/DtfmOpsDialect.cpp.inc"

void DtfmDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dtfm/Dialect/Dtfm/IR/DtfmOps.cpp.inc"
      >();
  registerAttributes();
}

/// Module attributes that have a typed form must have it: a pass reading
/// `dtfm.schedule` finds a #dtfm.schedule or nothing.
LogicalResult DtfmDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  if (attr.getName() == kScheduleAttrName &&
      !isa<ScheduleAttr>(attr.getValue()))
    return op->emitError() << kScheduleAttrName
                           << " must be a #dtfm.schedule attribute";
  if (attr.getName() == kClusterAttrName && !isa<ClusterAttr>(attr.getValue()))
    return op->emitError() << kClusterAttrName
                           << " must be a #dtfm.cluster attribute";
  if (attr.getName() == kShapeAttrName && !isa<ShapeAttr>(attr.getValue()))
    return op->emitError() << kShapeAttrName
                           << " must be a #dtfm.shape attribute";
  if (attr.getName() == kAssignmentAttrName &&
      !isa<AssignmentAttr>(attr.getValue()))
    return op->emitError() << kAssignmentAttrName
                           << " must be a #dtfm.assignment attribute";
  return success();
}
