//===- InsertGradSync.cpp - Data-parallel gradient synchronisation --------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Passes/Passes.h"
#include "dtfm/Planner/CostModel.h"
#include "dtfm/Planner/Workload.h"

#include "mlir/IR/Builders.h"

#include <map>

namespace mlir::dtfm {
#define GEN_PASS_DEF_INSERTGRADSYNC
#include "dtfm/Passes/Passes.h.inc"
} // namespace mlir::dtfm

using namespace mlir;
using namespace mlir::dtfm;
namespace planner = ::dtfm::planner;

namespace {
struct InsertGradSync
    : public mlir::dtfm::impl::InsertGradSyncBase<InsertGradSync> {
  using InsertGradSyncBase::InsertGradSyncBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fail = [&](const Twine &message) {
      mlir::emitError(clusterLoc(module))
          << "dtfm-insert-grad-sync: " << message;
      signalPassFailure();
    };
    std::optional<planner::GradientSync> syncKind =
        planner::parseGradientSync(sync.getValue());
    if (!syncKind)
      return fail("unknown sync '" + sync.getValue() + "' (expected " +
                  planner::kGradientSyncChoices + ")");
    std::string error;
    FailureOr<planner::Cluster> loaded = moduleCluster(module, error);
    if (failed(loaded))
      return fail(error);
    planner::Cluster cluster = std::move(*loaded);
    auto assignment =
        module->getAttrOfType<AssignmentAttr>(kAssignmentAttrName);
    if (!assignment)
      return fail("no dtfm.assignment; run --dtfm-assign-devices first");
    ArrayRef<ArrayAttr> stages = assignment.getStages();

    // Updates per stage, in IR order.
    std::map<int64_t, SmallVector<Operation *>> updates;
    WalkResult walk = module.walk([&](Operation *op) {
      if (!isa<SgdUpdateOp, AdamWUpdateOp>(op))
        return WalkResult::advance();
      auto stage = op->getAttrOfType<IntegerAttr>(kStageAttrName);
      if (!stage || stage.getInt() >= static_cast<int64_t>(stages.size())) {
        op->emitOpError("has no dtfm.stage of the assignment; run "
                        "--dtfm-partition-stages first");
        return WalkResult::interrupt();
      }
      updates[stage.getInt()].push_back(op);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
    if (updates.empty())
      return fail("no optimizer updates; run --dtfm-autodiff first");

    llvm::StringMap<int> byName;
    for (size_t i = 0; i < cluster.size(); ++i)
      byName[cluster.devices[i].name] = static_cast<int>(i);
    Builder b(module.getContext());
    for (auto &[stage, ops] : updates) {
      ArrayAttr names = stages[stage];
      std::vector<int> group;
      for (Attribute name : names) {
        auto it = byName.find(cast<StringAttr>(name).getValue());
        if (it == byName.end())
          return fail("dtfm.assignment names a device that cluster '" +
                      cluster.name + "' does not have");
        group.push_back(it->second);
      }
      if (group.size() < 2)
        continue;
      int dp = static_cast<int>(group.size());
      double total = 0;
      for (Operation *op : ops)
        total += getTensorBytes(op->getOperand(1).getType());
      double psSeconds =
          planner::groupDataParallelCost(cluster, group, total, dp);
      double ringSeconds =
          planner::groupRingAllReduceCost(cluster, group, total, dp);
      planner::GradientSync algorithm = *syncKind;
      if (algorithm == planner::GradientSync::Auto)
        algorithm = ringSeconds < psSeconds
                        ? planner::GradientSync::Ring
                        : planner::GradientSync::ParameterServer;
      bool ring = algorithm == planner::GradientSync::Ring;
      // The stage's gradients travel as one bucket (DT-FM's c_DP): the time
      // of the whole exchange, recorded on every sync of the stage.
      double stageSeconds = ring ? ringSeconds : psSeconds;
      for (Operation *op : ops) {
        Value grad = op->getOperand(1);
        int64_t bytes = getTensorBytes(grad.getType());
        double seconds = ring ? planner::groupRingAllReduceCost(
                                    cluster, group, double(bytes), dp)
                              : planner::groupDataParallelCost(
                                    cluster, group, double(bytes), dp);
        OpBuilder builder(op);
        auto syncOp = builder.create<GradSyncOp>(
            op->getLoc(), grad.getType(), grad,
            b.getStringAttr(planner::gradientSyncName(algorithm)), names,
            b.getI64IntegerAttr(bytes), b.getF64FloatAttr(seconds));
        for (StringRef attr : {kStageAttrName, kLayerAttrName})
          if (Attribute value = op->getAttr(attr))
            syncOp->setAttr(attr, value);
        syncOp->setAttr(kBucketSecondsAttrName,
                        b.getF64FloatAttr(stageSeconds));
        op->setOperand(1, syncOp.getResult());
      }
    }
  }
};
} // namespace
