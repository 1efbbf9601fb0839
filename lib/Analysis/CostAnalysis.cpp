//===- CostAnalysis.cpp - Per-op and per-layer costs of a model -----------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Analysis/CostAnalysis.h"
#include "dtfm/Analysis/Differentiation.h"
#include "dtfm/Support/OpShapes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MathExtras.h"

#include <set>

using namespace mlir;
using namespace mlir::dtfm;

int64_t OpCost::totalResultBytes() const {
  int64_t sum = 0;
  for (int64_t bytes : resultBytes)
    sum += bytes;
  return sum;
}

bool CostTotals::add(const OpCost &cost) {
  CostTotals sum = *this;
  auto plus = [](int64_t &total, int64_t value) {
    return !llvm::AddOverflow(total, value, total);
  };
  bool fits =
      plus(sum.ops, 1) &&
      plus(cost.frozenParameter ? sum.frozenParameters
                                : sum.trainableParameters,
           cost.parameterElements) &&
      plus(sum.parameterBytes, cost.parameterBytes) &&
      plus(sum.forwardFlops, cost.forwardFlops) &&
      plus(sum.backwardFlops, cost.backwardFlops) &&
      plus(sum.optimizerFlops, cost.optimizerFlops) &&
      plus(sum.savedActivationBytes, cost.savedActivationBytes) &&
      plus(sum.resultBytes, cost.totalResultBytes());
  // The training total must fit too (PrintCosts and the planner read it).
  int64_t training;
  fits = fits && !llvm::AddOverflow(sum.forwardFlops, sum.backwardFlops,
                                    training) &&
         !llvm::AddOverflow(training, sum.optimizerFlops, training);
  if (fits)
    *this = sum;
  return fits;
}

CostAttr mlir::dtfm::buildCostAttr(CostOpInterface op) {
  SmallVector<int64_t> resultBytes;
  for (unsigned i = 0, e = op->getNumResults(); i < e; ++i)
    resultBytes.push_back(op.getResultBytes(i));
  return CostAttr::get(op->getContext(), op.getForwardFlops(),
                       op.getBackwardFlops(), op.getSavedActivationBytes(),
                       op.getParameterBytes(), resultBytes,
                       op.getForwardBytes(), op.getBackwardBytes());
}

FailureOr<OpCost> mlir::dtfm::getOpCost(CostOpInterface op) {
  OpCost cost;
  cost.op = op;
  if (auto layer = op->getAttrOfType<StringAttr>(kLayerAttrName))
    cost.layer = layer.str();
  if (auto param = dyn_cast<ParamOp>(op.getOperation())) {
    cost.parameterElements = getNumElements(param.getType());
    cost.frozenParameter = param.getFrozen();
  }

  Attribute annotation = op->getAttr(kCostAttrName);
  if (!annotation) {
    cost.forwardFlops = op.getForwardFlops();
    cost.backwardFlops = op.getBackwardFlops();
    cost.forwardBytes = op.getForwardBytes();
    cost.backwardBytes = op.getBackwardBytes();
    cost.savedActivationBytes = op.getSavedActivationBytes();
    cost.parameterBytes = op.getParameterBytes();
    for (unsigned i = 0, e = op->getNumResults(); i < e; ++i)
      cost.resultBytes.push_back(op.getResultBytes(i));
    return cost;
  }

  // The dialect verifier has checked that dtfm.cost is a #dtfm.cost, and
  // the attribute that its counts are non-negative.
  auto annotated = dyn_cast<CostAttr>(annotation);
  if (!annotated)
    return op->emitOpError() << "malformed '" << kCostAttrName
                             << "': expected a #dtfm.cost attribute";
  if (annotated.getResultBytes().size() != op->getNumResults())
    return op->emitOpError() << "malformed '" << kCostAttrName
                             << "': expected 'result_bytes' with "
                             << op->getNumResults() << " entries";
  cost.forwardFlops = annotated.getFwdFlops();
  cost.backwardFlops = annotated.getBwdFlops();
  cost.forwardBytes = annotated.getFwdBytes();
  cost.backwardBytes = annotated.getBwdBytes();
  cost.savedActivationBytes = annotated.getSavedBytes();
  cost.parameterBytes = annotated.getParamBytes();
  cost.resultBytes.assign(annotated.getResultBytes().begin(),
                          annotated.getResultBytes().end());
  return cost;
}

