//===- SimulateCandidates.cpp - Keep the plan that simulates fastest ------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// hetero's model of the iteration is an estimate; dtfm-run's simulator
// replays the emitted plan's streams. This pass carries the module through
// the rest of --dtfm-plan (assign -> ... -> verify) once per candidate
// assignment algorithm -- the one asked for on the module itself, each of
// DT-FM's on a clone nested in it -- exports every result as plan.pb,
// simulates one iteration, and keeps the fastest plan (the one asked for
// on a tie). So the plan hetero emits is never slower in the simulator
// than the one any baseline algorithm would have emitted with the same
// shape and options. The verdict is recorded as `dtfm.candidates`.
//
// Bounded at scale: the baselines' searches together get the budget the
// search asked for had (so re-scoring costs at most as much searching
// again), and a baseline whose assignment repeats an earlier candidate's
// (rank order, KL and OP-Fence often agree) shares its time instead of
// being emitted, exported and simulated again.
//
// A baseline that cannot be planned (say, its layout does not fit in
// memory) is recorded with its error and does not stop the pass; its
// diagnostics are not shown. The candidate asked for reports as usual.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Passes/Passes.h"
#include "dtfm/Plan/SimInput.h"
#include "dtfm/Plan/Simulator.h"
#include "dtfm/Planner/ShapeSearch.h"
#include "dtfm/Target/Plan/Plan.h"

#include "plan.pb.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::dtfm;

namespace {

/// Simulates the plan a module of device programs describes; the iteration
/// time, or failure with a one-line `error`.
FailureOr<double> simulatedIteration(ModuleOp module, std::string &error) {
  FailureOr<::dtfm::planner::Cluster> cluster = moduleCluster(module, error);
  if (failed(cluster))
    return failure();
  ::dtfm::proto::Plan plan;
  {
    // exportPlan reports through diagnostics: keep the first line.
    ScopedDiagnosticHandler capture(module.getContext(), [&](Diagnostic &d) {
      if (error.empty())
        error = d.str();
      return success();
    });
    if (failed(exportPlan(module, *cluster, plan))) {
      if (error.empty())
        error = "the plan could not be exported";
      return failure();
    }
  }
  ::dtfm::plan::SimInput input;
  ::dtfm::plan::SimResult result;
  if (!::dtfm::plan::simulationInput(plan, input, error) ||
      !::dtfm::plan::simulate(input, result, error))
    return failure();
  return result.iterationSeconds;
}

/// Whether two assignments give the same plan: the rest of the pipeline
/// reads only the degrees, the stages' devices in order, the stage bounds
/// and the pipelines' micro-batch shares (not the algorithm or its costs).
bool sameLayout(AssignmentAttr a, AssignmentAttr b) {
  return a.getDp() == b.getDp() && a.getPp() == b.getPp() &&
         a.getStages() == b.getStages() &&
         a.getStageBounds() == b.getStageBounds() &&
         a.getPipelineMicroBatches() == b.getPipelineMicroBatches();
}

struct SimulateCandidates
    : public PassWrapper<SimulateCandidates, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(SimulateCandidates)

  SimulateCandidates(PlanTailBuilder buildTail,
                     std::vector<std::string> algorithms, bool printTable,
                     double budgetSeconds)
      : buildTail(std::move(buildTail)), algorithms(std::move(algorithms)),
        printTable(printTable), budgetSeconds(budgetSeconds) {}
  SimulateCandidates(const SimulateCandidates &other)
      : PassWrapper(other), buildTail(other.buildTail),
        algorithms(other.algorithms), printTable(other.printTable),
        budgetSeconds(other.budgetSeconds) {}

  StringRef getArgument() const override { return "dtfm-simulate-candidates"; }
  StringRef getDescription() const override {
    return "Plan with each candidate algorithm, simulate, keep the fastest";
  }

  void getDependentDialects(DialectRegistry &registry) const override {
    // The dynamic pipelines' dialects must be loaded before they run.
    OpPassManager tail(ModuleOp::getOperationName());
    buildTail(tail, PlanTailPart::Assignment, algorithms.front(), false, 0);
    buildTail(tail, PlanTailPart::AfterAssignment, algorithms.front(), false,
              0);
    tail.getDependentDialects(registry);
  }

