//===- ChooseShape.cpp - The plan's shape as a pass -----------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// A thin adapter: the micro-batch sizes the model accepts (each tried on a
// copy by --dtfm-rebatch's rewrite), the workload from the cost analysis,
// the shape search (lib/Planner/ShapeSearch.h), then the model rebatched to
// the chosen size and the choice recorded as `dtfm.shape`, with the lower
// bound on any plan's iteration time (lib/Planner/LowerBound.h) at the
// chosen plan's local steps.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Analysis/CostAnalysis.h"
#include "dtfm/Passes/Passes.h"
#include "dtfm/Planner/LowerBound.h"
#include "dtfm/Planner/ShapeSearch.h"
#include "dtfm/Planner/StageDegrees.h"

#include "mlir/IR/Builders.h"

#include <cmath>
#include <functional>

namespace mlir::dtfm {
#define GEN_PASS_DEF_CHOOSESHAPE
#include "dtfm/Passes/Passes.h.inc"
} // namespace mlir::dtfm

using namespace mlir;
using namespace mlir::dtfm;
namespace planner = ::dtfm::planner;

namespace {

struct ChooseShape : public mlir::dtfm::impl::ChooseShapeBase<ChooseShape> {
  using ChooseShapeBase::ChooseShapeBase;
  /// schedule=auto: the shape search chose the plan's schedule.
  bool problemChoosesSchedule = false;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fail = [&](const Twine &message) {
      mlir::emitError(clusterLoc(module)) << "dtfm-choose-shape: " << message;
      signalPassFailure();
    };
    if (!getModuleCluster(module))
      return fail(kNoClusterMessage);
    if (globalBatch <= 0 || globalBatch > ::dtfm::format::kMaxMicroBatches)
      return fail("global-batch must be in [1, " +
                  Twine(::dtfm::format::kMaxMicroBatches) + "] samples, got " +
                  Twine(globalBatch.getValue()));
    // auto: each shape scored under 1F1B and zero bubble (ShapeProblem).
    problemChoosesSchedule = schedule.getValue() == kAutoSchedule;
    std::optional<planner::PipelineSchedule> kind =
        problemChoosesSchedule
            ? planner::PipelineSchedule::OneFOneB
            : planner::parsePipelineSchedule(schedule.getValue());
    if (budget < 0 || !(stateBytes >= 0) || !kind)
      return fail("budget and state-bytes-per-param-byte must be >= 0 and "
                  "schedule " + Twine(kScheduleOptionChoices));
    for (int64_t size : microBatchSizes)
      if (size <= 0)
        return fail("micro-batch sizes must be positive, found " + Twine(size));
    planner::ShapeProblem problem;
    std::string error;
    if (!planner::parseCommunication(sync, compressRatio, bucketMb, syncEvery,
                                     dpCompression, ppCompression,
                                     problem.training, error))
      return fail(error);
    problem.training.syncFragments = syncFragments;
    problem.training.syncOverlap = syncOverlap;
    if (!planner::parseMemoryOptions(recompute, shardState, problem.training,
                                     error))
      return fail(error);
    if (tensorParallel < 0)
      return fail("tensor-parallel must be >= 0, got " +
                  Twine(tensorParallel.getValue()));
    FailureOr<int64_t> modelSize = modelMicroBatchSize(module, error);
    if (failed(modelSize))
      return fail(error);

    // The sizes the model accepts: each tried on a copy.
    std::vector<int64_t> candidates(microBatchSizes.begin(),
                                    microBatchSizes.end());
    if (candidates.empty())
      candidates = planner::microBatchSizeCandidates(*modelSize, globalBatch);
    std::vector<int64_t> sizes;
    std::string refusal;
    for (int64_t size : candidates) {
      OwningOpRef<ModuleOp> copy = module.clone();
      std::string why;
      if (succeeded(rebatchModule(*copy, size, why)))
        sizes.push_back(size);
      else if (refusal.empty())
        refusal = why;
    }
    if (sizes.empty())
      return fail(candidates.empty()
                      ? "no micro-batch size near the model's (" +
                            Twine(*modelSize) + ") divides global-batch " +
                            Twine(globalBatch.getValue())
                      : Twine(refusal));

