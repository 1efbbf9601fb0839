//===- InsertSendRecv.cpp - send/recv on edges between stages -------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Passes/Passes.h"
#include "dtfm/Planner/Cluster.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::dtfm {
#define GEN_PASS_DEF_INSERTSENDRECV
#include "dtfm/Passes/Passes.h.inc"
} // namespace mlir::dtfm

using namespace mlir;
using namespace mlir::dtfm;
namespace planner = ::dtfm::planner;

namespace {
struct InsertSendRecv
    : public mlir::dtfm::impl::InsertSendRecvBase<InsertSendRecv> {
  using InsertSendRecvBase::InsertSendRecvBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fail = [&](const Twine &message) {
      mlir::emitError(clusterLoc(module))
          << "dtfm-insert-send-recv: " << message;
      signalPassFailure();
    };
    std::string error;
    FailureOr<planner::Cluster> loaded = planningCluster(module, error);
    if (failed(loaded))
      return fail(error);
    planner::Cluster cluster = std::move(*loaded);

    // Every op must be staged.
    FailureOr<int64_t> counted = countStages(module);
    if (failed(counted))
      return signalPassFailure();
    int64_t stages = *counted;

    // The devices of each stage, entry i = pipeline i.
    std::vector<std::vector<size_t>> devices;
    if (failed(stageDevices(module, cluster, stages, devices)))
      return signalPassFailure();

    Builder b(module.getContext());
    int64_t tag = 0;
    // Receives of parameters (a tied weight used on another stage): the
    // parameter, and its gradient on the way back, move once per iteration,
    // not once per micro-batch.
    llvm::DenseSet<Operation *> parameterRecvs;
    auto movesOncePerIteration = [&](Value value) {
      if (value.getDefiningOp<ParamOp>())
        return true;
      auto backward = value.getDefiningOp<BackwardOp>();
      if (!backward)
        return false;
      unsigned result = cast<OpResult>(value).getResultNumber();
      Value wrt = backward.getInputs()[backward.getWrt()[result]];
      Operation *def = wrt.getDefiningOp();
      return def && (isa<ParamOp>(def) || parameterRecvs.contains(def));
    };
    for (auto func : module.getOps<func::FuncOp>()) {
      SmallVector<Operation *> ops;
      for (Operation &op : func.getBody().front())
        ops.push_back(&op);
      for (Operation *op : ops) {
        int64_t from = stageOf(op);
        OpBuilder after(op->getContext());
        after.setInsertionPointAfter(op);
        for (Value value : op->getResults()) {
          // Users on other stages, grouped by stage (ordered map: stable).
          std::map<int64_t, SmallVector<OpOperand *>> byStage;
          for (OpOperand &use : value.getUses()) {
            int64_t to = stageOf(use.getOwner());
            if (to != from)
              byStage[to].push_back(&use);
          }
          for (auto &[to, uses] : byStage) {
            int64_t bytes = getTensorBytes(value.getType());
            auto [latency, bandwidth] =
                slowestLink(cluster, devices[from], devices[to], bytes);
            auto send = after.create<SendOp>(
                op->getLoc(), value, b.getI64IntegerAttr(to),
                b.getI64IntegerAttr(tag), b.getI64IntegerAttr(bytes),
                b.getF64FloatAttr(latency), b.getF64FloatAttr(bandwidth));
            send->setAttr(kStageAttrName, b.getI64IntegerAttr(from));
            bool once = movesOncePerIteration(value);
            if (once)
              send->setAttr(kOncePerIterationAttrName, b.getUnitAttr());
            after.setInsertionPointAfter(send);
            Operation *first = uses.front()->getOwner();
            for (OpOperand *use : uses)
              if (use->getOwner()->isBeforeInBlock(first))
                first = use->getOwner();
            OpBuilder before(first);
            auto recv = before.create<RecvOp>(
                op->getLoc(), value.getType(), b.getI64IntegerAttr(from),
                b.getI64IntegerAttr(tag), b.getI64IntegerAttr(bytes),
                b.getF64FloatAttr(latency), b.getF64FloatAttr(bandwidth));
            recv->setAttr(kStageAttrName, b.getI64IntegerAttr(to));
            if (once) {
              recv->setAttr(kOncePerIterationAttrName, b.getUnitAttr());
              if (value.getDefiningOp<ParamOp>())
                parameterRecvs.insert(recv);
            }
            for (OpOperand *use : uses)
              use->set(recv.getResult());
            ++tag;
            ++numPairs;
          }
        }
      }
    }
  }

  static int64_t stageOf(Operation *op) {
    return op->getAttrOfType<IntegerAttr>(kStageAttrName).getInt();
  }

  /// (latency s, bandwidth Gbps) of the matched pair that takes longest to
  /// move `bytes`.
  static std::pair<double, double> slowestLink(const planner::Cluster &cluster,
                                               const std::vector<size_t> &a,
                                               const std::vector<size_t> &b,
                                               int64_t bytes) {
    double worst = -1, latency = 0, bandwidth = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      if (a[i] == b[i])
        continue;
      double t = cluster.transferSeconds(a[i], b[i], bytes);
      if (t > worst) {
        worst = t;
        latency = cluster.latencySeconds(a[i], b[i]);
        bandwidth = cluster.bandwidthGbps(a[i], b[i]);
      }
    }
    return {latency, worst < 0 ? 1e9 : bandwidth};
  }

  LogicalResult stageDevices(ModuleOp module, const planner::Cluster &cluster,
                             int64_t stages,
                             std::vector<std::vector<size_t>> &devices) {
    llvm::StringMap<size_t> byName;
    for (size_t i = 0; i < cluster.size(); ++i)
      byName[cluster.devices[i].name] = i;
    auto assignment =
        module->getAttrOfType<AssignmentAttr>(kAssignmentAttrName);
    if (!assignment) {
      if (stages > static_cast<int64_t>(cluster.size()))
        return mlir::emitError(clusterLoc(module))
               << "dtfm-insert-send-recv: " << stages << " stages but cluster '"
               << cluster.name << "' has " << cluster.size() << " devices";
      for (int64_t s = 0; s < stages; ++s)
        devices.push_back({static_cast<size_t>(s)});
      return success();
    }
    ArrayRef<ArrayAttr> groups = assignment.getStages();
    if (static_cast<int64_t>(groups.size()) < stages)
      return mlir::emitError(clusterLoc(module))
             << "dtfm-insert-send-recv: dtfm.assignment has fewer stages "
                "than the ops use ("
             << stages << ")";
    for (ArrayAttr group : groups) {
      std::vector<size_t> members;
      for (Attribute member : group) {
        auto it = byName.find(cast<StringAttr>(member).getValue());
        if (it == byName.end())
          return mlir::emitError(clusterLoc(module))
                 << "dtfm-insert-send-recv: dtfm.assignment names device "
                 << member << ", which cluster '" << cluster.name
                 << "' does not have";
        members.push_back(it->second);
      }
      devices.push_back(members);
    }
    return success();
  }
};
} // namespace