  /// The search budget of each other candidate: together they get as long
  /// as the search asked for had (the pipeline's budget, or where a shape
  /// was chosen on a large cluster, the shape search's default); none when
  /// that had none. On smaller clusters their fixed rounds are quick, and
  /// a wall-clock cut would make the plan depend on the machine's load.
  double candidateBudget(ModuleOp module) const {
    double total = budgetSeconds;
    // The device count from the attribute (building the cluster would
    // expand its N x N links just to count).
    ClusterAttr cluster = getModuleCluster(module);
    if (total <= 0 && module->hasAttr(kShapeAttrName) && cluster) {
      size_t devices = cluster.getDevices().size();
      if (devices > ::dtfm::planner::kLargeClusterDevices)
        total = ::dtfm::planner::defaultSearchBudgetSeconds(devices);
    }
    size_t others = algorithms.size() - 1;
    return total > 0 && others > 0 ? total / static_cast<double>(others) : 0;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    OwningOpRef<ModuleOp> pristine = module.clone();
    SmallVector<CandidatePlanAttr> plans;
    MLIRContext *context = module.getContext();

    // The algorithm asked for, on the module itself: its tables and its
    // errors go where they always go.
    OpPassManager asked(ModuleOp::getOperationName());
    buildTail(asked, PlanTailPart::Assignment, algorithms.front(), printTable,
              budgetSeconds);
    buildTail(asked, PlanTailPart::AfterAssignment, algorithms.front(),
              printTable, 0);
    if (failed(runPipeline(asked, module)))
      return signalPassFailure();
    std::string error;
    FailureOr<double> askedSeconds = simulatedIteration(module, error);
    if (failed(askedSeconds)) {
      mlir::emitError(clusterLoc(module))
          << "dtfm-plan: the " << algorithms.front()
          << " plan does not simulate: " << error;
      return signalPassFailure();
    }
    plans.push_back(CandidatePlanAttr::get(context, algorithms.front(),
                                           *askedSeconds, "", ""));

    // Each other candidate on a clone nested in the module (dynamic
    // pipelines run on the current operation or below it), then taken out
    // again.
    OwningOpRef<ModuleOp> fastest;
    double fastestSeconds = *askedSeconds;
    std::string fastestAlgorithm = algorithms.front();
    // Every candidate sees the asked plan's assignment: a tail may re-plan
    // its layout (hetero:link-shares) instead of searching again.
    auto askedAssignment =
        module->getAttrOfType<AssignmentAttr>(kAssignmentAttrName);
    // The assignments carried through and simulated, with their candidate.
    struct Simulated {
      AssignmentAttr assignment;
      std::string algorithm;
      double seconds;
    };
    SmallVector<Simulated> simulated;
    if (askedAssignment)
      simulated.push_back({askedAssignment, algorithms.front(), *askedSeconds});
    double budget = candidateBudget(module);
    for (const std::string &algorithm : ArrayRef(algorithms).drop_front()) {
      ModuleOp candidate = pristine->clone();
      if (askedAssignment)
        candidate->setAttr(kAssignmentAttrName, askedAssignment);
      module.getBody()->push_back(candidate);
      std::string why;
      FailureOr<double> seconds = failure();
      const Simulated *twin = nullptr;
      {
        ScopedDiagnosticHandler quiet(context, [&](Diagnostic &d) {
          if (why.empty() && d.getSeverity() == DiagnosticSeverity::Error)
            why = d.str();
          return success();
        });
        OpPassManager assign(ModuleOp::getOperationName());
        buildTail(assign, PlanTailPart::Assignment, algorithm, false, budget);
        if (succeeded(runPipeline(assign, candidate))) {
          auto assignment =
              candidate->getAttrOfType<AssignmentAttr>(kAssignmentAttrName);
          for (const Simulated &earlier : simulated)
            if (assignment && sameLayout(assignment, earlier.assignment))
              twin = &earlier;
          OpPassManager rest(ModuleOp::getOperationName());
          buildTail(rest, PlanTailPart::AfterAssignment, algorithm, false, 0);
          if (twin)
            seconds = twin->seconds;
          else if (succeeded(runPipeline(rest, candidate)))
            seconds = simulatedIteration(candidate, why);
          if (succeeded(seconds) && !twin && assignment)
            simulated.push_back({assignment, algorithm, *seconds});
        }
      }
      candidate->remove();
      OwningOpRef<ModuleOp> owned(candidate);
      if (failed(seconds)) {
        plans.push_back(CandidatePlanAttr::get(
            context, algorithm, std::nullopt,
            why.empty() ? "planning failed" : StringRef(why).split('\n').first,
            ""));
        continue;
      }
      // A twin's plan is its earlier candidate's, which a tie keeps.
      plans.push_back(CandidatePlanAttr::get(
          context, algorithm, *seconds, "", twin ? twin->algorithm : ""));
      if (!twin && *seconds < fastestSeconds) {
        fastestSeconds = *seconds;
        fastestAlgorithm = algorithm;
        fastest = std::move(owned);
      }
    }
    // Nested analyses were keyed by the clones, which are gone.
    getAnalysisManager().clear();

    if (fastest) {
      // Replace the module's contents and attributes with the winner's.
      module.getBody()->clear();
      module.getBody()->getOperations().splice(
          module.getBody()->end(), fastest->getBody()->getOperations());
      module->setAttrs(fastest.get()->getAttrDictionary());
    }
    std::optional<StoredDouble> searchBudget;
    if (budget > 0)
      searchBudget = StoredDouble(budget);
    module->setAttr(kCandidatesAttrName,
                    CandidatesAttr::get(context, fastestAlgorithm, plans,
                                        searchBudget));
    if (printTable) {
      raw_ostream &os = llvm::outs();
      os << "=== dtfm candidate plans (simulated iteration) ===\n";
      for (CandidatePlanAttr plan : plans) {
        os << llvm::format("%-18s ", plan.getAlgorithm().str().c_str());
        if (plan.getIterationS())
          os << llvm::format("%12.6f s", plan.getIterationS()->value);
        else
          os << "not planned: " << plan.getError();
        os << (plan.getAlgorithm() == fastestAlgorithm ? "  (chosen)" : "");
        if (!plan.getSameAs().empty())
          os << "  (the plan of " << plan.getSameAs() << ")";
        os << "\n";
      }
      if (budget > 0)
        os << llvm::format("(the searches after the first: %.3f s each, the "
                           "first's budget shared)\n",
                           budget);
      os.flush();
    }
  }

  PlanTailBuilder buildTail;
  std::vector<std::string> algorithms;
  bool printTable;
  double budgetSeconds;
};

} // namespace

std::unique_ptr<Pass>
mlir::dtfm::createSimulateCandidates(PlanTailBuilder buildTail,
                                     std::vector<std::string> algorithms,
                                     bool printTable, double budgetSeconds) {
  assert(!algorithms.empty() && "the algorithm asked for comes first");
  return std::make_unique<SimulateCandidates>(std::move(buildTail),
                                              std::move(algorithms),
                                              printTable, budgetSeconds);
}
