//===- Rebatch.cpp - Change the micro-batch size of a forward graph -------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::dtfm {
#define GEN_PASS_DEF_REBATCH
#include "dtfm/Passes/Passes.h.inc"
} // namespace mlir::dtfm

using namespace mlir;
using namespace mlir::dtfm;

/// Formats the op's location and name for messages.
static std::string describeOp(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "'" << op->getName() << "' at " << op->getLoc();
  return text;
}

FailureOr<int64_t> mlir::dtfm::modelMicroBatchSize(ModuleOp module,
                                                   std::string &error) {
  int64_t size = 0;
  WalkResult walk = module.walk([&](Operation *op) {
    if (!isa<InputOp, LabelOp>(op))
      return WalkResult::advance();
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    if (type.getRank() == 0) {
      error = describeOp(op) + " has no batch dimension";
      return WalkResult::interrupt();
    }
    if (size != 0 && type.getDimSize(0) != size) {
      error = "the inputs disagree on the micro-batch size (" +
              std::to_string(size) + " and " +
              std::to_string(type.getDimSize(0)) + " at " + describeOp(op) +
              ")";
      return WalkResult::interrupt();
    }
    size = type.getDimSize(0);
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  if (size == 0) {
    error = "the model has no dtfm.input or dtfm.label";
    return failure();
  }
  return size;
}

LogicalResult mlir::dtfm::rebatchModule(ModuleOp module, int64_t size,
                                        std::string &error) {
  FailureOr<int64_t> old = modelMicroBatchSize(module, error);
  if (failed(old))
    return failure();
  if (size <= 0) {
    error = "the micro-batch size must be positive";
    return failure();
  }
  if (size == *old)
    return success();
  auto prefix = "cannot change the micro-batch size from " +
                std::to_string(*old) + " to " + std::to_string(size) + ": ";
  llvm::DenseSet<Value> carrying;
  SmallVector<Operation *> ops;
  WalkResult walk = module.walk([&](Operation *op) {
    if (isa<BackwardOp, AccumulateOp, SgdUpdateOp, AdamWUpdateOp>(op)) {
      error = prefix + "the module is a training graph; rebatch before "
                       "--dtfm-autodiff";
      return WalkResult::interrupt();
    }
    bool source = isa<InputOp, LabelOp>(op);
    if (!source && (isa<ParamOp, ConstantOp>(op) ||
                    llvm::none_of(op->getOperands(), [&](Value v) {
                      return carrying.contains(v);
                    })))
      return WalkResult::advance();
    if (isa<func::ReturnOp>(op))
      return WalkResult::advance();
    for (Value result : op->getResults())
      carrying.insert(result);
    ops.push_back(op);
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  // A slice keeps the whole batch or the batch cannot change (checked on
  // the types as they are, before any changes).
  for (Operation *op : ops)
    if (auto slice = dyn_cast<SliceOp>(op)) {
      auto input = cast<RankedTensorType>(slice.getInput().getType());
      if (slice.getStarts()[0] != 0 ||
          slice.getEnds()[0] != input.getDimSize(0) ||
          slice.getSteps()[0] != 1) {
        error = prefix + describeOp(op) + " slices the batch dimension";
        return failure();
      }
    }
  for (Operation *op : ops) {
    for (Value result : op->getResults()) {
      auto type = cast<RankedTensorType>(result.getType());
      if (type.getRank() == 0)
        continue; // a loss: a mean over the batch
      int64_t dim = type.getDimSize(0);
      if (dim * size % *old != 0) {
        error = prefix + describeOp(op) + ": dimension 0 (" +
                std::to_string(dim) + ") does not scale with the batch";
        return failure();
      }
      SmallVector<int64_t> shape(type.getShape());
      shape[0] = dim * size / *old;
      result.setType(RankedTensorType::get(shape, type.getElementType()));
    }
    if (auto slice = dyn_cast<SliceOp>(op)) {
      SmallVector<int64_t> ends(slice.getEnds());
      ends[0] = cast<RankedTensorType>(slice.getInput().getType()).getDimSize(0);
      slice.setEnds(ends);
    }
  }
  // Function results follow their returned values.
  module.walk([&](func::FuncOp func) {
    if (func.isExternal())
      return;
    auto ret = cast<func::ReturnOp>(func.getBody().back().getTerminator());
    func.setFunctionType(FunctionType::get(
        module.getContext(), func.getArgumentTypes(),
        TypeRange(ret.getOperands())));
  });
  std::string diagnostic;
  {
    ScopedDiagnosticHandler capture(module.getContext(), [&](Diagnostic &d) {
      if (diagnostic.empty() && d.getSeverity() == DiagnosticSeverity::Error)
        diagnostic = d.str() + " (at " +
                     [&] {
                       std::string loc;
                       llvm::raw_string_ostream os(loc);
                       os << d.getLocation();
                       return loc;
                     }() +
                     ")";
      return success();
    });
    if (succeeded(verify(module)))
      return success();
  }
  error = prefix + diagnostic;
  return failure();
}

namespace {
struct Rebatch : public mlir::dtfm::impl::RebatchBase<Rebatch> {
  using RebatchBase::RebatchBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::string error;
    if (failed(rebatchModule(module, microBatchSize, error))) {
      mlir::emitError(toolLoc(module, "")) << "dtfm-rebatch: " << error;
      return signalPassFailure();
    }
  }
};
} // namespace
