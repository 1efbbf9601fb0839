//===- AssignDevices.cpp - DT-FM device assignment as a pass --------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// A thin adapter: derives the communication volumes from the annotated model,
// runs the planner's search (lib/Planner) and records the result.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Analysis/CostAnalysis.h"
#include "dtfm/Passes/Passes.h"
#include "dtfm/Planner/Hetero.h"
#include "dtfm/Planner/Search.h"
#include "dtfm/Planner/ShapeSearch.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

namespace mlir::dtfm {
#define GEN_PASS_DEF_ASSIGNDEVICES
#define GEN_PASS_DEF_CHOOSESHAPE
#define GEN_PASS_DEF_PRINTPLANSUMMARY
#include "dtfm/Passes/Passes.h.inc"
} // namespace mlir::dtfm

using namespace mlir;
using namespace mlir::dtfm;
namespace planner = ::dtfm::planner;

/// Names of the module attributes the passes write.
static constexpr llvm::StringLiteral kAssignmentAttrName = "dtfm.assignment";
static constexpr llvm::StringLiteral kShapeAttrName = "dtfm.shape";

namespace {

struct AssignDevices
    : public mlir::dtfm::impl::AssignDevicesBase<AssignDevices> {
  using AssignDevicesBase::AssignDevicesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fail = [&](const Twine &message) {
      mlir::emitError(toolLoc(module, clusterFile)) << "dtfm-assign-devices: " << message;
      signalPassFailure();
    };
    if (clusterFile.empty())
      return fail("no cluster file given (cluster=<file.textproto>)");
    bool hetero = algorithm == "hetero";
    std::optional<planner::SearchAlgorithm> algo =
        planner::parseSearchAlgorithm(algorithm);
    if (!algo && !hetero)
      return fail("unknown algorithm '" + algorithm.getValue() +
                  "' (expected rank-order, random, kl, op-fence, "
                  "genetic-paper, genetic or hetero)");
    if (dataParallel < 0 || pipelineParallel < 0 || microBatches <= 0 ||
        dpBytes < 0 || ppBytes < 0 || budget < 0)
      return fail("dp, pp, dp-bytes, pp-bytes and budget must be >= 0 and "
                  "micro-batches > 0");
    planner::HeteroProblem heteroProblem;
    {
      std::string error;
      if (!planner::parseCommunication(sync, compressRatio,
                                       heteroProblem.training, error))
        return fail(error);
    }

    planner::Cluster cluster;
    std::string error;
    if (!planner::loadClusterFile(clusterFile, cluster, error))
      return fail(error);
    // A shape chosen by --dtfm-choose-shape: its devices, D_DP x D_PP,
    // micro-batches and (for hetero) its layout.
    int microBatchCount = microBatches;
    std::optional<planner::Partition> chosenLayout;
    int shapeDp = dataParallel, shapePp = pipelineParallel;
    if (auto shape = module->getAttrOfType<DictionaryAttr>(kShapeAttrName)) {
      auto devices = shape.getAs<ArrayAttr>("devices");
      auto layout = shape.getAs<ArrayAttr>("stages");
      auto dpAttr = shape.getAs<IntegerAttr>("dp");
      auto ppAttr = shape.getAs<IntegerAttr>("pp");
      auto nbAttr = shape.getAs<IntegerAttr>("micro_batches");
      if (!devices || !layout || !dpAttr || !ppAttr || !nbAttr)
        return fail("dtfm.shape lacks devices, stages, dp, pp or "
                    "micro_batches");
      if ((dataParallel && dataParallel != dpAttr.getInt()) ||
          (pipelineParallel && pipelineParallel != ppAttr.getInt()))
        return fail("dp/pp contradict the chosen shape (dtfm.shape: dp " +
                    Twine(dpAttr.getInt()) + ", pp " + Twine(ppAttr.getInt()) +
                    ")");
      std::vector<int> used;
      llvm::StringMap<int> indexOf;
      for (auto [i, d] : llvm::enumerate(cluster.devices))
        indexOf[d.name] = static_cast<int>(i);
      for (Attribute a : devices) {
        auto it = indexOf.find(cast<StringAttr>(a).getValue());
        if (it == indexOf.end())
          return fail("dtfm.shape names device '" +
                      cast<StringAttr>(a).getValue() + "', which cluster '" +
                      cluster.name + "' lacks");
        used.push_back(it->second);
      }
      cluster = planner::subCluster(cluster, used);
      llvm::StringMap<int> subIndex;
      for (auto [i, d] : llvm::enumerate(cluster.devices))
        subIndex[d.name] = static_cast<int>(i);
      planner::Partition adopted;
      for (Attribute stage : layout) {
        adopted.emplace_back();
        for (Attribute a : cast<ArrayAttr>(stage))
          adopted.back().push_back(
              subIndex.lookup(cast<StringAttr>(a).getValue()));
      }
      chosenLayout = std::move(adopted);
      shapeDp = static_cast<int>(dpAttr.getInt());
      shapePp = static_cast<int>(ppAttr.getInt());
      microBatchCount = static_cast<int>(nbAttr.getInt());
    }
    int n = static_cast<int>(cluster.size());

    CostAnalysis &costs = getAnalysis<CostAnalysis>();
    if (!costs.isValid())
      return signalPassFailure();
    FailureOr<planner::Workload> model =
        buildWorkload(costs, /*withChain=*/false);

    // Candidate shapes.
    std::vector<std::pair<int, int>> shapes;
    if (shapeDp == 0 && shapePp == 0) {
      int64_t maxStages = std::max<int64_t>(1, model->layers);
      for (int pp = 1; pp <= n; ++pp)
        if (n % pp == 0 && pp <= maxStages)
          shapes.push_back({n / pp, pp});
    } else {
      int dp = shapeDp, pp = shapePp;
      if (dp == 0 && n % pp == 0)
        dp = n / pp;
      if (pp == 0 && n % dp == 0)
        pp = n / dp;
      if (dp * pp != n)
        return fail("cluster '" + cluster.name + "' has " + Twine(n) +
                    " devices, which is not dp " + Twine(dataParallel) +
                    " x pp " + Twine(pipelineParallel));
      shapes.push_back({dp, pp});
    }

    struct Best {
      planner::SearchResult result;
      planner::CommVolume volume;
      int dp = 0, pp = 0;
      /// hetero: predicted iteration time (its objective).
      std::optional<planner::HeteroCost> hetero;
      double score() const {
        return hetero ? hetero->iterationSeconds() : result.cost.total();
      }
    };
    std::optional<Best> best;

    // hetero: the model as a chain of blocks, re-balanced per candidate.
    if (hetero) {
      FailureOr<planner::Workload> workload = buildWorkload(costs);
      if (failed(workload))
        return signalPassFailure();
      heteroProblem.workload = std::move(*workload);
      heteroProblem.cluster = &cluster;
      heteroProblem.workload.boundaryBytes =
          ppBytes > 0 ? ppBytes : model->boundaryBytes;
      heteroProblem.training.stages.microBatches = microBatchCount;
    }

    for (auto [dp, pp] : shapes) {
      planner::CommVolume volume;
      volume.dataParallelBytes =
          dpBytes > 0
              ? dpBytes
              : 4.0 * static_cast<double>(model->trainableParameters) / pp;
      volume.pipelineBytes =
          ppBytes > 0 ? ppBytes : model->boundaryBytes * microBatchCount;
      planner::CostModel costModel(cluster, volume, dp);
      planner::SearchOptions options;
      options.dataParallel = dp;
      options.pipelineParallel = pp;
      options.seed = seed;
      options.timeBudgetSeconds = budget / static_cast<double>(shapes.size());
      if (progress)
        options.progress = [dp = dp, pp = pp](int generation, double cost) {
          llvm::errs() << llvm::format(
              "dtfm-assign-devices: dp %d pp %d generation %d best %.6f s\n",
              dp, pp, generation, cost);
        };
      if (hetero) {
        if (static_cast<size_t>(pp) > heteroProblem.workload.blocks.size())
          continue;
        planner::HeteroProblem problem = heteroProblem;
        problem.dataParallel = dp;
        problem.pipelineParallel = pp;
        planner::HeteroModel heteroModel(problem);
        planner::SearchResult result;
        auto start = std::chrono::steady_clock::now();
        result.partition =
            chosenLayout ? *chosenLayout
                         : planner::searchHetero(heteroModel, options,
                                                 &result.evaluations);
        result.wallSeconds = std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - start)
                                 .count();
        planner::HeteroCost cost = heteroModel.evaluate(result.partition);
        if (!cost.feasible)
          continue;
        // The groups are already in stage order: keep it, and match the
        // devices of neighbouring stages as DT-FM does.
        planner::LayoutCost &layout = result.cost;
        planner::LayoutCost dtfmCost = costModel.evaluate(result.partition);
        layout.dataParallel = dtfmCost.dataParallel;
        layout.pipeline = dtfmCost.pipeline;
        for (int s = 0; s < pp; ++s)
          layout.order.push_back(s);
        for (int s = 0; s + 1 < pp; ++s) {
          std::vector<int> match;
          costModel.groupPipelineWeight(result.partition[s],
                                        result.partition[s + 1], &match);
          layout.matchings.push_back(std::move(match));
        }
        Best candidate{std::move(result), volume, dp, pp, std::move(cost)};
        if (!best || candidate.score() < best->score())
          best = std::move(candidate);
        continue;
      }
      planner::SearchResult result =
          planner::searchLayout(costModel, *algo, options);
      Best candidate{std::move(result), volume, dp, pp, std::nullopt};
      if (!best || candidate.score() < best->score())
        best = std::move(candidate);
    }
    if (!best)
      return fail("no device layout fits the model in memory (algorithm "
                  "hetero tried " + Twine(shapes.size()) + " shapes)");
    record(module, cluster, best->result, best->volume, best->dp, best->pp,
           best->hetero);
    markAllAnalysesPreserved();
  }

  /// Stage s of the pipeline, its devices ordered by pipeline index.
  static std::vector<std::vector<int>>
  stagesInPipelineOrder(const planner::SearchResult &result) {
    const planner::LayoutCost &cost = result.cost;
    std::vector<std::vector<int>> stages;
    std::vector<int> first = result.partition[cost.order[0]];
    stages.push_back(first);
    for (size_t k = 0; k < cost.matchings.size(); ++k) {
      const std::vector<int> &next = result.partition[cost.order[k + 1]];
      // matchings[k][i]: position in `next` of the partner of position i of
      // the previous stage in its original order. Carry the permutation.
      const std::vector<int> &previousOriginal =
          result.partition[cost.order[k]];
      std::vector<int> stage(next.size());
      for (size_t i = 0; i < stages.back().size(); ++i) {
        int device = stages.back()[i];
        size_t pos = std::find(previousOriginal.begin(),
                               previousOriginal.end(), device) -
                     previousOriginal.begin();
        stage[i] = next[cost.matchings[k][pos]];
      }
      stages.push_back(stage);
    }
    return stages;
  }

  void record(ModuleOp module, const planner::Cluster &cluster,
              const planner::SearchResult &result,
              planner::CommVolume volume, int dp, int pp,
              const std::optional<planner::HeteroCost> &hetero) {
    Builder b(module.getContext());
    std::vector<std::vector<int>> stages = stagesInPipelineOrder(result);
    SmallVector<Attribute> stageAttrs;
    for (const std::vector<int> &stage : stages) {
      SmallVector<Attribute> names;
      for (int d : stage)
        names.push_back(b.getStringAttr(cluster.devices[d].name));
      stageAttrs.push_back(b.getArrayAttr(names));
    }
    SmallVector<NamedAttribute> fields{
        b.getNamedAttr("cluster", b.getStringAttr(cluster.name)),
        b.getNamedAttr("algorithm", b.getStringAttr(algorithm.getValue())),
        b.getNamedAttr("seed", b.getI64IntegerAttr(seed)),
        b.getNamedAttr("dp", b.getI64IntegerAttr(dp)),
        b.getNamedAttr("pp", b.getI64IntegerAttr(pp)),
        b.getNamedAttr("dp_bytes", b.getF64FloatAttr(volume.dataParallelBytes)),
        b.getNamedAttr("pp_bytes", b.getF64FloatAttr(volume.pipelineBytes)),
        b.getNamedAttr("data_parallel_cost_s",
                       b.getF64FloatAttr(result.cost.dataParallel)),
        b.getNamedAttr("pipeline_cost_s",
                       b.getF64FloatAttr(result.cost.pipeline)),
        b.getNamedAttr("total_cost_s", b.getF64FloatAttr(result.cost.total())),
        b.getNamedAttr("stages", b.getArrayAttr(stageAttrs)),
    };
    if (hetero) {
      fields.push_back(b.getNamedAttr(
          "iteration_s", b.getF64FloatAttr(hetero->iterationSeconds())));
      SmallVector<int64_t> bounds(hetero->plan.bounds.begin(),
                                  hetero->plan.bounds.end());
      fields.push_back(
          b.getNamedAttr("stage_bounds", b.getDenseI64ArrayAttr(bounds)));
    }
    module->setAttr(kAssignmentAttrName, b.getDictionaryAttr(fields));

    if (!printTable)
      return;
    raw_ostream &os = llvm::outs();
    os << "=== dtfm device assignment ===\n";
    os << llvm::format("cluster %s, %zu devices, algorithm %s, seed %llu\n",
                       cluster.name.c_str(), cluster.size(),
                       algorithm.getValue().c_str(),
                       (unsigned long long)seed.getValue());
    os << llvm::format("D_DP %d x D_PP %d; c_DP %.6g B, c_PP %.6g B\n", dp, pp,
                       volume.dataParallelBytes, volume.pipelineBytes);
    os << llvm::format("cost %.6f s = DATAP %.6f s + PIPELINEP %.6f s "
                       "(search %.3f s)\n",
                       result.cost.total(), result.cost.dataParallel,
                       result.cost.pipeline, result.wallSeconds);
    if (hetero)
      os << llvm::format("hetero: predicted iteration %.6f s = pipeline %.6f "
                         "s + gradient sync %.6f s\n",
                         hetero->iterationSeconds(), hetero->pipelineSeconds,
                         hetero->dataParallelSeconds);
    planner::CostModel costModel(cluster, volume, dp);
    for (auto [s, stage] : llvm::enumerate(stages)) {
      os << llvm::format("stage %2zu  DATAP %9.6f s  ", s,
                         costModel.groupDataParallelCost(stage));
      for (auto [i, d] : llvm::enumerate(stage))
        os << (i ? " " : "") << cluster.devices[d].name << "("
           << cluster.devices[d].region << ")";
      os << "\n";
    }
    os.flush();
  }
};
} // namespace

