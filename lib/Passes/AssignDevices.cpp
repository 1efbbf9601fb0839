//===- AssignDevices.cpp - DT-FM device assignment as a pass --------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// A thin adapter: reads the options and a shape chosen before (`dtfm.shape`),
// builds the workload from the cost analysis, runs the planner's assignment
// (lib/Planner/Assignment.h) and records the result as `dtfm.assignment`.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Analysis/CostAnalysis.h"
#include "dtfm/Passes/Passes.h"
#include "dtfm/Planner/Assignment.h"
#include "dtfm/Planner/Cluster.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::dtfm {
#define GEN_PASS_DEF_ASSIGNDEVICES
#include "dtfm/Passes/Passes.h.inc"
} // namespace mlir::dtfm

using namespace mlir;
using namespace mlir::dtfm;
namespace planner = ::dtfm::planner;

namespace {

struct AssignDevices
    : public mlir::dtfm::impl::AssignDevicesBase<AssignDevices> {
  using AssignDevicesBase::AssignDevicesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fail = [&](const Twine &message) {
      mlir::emitError(clusterLoc(module)) << "dtfm-assign-devices: " << message;
      signalPassFailure();
    };
    if (!getModuleCluster(module))
      return fail(kNoClusterMessage);
    planner::AssignmentOptions options;
    options.hetero = algorithm == "hetero";
    std::optional<planner::SearchAlgorithm> algo =
        planner::parseSearchAlgorithm(algorithm);
    if (!algo && !options.hetero)
      return fail("unknown algorithm '" + algorithm.getValue() +
                  "' (expected rank-order, random, kl, op-fence, "
                  "genetic-paper, genetic or hetero)");
    if (algo)
      options.algorithm = *algo;
    if (std::string problem = microBatchesProblem(microBatches);
        !problem.empty())
      return fail(problem);
    std::optional<planner::PipelineSchedule> kind =
        resolveSchedule(module, schedule.getValue());
    if (!kind)
      return fail("unknown schedule '" + schedule.getValue() + "' (expected " +
                  kScheduleOptionChoices + ")");
    if (dataParallel < 0 || pipelineParallel < 0 || dpBytes < 0 ||
        ppBytes < 0 || budget < 0)
      return fail("dp, pp, dp-bytes, pp-bytes and budget must be >= 0");
    std::string error;
    if (!planner::parseCommunication(sync, compressRatio, bucketMb, syncEvery,
                                     dpCompression, ppCompression,
                                     options.training, error))
      return fail(error);
    options.training.syncFragments = syncFragments;
    options.training.syncOverlap = syncOverlap;
    if (!planner::parseMemoryOptions(recompute, shardState, options.training,
                                     error))
      return fail(error);
    options.training.stages.schedule = *kind;
    // The module's updates say which optimizer state the stages hold.
    options.training.stages.optimizerBytesPerElement =
        optimizerStateBytesPerElement(module, "adamw").value_or(8);
    options.training.clipGradients = clipsGradients(module, 0);
    FailureOr<planner::Cluster> loaded = planningCluster(module, error);
    if (failed(loaded))
      return fail(error);
    planner::Cluster cluster = std::move(*loaded);
    // A degree per stage fixes the layout (its shape, when one was chosen,
    // gives the micro-batches).
    auto shape = module->getAttrOfType<ShapeAttr>(kShapeAttrName);
    bool stageDegrees = module->hasAttr(kTpStageBoundsAttrName);
    if (shape && !stageDegrees &&
        failed(adoptShape(shape, cluster, options, fail)))
      return;

    if (keepLayout && failed(adoptRecordedLayout(module, cluster, options, fail)))
      return;
    if (stageDegrees &&
        failed(adoptStageDegrees(module, shape, cluster, options, fail)))
      return;
    options.training.unevenByLinks = unevenByLinks;
    options.dataParallel = dataParallel;
    options.pipelineParallel = pipelineParallel;
    options.microBatches = microBatches;
    options.dataParallelBytes = dpBytes;
    options.pipelineBytes = ppBytes;
    options.seed = seed;
    options.budgetSeconds = budget;
    if (progress)
      options.progress = [](int dp, int pp, int generation, double cost) {
        llvm::errs() << llvm::format(
            "dtfm-assign-devices: dp %d pp %d generation %d best %.6f s\n", dp,
            pp, generation, cost);
      };

    CostAnalysis &costs = getAnalysis<CostAnalysis>();
    if (!costs.isValid())
      return signalPassFailure();
    // A shape the cluster lacks is reported before the model's chain is
    // built (which may fail on the model).
    if (!planner::checkAssignmentShape(cluster, options, error))
      return fail(error);
    // Only hetero scores stages: the others need the model's volumes alone.
    FailureOr<planner::Workload> workload =
        buildWorkload(costs, /*withChain=*/options.hetero);
    if (failed(workload))
      return signalPassFailure();
    planner::AssignmentResult result;
    if (!planner::planAssignment(cluster, *workload, options, result, error))
      return fail(error);
    record(module, cluster, result);
    markAllAnalysesPreserved();
  }