CostAnalysis::CostAnalysis(Operation *root) {
  root->walk([&](BackwardOp) { training = true; });
  llvm::StringMap<size_t> layerIndex;
  root->walk([&](CostOpInterface op) {
    FailureOr<OpCost> cost = getOpCost(op);
    if (failed(cost)) {
      valid = false;
      return;
    }
    if (training) {
      if (isa<BackwardOp, AccumulateOp>(op.getOperation())) {
        cost->backwardFlops = cost->forwardFlops;
        cost->forwardFlops = 0;
        cost->backwardBytes = cost->forwardBytes;
        cost->forwardBytes = 0;
      } else if (isa<SgdUpdateOp, AdamWUpdateOp>(op.getOperation())) {
        cost->optimizerFlops = cost->forwardFlops;
        cost->forwardFlops = 0;
        cost->forwardBytes = cost->backwardBytes = 0;
      } else {
        cost->backwardFlops = 0;
        cost->backwardBytes = 0;
      }
    }
    auto [it, inserted] = layerIndex.try_emplace(cost->layer,
                                                 layerTotals.size());
    if (inserted)
      layerTotals.push_back({cost->layer, CostTotals()});
    if (!layerTotals[it->second].second.add(*cost) || !totals.add(*cost)) {
      op->emitOpError("makes the model's FLOP or byte totals overflow 64 "
                      "bits");
      valid = false;
      return;
    }
    opCosts.push_back(std::move(*cost));
  });
}

bool mlir::dtfm::isTrainingOp(Operation *op) {
  return isa<BackwardOp, AccumulateOp, SgdUpdateOp, AdamWUpdateOp,
             GradSyncOp>(op);
}

/// What an op allocates only while it runs (LayerBlock::scratchBytes).
static double scratchBytes(Operation *op) {
  if (auto attention = dyn_cast<CausalAttentionOp>(op)) {
    auto query = cast<ShapedType>(attention.getQuery().getType());
    if (!query.hasStaticShape() || query.getRank() != 3)
      return 0;
    return static_cast<double>(query.getDimSize(0)) *
           static_cast<double>(attention.getNumHeads()) *
           static_cast<double>(query.getDimSize(1)) *
           static_cast<double>(query.getDimSize(1)) *
           static_cast<double>(getElementBytes(query.getElementType()));
  }
  if (auto loss = dyn_cast<CrossEntropyOp>(op)) {
    auto logits = cast<ShapedType>(loss.getLogits().getType());
    return logits.hasStaticShape()
               ? static_cast<double>(getTensorBytes(logits))
               : 0;
  }
  return 0;
}

/// Files an op's FLOPs and bytes under its block's forward and backward.
static void addRooflineWork(const OpCost &cost, LayerBlock &block) {
  block.forwardWork.add(static_cast<double>(cost.forwardFlops),
                        static_cast<double>(cost.forwardBytes));
  block.backwardWork.add(static_cast<double>(cost.backwardFlops),
                         static_cast<double>(cost.backwardBytes));
}

/// Before --dtfm-autodiff: the dtfm.accumulate the backward will add for
/// each trainable value used n > 1 times (its gradients summed: (n - 1)
/// FLOPs per element, n gradients read and one written), in the block of
/// its users when they share one, else of its producer -- as autodiff
/// places it. Elementwise and memory-bound: the roofline's bytes matter.
static void addGradientSums(const CostAnalysis &costs,
                            const llvm::StringMap<size_t> &blockOfLayer,
                            SmallVector<LayerBlock> &blocks) {
  auto layerOf = [](Operation *op) -> StringRef {
    auto layer = op->getAttrOfType<StringAttr>(kLayerAttrName);
    return layer ? layer.getValue() : StringRef();
  };
  for (const OpCost &cost : costs.getOpCosts()) {
    Operation *op = cost.op;
    if (isa<InputOp, LabelOp, ConstantOp>(op) ||
        (isa<ParamOp>(op) && cast<ParamOp>(op).getFrozen()))
      continue;
    for (Value result : op->getResults()) {
      auto type = dyn_cast<RankedTensorType>(result.getType());
      if (!type || !isa<FloatType>(type.getElementType()) ||
          !type.hasStaticShape())
        continue;
      int64_t uses = 0;
      StringRef usersLayer;
      bool oneLayer = true;
      for (OpOperand &use : result.getUses()) {
        if (!isa<CostOpInterface>(use.getOwner()))
          continue;
        StringRef layer = layerOf(use.getOwner());
        oneLayer = oneLayer && (uses == 0 || layer == usersLayer);
        usersLayer = layer;
        ++uses;
      }
      if (uses < 2)
        continue;
      auto it = blockOfLayer.find(oneLayer ? usersLayer : layerOf(op));
      if (it == blockOfLayer.end())
        continue;
      LayerBlock &block = blocks[it->second];
      double elements = static_cast<double>(type.getNumElements());
      double flops = static_cast<double>(uses - 1) * elements;
      block.flops += flops;
      block.backwardFlops += flops;
      block.backwardWork.add(flops,
                             static_cast<double>(uses + 1) *
                                 static_cast<double>(getTensorBytes(type)));
    }
  }
}

