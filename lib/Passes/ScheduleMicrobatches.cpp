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
    SmallVectorImpl<StageStreamsAttr> &streams,
    SmallVectorImpl<int64_t> &peakInFlight, std::string &error) {
  std::vector<planner::StageSchedule> plan = planner::buildSchedule(
      kind, static_cast<int>(stages), static_cast<int>(microBatches));
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
        planner::parsePipelineSchedule(schedule.getValue());
    if (!kind)
      return fail("unknown schedule '" + schedule.getValue() + "' (expected " +
                  planner::kPipelineScheduleChoices + ")");
    if (std::string problem = microBatchesProblem(microBatches);
        !problem.empty())
      return fail(problem);
    int count = static_cast<int>(planMicroBatches(module, microBatches));

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
    if (failed(buildStageStreams(b.getContext(), *kind, stages, count,
                                 stageAttrs, peaks, error)))
      return fail(error);
    module->setAttr(kScheduleAttrName,
                    ScheduleAttr::get(b.getContext(),
                                      planner::pipelineScheduleName(*kind),
                                      count, peaks, stageAttrs, pipelineCounts));
  }
};
} // namespace
