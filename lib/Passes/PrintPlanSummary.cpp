//===- PrintPlanSummary.cpp - The chosen shape as a table -----------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Prints the `dtfm.shape` that --dtfm-choose-shape recorded: the chosen
// shape, its runners-up, the predicted times against the lower bound on any
// plan (Planner/LowerBound.h), the stages and the idle
// devices with the reason each is idle. Once gradients are synchronised
// (--dtfm-insert-grad-sync), one line per data-parallel stage: its group,
// algorithm and buckets, and what overlapping the buckets with the last
// micro-batch's backward saves (Planner/Buckets.h).
//
//===----------------------------------------------------------------------===//

#include "dtfm/Analysis/CostAnalysis.h"
#include "dtfm/Passes/Passes.h"
#include "dtfm/Plan/MemoryModel.h"
#include "dtfm/Planner/Buckets.h"
#include "dtfm/Planner/CostModel.h"
#include "dtfm/Planner/Workload.h"
#include "dtfm/Target/Plan/Plan.h"

#include "plan.pb.h"

#include "mlir/IR/Diagnostics.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::dtfm {
#define GEN_PASS_DEF_PRINTPLANSUMMARY
#include "dtfm/Passes/Passes.h.inc"
} // namespace mlir::dtfm

using namespace mlir;
using namespace mlir::dtfm;