namespace {

struct ChooseShape : public mlir::dtfm::impl::ChooseShapeBase<ChooseShape> {
  using ChooseShapeBase::ChooseShapeBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fail = [&](const Twine &message) {
      mlir::emitError(toolLoc(module, clusterFile))
          << "dtfm-choose-shape: " << message;
      signalPassFailure();
    };
    if (clusterFile.empty())
      return fail("no cluster file given (cluster=<file.textproto>)");
    if (globalBatch <= 0)
      return fail("global-batch must be a positive number of samples");
    if (budget < 0 || !(stateBytes >= 0) ||
        (schedule != "1f1b" && schedule != "gpipe"))
      return fail("budget and state-bytes-per-param-byte must be >= 0 and "
                  "schedule 1f1b or gpipe");
    for (int64_t size : microBatchSizes)
      if (size <= 0)
        return fail("micro-batch sizes must be positive, found " +
                    Twine(size));
    planner::ShapeProblem problem;
    std::string error;
    if (!planner::parseCommunication(sync, compressRatio, problem.training,
                                     error))
      return fail(error);
    planner::Cluster cluster;
    if (!planner::loadClusterFile(clusterFile, cluster, error))
      return fail(error);
    FailureOr<int64_t> modelSize = modelMicroBatchSize(module, error);
    if (failed(modelSize))
      return fail(error);

