//===- Differentiation.cpp - Which forward ops get a backward -------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Analysis/Differentiation.h"
#include "dtfm/Dialect/Dtfm/IR/DtfmOps.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace mlir::dtfm;

Differentiation::Differentiation(ArrayRef<Operation *> forward,
                                 Operation *loss) {
  for (Operation *op : forward) {
    if (auto param = dyn_cast<ParamOp>(op)) {
      if (!param.getFrozen())
        dependsOnTrainable.insert(param.getResult());
    } else if (llvm::any_of(op->getOperands(), [&](Value v) {
                 return dependsOnTrainable.contains(v);
               })) {
      dependsOnTrainable.insert(op->result_begin(), op->result_end());
    }
  }
  // The gradient flows back from the loss: an op's operands get one when
  // the op gets a backward, and an op gets a backward when one of its
  // results got a gradient and it has an operand to differentiate.
  llvm::DenseSet<Value> hasGradient;
  for (Operation *op : llvm::reverse(forward)) {
    if (isa<ParamOp, InputOp, LabelOp>(op))
      continue;
    bool reached = op == loss || llvm::any_of(op->getResults(), [&](Value r) {
                     return hasGradient.contains(r);
                   });
    if (!reached || llvm::none_of(op->getOperands(),
                                  [&](Value v) { return isDifferentiable(v); }))
      continue;
    differentiated.insert(op);
    for (Value operand : op->getOperands())
      if (isDifferentiable(operand))
        hasGradient.insert(operand);
  }
}

bool Differentiation::isDifferentiable(Value value) const {
  auto type = dyn_cast<ShapedType>(value.getType());
  return type && isa<FloatType>(type.getElementType()) &&
         dependsOnTrainable.contains(value);
}