namespace {

/// One line per data-parallel stage: its group and algorithm, its buckets,
/// their all-reduce time in a row and what of it outlasts the last
/// micro-batch's backward once the buckets overlap it.
void printGradientSync(ModuleOp module, raw_ostream &os) {
  ClusterAttr clusterAttr = getModuleCluster(module);
  if (!clusterAttr)
    return;
  ::dtfm::planner::Cluster cluster = clusterAttr.toCluster();
  // The syncs and backward FLOPs of each stage, from the first function
  // holding the stage (device programs repeat a stage per replica).
  std::map<int64_t, Operation *> funcOfStage;
  std::map<int64_t, SmallVector<GradSyncOp>> syncs;
  module.walk([&](GradSyncOp op) {
    auto stage = op->getAttrOfType<IntegerAttr>(kStageAttrName);
    int64_t s = stage ? stage.getInt() : 0;
    Operation *func = op->getParentOp();
    if (funcOfStage.emplace(s, func).first->second == func)
      syncs[s].push_back(op);
  });
  if (syncs.empty())
    return;
  std::map<int64_t, double> backwardFlops;
  CostAnalysis costs(module);
  for (const OpCost &cost : costs.getOpCosts()) {
    auto stage = cost.op->getAttrOfType<IntegerAttr>(kStageAttrName);
    int64_t s = stage ? stage.getInt() : 0;
    auto func = funcOfStage.find(s);
    if (func != funcOfStage.end() && cost.op->getParentOp() == func->second)
      backwardFlops[s] += static_cast<double>(cost.backwardFlops);
  }
  llvm::StringMap<int> indexOf;
  for (size_t i = 0; i < cluster.size(); ++i)
    indexOf[cluster.devices[i].name] = static_cast<int>(i);
  for (auto &[stage, ops] : syncs) {
    std::map<int64_t, ::dtfm::planner::SyncBucket> buckets;
    double bytes = 0, slowest = 0;
    for (GradSyncOp op : ops) {
      bytes += static_cast<double>(op.getBytes());
      int64_t index = 0;
      if (auto b = op->getAttrOfType<IntegerAttr>(kBucketAttrName))
        index = b.getInt();
      ::dtfm::planner::SyncBucket &bucket = buckets[index];
      if (auto s = op->getAttrOfType<FloatAttr>(kBucketSecondsAttrName))
        bucket.seconds = s.getValueAsDouble();
      else
        bucket.seconds += op.getSeconds().convertToDouble();
      if (auto r = op->getAttrOfType<FloatAttr>(kBucketReadyAttrName))
        bucket.readyFraction = r.getValueAsDouble();
    }
    std::vector<int> group;
    for (Attribute name : ops.front().getGroup()) {
      auto it = indexOf.find(cast<StringAttr>(name).getValue());
      if (it == indexOf.end())
        continue; // --dtfm-verify-plan reports it
      group.push_back(it->second);
      double s = cluster.devices[it->second].speed();
      slowest = slowest > 0 ? std::min(slowest, s) : s;
    }
    std::vector<::dtfm::planner::SyncBucket> inOrder;
    double serial = 0;
    for (auto &[index, bucket] : buckets) {
      inOrder.push_back(bucket);
      serial += bucket.seconds;
    }
    double backward = slowest > 0 ? backwardFlops[stage] / slowest : 0;
    ::dtfm::planner::BucketTimeline timeline =
        ::dtfm::planner::layOutBuckets(inOrder, 0, backward, backward, 0, 0);
    double exposed = std::max(0.0, timeline.syncEnd.back() - backward);
    // The same gradients as one bucket, after the backward (in the int8 or
    // sparse format when they travel in it).
    int dp = static_cast<int>(group.size());
    auto compression =
        ops.front()->getAttrOfType<StringAttr>(kCompressionAttrName);
    auto ratio = ops.front()->getAttrOfType<FloatAttr>(kTopkRatioAttrName);
    namespace format = ::dtfm::format;
    std::optional<format::WireCodec> codec =
        compression ? format::parseWireCodec(compression.getValue().str())
                    : std::nullopt;
    format::WireCodec mode = format::WireCodec::Dense;
    std::string wire;
    if (codec && *codec != format::WireCodec::Dense &&
        (!format::wireCodecInfo(*codec).sparse || ratio)) {
      mode = *codec;
      wire = " " + ::dtfm::planner::codecChoiceName(
                       {mode, false, ratio ? ratio.getValueAsDouble() : 0});
      if (auto warmup =
              ops.front()->getAttrOfType<IntegerAttr>(kTopkWarmupAttrName);
          format::wireCodecInfo(mode).sparse && warmup && warmup.getInt() > 0)
        wire += " after " + std::to_string(warmup.getInt()) + " dense steps";
    }
    auto type = cast<ShapedType>(ops.front().getGrad().getType());
    double elementBytes =
        std::max<unsigned>(1, type.getElementTypeBitWidth() / 8);
    double oneBucket = ::dtfm::planner::groupExchangeSeconds(
        cluster, group, bytes, elementBytes, dp,
        ::dtfm::planner::parseGradientSync(ops.front().getAlgorithm()) ==
            ::dtfm::planner::GradientSync::Ring,
        mode, ratio ? ratio.getValueAsDouble() : 0);
    // Local steps: the parameters are exchanged every H steps instead.
    if (auto every =
            ops.front()->getAttrOfType<IntegerAttr>(kSyncEveryAttrName)) {
      int64_t h = std::max<int64_t>(1, every.getInt());
      os << llvm::format("gradient sync stage %lld: %d devices, %s%s, %.1f MB "
                         "of parameters every %lld steps: %.4f s each, "
                         "%.4f s a step on average\n",
                         (long long)stage, dp,
                         ops.front().getAlgorithm().str().c_str(), wire.c_str(),
                         bytes / 1e6, (long long)h, oneBucket,
                         oneBucket / double(h));
      continue;
    }
    os << llvm::format("gradient sync stage %lld: %d devices, %s%s, %.1f MB "
                       "in %zu bucket%s: %.4f s after the last backward "
                       "(one bucket: %.4f s)\n",
                       (long long)stage, dp,
                       ops.front().getAlgorithm().str().c_str(), wire.c_str(),
                       bytes / 1e6, buckets.size(),
                       buckets.size() == 1 ? "" : "s", exposed, oneBucket);
  }
}

/// Once the device programs are emitted: each stage's largest predicted
/// peak as the runtime allocates it (Plan/MemoryModel.h) against the
/// smallest capacity among its devices, flagged when over.
void printMemory(ModuleOp module, raw_ostream &os) {
  std::string error;
  FailureOr<::dtfm::planner::Cluster> cluster = moduleCluster(module, error);
  if (failed(cluster))
    return;
  ::dtfm::proto::Plan plan;
  {
    // A module without programs does not export: nothing to print.
    ScopedDiagnosticHandler quiet(module.getContext(),
                                  [](Diagnostic &) { return success(); });
    if (failed(exportPlan(module, *cluster, plan)) || plan.programs_size() == 0)
      return;
  }
  std::vector<::dtfm::plan::DeviceMemory> memory;
  if (!::dtfm::plan::planMemory(plan, memory, error)) {
    os << "memory: not predicted (" << error << ")\n";
    return;
  }
  struct StagePeak {
    double peak = 0, capacity = -1;
    std::string device;
    bool recomputed = false, sharded = false;
  };
  std::map<int64_t, StagePeak> stages;
  for (auto [r, m] : llvm::enumerate(memory)) {
    StagePeak &stage = stages[plan.programs(r).stage()];
    stage.recomputed |=
        ::dtfm::format::sharedPart(plan, plan.programs(r)).recompute();
    stage.sharded |= m.predicted.shardedState;
    if (m.predicted.total() > stage.peak) {
      stage.peak = m.predicted.total();
      stage.device = m.device;
    }
    stage.capacity = stage.capacity < 0
                         ? m.capacityBytes
                         : std::min(stage.capacity, m.capacityBytes);
  }
  for (const auto &[s, stage] : stages)
    os << llvm::format(
        "memory stage %lld: peak %.4g GB (%s) of %.4g GB%s%s%s\n", (long long)s,
        stage.peak / 1e9, stage.device.c_str(), stage.capacity / 1e9,
        stage.sharded ? ", optimizer state sharded" : "",
        stage.recomputed ? ", activations recomputed" : "",
        stage.peak > stage.capacity ? "  OVER CAPACITY" : "");
}

struct PrintPlanSummary
    : public mlir::dtfm::impl::PrintPlanSummaryBase<PrintPlanSummary> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    markAllAnalysesPreserved();
    auto shape = module->getAttrOfType<ShapeAttr>(kShapeAttrName);
    if (!shape) {
      mlir::emitError(toolLoc(module, ""))
          << "dtfm-print-plan-summary: the module has no dtfm.shape; plan "
             "with --dtfm-plan=...,global-batch=N or run "
             "--dtfm-choose-shape first";
      return signalPassFailure();
    }
    raw_ostream &os = llvm::outs();
    auto row = [&](StringRef label, int64_t dp, int64_t pp,
                   int64_t microBatchSize, int64_t microBatches,
                   int64_t devicesUsed, double iterationSeconds) {
      os << llvm::format("%-10s %6lld %6lld %6lld x %-6lld %8lld %12.4f\n",
                         label.str().c_str(), (long long)dp, (long long)pp,
                         (long long)microBatchSize, (long long)microBatches,
                         (long long)devicesUsed, iterationSeconds);
    };
    os << "=== dtfm plan shape ===\n";
    os << llvm::format(
        "cluster %s, global batch %lld samples; %lld shapes "
        "scored%s\n",
        shape.getCluster().str().c_str(), (long long)shape.getGlobalBatch(),
        (long long)shape.getShapesScored(),
        shape.getBudgetExhausted() ? " (search budget reached)" : "");
    if (shape.getTp() > 1)
      os << llvm::format("tensor parallel: groups of %lld devices inside a "
                         "node (each device below is its group's first; "
                         "%lld devices in all)\n",
                         (long long)shape.getTp(),
                         (long long)(shape.getTp() * shape.getDevicesUsed()));
    if (shape.getTp() == 0)
      os << "tensor parallel: a degree per stage (dtfm.tp_groups; each "
            "device below is its group's first)\n";
    os << "           dp     pp     micro-batch  devices  iteration_s\n";
    row("chosen", shape.getDp(), shape.getPp(), shape.getMicroBatchSize(),
        shape.getMicroBatches(), shape.getDevicesUsed(), shape.getIterationS());
    for (ShapeChoiceAttr other : shape.getRunnersUp())
      row("runner-up", other.getDp(), other.getPp(), other.getMicroBatchSize(),
          other.getMicroBatches(), other.getDevicesUsed(),
          other.getIterationS());
    os << llvm::format("predicted: pipeline %.4f s + gradient sync "
                       "%.4f s\n",
                       double(shape.getPipelineS()),
                       double(shape.getDataParallelS()));
    // How far the plan is from what the cluster allows (LowerBound.h).
    if (double bound = shape.getBoundS(); bound > 0)
      os << llvm::format("lower bound: %.4f s for any plan of this model on "
                         "this cluster; the chosen plan is within %.2fx of "
                         "it\n",
                         bound, double(shape.getIterationS()) / bound);
    // Whole plans simulated (--dtfm-plan algorithm=hetero programs=true):
    // the kept one may be a baseline's layout of the same shape.
    if (auto candidates =
            module->getAttrOfType<CandidatesAttr>(kCandidatesAttrName)) {
      os << "simulated";
      if (candidates.getSearchBudgetS())
        os << llvm::format(" (later searches %.3f s each)",
                           double(*candidates.getSearchBudgetS()));
      os << ":";
      for (auto [i, plan] : llvm::enumerate(candidates.getPlans())) {
        os << (i ? ", " : " ") << plan.getAlgorithm();
        if (plan.getIterationS())
          os << llvm::format(" %.4f s", double(*plan.getIterationS()));
        else
          os << " not planned";
        if (!plan.getSameAs().empty())
          os << " (plan of " << plan.getSameAs() << ")";
        if (plan.getAlgorithm() == candidates.getChosen())
          os << " (chosen)";
      }
      os << "\n";
    }
    // The stages as assigned (the shape's layout unless another
    // algorithm's plan was kept).
    auto assignment =
        module->getAttrOfType<AssignmentAttr>(kAssignmentAttrName);
    for (auto [s, stage] : llvm::enumerate(assignment ? assignment.getStages()
                                                      : shape.getStages())) {
      os << llvm::format("stage %2zu:", s);
      for (Attribute d : stage)
        os << " " << cast<StringAttr>(d).getValue();
      os << "\n";
    }
    if (assignment && !assignment.getPipelineMicroBatches().empty()) {
      os << "uneven replicas: micro-batches per pipeline";
      for (int64_t count : assignment.getPipelineMicroBatches())
        os << " " << count;
      os << " (shares of the global batch by pipeline speed)\n";
    }
    if (shape.getIdle().empty())
      os << "idle: none\n";
    else
      for (IdleDevicesAttr group : shape.getIdle()) {
        os << "idle:";
        for (StringAttr d : group.getDevices())
          os << " " << d.getValue();
        os << " -- " << group.getReason() << "\n";
      }
    printGradientSync(module, os);
    printMemory(module, os);
    os.flush();
  }
};

} // namespace