    // The degrees to try: the module's own, or with tensor-parallel=0 each
    // degree up to the largest node.
    if (tensorParallel == 0 && tensorParallelDegree(module) != 1)
      return fail("tensor-parallel=0 searches the degree of a model not "
                  "sharded yet, and this one is (degree " +
                  Twine(tensorParallelDegree(module)) + ")");
    if (tensorParallel > 1 && tensorParallel != tensorParallelDegree(module))
      return fail("tensor-parallel=" + Twine(tensorParallel.getValue()) +
                  " but the model is sharded to degree " +
                  Twine(tensorParallelDegree(module)) +
                  ": shard it first (--dtfm-tensor-parallel)");
    std::vector<int64_t> degrees{tensorParallelDegree(module)};
    if (tensorParallel == 0) {
      FailureOr<planner::Cluster> all = moduleCluster(module, error);
      if (failed(all))
        return fail(error);
      size_t largest = 1;
      for (const std::vector<int> &node : planner::nodeMembers(*all))
        largest = std::max(largest, node.size());
      for (int64_t t = 2; t <= static_cast<int64_t>(largest); ++t)
        degrees.push_back(t);
    }
    std::optional<double> optimizerBytes =
        optimizerStateBytesPerElement(module, optimizer);
    if (!optimizerBytes)
      return fail("unknown optimizer '" + optimizer.getValue() +
                  "' (expected adamw or sgd)");
    problem.globalBatch = globalBatch;
    problem.microBatchSizes = sizes;
    problem.fixedDataParallel = dataParallel;
    problem.fixedPipelineParallel = pipelineParallel;
    problem.training.stages.stateBytesPerParameterByte = stateBytes;
    problem.training.stages.optimizerBytesPerElement = *optimizerBytes;
    problem.training.clipGradients = clipsGradients(module, clipGradNorm);
    problem.training.stages.schedule = *kind;
    problem.chooseSchedule = problemChoosesSchedule;

    // One search per degree, on a copy sharded to it; the fastest wins.
    struct Candidate {
      int64_t degree = 1;
      planner::Cluster cluster;
      planner::ShapeSearchResult result;
    };
    std::optional<Candidate> best;
    // The lower bound of each degree searched: the plan is compared with
    // the smallest (Planner/LowerBound.h).
    std::vector<planner::LowerBoundModel> bounds;
    // tensor-parallel=0: the models sharded at each degree, for plans with
    // a degree per stage.
    planner::StageDegreeProblem mixed;
    std::string firstError;
    // Why a degree could not be planned: the first one's reason is the
    // error when none can.
    auto skip = [&](int64_t degree, const std::string &why) {
      if (firstError.empty())
        firstError = degrees.size() > 1
                         ? "tensor-parallel degree " + std::to_string(degree) +
                               ": " + why
                         : why;
    };
    for (int64_t degree : degrees) {
      OwningOpRef<ModuleOp> copy = module.clone();
      std::string why;
      if (tensorParallel == 0 &&
          failed(shardTensorParallel(*copy, degree, why))) {
        skip(degree, why); // the model does not shard to it
        continue;
      }
      FailureOr<planner::Cluster> cluster = planningCluster(*copy, why);
      if (failed(cluster)) {
        skip(degree, why); // no node holds a group of it
        continue;
      }
      CostAnalysis costs(*copy);
      if (!costs.isValid())
        return signalPassFailure();
      FailureOr<planner::Workload> workload = buildWorkload(costs);
      if (failed(workload))
        return signalPassFailure();
      if (tensorParallel == 0)
        mixed.workloadAt[degree] = *workload;
      Candidate candidate{degree, std::move(*cluster), {}};
      planner::ShapeProblem tried = problem;
      tried.cluster = &candidate.cluster;
      tried.workload = std::move(*workload);
      tried.workload.microBatchSize = *modelSize;
      // The degree the module has gets the whole budget, so that searching
      // the others never finds a worse plan for it than tensor-parallel=1
      // does; the others share another.
      planner::ShapeSearchOptions options;
      double total =
          budget > 0
              ? budget
              : planner::defaultSearchBudgetSeconds(candidate.cluster.size());
      options.budgetSeconds =
          degree == degrees.front()
              ? total
              : total / static_cast<double>(degrees.size() - 1);
      planner::LowerBoundModel bound;
      std::string boundError;
      if (planner::LowerBoundModel::create(tried, bound, boundError))
        bounds.push_back(std::move(bound));
      if (!planner::searchShapes(tried, options, candidate.result, why)) {
        skip(degree, why);
        continue;
      }
      if (!best || candidate.result.best.iterationSeconds() <
                       best->result.best.iterationSeconds())
        best = std::move(candidate);
    }
    if (!best)
      return fail(firstError);
    // The bound at the chosen plan's local steps (0: synchronous).
    auto lowerBound = [&](int64_t syncEvery) {
      double seconds = std::numeric_limits<double>::infinity();
      for (const planner::LowerBoundModel &bound : bounds)
        seconds = std::min(
            seconds,
            bound.bound(syncEvery, problem.training.syncOverlap).seconds);
      return std::isfinite(seconds) ? seconds : 0.0;
    };
    if (tensorParallel == 0) {
      FailureOr<bool> applied = applyStageDegrees(
          module, problem, mixed, best->result.best, lowerBound, error);
      if (failed(applied))
        return fail(error);
      if (*applied)
        return;
    }
    if (tensorParallel == 0 &&
        failed(shardTensorParallel(module, best->degree, error)))
      return fail(error); // sharded on a copy above: not expected
    if (failed(rebatchModule(module, best->result.best.microBatchSize, error)))
      return fail(error); // accepted on a copy above: not expected
    record(module, best->cluster, best->result, best->degree,
           lowerBound(best->result.best.cost.syncEvery));
  }