  /// The dp/pp options, when given, agree with degrees recorded before
  /// (`what`: where, and how its parenthesis opens).
  LogicalResult checkDegrees(int64_t dp, int64_t pp, StringRef what,
                             llvm::function_ref<void(const Twine &)> fail) {
    if ((!dataParallel || dataParallel == dp) &&
        (!pipelineParallel || pipelineParallel == pp))
      return success();
    fail("dp/pp contradict " + what + "dp " + Twine(dp) + ", pp " + Twine(pp) +
         ")");
    return failure();
  }

  /// A shape chosen by --dtfm-choose-shape: its devices (the cluster becomes
  /// them), D_DP x D_PP, micro-batches and (for hetero) its layout.
  LogicalResult adoptShape(ShapeAttr shape, planner::Cluster &cluster,
                           planner::AssignmentOptions &options,
                           llvm::function_ref<void(const Twine &)> fail) {
    if (failed(checkDegrees(shape.getDp(), shape.getPp(),
                            "the chosen shape (dtfm.shape: ", fail)))
      return failure();
    std::vector<int> used;
    llvm::StringMap<int> indexOf;
    for (auto [i, d] : llvm::enumerate(cluster.devices))
      indexOf[d.name] = static_cast<int>(i);
    for (StringAttr name : shape.getDevices()) {
      auto it = indexOf.find(name.getValue());
      if (it == indexOf.end()) {
        fail("dtfm.shape names device '" + name.getValue() +
             "', which cluster '" + cluster.name + "' lacks");
        return failure();
      }
      used.push_back(it->second);
    }
    cluster = planner::subCluster(cluster, used);
    llvm::StringMap<int> subIndex;
    for (auto [i, d] : llvm::enumerate(cluster.devices))
      subIndex[d.name] = static_cast<int>(i);
    planner::ChosenShape chosen;
    for (ArrayAttr stage : shape.getStages()) {
      chosen.layout.emplace_back();
      for (Attribute a : stage)
        chosen.layout.back().push_back(
            subIndex.lookup(cast<StringAttr>(a).getValue()));
    }
    chosen.dataParallel = static_cast<int>(shape.getDp());
    chosen.pipelineParallel = static_cast<int>(shape.getPp());
    chosen.microBatches = static_cast<int>(shape.getMicroBatches());
    options.chosen = std::move(chosen);
    return success();
  }

