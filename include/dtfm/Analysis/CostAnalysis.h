//===- CostAnalysis.h - Per-op and per-layer costs of a model ---*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_ANALYSIS_COSTANALYSIS_H
#define DTFM_ANALYSIS_COSTANALYSIS_H

#include "dtfm/Dialect/Dtfm/IR/DtfmAttrs.h"
#include "dtfm/Dialect/Dtfm/IR/DtfmOps.h"
#include "dtfm/Planner/Workload.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/AnalysisManager.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace mlir::dtfm {

/// The cost of one op for one micro-batch. In a training graph (one with
/// dtfm.backward ops) CostAnalysis files each op's work under the phase that
/// does it: forward ops only forward FLOPs (their backward work is done by
/// their dtfm.backward), backward and accumulate ops backward FLOPs, and
/// optimizer updates optimizer FLOPs, so that nothing is counted twice.
struct OpCost {
  Operation *op = nullptr;
  std::string layer;
  int64_t forwardFlops = 0;
  int64_t backwardFlops = 0;
  int64_t optimizerFlops = 0;
  /// Bytes moved through device memory (the roofline's), filed by phase
  /// as the FLOPs; an optimizer update's are not kept: it runs once per
  /// iteration, not per micro-batch, and its time is negligible there.
  int64_t forwardBytes = 0;
  int64_t backwardBytes = 0;
  int64_t savedActivationBytes = 0;
  int64_t parameterBytes = 0;
  /// Elements of the parameter defined by a dtfm.param (0 for other ops).
  int64_t parameterElements = 0;
  bool frozenParameter = false;
  SmallVector<int64_t> resultBytes;

  int64_t totalResultBytes() const;
};

/// Sums over a set of ops (a layer, the model).
struct CostTotals {
  int64_t ops = 0;
  int64_t trainableParameters = 0;
  int64_t frozenParameters = 0;
  int64_t parameterBytes = 0;
  int64_t forwardFlops = 0;
  int64_t backwardFlops = 0;
  int64_t optimizerFlops = 0;
  int64_t savedActivationBytes = 0;
  int64_t resultBytes = 0;

  /// Adds one op's cost; false (nothing changed) when a sum would overflow
  /// 64 bits.
  [[nodiscard]] bool add(const OpCost &cost);
  int64_t trainingFlops() const {
    return forwardFlops + backwardFlops + optimizerFlops;
  }
};

/// The #dtfm.cost the annotate pass attaches to `op`.
CostAttr buildCostAttr(CostOpInterface op);

/// The cost of `op`: from its `dtfm.cost` annotation when present, otherwise
/// from the interface. Fails (with a diagnostic on the op) on a malformed
/// annotation.
FailureOr<OpCost> getOpCost(CostOpInterface op);

/// Costs of every op implementing CostOpInterface under a root op, in IR order,
/// with per-layer sums (layers in order of first appearance).
class CostAnalysis {
public:
  explicit CostAnalysis(Operation *root);

  /// False when an annotation was malformed (a diagnostic was emitted).
  bool isValid() const { return valid; }
  /// Whether the graph has dtfm.backward ops (after --dtfm-autodiff).
  bool isTrainingGraph() const { return training; }
  ArrayRef<OpCost> getOpCosts() const { return opCosts; }
  ArrayRef<std::pair<std::string, CostTotals>> getLayerTotals() const {
    return layerTotals;
  }
  const CostTotals &getTotals() const { return totals; }

  bool isInvalidated(const AnalysisManager::PreservedAnalyses &pa) {
    return !pa.isPreserved<CostAnalysis>();
  }

private:
  bool valid = true;
  bool training = false;
  SmallVector<OpCost> opCosts;
  SmallVector<std::pair<std::string, CostTotals>> layerTotals;
  CostTotals totals;
};

