//===- VerifyPlan.cpp - Checks of a planned module ------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Passes/Passes.h"

#include <map>

namespace mlir::dtfm {
#define GEN_PASS_DEF_VERIFYPLAN
#include "dtfm/Passes/Passes.h.inc"
} // namespace mlir::dtfm

using namespace mlir;
using namespace mlir::dtfm;

namespace {
struct VerifyPlan : public mlir::dtfm::impl::VerifyPlanBase<VerifyPlan> {
  using VerifyPlanBase::VerifyPlanBase;

  static int64_t stageOf(Operation *op) {
    auto stage = op->getAttrOfType<IntegerAttr>("dtfm.stage");
    return stage ? stage.getInt() : -1;
  }

  void runOnOperation() override {
    std::map<int64_t, SmallVector<SendOp>> sends;
    std::map<int64_t, SmallVector<RecvOp>> recvs;
    getOperation().walk([&](Operation *op) {
      if (auto send = dyn_cast<SendOp>(op))
        sends[send.getTag()].push_back(send);
      else if (auto recv = dyn_cast<RecvOp>(op))
        recvs[recv.getTag()].push_back(recv);
    });
    bool ok = true;
    for (auto &[tag, list] : sends) {
      if (list.size() > 1) {
        list[1].emitOpError() << "reuses tag " << tag;
        ok = false;
        continue;
      }
      SendOp send = list.front();
      auto it = recvs.find(tag);
      if (it == recvs.end()) {
        send.emitOpError() << "with tag " << tag << " has no matching recv";
        ok = false;
        continue;
      }
      if (it->second.size() > 1) {
        it->second[1].emitOpError()
            << "is a second recv for tag " << tag << " (one per send)";
        ok = false;
        continue;
      }
      RecvOp recv = it->second.front();
      if (recv.getBytes() != send.getBytes()) {
        recv.emitOpError() << "receives " << recv.getBytes()
                           << " bytes but its send (tag " << tag
                           << ") sends " << send.getBytes();
        ok = false;
      }
      if (recv.getPeer() != stageOf(send) || send.getPeer() != stageOf(recv)) {
        recv.emitOpError() << "and its send (tag " << tag
                           << ") disagree on stages: send on "
                           << stageOf(send) << " to " << send.getPeer()
                           << ", recv on " << stageOf(recv) << " from "
                           << recv.getPeer();
        ok = false;
      }
    }
    for (auto &[tag, list] : recvs)
      if (!sends.count(tag)) {
        list.front().emitOpError() << "with tag " << tag << " has no send";
        ok = false;
      }
    if (!ok)
      return signalPassFailure();
    markAllAnalysesPreserved();
  }
};
} // namespace
