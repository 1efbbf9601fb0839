//===- Autodiff.cpp - Backward graph and optimizer updates ----------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Analysis/Differentiation.h"
#include "dtfm/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::dtfm {
#define GEN_PASS_DEF_AUTODIFF
#include "dtfm/Passes/Passes.h.inc"
} // namespace mlir::dtfm

using namespace mlir;
using namespace mlir::dtfm;

namespace {

struct Autodiff : public mlir::dtfm::impl::AutodiffBase<Autodiff> {
  using AutodiffBase::AutodiffBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (optimizer != "adamw" && optimizer != "sgd") {
      mlir::emitError(toolLoc(module, ""))
          << "dtfm-autodiff: unknown optimizer '" << optimizer.getValue()
          << "' (expected adamw or sgd)";
      return signalPassFailure();
    }
    if (!(lr > 0)) {
      mlir::emitError(toolLoc(module, ""))
          << "dtfm-autodiff: lr must be positive, got " << lr.getValue();
      return signalPassFailure();
    }
    bool found = false;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      SmallVector<CrossEntropyOp> losses;
      func.walk([&](CrossEntropyOp op) { losses.push_back(op); });
      if (losses.empty())
        continue;
      if (losses.size() > 1) {
        losses[1].emitOpError("is a second loss; dtfm-autodiff expects one "
                              "dtfm.cross_entropy per function");
        return signalPassFailure();
      }
      if (llvm::any_of(func.getOps<BackwardOp>(), [](auto) { return true; })) {
        func.emitOpError("already has a backward graph");
        return signalPassFailure();
      }
      found = true;
      differentiate(func, losses.front());
    }
    if (!found) {
      mlir::emitError(toolLoc(module, ""))
          << "dtfm-autodiff: no function has a loss (dtfm.cross_entropy); "
             "nothing to differentiate";
      return signalPassFailure();
    }
  }

  void differentiate(func::FuncOp func, CrossEntropyOp loss) {
    Block &body = func.getBody().front();
    SmallVector<Operation *> forward;
    for (Operation &op : body.without_terminator())
      forward.push_back(&op);

    // Which ops get a backward and which values a gradient.
    Differentiation differentiation(forward, loss);

    OpBuilder b(func.getContext());
    b.setInsertionPoint(body.getTerminator());
    llvm::MapVector<Value, SmallVector<Value>> grads;
    auto layerOf = [](Operation *op) {
      return op->getAttrOfType<StringAttr>(kLayerAttrName);
    };
    auto tag = [&](Operation *created, Operation *owner) {
      if (StringAttr layer = layerOf(owner))
        created->setAttr(kLayerAttrName, layer);
    };
    // The summed gradient of `value`, or null when nothing reached it.
    auto gradOf = [&](Value value, Operation *owner) -> Value {
      auto it = grads.find(value);
      if (it == grads.end() || it->second.empty())
        return Value();
      if (it->second.size() == 1)
        return it->second.front();
      auto sum =
          b.create<AccumulateOp>(owner->getLoc(), value.getType(), it->second);
      // Sum where the contributions are when they all come from one layer
      // (a value used twice by the next layer): once pipelined, one
      // gradient then crosses the stage boundary instead of one per use.
      Operation *first = it->second.front().getDefiningOp();
      bool oneLayer =
          first && layerOf(first) && llvm::all_of(it->second, [&](Value g) {
            Operation *def = g.getDefiningOp();
            return def && layerOf(def) == layerOf(first);
          });
      tag(sum, oneLayer ? first : owner);
      it->second = {sum.getResult()};
      return sum.getResult();
    };

    for (Operation *op : llvm::reverse(forward)) {
      if (!differentiation.getsBackward(op))
        continue;
      SmallVector<Value> inputs(op->getOperands());
      if (op != loss.getOperation()) {
        for (Value result : op->getResults())
          if (Value g = gradOf(result, op))
            inputs.push_back(g);
        // A multi-result op with only some gradients would need zeros,
        // which dtfm's ops never produce.
        if (inputs.size() != op->getNumOperands() + op->getNumResults()) {
          op->emitOpError("has results without gradients; dtfm-autodiff "
                          "supports this only for single-result ops");
          return signalPassFailure();
        }
      }
      SmallVector<int64_t> wrt;
      SmallVector<Type> gradTypes;
      for (auto [index, operand] : llvm::enumerate(op->getOperands()))
        if (differentiation.isDifferentiable(operand)) {
          wrt.push_back(index);
          gradTypes.push_back(operand.getType());
        }
      int64_t flops = 0;
      if (auto cost = dyn_cast<CostOpInterface>(op))
        flops = cost.getBackwardFlops();
      auto backward = b.create<BackwardOp>(
          op->getLoc(), gradTypes,
          b.getStringAttr(op->getName().getStringRef()), inputs,
          b.getDenseI64ArrayAttr(wrt), b.getI64IntegerAttr(flops));
      tag(backward, op);
      // The forward op's attributes (transpose_rhs, num_heads, epsilon, ...)
      // travel with its gradient, which a runtime needs to compute it.
      if (auto props =
              dyn_cast_or_null<DictionaryAttr>(op->getPropertiesAsAttribute()))
        if (!props.empty())
          backward->setAttr(kForwardAttrsAttrName, props);
      for (auto [index, grad] : llvm::zip(wrt, backward.getGrads()))
        grads[op->getOperand(index)].push_back(grad);
    }

    for (Operation *op : forward) {
      auto param = dyn_cast<ParamOp>(op);
      if (!param || param.getFrozen())
        continue;
      Value g = gradOf(param.getResult(), op);
      if (!g)
        continue; // not on the loss path
      Operation *update;
      if (optimizer == "sgd")
        update = b.create<SgdUpdateOp>(
            op->getLoc(), param.getType(), param.getResult(), g,
            b.getF64FloatAttr(lr), b.getF64FloatAttr(momentum),
            b.getF64FloatAttr(weightDecay));
      else
        update = b.create<AdamWUpdateOp>(
            op->getLoc(), param.getType(), param.getResult(), g,
            b.getF64FloatAttr(lr), b.getF64FloatAttr(beta1),
            b.getF64FloatAttr(beta2), b.getF64FloatAttr(epsilon),
            b.getF64FloatAttr(weightDecay));
      tag(update, op);
    }
  }
};
} // namespace
