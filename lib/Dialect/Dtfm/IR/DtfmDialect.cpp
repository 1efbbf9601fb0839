//===- DtfmDialect.cpp - dtfm dialect -------------------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Dialect/Dtfm/IR/DtfmDialect.h"
#include "dtfm/Dialect/Dtfm/IR/DtfmOps.h"

using namespace mlir;
using namespace mlir::dtfm;

#include "dtfm/Dialect/Dtfm/IR/DtfmOpsDialect.cpp.inc"

void DtfmDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dtfm/Dialect/Dtfm/IR/DtfmOps.cpp.inc"
      >();
}
