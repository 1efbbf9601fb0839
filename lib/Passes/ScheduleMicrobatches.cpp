//===- ScheduleMicrobatches.cpp - Micro-batch schedules on three slots ----===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Analysis/CostAnalysis.h"
#include "dtfm/Dialect/Dtfm/IR/DtfmAttrs.h"
#include "dtfm/Passes/Passes.h"
#include "dtfm/Planner/Schedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::dtfm {
#define GEN_PASS_DEF_SCHEDULEMICROBATCHES
#include "dtfm/Passes/Passes.h.inc"
} // namespace mlir::dtfm

using namespace mlir;
using namespace mlir::dtfm;
namespace planner = ::dtfm::planner;

FailureOr<int64_t> mlir::dtfm::countStages(ModuleOp module) {
  int64_t stages = 0;
  WalkResult staged = module.walk([&](Operation *op) {
    if (isa<ModuleOp, func::FuncOp>(op))
      return WalkResult::advance();
    auto stage = op->getAttrOfType<IntegerAttr>(kStageAttrName);
    if (!stage) {
      op->emitOpError("has no dtfm.stage; run --dtfm-partition-stages first");
      return WalkResult::interrupt();
    }
    stages = std::max<int64_t>(stages, stage.getInt() + 1);
    return WalkResult::advance();
  });
  if (staged.wasInterrupted())
    return failure();
  return stages;
}

LogicalResult mlir::dtfm::buildStageStreams(
    MLIRContext *context, ::dtfm::planner::PipelineSchedule kind,
    int64_t stages, int64_t microBatches,
    const std::vector<int> &weightDelays,
    SmallVectorImpl<StageStreamsAttr> &streams,
    SmallVectorImpl<int64_t> &peakInFlight, std::string &error) {
  std::vector<planner::StageSchedule> plan =
      planner::buildSchedule(kind, static_cast<int>(stages),
                             static_cast<int>(microBatches), weightDelays);
  if (!planner::checkSchedule(plan, error))
    return failure();
  Builder b(context);
  for (const planner::StageSchedule &stage : plan) {
    auto stream = [&](planner::Slot slot) {
      SmallVector<StringAttr> items;
      for (const planner::Instruction &inst : stage[slot])
        items.push_back(
            b.getStringAttr(::dtfm::format::formatEntry(inst.entry(), slot)));
      return items;
    };
    streams.push_back(StageStreamsAttr::get(
        context, stream(planner::Slot::Receive), stream(planner::Slot::Compute),
        stream(planner::Slot::Send)));
    peakInFlight.push_back(planner::peakInFlight(stage));
  }
  return success();
}

std::vector<int> mlir::dtfm::zeroBubbleDelays(ModuleOp module,
                                              int64_t stages,
                                              int64_t microBatches) {
  std::vector<planner::ZeroBubbleStageBytes> held(stages);
  std::vector<double> largest(stages, 0.0);
  std::vector<bool> split(stages, false);
  auto phaseOf = [](Operation *op) {
    auto phase = op->getAttrOfType<StringAttr>(kPhaseAttrName);
    return phase ? phase.getValue() : StringRef();
  };
  auto bytesOf = [](Value value) {
    return static_cast<double>(getTensorBytes(value.getType()));
  };
  module.walk([&](Operation *op) {
    auto stage = op->getAttrOfType<IntegerAttr>(kStageAttrName);
    StringRef phase = phaseOf(op);
    if (!stage || stage.getInt() < 0 || stage.getInt() >= stages)
      return;
    planner::ZeroBubbleStageBytes &bytes = held[stage.getInt()];
    if (phase == kWeightPhase)
      split[stage.getInt()] = true;
    // Held whatever the schedule: a parameter, its gradients' sum and its
    // optimizer state (AdamW's two moments); a value received once per
    // iteration.
    if (isa<ParamOp>(op) || op->hasAttr(kOncePerIterationAttrName)) {
      for (Value value : op->getResults())
        bytes.fixed += bytesOf(value);
      return;
    }
    if (isa<AdamWUpdateOp, SgdUpdateOp>(op)) {
      bytes.fixed += (isa<AdamWUpdateOp>(op) ? 3 : 1) *
                     bytesOf(op->getOperand(0));
      return;
    }
    if (phase != "fwd" && phase != "bwd" && phase != kWeightPhase)
      return;
    for (Value value : op->getResults()) {
      double size = bytesOf(value);
      largest[stage.getInt()] = std::max(largest[stage.getInt()], size);
      if (phase == kWeightPhase)
        continue;
      bool readByBackward = false, readByWeight = false;
      for (Operation *user : value.getUsers()) {
        StringRef reader = phaseOf(user);
        readByBackward |= reader == "bwd";
        readByWeight |= reader == kWeightPhase;
      }
      if (phase == "fwd" && (readByBackward || readByWeight))
        bytes.untilBackward += size;
      if (readByWeight)
        bytes.untilWeight += size;
    }
  });
  // A buffer that passes while an op runs (a softmax of the logits) counts
  // once on top.
  for (int64_t s = 0; s < stages; ++s)
    held[s].fixed += largest[s];
  std::vector<int> delays =
      planner::zeroBubbleWeightDelays(held, static_cast<int>(microBatches));
  for (int64_t s = 0; s < stages; ++s)
    if (!split[s])
      delays[s] = -1;
  return delays;
}