  /// tensor-parallel=0: searches plans with a degree per stage
  /// (Planner/StageDegrees.h) and, when the best is predicted faster than
  /// `uniform` (the best with one degree) also as the module sharded for it
  /// scores, applies it: the model rebatched, sharded per stage with its
  /// layout recorded (shardStageLayout), and the shape recorded with tp 0.
  /// True when applied.
  FailureOr<bool> applyStageDegrees(
      ModuleOp module, const planner::ShapeProblem &problem,
      planner::StageDegreeProblem &mixed, const planner::ShapeChoice &uniform,
      const std::function<double(int64_t)> &lowerBound, std::string &error) {
    if (mixed.workloadAt.size() < 2)
      return false;
    FailureOr<planner::Cluster> all = moduleCluster(module, error);
    if (failed(all))
      return failure();
    mixed.cluster = &*all;
    mixed.training = problem.training;
    mixed.globalBatch = problem.globalBatch;
    mixed.microBatchSizes = problem.microBatchSizes;
    mixed.fixedDataParallel = problem.fixedDataParallel;
    mixed.fixedPipelineParallel = problem.fixedPipelineParallel;
    mixed.beat = uniform.iterationSeconds();
    planner::StageDegreeChoice choice;
    int64_t scored = 0;
    std::string why;
    if ((problem.fixedPipelineParallel == 1) ||
        !planner::searchStageDegrees(mixed, choice, scored, why) ||
        !(choice.iterationSeconds() < uniform.iterationSeconds()))
      return false;
    // The module sharded for it: its own costs (a vocabulary table whose
    // readers' degrees differ stays whole) must still beat `uniform`.
    OwningOpRef<ModuleOp> copy = module.clone();
    const std::vector<int> &bounds = choice.cost.plan.bounds;
    if (failed(rebatchModule(*copy, choice.microBatchSize, why)) ||
        failed(shardStageLayout(*copy, choice.groups, bounds, why)))
      return false;
    CostAnalysis costs(*copy);
    if (!costs.isValid())
      return false;
    FailureOr<planner::Workload> workload = buildWorkload(costs);
    if (failed(workload))
      return false;
    planner::HeteroCost cost = planner::scoreStageLayout(
        *all, *workload, problem.training, choice, bounds);
    if (!(cost.iterationSeconds() < uniform.iterationSeconds()))
      return false;
    if (failed(rebatchModule(module, choice.microBatchSize, error)) ||
        failed(shardStageLayout(module, choice.groups, bounds, error)))
      return failure(); // done on a copy above: not expected
    choice.cost = std::move(cost);
    recordStageDegrees(module, *all, choice, uniform, scored,
                       lowerBound(choice.cost.syncEvery));
    return true;
  }