/// One block of the model as the stage partitioner sees it: a maximal run of
/// consecutive forward ops (IR order, which is topological) sharing a
/// `dtfm.layer`, plus the training ops (backward, accumulate, updates) of
/// that layer. FLOPs of all three phases, each counted once.
struct LayerBlock {
  std::string layer;
  SmallVector<Operation *, 4> ops; // (a block stays small in a SmallVector)
  double flops = 0;
  double parameterBytes = 0;  ///< of dtfm.param ops only
  double activationBytes = 0; ///< saved for backward, per micro-batch
  /// What the runtime holds of a micro-batch from its forward to its
  /// backward: every operand but parameters of the block's ops that get a
  /// dtfm.backward (it reads all of its forward op's operands), each value
  /// once, in the block of its first such reader. -1: not known (no loss to
  /// differentiate); the planner then takes activationBytes.
  double heldBytes = -1;
  double backwardFlops = 0;   ///< the part of `flops` the backward does
  /// Bytes of the values its forward ops read from other ops than its own
  /// and parameters: what activation recomputation keeps of it.
  double inputBytes = 0;
  /// The largest buffer one of its ops allocates only while it runs, in
  /// the model's type: attention's probabilities (the backward recomputes
  /// them), the loss's softmax of the logits; with a loss, an op's backward
  /// adds the gradients it writes (the logits' beside their softmax).
  double scratchBytes = 0;
  /// Tensor parallelism: its sums over the group per micro-batch
  /// (dtfm.tp_all_reduce, forward or backward) and their bytes.
  double groupSums = 0, groupSumBytes = 0;
  /// Its ops' FLOPs and bytes moved, forward and backward (the roofline's).
  ::dtfm::planner::RooflineWork forwardWork, backwardWork;
  /// The part of backwardFlops that computes its parameters' gradients
  /// (what a zero-bubble schedule's W runs; weightGradientFlops).
  double weightFlops = 0;
  /// What a zero-bubble W of its ops reads, held from the micro-batch's B
  /// to its W: the operands but parameters of its ops that take a
  /// parameter, and their results' gradients. -1: not known.
  double weightHeldBytes = -1;
};

/// The FLOPs of the parameters' gradients out of a backward of
/// `backwardFlops` of the op `forward` (its name) whose gradients with
/// respect to `differentiated` operands (indices) are computed, `weights`
/// among them the parameters'; `outputElements` its result's elements.
/// A product (linear, matmul, conv2d) costs half of the rest for each of
/// its two factors' gradients and its output's elements for a bias's
/// (operand 2); any other op an equal share per gradient. The one rule the
/// zero-bubble split (dtfm-schedule-microbatches) and the planner use.
int64_t weightGradientFlops(StringRef forward, int64_t backwardFlops,
                            int64_t outputElements,
                            ArrayRef<int64_t> differentiated,
                            ArrayRef<int64_t> weights);

/// The model's blocks in order. Fails (with a diagnostic on the op) when a
/// layer's forward ops are not one run, or a training op names a layer that
/// no forward op has.
FailureOr<SmallVector<LayerBlock>> buildLayerChain(const CostAnalysis &costs);

/// The planner's view of a block (its figures without the ops).
::dtfm::planner::ChainBlock chainBlockOf(const LayerBlock &block);

/// The model as every planner sees it (lib/Planner's Workload), for one
/// micro-batch of the model's size (left at 1: the caller knows it):
/// trainable parameters, layers and the mean bytes crossing a layer
/// boundary; with `withChain`, also its chain of blocks (buildLayerChain),
/// the parameters that blocks share, and the gradient bytes the plan's syncs
/// carry per parameter byte. Fails (with a diagnostic on the op) only when
/// the chain does: the planners that score stages ask for it, DT-FM's
/// communication-only search does not.
FailureOr<::dtfm::planner::Workload> buildWorkload(const CostAnalysis &costs,
                                                   bool withChain = true);

/// Whether `op` belongs to the training part of a graph (built by autodiff).
bool isTrainingOp(Operation *op);

/// The optimizer state the runtime keeps per parameter element for the
/// module's updates (Plan/MemoryModel.h): 8 bytes for dtfm.adamw_update
/// (m and v), 4 for dtfm.sgd_update (its velocity); a module without
/// updates yet (before --dtfm-autodiff) is planned for `optimizer`
/// ("adamw" or "sgd", --dtfm-plan's). Nullopt for an unknown name.
std::optional<double> optimizerStateBytesPerElement(ModuleOp module,
                                                    StringRef optimizer);

/// Whether the module's updates clip the gradient norm (clip_grad_norm >
/// 0): the planner then costs the norm's reduction each step. A module
/// without updates yet is planned for `clipGradNorm` (--dtfm-plan's).
bool clipsGradients(ModuleOp module, double clipGradNorm);

} // namespace mlir::dtfm

#endif // DTFM_ANALYSIS_COSTANALYSIS_H