/// What the runtime keeps of a micro-batch for its backward
/// (LayerBlock::heldBytes) and the transient of each backward step, for
/// the ops --dtfm-autodiff gives a dtfm.backward (Differentiation's rule).
/// Without a loss nothing is known.
static void addHeldValues(const CostAnalysis &costs,
                          const llvm::StringMap<size_t> &blockOfLayer,
                          SmallVector<LayerBlock> &blocks) {
  SmallVector<Operation *> forward;
  Operation *loss = nullptr;
  for (const OpCost &cost : costs.getOpCosts())
    if (!isTrainingOp(cost.op)) {
      forward.push_back(cost.op);
      if (!loss && isa<CrossEntropyOp>(cost.op))
        loss = cost.op;
    }
  if (!loss)
    return;
  Differentiation differentiation(forward, loss);
  auto isDifferentiable = [&](Value v) {
    return differentiation.isDifferentiable(v);
  };
  auto bytesOf = [](Value v) {
    auto type = dyn_cast<ShapedType>(v.getType());
    return type && type.hasStaticShape()
               ? static_cast<double>(getTensorBytes(type))
               : 0.0;
  };
  for (LayerBlock &block : blocks)
    block.heldBytes = block.weightHeldBytes = 0;
  llvm::DenseSet<Value> held, heldForWeights;
  for (Operation *op : forward) {
    if (!differentiation.getsBackward(op))
      continue;
    auto layer = op->getAttrOfType<StringAttr>(kLayerAttrName);
    auto it = blockOfLayer.find(layer ? layer.getValue() : StringRef());
    if (it == blockOfLayer.end())
      continue;
    LayerBlock &block = blocks[it->second];
    double gradients = 0;
    bool takesParameter = llvm::any_of(op->getOperands(), [](Value v) {
      return isa_and_nonnull<ParamOp>(v.getDefiningOp());
    });
    for (Value operand : op->getOperands()) {
      if (isDifferentiable(operand))
        gradients += bytesOf(operand);
      if (isa_and_nonnull<ParamOp>(operand.getDefiningOp()))
        continue;
      if (held.insert(operand).second)
        block.heldBytes += bytesOf(operand);
      // (dtfm-schedule-microbatches' split: the W reads the same inputs)
      if (takesParameter && heldForWeights.insert(operand).second)
        block.weightHeldBytes += bytesOf(operand);
    }
    if (takesParameter) // and the gradient of each result
      for (Value result : op->getResults())
        block.weightHeldBytes += bytesOf(result);
    block.scratchBytes =
        std::max(block.scratchBytes, scratchBytes(op) + gradients);
  }
}

/// A forward op's weightGradientFlops: its float operands differentiated,
/// those a dtfm.param defines the parameters.
static int64_t forwardWeightFlops(const OpCost &cost) {
  Operation *op = cost.op;
  if (op->getNumResults() == 0)
    return 0;
  SmallVector<int64_t> differentiated, weights;
  for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
    auto type = dyn_cast<RankedTensorType>(operand.getType());
    if (!type || !isa<FloatType>(type.getElementType()))
      continue;
    differentiated.push_back(static_cast<int64_t>(i));
    if (isa_and_nonnull<ParamOp>(operand.getDefiningOp()))
      weights.push_back(static_cast<int64_t>(i));
  }
  auto result = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  int64_t outputElements =
      result && result.hasStaticShape() ? result.getNumElements() : 0;
  return weightGradientFlops(op->getName().getStringRef(), cost.backwardFlops,
                             outputElements, differentiated, weights);
}

