//===- TensorParallel.cpp - Megatron-style sharding of a forward graph ----===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The rewrite is structural: it finds attention blocks and MLPs by the ops
// that form them (not by parameter names), so a model imported from ONNX
// shards like a preset. The program it leaves is the same for every member
// of the group (SPMD); which slice of each sharded parameter a member holds
// is the runtime's business (the member's rank and dtfm.tp_shard).
//
//===----------------------------------------------------------------------===//

#include "dtfm/Analysis/CostAnalysis.h"
#include "dtfm/Passes/Passes.h"
#include "dtfm/Plan/OpKinds.h"
#include "dtfm/Planner/StageDegrees.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

#include "llvm/ADT/StringSet.h"

#include <limits>
#include <map>
#include <set>

namespace mlir::dtfm {
#define GEN_PASS_DEF_TENSORPARALLEL
#include "dtfm/Passes/Passes.h.inc"
} // namespace mlir::dtfm

using namespace mlir;
using namespace mlir::dtfm;

namespace {

/// The parameter `value` is when nothing but `user` reads it; null
/// otherwise (a tied weight, a computed weight).
ParamOp exclusiveParam(Value value, Operation *user) {
  auto param = value.getDefiningOp<ParamOp>();
  if (!param ||
      !llvm::all_of(value.getUsers(), [&](Operation *u) { return u == user; }))
    return nullptr;
  return param;
}

/// The only op reading `value`, or null.
Operation *soleUser(Value value) {
  if (!value.hasOneUse())
    return nullptr;
  return *value.getUsers().begin();
}

/// An op that leaves a sharded last dimension sharded (OpKinds.def's
/// DTFM_TP_PASS_THROUGH).
bool passesShardsThrough(Operation *op) {
  std::optional<::dtfm::plan::OpKind> kind =
      ::dtfm::plan::opKindOf(op->getName().getStringRef());
  return kind && ::dtfm::plan::opKindInfo(*kind).tensorParallelPassThrough &&
         op->getNumOperands() == 1;
}

/// The linear whose weight (and bias) only it reads, with its result read by
/// one op only: the shape of a column- or row-parallel linear.
LinearOp shardableLinear(Operation *op) {
  auto linear = dyn_cast_or_null<LinearOp>(op);
  if (!linear || !exclusiveParam(linear.getWeight(), linear) ||
      (linear.getBias() && !exclusiveParam(linear.getBias(), linear)))
    return nullptr;
  return linear;
}

/// One block to shard: column-parallel linears reading `input`, ops in
/// between whose last dimension shrinks with them, and the row-parallel
/// linear that ends it.
struct ShardBlock {
  Operation *anchor; // attention or the MLP's first linear (messages)
  Value input;
  SmallVector<LinearOp> columns;
  CausalAttentionOp attention; // null for an MLP
  SmallVector<Operation *> between;
  LinearOp row;
};

std::optional<ShardBlock> matchAttention(CausalAttentionOp attention) {
  ShardBlock block{attention, Value(), {}, attention, {}, nullptr};
  for (Value projected :
       {attention.getQuery(), attention.getKey(), attention.getValue()}) {
    // A rotary embedding between projection and attention works per head,
    // so it shards with them (Llama's Q and K).
    if (auto rotary = projected.getDefiningOp<RotaryOp>()) {
      if (!projected.hasOneUse())
        return std::nullopt;
      block.between.push_back(rotary);
      projected = rotary.getInput();
    }
    LinearOp linear = shardableLinear(projected.getDefiningOp());
    if (!linear || !projected.hasOneUse())
      return std::nullopt;
    if (block.input && linear.getInput() != block.input)
      return std::nullopt; // Q, K and V of different inputs
    block.input = linear.getInput();
    block.columns.push_back(linear);
  }
  block.row = shardableLinear(soleUser(attention.getResult()));
  if (!block.row || block.row.getInput() != attention.getResult())
    return std::nullopt;
  return block;
}

std::optional<ShardBlock> matchMlp(LinearOp first) {
  if (!shardableLinear(first))
    return std::nullopt;
  ShardBlock block{first, first.getInput(), {first}, nullptr, {}, nullptr};
  Value current = first.getResult();
  Operation *user = soleUser(current);
  while (user && passesShardsThrough(user)) {
    block.between.push_back(user);
    current = user->getResult(0);
    user = soleUser(current);
  }
  if (block.between.empty())
    return std::nullopt; // two linears in a row are not an MLP
  // A gated MLP (SwiGLU): the activated gate times a second linear of the
  // same input, which is column-parallel too.
  if (auto mul = dyn_cast_or_null<MulOp>(user)) {
    Value other = mul.getLhs() == current ? mul.getRhs() : mul.getLhs();
    LinearOp up = shardableLinear(other.getDefiningOp());
    if (up && other.hasOneUse() && up.getInput() == first.getInput() &&
        other.getType() == current.getType()) {
      block.columns.push_back(up);
      block.between.push_back(mul);
      current = mul.getResult();
      user = soleUser(current);
    }
  }
  block.row = shardableLinear(user);
  if (!block.row || block.row.getInput() != current)
    return std::nullopt;
  return block;
}

RankedTensorType withDim(Type type, int64_t dim, int64_t size) {
  auto tensor = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(tensor.getShape());
  shape[dim < 0 ? shape.size() + dim : dim] = size;
  return RankedTensorType::get(shape, tensor.getElementType());
}

int64_t lastDim(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape().back();
}

std::string layerOf(Operation *op) {
  auto layer = op->getAttrOfType<StringAttr>(kLayerAttrName);
  return layer ? " in layer '" + layer.str() + "'" : "";
}

/// A parameter split by the vocabulary: read only by embeddings (as their
/// table) and by heads (a matmul or linear whose logits only a
/// cross_entropy reads), all of which find the vocabulary along `dim`.
struct VocabularyTable {
  ParamOp param;
  int64_t dim;
  SmallVector<EmbeddingOp> embeddings;
  SmallVector<Operation *> heads;
};

/// The loss reading `head`'s result when that is all that reads it.
CrossEntropyOp lossOf(Operation *head) {
  auto loss = dyn_cast_or_null<CrossEntropyOp>(soleUser(head->getResult(0)));
  return loss && loss.getLogits() == head->getResult(0) ? loss : nullptr;
}

std::optional<VocabularyTable>
matchVocabularyTable(ParamOp param,
                     const llvm::DenseSet<Operation *> &claimed) {
  Value table = param.getResult();
  if (cast<RankedTensorType>(table.getType()).getRank() != 2 ||
      table.use_empty())
    return std::nullopt;
  VocabularyTable match{param, -1, {}, {}};
  auto agree = [&](int64_t dim) {
    if (match.dim >= 0 && match.dim != dim)
      return false;
    match.dim = dim;
    return true;
  };
  for (Operation *user : table.getUsers()) {
    if (llvm::is_contained(match.heads, user) ||
        llvm::is_contained(match.embeddings, user))
      continue;
    if (auto embedding = dyn_cast<EmbeddingOp>(user);
        embedding && embedding.getIndices() != table && agree(0)) {
      match.embeddings.push_back(embedding);
      continue;
    }
    if (claimed.contains(user) || !lossOf(user))
      return std::nullopt;
    if (auto matmul = dyn_cast<MatmulOp>(user);
        matmul && matmul.getRhs() == table && matmul.getLhs() != table &&
        agree(matmul.getTransposeRhs() ? 0 : 1)) {
      match.heads.push_back(matmul);
      continue;
    }
    if (auto linear = dyn_cast<LinearOp>(user);
        linear && linear.getWeight() == table && linear.getInput() != table &&
        (!linear.getBias() || exclusiveParam(linear.getBias(), linear)) &&
        agree(1)) {
      match.heads.push_back(linear);
      continue;
    }
    return std::nullopt;
  }
  return match;
}

/// The rewrite for groups of `degree` devices.
class Sharding {
public:
  explicit Sharding(int64_t degree) : degree(degree) {}

