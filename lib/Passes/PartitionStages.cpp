//===- PartitionStages.cpp - Uneven pipeline stages as a pass -------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Analysis/CostAnalysis.h"
#include "dtfm/Passes/Passes.h"
#include "dtfm/Planner/Cluster.h"
#include "dtfm/Planner/StagePartition.h"

#include "mlir/IR/Builders.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>

namespace mlir::dtfm {
#define GEN_PASS_DEF_PARTITIONSTAGES
#include "dtfm/Passes/Passes.h.inc"
} // namespace mlir::dtfm

using namespace mlir;
using namespace mlir::dtfm;
namespace planner = ::dtfm::planner;

namespace {

struct PartitionStages
    : public mlir::dtfm::impl::PartitionStagesBase<PartitionStages> {
  using PartitionStagesBase::PartitionStagesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fail = [&](const Twine &message) {
      mlir::emitError(clusterLoc(module))
          << "dtfm-partition-stages: " << message;
      signalPassFailure();
    };
    if (!getModuleCluster(module))
      return fail(kNoClusterMessage);
    planner::StagePartitionOptions options;
    std::optional<planner::PipelineSchedule> kind =
        resolveSchedule(module, schedule.getValue());
    if (!kind)
      return fail("unknown schedule '" + schedule.getValue() + "' (expected " +
                  kScheduleOptionChoices + ")");
    options.schedule = *kind;
    if (std::string problem = microBatchesProblem(microBatches);
        !problem.empty())
      return fail(problem);
    if (numStages < 0 || !(stateBytes >= 0))
      return fail("stages and state-bytes-per-param-byte must be >= 0");
    options.microBatches =
        static_cast<int>(largestPipelineMicroBatches(module, microBatches));
    options.stateBytesPerParameterByte = stateBytes;
    std::optional<planner::MemoryOption> again =
        planner::parseMemoryOption(recompute.getValue());
    std::optional<planner::MemoryOption> shard =
        planner::parseMemoryOption(shardState.getValue());
    if (!again || !shard)
      return fail(Twine(again ? "shard-state" : "recompute") + " must be " +
                  planner::kMemoryOptionChoices + ", got '" +
                  (again ? shardState : recompute).getValue() + "'");
    options.recompute = *again;
    options.shardState = *shard;

    std::string error;
    FailureOr<planner::Cluster> loaded = planningCluster(module, error);
    if (failed(loaded))
      return fail(error);
    planner::Cluster cluster = std::move(*loaded);
    std::vector<planner::StageDevice> devices;
    if (failed(stageDevices(module, cluster, devices)))
      return signalPassFailure();
    // Each stage's data-parallel group (the same width in every stage).
    if (auto assignment =
            module->getAttrOfType<AssignmentAttr>(kAssignmentAttrName))
      if (!assignment.getStages().empty())
        options.dataParallel = static_cast<int>(
            cast<ArrayAttr>(assignment.getStages()[0]).size());

    CostAnalysis &costs = getAnalysis<CostAnalysis>();
    if (!costs.isValid())
      return signalPassFailure();
    options.optimizerBytesPerElement =
        optimizerStateBytesPerElement(module, "adamw").value_or(8);
    if (FailureOr<planner::Workload> workload = buildWorkload(costs);
        succeeded(workload))
    {
      options.elementsPerParameterByte = workload->gradientElementsPerByte;
      options.boundaryBytes = workload->boundaryBytes;
      options.tied = workload->tied;
    }
    FailureOr<SmallVector<LayerBlock>> chainOrFailure = buildLayerChain(costs);
    if (failed(chainOrFailure))
      return signalPassFailure();
    SmallVector<LayerBlock> &blocks = *chainOrFailure;
    std::vector<planner::ChainBlock> chain;
    for (const LayerBlock &block : blocks)
      chain.push_back(chainBlockOf(block));

    // hetero's assignment chose the bounds with the layout (its model
    // scored them); other assignments leave the split to the partitioner.
    planner::StagePlan plan;
    auto assignment =
        module->getAttrOfType<AssignmentAttr>(kAssignmentAttrName);
    if (assignment && !assignment.getStageBounds().empty()) {
      std::vector<int> bounds(assignment.getStageBounds().begin(),
                              assignment.getStageBounds().end());
      if (!planner::planForBounds(chain, devices, options, bounds, plan, error))
        return fail("dtfm.assignment's stage_bounds: " + error);
    } else if (!planner::partitionChain(chain, devices, options, plan, error)) {
      return fail(error);
    }

    Builder b(module.getContext());
    for (size_t s = 0; s + 1 < plan.bounds.size(); ++s)
      for (int i = plan.bounds[s]; i < plan.bounds[s + 1]; ++i)
        for (Operation *op : blocks[i].ops)
          op->setAttr(kStageAttrName, b.getI64IntegerAttr(s));
    // Ops without a cost (func.return) follow their operands' last stage.
    module.walk([&](Operation *op) {
      if (op->hasAttr(kStageAttrName) || isa<CostOpInterface>(op) ||
          op->getNumOperands() == 0)
        return;
      int64_t stage = 0;
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp())
          if (auto s = def->getAttrOfType<IntegerAttr>(kStageAttrName))
            stage = std::max(stage, s.getInt());
      op->setAttr(kStageAttrName, b.getI64IntegerAttr(stage));
    });
    SmallVector<int64_t> bounds(plan.bounds.begin(), plan.bounds.end());
    SmallVector<StoredDouble> seconds(plan.stageSeconds.begin(),
                                      plan.stageSeconds.end());
    SmallVector<int64_t> memory;
    for (double bytes : plan.stageMemoryBytes)
      memory.push_back(static_cast<int64_t>(std::llround(bytes)));
    module->setAttr(kStagesAttrName,
                    StagesAttr::get(module.getContext(), bounds, seconds,
                                    memory, plan.bottleneckSeconds));
    if (printTable)
      print(blocks, devices, plan);
    markAnalysesPreserved<CostAnalysis>();
  }

  /// The device of each stage: from dtfm.assignment when present, else the
  /// first `stages` devices of the cluster, one per stage.
  LogicalResult stageDevices(ModuleOp module, const planner::Cluster &cluster,
                             std::vector<planner::StageDevice> &devices) {
    llvm::StringMap<size_t> byName;
    for (size_t i = 0; i < cluster.size(); ++i)
      byName[cluster.devices[i].name] = i;
    auto assignment =
        module->getAttrOfType<AssignmentAttr>(kAssignmentAttrName);
    if (!assignment) {
      size_t count =
          numStages > 0 ? static_cast<size_t>(numStages) : cluster.size();
      if (count > cluster.size())
        return mlir::emitError(clusterLoc(module))
               << "dtfm-partition-stages: " << count << " stages but cluster '"
               << cluster.name << "' has " << cluster.size() << " devices";
      for (size_t i = 0; i < count; ++i)
        devices.push_back(
            planner::stageDeviceOf(cluster, {static_cast<int>(i)}));
      return success();
    }
    for (ArrayAttr members : assignment.getStages()) {
      std::vector<int> indices;
      for (Attribute member : members) {
        auto name = dyn_cast<StringAttr>(member);
        auto it = name ? byName.find(name.getValue()) : byName.end();
        if (it == byName.end())
          return mlir::emitError(clusterLoc(module))
                 << "dtfm-partition-stages: dtfm.assignment names device "
                 << member << ", which cluster '" << cluster.name
                 << "' does not have";
        indices.push_back(static_cast<int>(it->second));
      }
      if (indices.empty())
        return mlir::emitError(clusterLoc(module))
               << "dtfm-partition-stages: dtfm.assignment has a stage "
                  "without devices";
      devices.push_back(planner::stageDeviceOf(cluster, indices));
    }
    return success();
  }

  void print(ArrayRef<LayerBlock> blocks,
             const std::vector<planner::StageDevice> &devices,
             const planner::StagePlan &plan) {
    raw_ostream &os = llvm::outs();
    os << "=== dtfm pipeline stages ===\n";
    os << llvm::format("%zu stages over %zu blocks; slowest stage %.6g s per "
                       "micro-batch\n",
                       devices.size(), blocks.size(), plan.bottleneckSeconds);
    for (size_t s = 0; s < devices.size(); ++s) {
      int first = plan.bounds[s], last = plan.bounds[s + 1];
      os << llvm::format("stage %2zu  %-16s %3d blocks  %10.6g s  %10.4g GB  ",
                         s, devices[s].name.c_str(), last - first,
                         plan.stageSeconds[s], plan.stageMemoryBytes[s] / 1e9);
      os << (blocks[first].layer.empty() ? "-" : blocks[first].layer);
      if (last - first > 1)
        os << " .. "
           << (blocks[last - 1].layer.empty() ? "-" : blocks[last - 1].layer);
      os << "\n";
    }
    os.flush();
  }
};
} // namespace
