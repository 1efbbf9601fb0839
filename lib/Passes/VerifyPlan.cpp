//===- VerifyPlan.cpp - Checks of a planned module ------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Dialect/Dtfm/IR/DevicePrograms.h"
#include "dtfm/Dialect/Dtfm/IR/DtfmAttrs.h"
#include "dtfm/Passes/Passes.h"
#include "dtfm/Planner/Schedule.h"
#include "dtfm/Planner/Transfers.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"


namespace mlir::dtfm {
#define GEN_PASS_DEF_VERIFYPLAN
#include "dtfm/Passes/Passes.h.inc"
} // namespace mlir::dtfm

using namespace mlir;
using namespace mlir::dtfm;

namespace {
struct VerifyPlan : public mlir::dtfm::impl::VerifyPlanBase<VerifyPlan> {
  using VerifyPlanBase::VerifyPlanBase;

  /// This op's own end: its program's device, else its stage.
  static std::string self(Operation *op) {
    if (auto func = op->getParentOfType<func::FuncOp>())
      if (auto device = func->getAttrOfType<StringAttr>(kDeviceAttrName))
        return device.str();
    auto stage = op->getAttrOfType<IntegerAttr>(kStageAttrName);
    return stage ? "stage " + std::to_string(stage.getInt()) : "?";
  }
  /// The other end: `peer_device` when set, else the peer stage.
  static std::string other(Operation *op, int64_t peer) {
    if (auto device = op->getAttrOfType<StringAttr>("peer_device"))
      return device.str();
    return "stage " + std::to_string(peer);
  }

  void runOnOperation() override {
    // Tags and bytes are verified non-negative, so the int64 views are
    // exact.
    std::vector<::dtfm::planner::TransferEnd> ends;
    std::vector<Operation *> endOps;
    getOperation().walk([&](Operation *op) {
      if (auto send = dyn_cast<SendOp>(op)) {
        ends.push_back({true, static_cast<int64_t>(send.getTag()), self(op),
                        other(op, send.getPeer()),
                        static_cast<int64_t>(send.getBytes())});
        endOps.push_back(op);
      } else if (auto recv = dyn_cast<RecvOp>(op)) {
        ends.push_back({false, static_cast<int64_t>(recv.getTag()),
                        other(op, recv.getPeer()), self(op),
                        static_cast<int64_t>(recv.getBytes())});
        endOps.push_back(op);
      }
    });
    // A replica without a body runs its template's transfers with its own
    // peers (the problems point at the template's ops).
    bool ok = true;
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (!func->hasAttr(kTemplateAttrName))
        continue;
      FailureOr<SmallVector<StringAttr>> peers = peerDevices(func);
      if (failed(peers)) {
        ok = false;
        continue;
      }
      auto device = func->getAttrOfType<StringAttr>(kDeviceAttrName);
      std::string mine = device ? device.str() : "?";
      size_t next = 0;
      for (Operation &op : programBody(func).getBody().front()) {
        std::string theirs;
        if (op.hasAttr("peer_device"))
          theirs = (*peers)[next++].str();
        if (auto send = dyn_cast<SendOp>(op)) {
          ends.push_back({true, static_cast<int64_t>(send.getTag()), mine,
                          theirs.empty() ? other(&op, send.getPeer()) : theirs,
                          static_cast<int64_t>(send.getBytes())});
          endOps.push_back(&op);
        } else if (auto recv = dyn_cast<RecvOp>(op)) {
          ends.push_back({false, static_cast<int64_t>(recv.getTag()),
                          theirs.empty() ? other(&op, recv.getPeer()) : theirs,
                          mine, static_cast<int64_t>(recv.getBytes())});
          endOps.push_back(&op);
        }
      }
    }
    for (const ::dtfm::planner::TransferProblem &problem :
         ::dtfm::planner::checkTransfers(ends)) {
      endOps[problem.end]->emitOpError() << problem.message;
      ok = false;
    }
    // The recorded schedule must run to completion.
    if (auto schedule =
            getOperation()->getAttrOfType<ScheduleAttr>(kScheduleAttrName)) {
      std::vector<std::array<std::vector<std::string>, 3>> streams;
      for (StageStreamsAttr stage : schedule.getStages()) {
        std::array<std::vector<std::string>, 3> slots;
        ArrayRef<StringAttr> lists[3] = {stage.getRecv(), stage.getCompute(),
                                         stage.getSend()};
        for (int slot = 0; slot < 3; ++slot)
          for (StringAttr item : lists[slot])
            slots[slot].push_back(item.str());
        streams.push_back(std::move(slots));
      }
      std::vector<::dtfm::planner::StageSchedule> plan;
      std::string error;
      if (!::dtfm::planner::parseSchedule(streams, plan, error) ||
          !::dtfm::planner::checkSchedule(plan, error)) {
        mlir::emitError(toolLoc(getOperation(), ""))
            << "dtfm-verify-plan: dtfm.schedule: " << error;
        ok = false;
      }
    }
    if (!ok)
      return signalPassFailure();
    markAllAnalysesPreserved();
  }
};
} // namespace