  /// Why `degree` cannot shard `block`; empty when it can.
  std::string check(ShardBlock block) const {
    std::string where = "'" + block.anchor->getName().getStringRef().str() +
                        "'" + layerOf(block.anchor);
    auto divides = [&](int64_t size, const char *what) -> std::string {
      if (size % degree == 0)
        return "";
      return "degree " + std::to_string(degree) + " does not divide the " +
             std::to_string(size) + " " + what + " of " + where;
    };
    if (block.attention) {
      if (std::string e = divides(block.attention.getNumHeads(), "heads");
          !e.empty())
        return e;
      if (std::string e =
              divides(block.attention.getKeyValueHeads(), "key/value heads");
          !e.empty())
        return e;
    }
    for (Operation *op : block.between)
      if (auto rotary = dyn_cast<RotaryOp>(op))
        if (std::string e = divides(rotary.getNumHeads(), "rotary heads");
            !e.empty())
          return e;
    for (LinearOp column : block.columns)
      if (std::string e = divides(lastDim(column.getResult()), "columns");
          !e.empty())
        return e;
    return "";
  }

  void shard(ShardBlock block) {
    // The block's input: whole in the forward, its gradient summed over
    // the group in the backward (each member's columns give a part of it).
    Operation *firstColumn = block.columns.front();
    for (LinearOp column : block.columns)
      if (column->isBeforeInBlock(firstColumn))
        firstColumn = column;
    // The columns' input as it is now: an earlier block's rewrite may have
    // replaced the value matched (a row-parallel result read directly).
    Value input = block.columns.front().getInput();
    OpBuilder b(firstColumn);
    auto copy = b.create<TpAllReduceOp>(firstColumn->getLoc(), input.getType(),
                                        input, b.getI64IntegerAttr(degree),
                                        b.getUnitAttr());
    copyLayer(firstColumn, copy);
    for (LinearOp column : block.columns) {
      column.getInputMutable().assign(copy.getResult());
      int64_t width = lastDim(column.getResult());
      shardParam(column.getWeight().getDefiningOp<ParamOp>(), 1, width);
      if (Value bias = column.getBias())
        shardParam(bias.getDefiningOp<ParamOp>(), 0, width);
      shrink(column);
    }
    if (block.attention) {
      if (block.attention.getNumKvHeads())
        block.attention.setNumKvHeads(block.attention.getKeyValueHeads() /
                                      degree);
      block.attention.setNumHeads(block.attention.getNumHeads() / degree);
      shrink(block.attention);
    }
    for (Operation *op : block.between) {
      if (auto rotary = dyn_cast<RotaryOp>(op))
        rotary.setNumHeads(rotary.getNumHeads() / degree);
      shrink(op);
    }

    // Row-parallel: a partial product on each member, summed, then the
    // bias once.
    LinearOp row = block.row;
    auto weight = row.getWeight().getDefiningOp<ParamOp>();
    shardParam(weight, 0, weight.getType().getDimSize(0));
    b.setInsertionPoint(row);
    auto partial = b.create<LinearOp>(row.getLoc(), row.getResult().getType(),
                                      row.getInput(), row.getWeight(), Value());
    copyLayer(row, partial);
    auto sum = b.create<TpAllReduceOp>(row.getLoc(), partial.getType(),
                                       partial.getResult(),
                                       b.getI64IntegerAttr(degree), UnitAttr());
    copyLayer(row, sum);
    Value whole = sum.getResult();
    if (Value bias = row.getBias()) {
      auto add = b.create<AddOp>(row.getLoc(), whole.getType(), whole, bias);
      copyLayer(row, add);
      whole = add.getResult();
    }
    row.getResult().replaceAllUsesWith(whole);
    row.erase();
  }