    // The sizes the model accepts: each tried on a copy.
    std::vector<int64_t> candidates(microBatchSizes.begin(),
                                    microBatchSizes.end());
    if (candidates.empty())
      for (int64_t d = std::max<int64_t>(1, *modelSize / 4);
           d <= *modelSize * 4; ++d)
        if (globalBatch % d == 0)
          candidates.push_back(d);
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

    CostAnalysis &costs = getAnalysis<CostAnalysis>();
    if (!costs.isValid())
      return signalPassFailure();
    FailureOr<planner::Workload> workload = buildWorkload(costs);
    if (failed(workload))
      return signalPassFailure();
    problem.cluster = &cluster;
    problem.workload = std::move(*workload);
    problem.workload.microBatchSize = *modelSize;
    problem.globalBatch = globalBatch;
    problem.microBatchSizes = sizes;
    problem.fixedDataParallel = dataParallel;
    problem.fixedPipelineParallel = pipelineParallel;
    problem.training.stages.stateBytesPerParameterByte = stateBytes;
    problem.training.stages.schedule =
        schedule == "gpipe" ? planner::PipelineSchedule::GPipe
                            : planner::PipelineSchedule::OneFOneB;
    planner::ShapeSearchOptions options;
    options.budgetSeconds =
        budget > 0 ? budget : (cluster.size() <= 128 ? 3.0 : 10.0);
    planner::ShapeSearchResult result;
    if (!planner::searchShapes(problem, options, result, error))
      return fail(error);
    if (failed(rebatchModule(module, result.best.microBatchSize, error)))
      return fail(error); // accepted on a copy above: not expected
    record(module, cluster, result);
  }