std::optional<planner::PipelineSchedule>
mlir::dtfm::resolveSchedule(ModuleOp module, StringRef option) {
  if (option != kAutoSchedule)
    return planner::parsePipelineSchedule(option);
  auto shape = module->getAttrOfType<ShapeAttr>(kShapeAttrName);
  if (!shape || shape.getSchedule().empty())
    return planner::PipelineSchedule::OneFOneB;
  return planner::parsePipelineSchedule(shape.getSchedule());
}

/// Whether `value` is a parameter as the stage sees it: a dtfm.param, or a
/// tied one received once per iteration.
static bool isWeight(Value value) {
  Operation *def = value.getDefiningOp();
  if (isa_and_nonnull<ParamOp>(def))
    return true;
  auto recv = dyn_cast_or_null<RecvOp>(def);
  return recv && recv->hasAttr(kOncePerIterationAttrName);
}

void mlir::dtfm::splitWeightGradients(ModuleOp module,
                                      llvm::DenseSet<Operation *> &weightOps) {
  // 1. Each dtfm.backward that differentiates parameters and other values
  // becomes two: B (the others: the pipeline waits for them) and W (the
  // parameters), reading the same inputs. The kernels compute each
  // gradient on its own, so the values are the same.
  weightOps.clear();
  SmallVector<BackwardOp> backwards;
  module.walk([&](BackwardOp op) { backwards.push_back(op); });
  for (BackwardOp op : backwards) {
    SmallVector<int64_t> weightIdx, inputIdx;
    SmallVector<unsigned> weightResults, inputResults;
    for (auto [result, index] : llvm::enumerate(op.getWrt()))
      if (isWeight(op.getInputs()[index])) {
        weightIdx.push_back(index);
        weightResults.push_back(result);
      } else {
        inputIdx.push_back(index);
        inputResults.push_back(result);
      }
    if (weightIdx.empty())
      continue;
    if (inputIdx.empty()) {
      weightOps.insert(op);
      continue;
    }
    auto dOut = cast<RankedTensorType>(op.getInputs().back().getType());
    int64_t weightFlops =
        weightGradientFlops(op.getForward(), op.getFlops(),
                            dOut.getNumElements(), op.getWrt(), weightIdx);
    OpBuilder b(op);
    auto half = [&](ArrayRef<int64_t> wrt, ArrayRef<unsigned> results,
                    int64_t flops) {
      SmallVector<Type> types;
      for (unsigned r : results)
        types.push_back(op.getResult(r).getType());
      auto made = b.create<BackwardOp>(op.getLoc(), types, op.getForwardAttr(),
                                       op.getInputs(),
                                       b.getDenseI64ArrayAttr(wrt),
                                       b.getI64IntegerAttr(flops));
      // (a cost annotation was the whole op's: the halves are costed anew)
      for (NamedAttribute attr : op->getDiscardableAttrs())
        if (attr.getName() != kCostAttrName)
          made->setAttr(attr.getName(), attr.getValue());
      for (auto [k, r] : llvm::enumerate(results))
        op.getResult(r).replaceAllUsesWith(made.getResult(k));
      return made;
    };
    half(inputIdx, inputResults, op.getFlops() - weightFlops);
    weightOps.insert(half(weightIdx, weightResults, weightFlops));
    op.erase();
  }
  // 2. A sum of weight gradients is weight work too.
  module.walk([&](AccumulateOp op) {
    if (llvm::all_of(op.getGrads(), [&](Value v) {
          return v.getDefiningOp() && weightOps.contains(v.getDefiningOp());
        }))
      weightOps.insert(op);
  });
  // 3. What a micro-batch's backward reads (a send, a sum it makes) cannot
  // wait for its W: such weight work stays in the backward, and so, in
  // turn, does the weight work it reads.
  for (bool changed = true; changed;) {
    changed = false;
    for (Operation *op : llvm::to_vector(weightOps)) {
      bool readLater = llvm::all_of(op->getUsers(), [&](Operation *user) {
        return weightOps.contains(user) ||
               isa<SgdUpdateOp, AdamWUpdateOp, GradSyncOp>(user);
      });
      if (!readLater) {
        weightOps.erase(op);
        changed = true;
      }
    }
  }
}