  /// Vocabulary-parallel: each member holds a slice of the vocabulary.
  /// Its embeddings give zeros outside it and a sum makes them whole; its
  /// heads compute their slice of the logits (from an input whose gradient
  /// the group sums), and the loss sums its per-row parts over the group.
  /// The degree divides the vocabulary.
  void shard(VocabularyTable table) {
    int64_t vocabulary = table.param.getType().getDimSize(table.dim);
    shardParam(table.param, table.dim, vocabulary);
    for (EmbeddingOp embedding : table.embeddings) {
      embedding.setVocabShard(degree);
      embedding->removeAttr(kCostAttrName);
      OpBuilder b(embedding->getContext());
      b.setInsertionPointAfter(embedding);
      auto sum = b.create<TpAllReduceOp>(
          embedding.getLoc(), embedding.getType(), embedding.getResult(),
          b.getI64IntegerAttr(degree), UnitAttr());
      copyLayer(embedding, sum);
      embedding.getResult().replaceAllUsesExcept(sum.getResult(), sum);
    }
    for (Operation *head : table.heads) {
      Value input = head->getOperand(0);
      OpBuilder b(head);
      auto copy =
          b.create<TpAllReduceOp>(head->getLoc(), input.getType(), input,
                                  b.getI64IntegerAttr(degree), b.getUnitAttr());
      copyLayer(head, copy);
      head->setOperand(0, copy.getResult());
      if (auto linear = dyn_cast<LinearOp>(head); linear && linear.getBias())
        shardParam(linear.getBias().getDefiningOp<ParamOp>(), 0, vocabulary);
      CrossEntropyOp loss = lossOf(head);
      shrink(head);
      loss.setVocabShard(degree);
      loss->removeAttr(kCostAttrName);
    }
  }

private:
  void shardParam(ParamOp param, int64_t dim, int64_t size) {
    param.getResult().setType(withDim(param.getType(), dim, size / degree));
    OpBuilder b(param);
    int64_t rank = param.getType().getRank();
    param->setAttr(kTpShardAttrName, b.getDenseI64ArrayAttr(
                                         {dim < 0 ? rank + dim : dim, degree}));
    param->removeAttr(kCostAttrName);
  }

