//===- VerifyPlan.cpp - Checks of a planned module ------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Dialect/Dtfm/IR/DtfmAttrs.h"
#include "dtfm/Passes/Passes.h"
#include "dtfm/Planner/Schedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <map>

namespace mlir::dtfm {
#define GEN_PASS_DEF_VERIFYPLAN
#include "dtfm/Passes/Passes.h.inc"
} // namespace mlir::dtfm

using namespace mlir;
using namespace mlir::dtfm;

namespace {
/// One end of a transfer: who sends to whom under which tag. In device
/// programs (after --dtfm-emit-stage-programs) the ends are device names;
/// before, stage numbers.
struct Transfer {
  int64_t tag;
  std::string from, to;
  Operation *op;
  int64_t bytes;
};

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
    std::map<int64_t, SmallVector<Transfer>> sends, recvs;
    getOperation().walk([&](Operation *op) {
      // Tags and bytes are verified non-negative, so the int64 views are
      // exact.
      if (auto send = dyn_cast<SendOp>(op)) {
        auto tag = static_cast<int64_t>(send.getTag());
        sends[tag].push_back({tag, self(op), other(op, send.getPeer()), op,
                              static_cast<int64_t>(send.getBytes())});
      } else if (auto recv = dyn_cast<RecvOp>(op)) {
        auto tag = static_cast<int64_t>(recv.getTag());
        recvs[tag].push_back({tag, other(op, recv.getPeer()), self(op), op,
                              static_cast<int64_t>(recv.getBytes())});
      }
    });
    bool ok = true;
    auto report = [&](Operation *op) {
      ok = false;
      return op->emitOpError();
    };
    for (auto &[tag, list] : sends) {
      for (size_t i = 0; i < list.size(); ++i) {
        const Transfer &send = list[i];
        bool duplicate = false;
        for (size_t j = 0; j < i; ++j)
          duplicate |= list[j].from == send.from && list[j].to == send.to;
        if (duplicate) {
          report(send.op) << "reuses tag " << tag << " from " << send.from
                          << " to " << send.to;
          continue;
        }
        SmallVector<const Transfer *> matches;
        for (const Transfer &recv : recvs[tag])
          if (recv.from == send.from && recv.to == send.to)
            matches.push_back(&recv);
        if (matches.empty()) {
          if (!recvs[tag].empty() && list.size() == 1 &&
              recvs[tag].size() == 1) {
            const Transfer &recv = recvs[tag].front();
            report(recv.op)
                << "and its send (tag " << tag
                << ") disagree on ends: send from " << send.from << " to "
                << send.to << ", recv from " << recv.from << " on " << recv.to;
          } else {
            report(send.op) << "with tag " << tag << " from " << send.from
                            << " to " << send.to << " has no matching recv";
          }
          continue;
        }
        if (matches.size() > 1) {
          report(matches[1]->op)
              << "is a second recv for tag " << tag << " (one per send)";
          continue;
        }
        if (matches.front()->bytes != send.bytes)
          report(matches.front()->op)
              << "receives " << matches.front()->bytes
              << " bytes but its send (tag " << tag << ") sends " << send.bytes;
      }
    }
    for (auto &[tag, list] : recvs)
      for (const Transfer &recv : list) {
        bool matched = false;
        for (const Transfer &send : sends[tag])
          matched |= send.from == recv.from && send.to == recv.to;
        if (!matched && sends[tag].empty())
          report(recv.op) << "with tag " << tag << " has no send";
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