  void record(ModuleOp module, const planner::Cluster &cluster,
              const planner::ShapeSearchResult &result) {
    Builder b(module.getContext());
    auto names = [&](const std::vector<int> &devices) {
      SmallVector<Attribute> list;
      for (int d : devices)
        list.push_back(b.getStringAttr(cluster.devices[d].name));
      return b.getArrayAttr(list);
    };
    auto shapeFields = [&](const planner::ShapeChoice &c) {
      return SmallVector<NamedAttribute>{
          b.getNamedAttr("dp", b.getI64IntegerAttr(c.dataParallel)),
          b.getNamedAttr("pp", b.getI64IntegerAttr(c.pipelineParallel)),
          b.getNamedAttr("micro_batch_size",
                         b.getI64IntegerAttr(c.microBatchSize)),
          b.getNamedAttr("micro_batches", b.getI64IntegerAttr(c.microBatches)),
          b.getNamedAttr("devices_used",
                         b.getI64IntegerAttr(c.devices.size())),
          b.getNamedAttr("iteration_s",
                         b.getF64FloatAttr(c.iterationSeconds())),
      };
    };
    const planner::ShapeChoice &best = result.best;
    SmallVector<NamedAttribute> fields = shapeFields(best);
    SmallVector<Attribute> stages, runnersUp, idle;
    for (const std::vector<int> &stage : best.stages)
      stages.push_back(names(stage));
    for (const planner::ShapeChoice &other : result.runnersUp)
      runnersUp.push_back(b.getDictionaryAttr(shapeFields(other)));
    for (const planner::IdleDevices &group : result.idle)
      idle.push_back(b.getDictionaryAttr(
          {b.getNamedAttr("devices", names(group.devices)),
           b.getNamedAttr("reason", b.getStringAttr(group.reason))}));
    fields.append({
        b.getNamedAttr("cluster", b.getStringAttr(cluster.name)),
        b.getNamedAttr("global_batch", b.getI64IntegerAttr(globalBatch)),
        b.getNamedAttr("pipeline_s",
                       b.getF64FloatAttr(best.cost.pipelineSeconds)),
        b.getNamedAttr("data_parallel_s",
                       b.getF64FloatAttr(best.cost.dataParallelSeconds)),
        b.getNamedAttr("devices", names(best.devices)),
        b.getNamedAttr("stages", b.getArrayAttr(stages)),
        b.getNamedAttr("runners_up", b.getArrayAttr(runnersUp)),
        b.getNamedAttr("idle", b.getArrayAttr(idle)),
        b.getNamedAttr("shapes_scored",
                       b.getI64IntegerAttr(result.shapesScored)),
    });
    if (result.budgetExhausted)
      fields.push_back(
          b.getNamedAttr("budget_exhausted", b.getUnitAttr()));
    module->setAttr(kShapeAttrName, b.getDictionaryAttr(fields));
  }
};