  /// `op`'s result, its last dimension divided by the degree.
  void shrink(Operation *op) {
    Value result = op->getResult(0);
    result.setType(withDim(result.getType(), -1, lastDim(result) / degree));
    op->removeAttr(kCostAttrName);
  }

  static void copyLayer(Operation *from, Operation *to) {
    if (Attribute layer = from->getAttr(kLayerAttrName))
      to->setAttr(kLayerAttrName, layer);
  }

  int64_t degree;
};

struct TensorParallel
    : public mlir::dtfm::impl::TensorParallelBase<TensorParallel> {
  using TensorParallelBase::TensorParallelBase;

  void runOnOperation() override {
    std::string error;
    if (!stageDegrees.empty()) {
      if (degree != 1 || !layerDegrees.empty())
        error = "stage-degrees comes without degree and layer-degrees";
      else
        (void)shardStagesTensorParallel(getOperation(), stageDegrees,
                                        dataParallel, microBatches, error);
      if (!error.empty()) {
        mlir::emitError(toolLoc(getOperation(), ""))
            << "dtfm-tensor-parallel: " << error;
        signalPassFailure();
      }
      return;
    }
    TensorParallelLayers layers{degree, {}};
    llvm::StringSet<> known;
    getOperation().walk([&](Operation *op) {
      if (auto layer = op->getAttrOfType<StringAttr>(kLayerAttrName))
        known.insert(layer.getValue());
    });
    for (const std::string &pair : layerDegrees) {
      auto [layer, text] = StringRef(pair).rsplit(':');
      int64_t value = 0;
      if (layer.empty() || text.getAsInteger(10, value) || value < 1) {
        error = "layer-degrees: expected LAYER:DEGREE with a degree >= 1, "
                "got '" + pair + "'";
        break;
      }
      if (!known.contains(layer)) {
        error = "layer-degrees: the model has no layer '" + layer.str() + "'";
        break;
      }
      layers.byLayer[layer] = value;
    }
    if (!error.empty() ||
        failed(shardTensorParallel(getOperation(), layers, error))) {
      mlir::emitError(toolLoc(getOperation(), ""))
          << "dtfm-tensor-parallel: " << error;
      signalPassFailure();
    }
  }
};
} // namespace

