//===- Passes.h - dtfm passes -----------------------------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PASSES_PASSES_H
#define DTFM_PASSES_PASSES_H

#include "dtfm/Analysis/ClusterAnalysis.h"
#include "dtfm/Dialect/Dtfm/IR/DtfmOps.h"
#include "dtfm/Format/PlanFile.h"
#include "dtfm/Planner/StagePartition.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "llvm/ADT/DenseSet.h"

#include <functional>
#include <string>
#include <vector>

namespace mlir::dtfm {

#define GEN_PASS_DECL
#include "dtfm/Passes/Passes.h.inc"

/// Where a planning pass reports problems that concern the whole module and
/// the cluster file rather than one op: the cluster file (line 0, so no
/// source excerpt is shown), or else the input file, also at line 0. Keeps
/// each diagnostic on one line.
inline Location toolLoc(ModuleOp module, llvm::StringRef clusterFile) {
  llvm::StringRef file = clusterFile;
  if (file.empty()) {
    auto input = dyn_cast<FileLineColLoc>(module.getLoc());
    if (!input)
      return module.getLoc();
    file = input.getFilename().getValue();
  }
  return FileLineColLoc::get(module.getContext(), file, 0, 0);
}

/// toolLoc for the passes that read the cluster: the file the module's
/// `dtfm.cluster` was imported from (else the input file).
inline Location clusterLoc(ModuleOp module) {
  ClusterAttr cluster = getModuleCluster(module);
  return toolLoc(module, cluster ? cluster.getSource() : llvm::StringRef());
}

/// Micro-batches per pipeline: those of the shape --dtfm-choose-shape chose
/// (`dtfm.shape`), else `option`.
inline int64_t planMicroBatches(ModuleOp module, int64_t option) {
  if (auto shape = module->getAttrOfType<ShapeAttr>(kShapeAttrName))
    return shape.getMicroBatches();
  return option;
}

/// A micro-batch count (an option) outside [1, format::kMaxMicroBatches]:
/// the one-line problem, else "".
inline std::string microBatchesProblem(int64_t count) {
  if (count >= 1 && count <= ::dtfm::format::kMaxMicroBatches)
    return "";
  return "micro-batches must be in [1, " +
         std::to_string(::dtfm::format::kMaxMicroBatches) + "], got " +
         std::to_string(count);
}

/// The most micro-batches a pipeline runs: with uneven replicas, the
/// largest of `dtfm.assignment`'s pipeline counts, else planMicroBatches.
inline int64_t largestPipelineMicroBatches(ModuleOp module, int64_t option) {
  if (auto assignment =
          module->getAttrOfType<AssignmentAttr>(kAssignmentAttrName))
    if (!assignment.getPipelineMicroBatches().empty())
      return *llvm::max_element(assignment.getPipelineMicroBatches());
  return planMicroBatches(module, option);
}

/// How many stages a staged module has (1 + its largest dtfm.stage);
/// failure, with an error on the first op that has none ("run
/// --dtfm-partition-stages first"), when one is not staged.
FailureOr<int64_t> countStages(ModuleOp module);

/// The streams of every stage for `microBatches` micro-batches of a
/// `kind` schedule, and the micro-batches each stage holds at its peak;
/// failure with a one-line `error` when the schedule cannot finish. ZB-H1
/// puts off weightDelays[s] Ws at stage s (zeroBubbleDelays).
LogicalResult
buildStageStreams(MLIRContext *context, ::dtfm::planner::PipelineSchedule kind,
                  int64_t stages, int64_t microBatches,
                  const std::vector<int> &weightDelays,
                  SmallVectorImpl<StageStreamsAttr> &streams,
                  SmallVectorImpl<int64_t> &peakInFlight, std::string &error);

/// ZB-H1 within 1F1B's peak: how many Ws each stage of a module whose ops
/// carry dtfm.stage and dtfm.phase may put off (planner::
/// zeroBubbleWeightDelays) for `microBatches` micro-batches, from the
/// bytes one micro-batch holds from its forward to its backward (what
/// "bwd" and "wgt" ops read of the forward's values) and from its B to its
/// W (what "wgt" ops read of the forward's and the B's values), and what
/// the stage holds whatever the schedule (parameters, their gradients'
/// sums and optimizer state, values received once per iteration, its
/// largest value as the buffer an op holds while it runs). -1 for a stage
/// that has no "wgt" op: its backward is not split.
std::vector<int> zeroBubbleDelays(ModuleOp module, int64_t stages,
                                  int64_t microBatches);

/// A pass's `schedule` option may be "auto": the schedule
/// --dtfm-choose-shape chose for the plan (dtfm.shape's, schedule=auto).
inline constexpr llvm::StringLiteral kAutoSchedule = "auto";
inline constexpr const char *kScheduleOptionChoices =
    "1f1b, zb-h1, gpipe or auto";
/// The schedule a pass's option names: "auto" is dtfm.shape's choice (1F1B
/// when the module records none); std::nullopt for an unknown name.
std::optional<::dtfm::planner::PipelineSchedule>
resolveSchedule(ModuleOp module, StringRef option);

/// Zero-bubble schedules: splits each dtfm.backward that differentiates
/// both parameters and other values into two (the same inputs; wrt the
/// others, wrt the parameters) and returns in `weightOps` the ops a
/// micro-batch's weight-gradient half runs: the parameters' gradients, the
/// sums of them, less any a send or another backward op reads (those stay
/// in the backward).
void splitWeightGradients(ModuleOp module,
                          llvm::DenseSet<Operation *> &weightOps);

/// The model's micro-batch size: dimension 0 of its inputs and labels,
/// which must agree (one-line `error` otherwise).
FailureOr<int64_t> modelMicroBatchSize(ModuleOp module, std::string &error);

/// Changes the micro-batch size of a forward graph (see --dtfm-rebatch). On
/// failure the module may be half-changed: work on a clone to try.
LogicalResult rebatchModule(ModuleOp module, int64_t size, std::string &error);

/// --dtfm-tensor-parallel's rewrite of `module` for groups of `degree`
/// devices (nothing for 1). Fails with a one-line `error` (the module is
/// then unchanged) when it cannot: see the pass.
LogicalResult shardTensorParallel(ModuleOp module, int64_t degree,
                                  std::string &error);

/// The degree of each layer (by `dtfm.layer`): `byLayer`'s where it names
/// the layer, else `degree`.
struct TensorParallelLayers {
  int64_t degree = 1;
  llvm::StringMap<int64_t> byLayer;
};

/// The rewrite with a degree per layer (a degree per pipeline stage): each
/// attention or MLP block at its layer's degree, a vocabulary table at its
/// readers' degree when they agree (whole otherwise). The module's
/// `dtfm.tensor_parallel` is the degree when one is used, 0 when several
/// are.
LogicalResult shardTensorParallel(ModuleOp module,
                                  const TensorParallelLayers &layers,
                                  std::string &error);

/// A tensor-parallel degree per pipeline stage (`degrees[s]`, each stage on
/// `dataParallel` groups, `microBatches` per iteration): the groups cut from
/// the cluster's nodes and the stage bounds chosen with each stage costed
/// on the model sharded at its degree (Planner/StageDegrees.h), then
/// shardStageLayout. One-line `error`
/// when the cluster's nodes do not hold the groups or the model does not
/// shard.
LogicalResult shardStagesTensorParallel(ModuleOp module,
                                        ArrayRef<int64_t> degrees,
                                        int64_t dataParallel,
                                        int64_t microBatches,
                                        std::string &error);

/// Shards a model not sharded yet with stage s -- blocks [bounds[s],
/// bounds[s + 1]) of its chain of layers -- at the size of its groups
/// (`stageGroups[s]`: indices into the module's cluster, one size per
/// stage) and records the layout as `dtfm.tp_groups` (stage-major) and
/// `dtfm.tp_stage_bounds`, which the planning passes follow. Refuses, in
/// one line, malformed bounds or groups and a stage of degree > 1 none of
/// whose layers shards.
LogicalResult
shardStageLayout(ModuleOp module,
                 const std::vector<std::vector<std::vector<int>>> &stageGroups,
                 const std::vector<int> &bounds, std::string &error);

/// The rest of --dtfm-plan from device assignment on, in two parts: the
/// assignment (--dtfm-assign-devices) and what follows it (partition ->
/// send/recv -> ... -> verify -> fit memory).
enum class PlanTailPart { Assignment, AfterAssignment };

/// Adds a part of the tail with the given assignment algorithm, print-table
/// setting and (for the assignment) search budget in seconds; the other
/// options are the pipeline's.
using PlanTailBuilder =
    std::function<void(OpPassManager &, PlanTailPart part,
                       llvm::StringRef algorithm, bool printTable,
                       double budgetSeconds)>;

/// Runs the tail with each of `algorithms` (the one asked for first, on the
/// module, with the pipeline's `budgetSeconds`; the others on clones),
/// simulates each plan, keeps the fastest and records `dtfm.candidates`.
/// The others' searches share one budget: `budgetSeconds`, or the shape
/// search's default where a shape was chosen, or none. A candidate whose
/// assignment repeats an earlier one's is not carried further (its plan
/// would be the same). Built by --dtfm-plan only: it needs the pipeline's
/// options.
std::unique_ptr<Pass>
createSimulateCandidates(PlanTailBuilder buildTail,
                         std::vector<std::string> algorithms, bool printTable,
                         double budgetSeconds);

#define GEN_PASS_REGISTRATION
#include "dtfm/Passes/Passes.h.inc"

/// Registers the pass pipelines (--dtfm-plan).
void registerDtfmPipelines();

} // namespace mlir::dtfm

#endif // DTFM_PASSES_PASSES_H
