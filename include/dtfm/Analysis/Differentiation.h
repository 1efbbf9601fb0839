//===- Differentiation.h - Which forward ops get a backward -----*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_ANALYSIS_DIFFERENTIATION_H
#define DTFM_ANALYSIS_DIFFERENTIATION_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::dtfm {

/// Which forward ops --dtfm-autodiff gives a dtfm.backward, and which
/// values it computes gradients of. One home for the rule: the pass builds
/// the backward graph from it, and the cost analysis sizes from it what
/// the runtime keeps of a micro-batch for that backward.
class Differentiation {
public:
  /// `forward`: a function's forward ops in program order; `loss`: its
  /// dtfm.cross_entropy, where the gradient starts.
  Differentiation(llvm::ArrayRef<Operation *> forward, Operation *loss);

  /// A float tensor that depends on a trainable (not frozen) parameter.
  bool isDifferentiable(Value value) const;
  /// The op gets a dtfm.backward: it is the loss or the loss's gradient
  /// reaches one of its results, and one of its operands is
  /// differentiable.
  bool getsBackward(Operation *op) const { return differentiated.contains(op); }

private:
  llvm::DenseSet<Value> dependsOnTrainable;
  llvm::SmallPtrSet<Operation *, 32> differentiated;
};

} // namespace mlir::dtfm

#endif // DTFM_ANALYSIS_DIFFERENTIATION_H