  /// A degree per stage (--dtfm-tensor-parallel stage-degrees): the layers
  /// are sharded for their stage, so the layout (`dtfm.tp_groups`, each
  /// stage's groups in stage order) and the bounds (`dtfm.tp_stage_bounds`)
  /// stay as recorded; hetero scores them. `shape`, when the shape search
  /// chose them, must agree and gives the micro-batches.
  LogicalResult
  adoptStageDegrees(ModuleOp module, ShapeAttr shape, planner::Cluster &cluster,
                    planner::AssignmentOptions &options,
                    llvm::function_ref<void(const Twine &)> fail) {
    auto bounds = module->getAttrOfType<DenseI64ArrayAttr>(kTpStageBoundsAttrName);
    auto groups = module->getAttrOfType<ArrayAttr>(kTpGroupsAttrName);
    if (!options.hetero || options.chosen || !bounds || bounds.size() < 2 ||
        !groups || groups.size() % (bounds.size() - 1) != 0) {
      fail(!options.hetero || options.chosen
               ? "a tensor-parallel degree per stage needs algorithm=hetero "
                 "and no other chosen shape"
               : "dtfm.tp_stage_bounds and dtfm.tp_groups do not give each "
                 "stage its groups");
      return failure();
    }
    int pp = static_cast<int>(bounds.size() - 1);
    int dp = static_cast<int>(groups.size()) / pp;
    if (failed(checkDegrees(dp, pp, "the stages' degrees (", fail)))
      return failure();
    if (shape && (shape.getDp() != dp || shape.getPp() != pp ||
                  shape.getTp() != 0)) {
      fail("dtfm.shape (dp " + Twine(shape.getDp()) + ", pp " +
           Twine(shape.getPp()) + ", tp " + Twine(shape.getTp()) +
           ") is not the layout of dtfm.tp_groups (dp " + Twine(dp) +
           ", pp " + Twine(pp) + ", a degree per stage: tp 0)");
      return failure();
    }
    llvm::StringMap<int> indexOf;
    for (auto [i, d] : llvm::enumerate(cluster.devices))
      indexOf[d.name] = static_cast<int>(i);
    planner::ChosenShape chosen;
    chosen.dataParallel = dp;
    chosen.pipelineParallel = pp;
    chosen.microBatches =
        shape ? static_cast<int>(shape.getMicroBatches()) : microBatches;
    chosen.bounds.assign(bounds.asArrayRef().begin(), bounds.asArrayRef().end());
    // The groups' leaders, in stage order, are the cluster planned on: the
    // devices in no group stay out.
    std::vector<int> used;
    for (int s = 0; s < pp; ++s) {
      chosen.layout.emplace_back();
      for (int k = 0; k < dp; ++k) {
        auto first = cast<ArrayAttr>(groups[s * dp + k])[0];
        auto it = indexOf.find(cast<StringAttr>(first).getValue());
        if (it == indexOf.end()) {
          fail("dtfm.tp_groups names device " + Twine(
                   cast<StringAttr>(first).getValue()) +
               ", which the cluster lacks");
          return failure();
        }
        chosen.layout.back().push_back(static_cast<int>(used.size()));
        used.push_back(it->second);
      }
    }
    cluster = planner::subCluster(cluster, used);
    options.chosen = std::move(chosen);
    return success();
  }

  /// keep-layout=true: the layout of the assignment recorded before (its
  /// D_DP x D_PP and the devices of each stage), planned again without a
  /// search -- as --dtfm-plan's hetero:link-shares candidate re-plans
  /// hetero's layout with other shares.
  LogicalResult
  adoptRecordedLayout(ModuleOp module, const planner::Cluster &cluster,
                      planner::AssignmentOptions &options,
                      llvm::function_ref<void(const Twine &)> fail) {
    if (!options.hetero) {
      fail("keep-layout=true needs algorithm=hetero");
      return failure();
    }
    auto recorded = module->getAttrOfType<AssignmentAttr>(kAssignmentAttrName);
    if (!recorded) {
      fail("keep-layout=true needs a dtfm.assignment to take the layout from");
      return failure();
    }
    if (failed(checkDegrees(recorded.getDp(), recorded.getPp(),
                            "the recorded assignment (", fail)))
      return failure();
    llvm::StringMap<int> indexOf;
    for (auto [i, d] : llvm::enumerate(cluster.devices))
      indexOf[d.name] = static_cast<int>(i);
    planner::ChosenShape chosen;
    chosen.dataParallel = static_cast<int>(recorded.getDp());
    chosen.pipelineParallel = static_cast<int>(recorded.getPp());
    chosen.microBatches =
        options.chosen ? options.chosen->microBatches : microBatches;
    std::vector<bool> named(cluster.size(), false);
    for (ArrayAttr stage : recorded.getStages()) {
      chosen.layout.emplace_back();
      for (Attribute a : stage) {
        StringRef name = cast<StringAttr>(a).getValue();
        auto it = indexOf.find(name);
        if (it == indexOf.end()) {
          fail("the recorded assignment names device '" + name +
               "', which cluster '" + cluster.name + "' lacks");
          return failure();
        }
        if (named[it->second]) {
          fail("the recorded assignment names device '" + name + "' twice");
          return failure();
        }
        named[it->second] = true;
        chosen.layout.back().push_back(it->second);
      }
    }
    options.chosen = std::move(chosen);
    return success();
  }