FailureOr<SmallVector<LayerBlock>>
mlir::dtfm::buildLayerChain(const CostAnalysis &costs) {
  auto work = [](const OpCost &c) {
    return static_cast<double>(c.forwardFlops) +
           static_cast<double>(c.backwardFlops) +
           static_cast<double>(c.optimizerFlops);
  };
  SmallVector<LayerBlock> blocks;
  llvm::StringMap<size_t> blockOfLayer;
  for (const OpCost &cost : costs.getOpCosts()) {
    if (isTrainingOp(cost.op))
      continue;
    if (blocks.empty() || blocks.back().layer != cost.layer) {
      // Stages are cut between layers and training ops find their block by
      // its layer: a layer must be one run of ops.
      if (!blockOfLayer.try_emplace(cost.layer, blocks.size()).second) {
        cost.op->emitError()
            << "layer '" << cost.layer
            << "' is not contiguous: its ops resume after "
               "layer '"
            << blocks.back().layer << "' (give each run its own dtfm.layer)";
        return failure();
      }
      blocks.push_back(LayerBlock());
      blocks.back().layer = cost.layer;
    }
    LayerBlock &block = blocks.back();
    block.ops.push_back(cost.op);
    block.flops += work(cost);
    block.backwardFlops += static_cast<double>(cost.backwardFlops);
    block.weightFlops += static_cast<double>(forwardWeightFlops(cost));
    addRooflineWork(cost, block);
    block.parameterBytes += static_cast<double>(cost.parameterBytes);
    block.activationBytes += static_cast<double>(cost.savedActivationBytes);
    block.scratchBytes = std::max(block.scratchBytes, scratchBytes(cost.op));
    if (auto sum = dyn_cast<TpAllReduceOp>(cost.op)) {
      block.groupSums += 1;
      block.groupSumBytes +=
          static_cast<double>(getTensorBytes(sum.getResult().getType()));
    }
    if (auto loss = dyn_cast<CrossEntropyOp>(cost.op))
      if (std::optional<uint64_t> degree = loss.getVocabShard()) {
        // Its row sums, in the forward and again in the backward (f32).
        auto labels = cast<ShapedType>(loss.getLabels().getType());
        if (labels.hasStaticShape()) {
          block.groupSums += 2;
          block.groupSumBytes +=
              2.0 * 4 * static_cast<double>(labels.getNumElements()) *
              static_cast<double>(::dtfm::shapes::vocabParallelLossSumWidth(
                  static_cast<int64_t>(*degree)));
        }
      }
  }
  for (LayerBlock &block : blocks) {
    llvm::SmallPtrSet<Operation *, 16> own(block.ops.begin(), block.ops.end());
    llvm::DenseSet<Value> entering;
    for (Operation *op : block.ops)
      for (Value operand : op->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if ((def && (own.contains(def) || isa<ParamOp>(def))) ||
            !entering.insert(operand).second)
          continue;
        if (auto shaped = dyn_cast<ShapedType>(operand.getType()))
          if (shaped.hasStaticShape())
            block.inputBytes += static_cast<double>(getTensorBytes(shaped));
      }
  }
  if (!costs.isTrainingGraph())
    addGradientSums(costs, blockOfLayer, blocks);
  addHeldValues(costs, blockOfLayer, blocks);
  for (const OpCost &cost : costs.getOpCosts()) {
    if (!isTrainingOp(cost.op))
      continue;
    auto it = blockOfLayer.find(cost.layer);
    if (it == blockOfLayer.end())
      return cost.op->emitOpError()
             << "belongs to layer '" << cost.layer
             << "', which no forward op has";
    LayerBlock &block = blocks[it->second];
    block.ops.push_back(cost.op);
    // Optimizer state is accounted by the partitioner's state factor.
    block.flops += work(cost);
    block.backwardFlops += static_cast<double>(cost.backwardFlops);
    addRooflineWork(cost, block);
  }
  return blocks;
}

::dtfm::planner::ChainBlock mlir::dtfm::chainBlockOf(const LayerBlock &block) {
  return {block.flops,         block.parameterBytes, block.activationBytes,
          block.backwardFlops, block.inputBytes,     block.scratchBytes,
          block.groupSums,     block.groupSumBytes,  block.forwardWork,
          block.backwardWork,  block.heldBytes,      block.weightFlops,
          block.weightHeldBytes};
}

int64_t mlir::dtfm::weightGradientFlops(StringRef forward,
                                        int64_t backwardFlops,
                                        int64_t outputElements,
                                        ArrayRef<int64_t> differentiated,
                                        ArrayRef<int64_t> weights) {
  if (weights.empty() || differentiated.empty() || backwardFlops <= 0)
    return 0;
  if (forward == "dtfm.linear" || forward == "dtfm.matmul" ||
      forward == "dtfm.conv2d") {
    bool hasBias = llvm::is_contained(differentiated, 2);
    int64_t bias = hasBias ? std::min(backwardFlops, outputElements) : 0;
    int64_t share = 0;
    for (int64_t index : weights)
      share += index == 2 ? bias : (backwardFlops - bias) / 2;
    return std::min(backwardFlops, share);
  }
  return backwardFlops * static_cast<int64_t>(weights.size()) /
         static_cast<int64_t>(differentiated.size());
}

