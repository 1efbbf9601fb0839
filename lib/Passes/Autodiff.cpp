//===- Autodiff.cpp - Backward graph and optimizer updates ----------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Analysis/Differentiation.h"
#include "dtfm/Passes/Passes.h"
#include "dtfm/Support/LrSchedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>
#include <cstdio>

namespace mlir::dtfm {
#define GEN_PASS_DEF_AUTODIFF
#include "dtfm/Passes/Passes.h.inc"
} // namespace mlir::dtfm

using namespace mlir;
using namespace mlir::dtfm;

namespace {

/// "-0.1", not the diagnostic's "-1.000000e-01".
std::string shortest(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

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
    std::optional<::dtfm::optim::LrScheduleKind> kind =
        ::dtfm::optim::lrScheduleOf(lrSchedule.getValue());
    if (!kind) {
      mlir::emitError(toolLoc(module, ""))
          << "dtfm-autodiff: unknown lr-schedule '" << lrSchedule.getValue()
          << "' (expected " << ::dtfm::optim::lrScheduleNames() << ")";
      return signalPassFailure();
    }
    schedule.kind = *kind;
    schedule.lr = lr;
    schedule.minLr = minLr;
    schedule.warmupSteps = warmupSteps;
    schedule.totalSteps = totalSteps;
    schedule.decaySteps = decaySteps;
    if (std::string problem = schedule.check(); !problem.empty()) {
      mlir::emitError(toolLoc(module, "")) << "dtfm-autodiff: " << problem;
      return signalPassFailure();
    }
    if (!(clipGradNorm >= 0 && std::isfinite(clipGradNorm))) {
      mlir::emitError(toolLoc(module, ""))
          << "dtfm-autodiff: clip-grad-norm must be >= 0 and finite (0: no "
             "clipping), got "
          << shortest(clipGradNorm);
      return signalPassFailure();
    }
    if (!(weightDecay >= 0 && std::isfinite(weightDecay))) {
      mlir::emitError(toolLoc(module, ""))
          << "dtfm-autodiff: weight-decay must be >= 0 and finite, got "
          << shortest(weightDecay);
      return signalPassFailure();
    }
    if (decayParams != "matrices" && decayParams != "all" &&
        decayParams != "matrices-except-embeddings") {
      mlir::emitError(toolLoc(module, ""))
          << "dtfm-autodiff: unknown decay-params '" << decayParams.getValue()
          << "' (expected matrices, matrices-except-embeddings or all)";
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
        // On the function's location alone: emitOpError would print the
        // whole function with it.
        mlir::emitError(func.getLoc())
            << "dtfm-autodiff: function @" << func.getSymName()
            << " already has its backward graph and optimizer updates; give "
               "the forward model (--dtfm-plan and --dtfm-autodiff take the "
               "same optimizer options)";
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
      FloatAttr decay = b.getF64FloatAttr(decays(param) ? weightDecay : 0.0);
      FloatAttr rate = b.getF64FloatAttr(lr);
      // The schedule's and clipping's attributes only where they differ
      // from their defaults (a constant rate, no clipping): every device
      // program of a plan carries them.
      StringAttr kind = schedule.kind == ::dtfm::optim::LrScheduleKind::Constant
                            ? StringAttr()
                            : b.getStringAttr(lrSchedule.getValue());
      FloatAttr floor = minLr > 0 ? b.getF64FloatAttr(minLr) : FloatAttr();
      auto count = [&](int64_t steps) {
        return steps > 0 ? b.getI64IntegerAttr(steps) : IntegerAttr();
      };
      IntegerAttr warmup = count(warmupSteps), total = count(totalSteps),
                  decaying = count(decaySteps);
      FloatAttr clip =
          clipGradNorm > 0 ? b.getF64FloatAttr(clipGradNorm) : FloatAttr();
      Operation *update;
      if (optimizer == "sgd")
        update = b.create<SgdUpdateOp>(
            op->getLoc(), param.getType(), param.getResult(), g, rate,
            b.getF64FloatAttr(momentum), decay, kind, floor, warmup, total,
            decaying, clip);
      else
        update = b.create<AdamWUpdateOp>(
            op->getLoc(), param.getType(), param.getResult(), g, rate,
            b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2),
            b.getF64FloatAttr(epsilon), decay, kind, floor, warmup, total,
            decaying, clip);
      tag(update, op);
    }
  }

  /// Whether `param` is in the decayed group (decay-params): nanoGPT's and
  /// Hugging Face's grouping leaves biases and norm gains -- the parameters
  /// of rank < 2 -- out.
  bool decays(ParamOp param) {
    if (decayParams == "all")
      return true;
    if (cast<ShapedType>(param.getType()).getRank() < 2)
      return false;
    if (decayParams == "matrices-except-embeddings")
      return llvm::none_of(param->getUsers(), [&](Operation *user) {
        auto embedding = dyn_cast<EmbeddingOp>(user);
        return embedding && embedding.getTable() == param.getResult();
      });
    return true;
  }

  ::dtfm::optim::LrSchedule schedule;
};
} // namespace