struct PrintPlanSummary
    : public mlir::dtfm::impl::PrintPlanSummaryBase<PrintPlanSummary> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    markAllAnalysesPreserved();
    auto shape = module->getAttrOfType<DictionaryAttr>(kShapeAttrName);
    if (!shape) {
      mlir::emitError(toolLoc(module, ""))
          << "dtfm-print-plan-summary: the module has no dtfm.shape; plan "
             "with --dtfm-plan=...,global-batch=N or run "
             "--dtfm-choose-shape first";
      return signalPassFailure();
    }
    auto integer = [](DictionaryAttr d, StringRef name) -> int64_t {
      auto a = d.getAs<IntegerAttr>(name);
      return a ? a.getInt() : 0;
    };
    auto real = [](DictionaryAttr d, StringRef name) -> double {
      auto a = d.getAs<FloatAttr>(name);
      return a ? a.getValueAsDouble() : 0;
    };
    raw_ostream &os = llvm::outs();
    auto row = [&](StringRef label, DictionaryAttr d) {
      os << llvm::format("%-10s %6lld %6lld %6lld x %-6lld %8lld %12.4f\n",
                         label.str().c_str(), (long long)integer(d, "dp"),
                         (long long)integer(d, "pp"),
                         (long long)integer(d, "micro_batch_size"),
                         (long long)integer(d, "micro_batches"),
                         (long long)integer(d, "devices_used"),
                         real(d, "iteration_s"));
    };
    os << "=== dtfm plan shape ===\n";
    os << llvm::format("cluster %s, global batch %lld samples; %lld shapes "
                       "scored%s\n",
                       shape.getAs<StringAttr>("cluster").getValue().str().c_str(),
                       (long long)integer(shape, "global_batch"),
                       (long long)integer(shape, "shapes_scored"),
                       shape.get("budget_exhausted")
                           ? " (search budget reached)"
                           : "");
    os << "           dp     pp     micro-batch  devices  iteration_s\n";
    row("chosen", shape);
    if (auto runners = shape.getAs<ArrayAttr>("runners_up"))
      for (Attribute other : runners)
        row("runner-up", cast<DictionaryAttr>(other));
    os << llvm::format("predicted: pipeline %.4f s + gradient sync "
                       "%.4f s\n",
                       real(shape, "pipeline_s"),
                       real(shape, "data_parallel_s"));
    if (auto stages = shape.getAs<ArrayAttr>("stages"))
      for (auto [s, stage] : llvm::enumerate(stages)) {
        os << llvm::format("stage %2zu:", s);
        for (Attribute d : cast<ArrayAttr>(stage))
          os << " " << cast<StringAttr>(d).getValue();
        os << "\n";
      }
    auto idle = shape.getAs<ArrayAttr>("idle");
    if (!idle || idle.empty())
      os << "idle: none\n";
    else
      for (Attribute entry : idle) {
        auto group = cast<DictionaryAttr>(entry);
        os << "idle:";
        for (Attribute d : group.getAs<ArrayAttr>("devices"))
          os << " " << cast<StringAttr>(d).getValue();
        os << " -- " << group.getAs<StringAttr>("reason").getValue() << "\n";
      }
    os.flush();
  }
};

} // namespace