/// Values produced in one `dtfm.layer` and used in a later one are what a
/// pipeline cut between those layers would send: their mean size.
static double meanBoundaryBytes(const CostAnalysis &costs) {
  llvm::StringMap<size_t> indexOfLayer;
  for (auto [i, entry] : llvm::enumerate(costs.getLayerTotals()))
    indexOfLayer[entry.first] = i;
  double sum = 0;
  int64_t count = 0;
  for (const OpCost &cost : costs.getOpCosts()) {
    if (isa<ParamOp>(cost.op))
      continue;
    size_t from = indexOfLayer[cost.layer];
    for (auto [i, result] : llvm::enumerate(cost.op->getResults())) {
      bool crosses = llvm::any_of(result.getUsers(), [&](Operation *user) {
        auto layer = user->getAttrOfType<StringAttr>(kLayerAttrName);
        auto it = indexOfLayer.find(layer ? layer.getValue() : "");
        return it != indexOfLayer.end() && it->second > from;
      });
      if (crosses) {
        sum += static_cast<double>(cost.resultBytes[i]);
        ++count;
      }
    }
  }
  if (count == 0) {
    // No layers: the largest activation is the conservative choice.
    for (const OpCost &cost : costs.getOpCosts())
      if (!isa<ParamOp>(cost.op))
        sum = std::max(sum, static_cast<double>(cost.totalResultBytes()));
    count = 1;
  }
  return sum / static_cast<double>(count);
}

FailureOr<::dtfm::planner::Workload>
mlir::dtfm::buildWorkload(const CostAnalysis &costs, bool withChain) {
  ::dtfm::planner::Workload result;
  result.trainableParameters = costs.getTotals().trainableParameters;
  result.layers = static_cast<int64_t>(costs.getLayerTotals().size());
  result.boundaryBytes = meanBoundaryBytes(costs);
  if (!withChain)
    return result;
  FailureOr<SmallVector<LayerBlock>> chain = buildLayerChain(costs);
  if (failed(chain))
    return failure();
  double parameterBytes = 0;
  DenseMap<Operation *, int> blockOf;
  for (const LayerBlock &block : *chain) {
    for (Operation *op : block.ops)
      blockOf[op] = static_cast<int>(result.blocks.size());
    result.blocks.push_back(chainBlockOf(block));
    parameterBytes += block.parameterBytes;
  }
  // Parameters read by the forward ops of other blocks, once per reader.
  double gradientBytes = 0, gradientElements = 0;
  for (const LayerBlock &block : *chain)
    for (Operation *op : block.ops) {
      auto param = dyn_cast<ParamOp>(op);
      if (!param)
        continue;
      double bytes = static_cast<double>(getTensorBytes(param.getType()));
      if (!param.getFrozen()) {
        gradientBytes += bytes;
        gradientElements += static_cast<double>(getNumElements(param.getType()));
      }
      int owner = blockOf[op];
      std::set<int> readers;
      for (Operation *user : param->getUsers()) {
        auto it = blockOf.find(user);
        if (it != blockOf.end() && it->second != owner && !isTrainingOp(user))
          readers.insert(it->second);
      }
      for (int reader : readers)
        result.tied.push_back({owner, reader, bytes});
    }
  if (parameterBytes > 0)
    result.gradientBytesPerParameterByte = gradientBytes / parameterBytes;
  if (gradientBytes > 0)
    result.gradientElementsPerByte = gradientElements / gradientBytes;
  return result;
}

std::optional<double>
mlir::dtfm::optimizerStateBytesPerElement(ModuleOp module,
                                          StringRef optimizer) {
  bool adamw = false, sgd = false;
  module.walk([&](Operation *op) {
    adamw |= isa<AdamWUpdateOp>(op);
    sgd |= isa<SgdUpdateOp>(op);
  });
  if (adamw || (!sgd && optimizer == "adamw"))
    return 8.0;
  if (sgd || optimizer == "sgd")
    return 4.0;
  return std::nullopt;
}

bool mlir::dtfm::clipsGradients(ModuleOp module, double clipGradNorm) {
  bool updates = false, clips = false;
  module.walk([&](Operation *op) {
    if (auto sgd = dyn_cast<SgdUpdateOp>(op)) {
      updates = true;
      clips |= sgd.getClipGradNorm().convertToDouble() > 0;
    } else if (auto adamw = dyn_cast<AdamWUpdateOp>(op)) {
      updates = true;
      clips |= adamw.getClipGradNorm().convertToDouble() > 0;
    }
  });
  return updates ? clips : clipGradNorm > 0;
}