  void recordStageDegrees(ModuleOp module, const planner::Cluster &cluster,
                          const planner::StageDegreeChoice &choice,
                          const planner::ShapeChoice &uniform, int64_t scored,
                          double boundSeconds) {
    MLIRContext *context = module.getContext();
    Builder b(context);
    // Each group as its first member, as the planning cluster names it.
    SmallVector<StringAttr> leaders;
    SmallVector<ArrayAttr> stages;
    std::vector<bool> used(cluster.size(), false);
    for (const auto &groups : choice.groups) {
      SmallVector<Attribute> stage;
      for (const std::vector<int> &group : groups) {
        leaders.push_back(b.getStringAttr(cluster.devices[group.front()].name));
        stage.push_back(leaders.back());
        for (int member : group)
          used[member] = true;
      }
      stages.push_back(b.getArrayAttr(stage));
    }
    SmallVector<StringAttr> idleNames;
    for (size_t d = 0; d < cluster.size(); ++d)
      if (!used[d])
        idleNames.push_back(b.getStringAttr(cluster.devices[d].name));
    SmallVector<IdleDevicesAttr> idle;
    if (!idleNames.empty())
      idle.push_back(IdleDevicesAttr::get(
          context, idleNames, "in no group of the stages' degrees"));
    SmallVector<ShapeChoiceAttr> runnersUp{ShapeChoiceAttr::get(
        context, uniform.dataParallel, uniform.pipelineParallel,
        uniform.microBatchSize, uniform.microBatches, uniform.devices.size(),
        uniform.iterationSeconds())};
    module->setAttr(
        kShapeAttrName,
        ShapeAttr::get(
            context, cluster.name, globalBatch, choice.dataParallel,
            static_cast<int64_t>(choice.groups.size()), choice.microBatchSize,
            choice.microBatches, leaders.size(), choice.iterationSeconds(),
            choice.cost.pipelineSeconds, choice.cost.dataParallelSeconds,
            leaders, stages, runnersUp, idle, scored, /*budgetExhausted=*/false,
            /*tp=*/0, boundSeconds, /*schedule=*/""));
  }

  void record(ModuleOp module, const planner::Cluster &cluster,
              const planner::ShapeSearchResult &result, int64_t degree,
              double boundSeconds) {
    MLIRContext *context = module.getContext();
    Builder b(context);
    auto names = [&](const std::vector<int> &devices) {
      SmallVector<StringAttr> list;
      for (int d : devices)
        list.push_back(b.getStringAttr(cluster.devices[d].name));
      return list;
    };
    const planner::ShapeChoice &best = result.best;
    SmallVector<ArrayAttr> stages;
    SmallVector<ShapeChoiceAttr> runnersUp;
    SmallVector<IdleDevicesAttr> idle;
    for (const std::vector<int> &stage : best.stages) {
      SmallVector<StringAttr> list = names(stage);
      stages.push_back(
          b.getArrayAttr(SmallVector<Attribute>(list.begin(), list.end())));
    }
    for (const planner::ShapeChoice &other : result.runnersUp)
      runnersUp.push_back(ShapeChoiceAttr::get(
          context, other.dataParallel, other.pipelineParallel,
          other.microBatchSize, other.microBatches, other.devices.size(),
          other.iterationSeconds()));
    for (const planner::IdleDevices &group : result.idle)
      idle.push_back(
          IdleDevicesAttr::get(context, names(group.devices), group.reason));
    module->setAttr(
        kShapeAttrName,
        ShapeAttr::get(context, cluster.name, globalBatch, best.dataParallel,
                       best.pipelineParallel, best.microBatchSize,
                       best.microBatches, best.devices.size(),
                       best.iterationSeconds(), best.cost.pipelineSeconds,
                       best.cost.dataParallelSeconds, names(best.devices),
                       stages, runnersUp, idle, result.shapesScored,
                       result.budgetExhausted, degree, boundSeconds,
                       problemChoosesSchedule
                           ? planner::pipelineScheduleName(best.schedule)
                           : ""));
  }
};

} // namespace
