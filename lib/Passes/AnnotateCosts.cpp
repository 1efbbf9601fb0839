//===- AnnotateCosts.cpp - Write op costs as attributes -------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Analysis/CostAnalysis.h"
#include "dtfm/Passes/Passes.h"

namespace mlir::dtfm {
#define GEN_PASS_DEF_ANNOTATECOSTS
#include "dtfm/Passes/Passes.h.inc"
} // namespace mlir::dtfm

using namespace mlir;
using namespace mlir::dtfm;

namespace {
struct AnnotateCosts : public mlir::dtfm::impl::AnnotateCostsBase<AnnotateCosts> {
  using AnnotateCostsBase::AnnotateCostsBase;

  void runOnOperation() override {
    getOperation()->walk([&](CostOpInterface op) {
      op->setAttr(kCostAttrName, buildCostAttr(op));
      ++numAnnotated;
    });
  }
};
} // namespace
