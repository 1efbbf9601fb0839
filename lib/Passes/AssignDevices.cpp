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

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

namespace mlir::dtfm {
#define GEN_PASS_DEF_ASSIGNDEVICES
#include "dtfm/Passes/Passes.h.inc"
} // namespace mlir::dtfm

using namespace mlir;
using namespace mlir::dtfm;
namespace planner = ::dtfm::planner;

/// Name of the module attribute the pass writes.
static constexpr llvm::StringLiteral kAssignmentAttrName = "dtfm.assignment";

namespace {

/// What the model says about communication, before D_PP is known.
struct ModelVolumes {
  int64_t trainableParameters = 0;
  double boundaryBytes = 0; ///< mean bytes crossing a layer boundary
  int64_t layers = 0;
};

/// Values produced in one `dtfm.layer` and used in a later one are what a
/// pipeline cut between those layers would send.
ModelVolumes measureModel(const CostAnalysis &costs) {
  ModelVolumes volumes;
  volumes.trainableParameters = costs.getTotals().trainableParameters;
  volumes.layers = static_cast<int64_t>(costs.getLayerTotals().size());
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
  volumes.boundaryBytes = sum / static_cast<double>(count);
  return volumes;
}

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

    planner::Cluster cluster;
    std::string error;
    if (!planner::loadClusterFile(clusterFile, cluster, error))
      return fail(error);
    int n = static_cast<int>(cluster.size());

    CostAnalysis &costs = getAnalysis<CostAnalysis>();
    if (!costs.isValid())
      return signalPassFailure();
    ModelVolumes model = measureModel(costs);

    // Candidate shapes.
    std::vector<std::pair<int, int>> shapes;
    if (dataParallel == 0 && pipelineParallel == 0) {
      int64_t maxStages = std::max<int64_t>(1, model.layers);
      for (int pp = 1; pp <= n; ++pp)
        if (n % pp == 0 && pp <= maxStages)
          shapes.push_back({n / pp, pp});
    } else {
      int dp = dataParallel, pp = pipelineParallel;
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
    planner::HeteroProblem heteroProblem;
    if (hetero) {
      FailureOr<SmallVector<LayerBlock>> chain = buildLayerChain(costs);
      if (failed(chain))
        return signalPassFailure();
      double parameterBytes = 0;
      for (const LayerBlock &block : *chain) {
        heteroProblem.blocks.push_back(
            {block.flops, block.parameterBytes, block.activationBytes});
        parameterBytes += block.parameterBytes;
      }
      heteroProblem.cluster = &cluster;
      heteroProblem.boundaryBytes =
          ppBytes > 0 ? ppBytes : model.boundaryBytes;
      // fp32 gradients, as for c_DP.
      heteroProblem.gradientBytesPerParameterByte =
          parameterBytes > 0
              ? 4.0 * static_cast<double>(model.trainableParameters) /
                    parameterBytes
              : 1.0;
      heteroProblem.stageOptions.microBatches = microBatches;
    }

    for (auto [dp, pp] : shapes) {
      planner::CommVolume volume;
      volume.dataParallelBytes =
          dpBytes > 0 ? dpBytes
                      : 4.0 * static_cast<double>(model.trainableParameters) /
                            pp;
      volume.pipelineBytes =
          ppBytes > 0 ? ppBytes : model.boundaryBytes * microBatches;
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
        if (static_cast<size_t>(pp) > heteroProblem.blocks.size())
          continue;
        planner::HeteroProblem problem = heteroProblem;
        problem.dataParallel = dp;
        problem.pipelineParallel = pp;
        planner::HeteroModel heteroModel(problem);
        planner::SearchResult result;
        auto start = std::chrono::steady_clock::now();
        result.partition = planner::searchHetero(heteroModel, options,
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
                         "s + data-parallel sync %.6f s\n",
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
