//===- InsertGradSync.cpp - Data-parallel gradient synchronisation --------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Analysis/CostAnalysis.h"
#include "dtfm/Format/WireCodec.h"
#include "dtfm/Passes/Passes.h"
#include "dtfm/Plan/Program.h"
#include "dtfm/Planner/Buckets.h"
#include "dtfm/Planner/CostModel.h"
#include "dtfm/Planner/Workload.h"

#include "mlir/IR/Builders.h"

#include <map>
#include <memory>

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
    FailureOr<planner::Cluster> loaded = planningCluster(module, error);
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
      return fail("no optimizer updates: no trainable parameter reaches the "
                  "loss (none, or all frozen), or --dtfm-autodiff has not "
                  "run");
    double capBytes = 0;
    std::string capError;
    if (!planner::parseBucketCap(bucketMb, capBytes, capError))
      return fail(capError);
    int64_t every = 0;
    std::string everyError;
    if (!planner::parseSyncEvery(syncEvery, every, everyError))
      return fail(everyError);
    ShapeAttr shape = module->getAttrOfType<ShapeAttr>(kShapeAttrName);
    if (every == planner::kSyncEveryAuto && !shape)
      return fail("sync-every=auto needs the plan's shape: plan with "
                  "global-batch=N (or run --dtfm-choose-shape first)");
    if (!(outerLr > 0 && outerLr < 1e6) ||
        !(outerMomentum >= 0 && outerMomentum < 1))
      return fail("outer-lr must be in (0, 1e6) and outer-momentum in "
                  "[0, 1)");
    std::optional<planner::CodecChoice> compression = planner::parseCodecChoice(
        dpCompression.getValue(), planner::CodecUse::Gradients);
    if (!compression)
      return fail("unknown dp-compression '" + dpCompression.getValue() +
                  "' (expected " +
                  planner::codecChoices(planner::CodecUse::Gradients) + ")");
    const ::dtfm::format::WireCodecInfo &forcedCodec =
        ::dtfm::format::wireCodecInfo(compression->codec);
    bool forced = forcedCodec.codec != ::dtfm::format::WireCodec::Dense;
    if (forced && assignment.getDp() < 2)
      return fail("dp-compression=" + dpCompression.getValue() +
                  " needs data-parallel groups of 2 or more devices (dp = 1)");
    if (!(topkWarmup >= 0 && topkWarmup <= 1000000000))
      return fail("topk-warmup must be in [0, 1e9] steps, got " +
                  Twine(topkWarmup.getValue()));
    if (syncFragments < 1 || syncFragments > 1000000)
      return fail("sync-fragments must be between 1 and 1000000, got " +
                  Twine(syncFragments.getValue()));
    if (syncFragments > 1 && every < 1)
      return fail("sync-fragments=" + Twine(syncFragments.getValue()) +
                  " exchanges local steps' parameters in fragments: it "
                  "needs sync-every=H (H >= 1)");
    if (syncFragments > every && every >= 1)
      return fail("sync-fragments=" + Twine(syncFragments.getValue()) +
                  " is more than sync-every=" + Twine(every) +
                  ": each fragment needs a step of its own");
    if (syncOverlap < 0 || (syncOverlap > 0 && every < 1) ||
        (every >= 1 &&
         syncOverlap >= ::dtfm::plan::localStepsMinGap(
                            every, std::min<int64_t>(syncFragments, every))))
      return fail("sync-overlap=" + Twine(syncOverlap.getValue()) +
                  " must be below the steps between two exchanges of local "
                  "steps (sync-every=H, H >= 1; with P fragments the fewest "
                  "steps between two of them)");
    if (!(outerMixing >= 0 && outerMixing <= 1))
      return fail("outer-mixing must be in [0, 1], got " +
                  Twine(std::to_string(outerMixing.getValue())));
    std::string codecError;
    if (!planner::checkCodecForSyncs(forcedCodec.codec,
                                     dpCompression.getValue(), every,
                                     codecError))
      return fail(codecError);

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
    // Phase 1: per data-parallel stage, its group, algorithm, compression
    // and gradients in the order the backward completes them.
    struct StageSync {
      SmallVector<Operation *> ops, order;
      ArrayAttr names;
      std::vector<int> group;
      // The group's links (shared: the plan points to them) and its
      // algorithm and codec (planner::planGradientSync).
      std::shared_ptr<planner::GroupLinks> links;
      planner::GradientSyncPlan plan;
      double total = 0, backwardSeconds = 0;
      std::vector<double> sizes, ready;
    };
    std::vector<StageSync> syncs;
    for (auto &[stage, ops] : updates) {
      StageSync sync;
      sync.ops.assign(ops.begin(), ops.end());
      sync.names = stages[stage];
      for (Attribute name : sync.names) {
        auto it = byName.find(cast<StringAttr>(name).getValue());
        if (it == byName.end())
          return fail("dtfm.assignment names a device that cluster '" +
                      cluster.name + "' does not have");
        sync.group.push_back(it->second);
      }
      if (sync.group.size() < 2)
        continue;
      const std::vector<int> &group = sync.group;
      int dp = static_cast<int>(group.size());
      for (Operation *op : ops)
        sync.total += getTensorBytes(op->getOperand(1).getType());
      // Compressed (forced, or int8 under auto where it pays): what
      // crosses the links for the gradients' elements.
      Type element =
          cast<ShapedType>(ops.front()->getOperand(1).getType())
              .getElementType();
      double elementBytes =
          std::max<unsigned>(1, element.getIntOrFloatBitWidth() / 8);
      sync.links = std::make_shared<planner::GroupLinks>(cluster, group);
      sync.plan = planner::planGradientSync(
          *sync.links, sync.total, elementBytes, dp, *syncKind, *compression);
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
      sync.order.assign(ops.begin(), ops.end());
      llvm::stable_sort(sync.order, [&](Operation *a, Operation *b) {
        return readyFraction(a->getOperand(1)) <
               readyFraction(b->getOperand(1));
      });
      for (Operation *op : sync.order) {
        sync.sizes.push_back(
            double(getTensorBytes(op->getOperand(1).getType())));
        sync.ready.push_back(readyFraction(op->getOperand(1)));
      }
      // One micro-batch's backward on the group's slowest device: what the
      // buckets can hide behind.
      double slowest = 0;
      for (int d : group) {
        double speed = cluster.devices[d].speed();
        slowest = slowest > 0 ? std::min(slowest, speed) : speed;
      }
      sync.backwardSeconds = slowest > 0 ? stageTotal / slowest : 0;
      syncs.push_back(std::move(sync));
    }
    auto bucketsOf = [&](const StageSync &sync, double cap) {
      return planner::planBuckets(
          sync.sizes, sync.ready, cap,
          [&](double bytes) { return sync.plan.exchangeSeconds(bytes); },
          sync.backwardSeconds);
    };
    // sync-every=auto: the H of the plan's pipeline time (the shape's) and
    // its slowest group's exchanges.
    if (every == planner::kSyncEveryAuto) {
      double exposed = 0, exchange = 0;
      for (const StageSync &sync : syncs) {
        exposed = std::max(exposed, bucketsOf(sync, capBytes).exposedSeconds);
        exchange = std::max(exchange, sync.plan.exchangeSeconds(sync.total));
      }
      every = planner::chooseSyncEvery(shape.getPipelineS(), exposed,
                                       exchange);
    }
    // Local steps exchange parameters after the step: one bucket.
    if (every >= 1)
      capBytes = 0;

    // Local steps in fragments: whole layers, strided (the k-th layer to
    // hold a parameter, in IR order, goes to fragment k mod P), so that
    // each fragment spans the depth of the model as Streaming DiLoCo's do.
    llvm::DenseMap<Operation *, int64_t> fragmentOf;
    if (syncFragments > 1) {
      llvm::StringMap<int64_t> layerOrdinal;
      int64_t layers = 0;
      for (const StageSync &sync : syncs)
        for (Operation *op : sync.ops) {
          auto layer = op->getAttrOfType<StringAttr>(kLayerAttrName);
          int64_t ordinal = layers;
          if (layer) {
            auto [it, added] =
                layerOrdinal.try_emplace(layer.getValue(), layers);
            ordinal = it->second;
            if (added)
              ++layers;
          } else {
            ++layers; // a parameter outside any layer: a layer of its own
          }
          fragmentOf[op] = ordinal % syncFragments;
        }
      if (syncFragments > layers)
        return fail("sync-fragments=" + Twine(syncFragments.getValue()) +
                    " is more than the " + Twine(layers) +
                    " layers holding parameters");
    }

    // Phase 2: buckets, then one dtfm.grad_sync per update.
    for (const StageSync &sync : syncs) {
      planner::BucketPlan plan = bucketsOf(sync, capBytes);
      llvm::DenseMap<Operation *, int> bucketOfOp;
      for (size_t i = 0; i < sync.order.size(); ++i)
        bucketOfOp[sync.order[i]] = plan.bucketOf[i];
      // Local steps in fragments: one bucket per fragment of this stage,
      // timed for its own bytes (what the simulator exposes per exchange).
      if (!fragmentOf.empty()) {
        std::map<int64_t, double> fragmentBytes;
        for (Operation *op : sync.ops)
          fragmentBytes[fragmentOf.lookup(op)] +=
              double(getTensorBytes(op->getOperand(1).getType()));
        plan.buckets.assign(syncFragments, planner::SyncBucket{});
        for (const auto &[fragment, bytes] : fragmentBytes)
          plan.buckets[fragment] = {1.0, sync.plan.exchangeSeconds(bytes),
                                    bytes / std::max(1.0, sync.total)};
        for (Operation *op : sync.ops)
          bucketOfOp[op] = static_cast<int>(fragmentOf.lookup(op));
      }
      for (Operation *op : sync.ops) {
        Value grad = op->getOperand(1);
        int64_t bytes = getTensorBytes(grad.getType());
        double seconds = sync.plan.exchangeSeconds(double(bytes));
        int bucket = bucketOfOp.lookup(op);
        OpBuilder builder(op);
        auto syncOp = builder.create<GradSyncOp>(
            op->getLoc(), grad.getType(), grad,
            b.getStringAttr(planner::gradientSyncName(sync.plan.algorithm)),
            sync.names, b.getI64IntegerAttr(bytes), b.getF64FloatAttr(seconds));
        for (StringRef attr : {kStageAttrName, kLayerAttrName})
          if (Attribute value = op->getAttr(attr))
            syncOp->setAttr(attr, value);
        syncOp->setAttr(kBucketAttrName, b.getI64IntegerAttr(bucket));
        const planner::SyncBucket &planned = plan.buckets[bucket];
        syncOp->setAttr(kBucketSecondsAttrName,
                        b.getF64FloatAttr(planned.seconds));
        syncOp->setAttr(kBucketReadyAttrName,
                        b.getF64FloatAttr(planned.readyFraction));
        const ::dtfm::format::WireCodecInfo &codec =
            ::dtfm::format::wireCodecInfo(sync.plan.codec);
        if (sync.plan.codec != ::dtfm::format::WireCodec::Dense)
          syncOp->setAttr(kCompressionAttrName, b.getStringAttr(codec.name));
        if (codec.sparse) {
          syncOp->setAttr(kTopkRatioAttrName,
                          b.getF64FloatAttr(sync.plan.ratio));
          syncOp->setAttr(kTopkWarmupAttrName,
                          b.getI64IntegerAttr(topkWarmup));
        }
        if (every >= 1) {
          syncOp->setAttr(kSyncEveryAttrName, b.getI64IntegerAttr(every));
          syncOp->setAttr(kOuterLrAttrName, b.getF64FloatAttr(outerLr));
          syncOp->setAttr(kOuterMomentumAttrName,
                          b.getF64FloatAttr(outerMomentum));
          if (syncOverlap > 0) {
            syncOp->setAttr(kSyncOverlapAttrName,
                            b.getI64IntegerAttr(syncOverlap));
            syncOp->setAttr(kOuterMixingAttrName,
                            b.getF64FloatAttr(outerMixing));
          }
          if (syncFragments > 1) {
            syncOp->setAttr(kSyncFragmentAttrName,
                            b.getI64IntegerAttr(fragmentOf.lookup(op)));
            syncOp->setAttr(kSyncFragmentsAttrName,
                            b.getI64IntegerAttr(syncFragments));
          }
        }
        op->setOperand(1, syncOp.getResult());
      }
    }
  }
};
} // namespace