LogicalResult mlir::dtfm::shardTensorParallel(ModuleOp module, int64_t degree,
                                              std::string &error) {
  return shardTensorParallel(module, TensorParallelLayers{degree, {}}, error);
}

LogicalResult
mlir::dtfm::shardTensorParallel(ModuleOp module,
                                const TensorParallelLayers &layers,
                                std::string &error) {
  auto refuse = [&](int64_t degree) {
    error = "degree must be at least 1, got " + std::to_string(degree) +
            (degree == 0 ? " (--dtfm-plan's tp=0, a degree chosen with the "
                           "shape, needs global-batch)"
                         : "");
    return failure();
  };
  if (layers.degree < 1)
    return refuse(layers.degree);
  for (const auto &entry : layers.byLayer)
    if (entry.second < 1)
      return refuse(entry.second);
  if (layers.degree == 1 && layers.byLayer.empty())
    return success();
  auto degreeOf = [&](Operation *op) {
    auto layer = op->getAttrOfType<StringAttr>(kLayerAttrName);
    auto it = layer ? layers.byLayer.find(layer.getValue())
                    : layers.byLayer.end();
    return it == layers.byLayer.end() ? layers.degree : it->second;
  };
  if (module->hasAttr(kTensorParallelAttrName)) {
    error = "the model is sharded already";
    return failure();
  }
  SmallVector<ShardBlock> blocks;
  llvm::DenseSet<Operation *> claimed; // linears of a block found already
  auto take = [&](std::optional<ShardBlock> block) {
    if (!block || llvm::any_of(block->columns, [&](LinearOp column) {
          return claimed.contains(column);
        }))
      return;
    for (LinearOp column : block->columns)
      claimed.insert(column);
    claimed.insert(block->row);
    blocks.push_back(*block);
  };
  bool backward = false;
  module.walk([&](Operation *op) {
    if (isa<BackwardOp>(op))
      backward = true;
    if (auto attention = dyn_cast<CausalAttentionOp>(op))
      take(matchAttention(attention));
    else if (auto linear = dyn_cast<LinearOp>(op))
      take(matchMlp(linear));
  });
  if (backward) {
    error = "the module has a backward graph already; shard the forward "
            "graph (before --dtfm-autodiff)";
    return failure();
  }
  // Tables split by the vocabulary: found before the blocks change the
  // graph, from the parameters no block claimed; kept whole where the
  // degree does not divide the vocabulary, or where their readers' layers
  // have different degrees (a tied embedding and head on stages of
  // different degrees: each stage holds it whole).
  SmallVector<std::pair<VocabularyTable, int64_t>> tables;
  module.walk([&](ParamOp param) {
    std::optional<VocabularyTable> table = matchVocabularyTable(param, claimed);
    if (!table)
      return;
    SmallVector<Operation *> readers(table->embeddings.begin(),
                                     table->embeddings.end());
    readers.append(table->heads.begin(), table->heads.end());
    int64_t degree = readers.empty() ? 1 : degreeOf(readers.front());
    for (Operation *reader : readers)
      if (degreeOf(reader) != degree)
        degree = 1;
    if (degree > 1 &&
        table->param.getType().getDimSize(table->dim) % degree == 0)
      tables.push_back({*table, degree});
  });
  // Each block at its layer's degree; degree 1 leaves it whole.
  SmallVector<std::pair<ShardBlock, int64_t>> sharded;
  std::set<int64_t> degrees; // of every block, whole ones included
  for (ShardBlock block : blocks) {
    int64_t degree = degreeOf(block.anchor);
    degrees.insert(degree);
    if (degree > 1)
      sharded.push_back({block, degree});
  }
  if (sharded.empty() && tables.empty()) {
    error = "no attention or MLP block or vocabulary to shard (degree " +
            std::to_string(layers.degree) + ")";
    return failure();
  }
  for (auto &[block, degree] : sharded)
    if (std::string problem = Sharding(degree).check(block); !problem.empty()) {
      error = problem;
      return failure();
    }
  for (auto &[block, degree] : sharded)
    Sharding(degree).shard(block);
  for (auto &[table, degree] : tables) {
    Sharding(degree).shard(table);
    degrees.insert(degree);
  }
  // One degree: the module's. Several (a degree per stage): each sharded
  // op carries its own, and the planner's groups say whose.
  Builder b(module.getContext());
  module->setAttr(kTensorParallelAttrName,
                  b.getI64IntegerAttr(degrees.size() == 1 ? *degrees.begin()
                                                          : 0));
  if (failed(verify(module))) {
    error = "the sharded module does not verify";
    return failure();
  }
  return success();
}

