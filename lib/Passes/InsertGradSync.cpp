//===- InsertGradSync.cpp - Data-parallel gradient synchronisation --------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Analysis/CostAnalysis.h"
#include "dtfm/Format/Int8.h"
#include "dtfm/Passes/Passes.h"
#include "dtfm/Planner/Buckets.h"
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
    double capBytes = 0;
    std::string capError;
    if (!planner::parseBucketCap(bucketMb, capBytes, capError))
      return fail(capError);
    if (syncEvery < 0 || syncEvery > 1000000)
      return fail("sync-every must be between 0 and 1000000, got " +
                  Twine(syncEvery.getValue()));
    if (!(outerLr > 0 && outerLr < 1e6) ||
        !(outerMomentum >= 0 && outerMomentum < 1))
      return fail("outer-lr must be in (0, 1e6) and outer-momentum in "
                  "[0, 1)");
    std::optional<planner::DpCompressionChoice> compression =
        planner::parseDpCompression(dpCompression.getValue());
    if (!compression)
      return fail("unknown dp-compression '" + dpCompression.getValue() +
                  "' (expected " + planner::kDpCompressionChoices + ")");
    bool forced = compression->mode == planner::DpCompression::Int8 ||
                  compression->mode == planner::DpCompression::TopK;
    if (forced && assignment.getDp() < 2)
      return fail("dp-compression=" + dpCompression.getValue() +
                  " needs data-parallel groups of 2 or more devices (dp = 1)");
    if (compression->mode == planner::DpCompression::TopK && syncEvery >= 1)
      return fail("dp-compression=" + dpCompression.getValue() +
                  " sparsifies gradients; with sync-every the parameters "
                  "travel dense or int8");
    // Local steps exchange parameters after the step: one bucket.
    if (syncEvery >= 1)
      capBytes = 0;

    // Each stage's backward FLOPs done after each op, in IR order (the order
    // the runtime runs them): when a gradient is complete.
    CostAnalysis &costs = getAnalysis<CostAnalysis>();
    if (!costs.isValid())
      return signalPassFailure();
    llvm::DenseMap<Operation *, double> backwardDone;
    std::map<int64_t, double> stageBackward;
    for (const OpCost &cost : costs.getOpCosts()) {
      auto stage = cost.op->getAttrOfType<IntegerAttr>(kStageAttrName);
      if (!stage)
        continue;
      double &done = stageBackward[stage.getInt()];
      done += static_cast<double>(cost.backwardFlops);
      backwardDone[cost.op] = done;
    }

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
      // Compressed (forced, or int8 under auto where it pays): what
      // crosses the links for the gradients' elements.
      Type element =
          cast<ShapedType>(ops.front()->getOperand(1).getType())
              .getElementType();
      double elementBytes =
          std::max<unsigned>(1, element.getIntOrFloatBitWidth() / 8);
      auto secondsAs = [&](planner::DpCompression mode, double bytes) {
        return planner::groupExchangeSeconds(cluster, group, bytes,
                                             elementBytes, dp, ring, mode,
                                             compression->topkRatio);
      };
      planner::DpCompression mode = planner::groupCompression(
          *compression, secondsAs(planner::DpCompression::None, total),
          secondsAs(planner::DpCompression::Int8, total));
      auto exchangeSeconds = [&](double bytes) {
        return secondsAs(mode, bytes);
      };
      // Buckets in the order the backward completes the gradients (a
      // gradient defined outside the stage's ops is complete from the
      // start).
      double stageTotal = stageBackward[stage];
      auto readyFraction = [&](Value grad) {
        Operation *def = grad.getDefiningOp();
        auto it = def ? backwardDone.find(def) : backwardDone.end();
        if (it == backwardDone.end() || stageTotal <= 0)
          return it == backwardDone.end() ? 0.0 : 1.0;
        return it->second / stageTotal;
      };
      SmallVector<Operation *> order(ops.begin(), ops.end());
      llvm::stable_sort(order, [&](Operation *a, Operation *b) {
        return readyFraction(a->getOperand(1)) <
               readyFraction(b->getOperand(1));
      });
      std::vector<double> sizes, ready;
      for (Operation *op : order) {
        sizes.push_back(double(getTensorBytes(op->getOperand(1).getType())));
        ready.push_back(readyFraction(op->getOperand(1)));
      }
      // One micro-batch's backward on the group's slowest device: what the
      // buckets can hide behind.
      double slowest = 0;
      for (int d : group) {
        double speed = cluster.devices[d].speed();
        slowest = slowest > 0 ? std::min(slowest, speed) : speed;
      }
      double backwardSeconds = slowest > 0 ? stageTotal / slowest : 0;
      planner::BucketPlan plan = planner::planBuckets(
          sizes, ready, capBytes, exchangeSeconds, backwardSeconds);
      llvm::DenseMap<Operation *, int> bucketOfOp;
      for (size_t i = 0; i < order.size(); ++i)
        bucketOfOp[order[i]] = plan.bucketOf[i];
      for (Operation *op : ops) {
        Value grad = op->getOperand(1);
        int64_t bytes = getTensorBytes(grad.getType());
        double seconds = exchangeSeconds(double(bytes));
        int bucket = bucketOfOp.lookup(op);
        OpBuilder builder(op);
        auto syncOp = builder.create<GradSyncOp>(
            op->getLoc(), grad.getType(), grad,
            b.getStringAttr(planner::gradientSyncName(algorithm)), names,
            b.getI64IntegerAttr(bytes), b.getF64FloatAttr(seconds));
        for (StringRef attr : {kStageAttrName, kLayerAttrName})
          if (Attribute value = op->getAttr(attr))
            syncOp->setAttr(attr, value);
        syncOp->setAttr(kBucketAttrName, b.getI64IntegerAttr(bucket));
        const planner::SyncBucket &planned = plan.buckets[bucket];
        syncOp->setAttr(kBucketSecondsAttrName,
                        b.getF64FloatAttr(planned.seconds));
        syncOp->setAttr(kBucketReadyAttrName,
                        b.getF64FloatAttr(planned.readyFraction));
        if (mode == planner::DpCompression::Int8)
          syncOp->setAttr(kCompressionAttrName, b.getStringAttr("int8"));
        if (mode == planner::DpCompression::TopK) {
          syncOp->setAttr(kCompressionAttrName, b.getStringAttr("topk"));
          syncOp->setAttr(kTopkRatioAttrName,
                          b.getF64FloatAttr(compression->topkRatio));
        }
        if (syncEvery >= 1) {
          syncOp->setAttr(kSyncEveryAttrName,
                          b.getI64IntegerAttr(syncEvery));
          syncOp->setAttr(kOuterLrAttrName, b.getF64FloatAttr(outerLr));
          syncOp->setAttr(kOuterMomentumAttrName,
                          b.getF64FloatAttr(outerMomentum));
        }
        op->setOperand(1, syncOp.getResult());
      }
    }
  }
};
} // namespace