  void record(ModuleOp module, const planner::Cluster &cluster,
              const planner::AssignmentResult &result) {
    Builder b(module.getContext());
    const planner::LayoutCost &cost = result.search.cost;
    const planner::CommVolume &volume = result.volume;
    SmallVector<ArrayAttr> stageAttrs;
    for (const std::vector<int> &stage : result.stages) {
      SmallVector<Attribute> names;
      for (int d : stage)
        names.push_back(b.getStringAttr(cluster.devices[d].name));
      stageAttrs.push_back(b.getArrayAttr(names));
    }
    const std::optional<planner::HeteroCost> &hetero = result.hetero;
    std::optional<StoredDouble> iterationSeconds;
    SmallVector<int64_t> bounds, pipelineMicroBatches;
    if (hetero) {
      iterationSeconds = StoredDouble(hetero->iterationSeconds());
      bounds.assign(hetero->plan.bounds.begin(), hetero->plan.bounds.end());
      pipelineMicroBatches.assign(hetero->pipelineMicroBatches.begin(),
                                  hetero->pipelineMicroBatches.end());
    }
    module->setAttr(kAssignmentAttrName,
                    AssignmentAttr::get(
                        module.getContext(), cluster.name, algorithm.getValue(),
                        seed, result.dataParallel, result.pipelineParallel,
                        volume.dataParallelBytes, volume.pipelineBytes,
                        cost.dataParallel, cost.pipeline, cost.total(),
                        stageAttrs, iterationSeconds, bounds,
                        pipelineMicroBatches));

    if (!printTable)
      return;
    raw_ostream &os = llvm::outs();
    os << "=== dtfm device assignment ===\n";
    os << llvm::format("cluster %s, %zu devices, algorithm %s, seed %llu\n",
                       cluster.name.c_str(), cluster.size(),
                       algorithm.getValue().c_str(),
                       (unsigned long long)seed.getValue());
    os << llvm::format("D_DP %d x D_PP %d; c_DP %.6g B, c_PP %.6g B\n",
                       result.dataParallel, result.pipelineParallel,
                       volume.dataParallelBytes, volume.pipelineBytes);
    os << llvm::format("cost %.6f s = DATAP %.6f s + PIPELINEP %.6f s "
                       "(search %.3f s)\n",
                       cost.total(), cost.dataParallel, cost.pipeline,
                       result.search.wallSeconds);
    if (hetero)
      os << llvm::format("hetero: predicted iteration %.6f s = pipeline %.6f "
                         "s + gradient sync %.6f s\n",
                         hetero->iterationSeconds(), hetero->pipelineSeconds,
                         hetero->dataParallelSeconds);
    if (hetero && !hetero->pipelineMicroBatches.empty()) {
      os << "hetero: uneven replicas, micro-batches per pipeline";
      for (int count : hetero->pipelineMicroBatches)
        os << " " << count;
      os << llvm::format(" (pipeline %.6f s; %.6f s with even shares)\n",
                         hetero->pipelineSeconds, hetero->evenPipelineSeconds);
    }
    for (auto [s, stage] : llvm::enumerate(result.stages)) {
      os << llvm::format("stage %2zu  DATAP %9.6f s  ", s,
                         result.stageDataParallelSeconds[s]);
      for (auto [i, d] : llvm::enumerate(stage))
        os << (i ? " " : "") << cluster.devices[d].name << "("
           << cluster.devices[d].region << ")";
      os << "\n";
    }
    os.flush();
  }
};

} // namespace