LogicalResult mlir::dtfm::shardStagesTensorParallel(ModuleOp module,
                                                    ArrayRef<int64_t> degrees,
                                                    int64_t dataParallel,
                                                    int64_t microBatches,
                                                    std::string &error) {
  namespace planner = ::dtfm::planner;
  if (degrees.empty() || dataParallel < 1 || microBatches < 1 ||
      microBatches > ::dtfm::format::kMaxMicroBatches) {
    error = "stage-degrees needs a degree per stage, dp >= 1 and "
            "micro-batches in [1, " +
            std::to_string(::dtfm::format::kMaxMicroBatches) + "]";
    return failure();
  }
  for (int64_t degree : degrees)
    if (degree < 1) {
      error = "stage degrees must be at least 1, got " +
              std::to_string(degree);
      return failure();
    }
  if (module->hasAttr(kTensorParallelAttrName)) {
    error = "the model is sharded already";
    return failure();
  }
  FailureOr<planner::Cluster> cluster = moduleCluster(module, error);
  if (failed(cluster))
    return failure();
  FailureOr<int64_t> modelSize = modelMicroBatchSize(module, error);
  if (failed(modelSize))
    return failure();

  // The model sharded uniformly at each degree (and whole): what each
  // stage costs at its degree.
  planner::StageDegreeProblem problem;
  problem.cluster = &*cluster;
  std::set<int64_t> distinct(degrees.begin(), degrees.end());
  distinct.insert(1);
  for (int64_t degree : distinct) {
    OwningOpRef<ModuleOp> copy = module.clone();
    if (degree > 1 && failed(shardTensorParallel(*copy, degree, error))) {
      error = "stage degree " + std::to_string(degree) + ": " + error;
      return failure();
    }
    CostAnalysis costs(*copy);
    FailureOr<planner::Workload> workload =
        costs.isValid() ? buildWorkload(costs)
                        : FailureOr<planner::Workload>(failure());
    if (failed(workload)) {
      error = "the model's layers do not form a chain (degree " +
              std::to_string(degree) + ")";
      return failure();
    }
    if (!problem.workloadAt.empty() &&
        workload->blocks.size() !=
            problem.workloadAt.begin()->second.blocks.size()) {
      error = "the model sharded at degree " + std::to_string(degree) +
              " has other layers than unsharded";
      return failure();
    }
    workload->microBatchSize = *modelSize;
    problem.workloadAt[degree] = std::move(*workload);
  }
  problem.globalBatch = dataParallel * microBatches * *modelSize;
  problem.microBatchSizes = {*modelSize};
  problem.training.stages.optimizerBytesPerElement =
      optimizerStateBytesPerElement(module, "adamw").value_or(8);
  planner::StageDegreeChoice choice = planner::scoreStageDegrees(
      problem, std::vector<int64_t>(degrees.begin(), degrees.end()),
      static_cast<int>(dataParallel), *modelSize);
  if (!choice.cost.feasible) {
    error = choice.cost.error;
    return failure();
  }
  return shardStageLayout(module, choice.groups, choice.cost.plan.bounds,
                          error);
}