namespace {
struct ScheduleMicrobatches
    : public mlir::dtfm::impl::ScheduleMicrobatchesBase<ScheduleMicrobatches> {
  using ScheduleMicrobatchesBase::ScheduleMicrobatchesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fail = [&](const Twine &message) {
      mlir::emitError(toolLoc(module, ""))
          << "dtfm-schedule-microbatches: " << message;
      signalPassFailure();
    };
    std::optional<planner::PipelineSchedule> kind =
        resolveSchedule(module, schedule.getValue());
    if (!kind)
      return fail("unknown schedule '" + schedule.getValue() + "' (expected " +
                  kScheduleOptionChoices + ")");
    if (std::string problem = microBatchesProblem(microBatches);
        !problem.empty())
      return fail(problem);
    int count = static_cast<int>(planMicroBatches(module, microBatches));

    // Zero bubble: the parameters' gradients split off, tagged "wgt" below.
    llvm::DenseSet<Operation *> weightOps;
    if (*kind == planner::PipelineSchedule::ZeroBubbleH1)
      splitWeightGradients(module, weightOps);
    Builder b(module.getContext());
    // A transfer moves a backward value when its value comes from a
    // training op or only training ops read it on arrival. Both ends must
    // agree (the runtime pairs them by phase), so the rule is applied to the
    // pair: a tag is backward when either end says so.
    llvm::DenseSet<int64_t> backwardTags;
    module.walk([&](Operation *op) {
      if (auto send = dyn_cast<SendOp>(op)) {
        Operation *def = send.getValue().getDefiningOp();
        if (auto compress = dyn_cast_or_null<TopKCompressOp>(def))
          def = compress.getInput().getDefiningOp();
        if (def && isTrainingOp(def))
          backwardTags.insert(static_cast<int64_t>(send.getTag()));
      }
      if (auto recv = dyn_cast<RecvOp>(op)) {
        SmallVector<Operation *> users(recv.getResult().getUsers().begin(),
                                       recv.getResult().getUsers().end());
        for (size_t i = 0; i < users.size(); ++i)
          if (auto decompress = dyn_cast<TopKDecompressOp>(users[i])) {
            users.erase(users.begin() + i--);
            users.append(decompress.getResult().getUsers().begin(),
                         decompress.getResult().getUsers().end());
          }
        if (!users.empty() && llvm::all_of(users, isTrainingOp))
          backwardTags.insert(static_cast<int64_t>(recv.getTag()));
      }
    });
    FailureOr<int64_t> counted = countStages(module);
    if (failed(counted))
      return signalPassFailure();
    int64_t stages = *counted;
    module.walk([&](Operation *op) {
      if (isa<ModuleOp, func::FuncOp>(op))
        return;
      StringRef slot = isa<RecvOp>(op)   ? "recv"
                       : isa<SendOp>(op) ? "send"
                                         : "compute";
      op->setAttr(kSlotAttrName, b.getStringAttr(slot));
      StringRef phase = isa<SgdUpdateOp, AdamWUpdateOp, GradSyncOp>(op) ? "opt"
                        : isa<BackwardOp, AccumulateOp>(op)             ? "bwd"
                                                                        : "fwd";
      if (weightOps.contains(op))
        phase = kWeightPhase;
      // A transfer belongs to the phase of the value it moves.
      if (auto send = dyn_cast<SendOp>(op))
        if (backwardTags.contains(static_cast<int64_t>(send.getTag())))
          phase = "bwd";
      if (auto recv = dyn_cast<RecvOp>(op))
        if (backwardTags.contains(static_cast<int64_t>(recv.getTag())))
          phase = "bwd";
      // AdaTopK's ops belong to the phase of the value they carry.
      if (auto compress = dyn_cast<TopKCompressOp>(op)) {
        Operation *def = compress.getInput().getDefiningOp();
        if (def && isTrainingOp(def))
          phase = "bwd";
      }
      if (auto decompress = dyn_cast<TopKDecompressOp>(op)) {
        auto users = decompress.getResult().getUsers();
        if (!users.empty() && llvm::all_of(users, isTrainingOp))
          phase = "bwd";
      }
      op->setAttr(kPhaseAttrName, b.getStringAttr(phase));
    });

    // Uneven replicas: the counts hetero gave each pipeline, on the same
    // global batch.
    SmallVector<int64_t> pipelineCounts;
    if (auto assignment =
            module->getAttrOfType<AssignmentAttr>(kAssignmentAttrName)) {
      ArrayRef<int64_t> counts = assignment.getPipelineMicroBatches();
      int64_t sum = 0;
      for (int64_t c : counts)
        sum += c;
      if (!counts.empty() && sum != assignment.getDp() * count)
        return fail("dtfm.assignment's pipeline_micro_batches sum to " +
                    Twine(sum) + ", not dp x micro-batches = " +
                    Twine(assignment.getDp() * count));
      pipelineCounts.assign(counts.begin(), counts.end());
      count = static_cast<int>(largestPipelineMicroBatches(module, count));
    }
    SmallVector<StageStreamsAttr> stageAttrs;
    SmallVector<int64_t> peaks;
    std::string error;
    // ZB-H1: a stage that can put off no W within 1F1B's peak does not
    // split its backward (each W op runs right after its B op, in the
    // backward: 1F1B's memory; holding a micro-batch's output gradients
    // from its B to its W would cost bytes for no gain).
    std::vector<int> weightDelays;
    if (*kind == planner::PipelineSchedule::ZeroBubbleH1) {
      weightDelays = zeroBubbleDelays(module, stages, count);
      module.walk([&](Operation *op) {
        auto stage = op->getAttrOfType<IntegerAttr>(kStageAttrName);
        auto phase = op->getAttrOfType<StringAttr>(kPhaseAttrName);
        if (stage && phase && phase.getValue() == kWeightPhase &&
            weightDelays[stage.getInt()] <= 0)
          op->setAttr(kPhaseAttrName, b.getStringAttr("bwd"));
      });
      for (int &delay : weightDelays)
        delay = delay <= 0 ? -1 : delay;
    }
    if (failed(buildStageStreams(b.getContext(), *kind, stages, count,
                                 weightDelays, stageAttrs, peaks, error)))
      return fail(error);
    module->setAttr(kScheduleAttrName,
                    ScheduleAttr::get(b.getContext(),
                                      planner::pipelineScheduleName(*kind),
                                      count, peaks, stageAttrs, pipelineCounts));
  }
};
} // namespace