LogicalResult mlir::dtfm::shardStageLayout(
    ModuleOp module,
    const std::vector<std::vector<std::vector<int>>> &stageGroups,
    const std::vector<int> &bounds, std::string &error) {
  namespace planner = ::dtfm::planner;
  FailureOr<planner::Cluster> loaded = moduleCluster(module, error);
  if (failed(loaded))
    return failure();
  const planner::Cluster &cluster = *loaded;
  CostAnalysis costs(module);
  FailureOr<SmallVector<LayerBlock>> chain =
      costs.isValid() ? buildLayerChain(costs)
                      : FailureOr<SmallVector<LayerBlock>>(failure());
  if (failed(chain)) {
    error = "the model's layers do not form a chain";
    return failure();
  }
  size_t pp = stageGroups.size();
  if (pp == 0 || bounds.size() != pp + 1 || bounds.front() != 0 ||
      bounds.back() != static_cast<int>(chain->size()) ||
      std::adjacent_find(bounds.begin(), bounds.end(),
                         std::greater_equal<int>()) != bounds.end()) {
    error = "stage bounds must rise strictly from 0 to " +
            std::to_string(chain->size()) + " over " + std::to_string(pp) +
            " stages";
    return failure();
  }
  std::vector<int64_t> degrees;
  for (const auto &groups : stageGroups) {
    if (groups.empty() ||
        llvm::any_of(groups, [&](const std::vector<int> &group) {
          return group.size() != groups.front().size();
        })) {
      error = "each stage needs groups, all of one size";
      return failure();
    }
    degrees.push_back(static_cast<int64_t>(groups.front().size()));
  }
  TensorParallelLayers layers;
  for (size_t s = 0; s < pp; ++s)
    for (int i = bounds[s]; i < bounds[s + 1]; ++i)
      if (!(*chain)[i].layer.empty())
        layers.byLayer[(*chain)[i].layer] = degrees[s];
  std::string shardError;
  bool sharded = succeeded(shardTensorParallel(module, layers, shardError));
  // A group whose stage holds nothing sharded would repeat its whole stage
  // on every member (the partitioner gave it only layers that stay whole:
  // sums costing more than the work they divide, or a tied table kept
  // whole): refused rather than planned. A failed sharding leaves the
  // module as it was.
  llvm::StringSet<> shardedLayers;
  module.walk([&](ParamOp param) {
    if (auto layer = param->getAttrOfType<StringAttr>(kLayerAttrName);
        layer && param->hasAttr(kTpShardAttrName))
      shardedLayers.insert(layer.getValue());
  });
  for (size_t s = 0; s < pp; ++s) {
    bool any = false;
    for (int i = bounds[s]; i < bounds[s + 1]; ++i)
      any = any || shardedLayers.contains((*chain)[i].layer);
    if (degrees[s] > 1 && !any) {
      error = "stage " + std::to_string(s) + " at degree " +
              std::to_string(degrees[s]) + " gets layers " +
              (*chain)[bounds[s]].layer + " to " +
              (*chain)[bounds[s + 1] - 1].layer +
              " and none of them is sharded (the stage partitioner's best "
              "split on these devices and links): its group would repeat "
              "them on every member (give it degree 1)";
      return failure();
    }
  }
  if (!sharded) {
    error = shardError;
    return failure();
  }
  Builder b(module.getContext());
  SmallVector<Attribute> groupNames;
  for (const auto &groups : stageGroups)
    for (const std::vector<int> &group : groups) {
      SmallVector<Attribute> names;
      for (int member : group)
        names.push_back(b.getStringAttr(cluster.devices.at(member).name));
      groupNames.push_back(b.getArrayAttr(names));
    }
  module->setAttr(kTpGroupsAttrName, b.getArrayAttr(groupNames));
  SmallVector<int64_t> recorded(bounds.begin(), bounds.end());
  module->setAttr(kTpStageBoundsAttrName, b.getDenseI64ArrayAttr(recorded));
  return success();
}
