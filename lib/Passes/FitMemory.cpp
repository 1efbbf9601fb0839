//===- FitMemory.cpp - Recompute where a program would not fit ------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The planner sizes stages with its own estimate of memory; the runtime's
// exact figure exists only once the device programs do. This pass takes
// it (Runtime/MemoryModel.h on the exported plan), turns activation
// recomputation on for each program over its device's capacity, and
// refuses the plan when one still is.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Passes/Passes.h"
#include "dtfm/Runtime/MemoryModel.h"
#include "dtfm/Target/Plan/Plan.h"

#include "plan.pb.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <cstdio>

namespace mlir::dtfm {
#define GEN_PASS_DEF_FITMEMORY
#include "dtfm/Passes/Passes.h.inc"
} // namespace mlir::dtfm

using namespace mlir;
using namespace mlir::dtfm;

namespace {

struct FitMemory : public mlir::dtfm::impl::FitMemoryBase<FitMemory> {
  using FitMemoryBase::FitMemoryBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fail = [&](const Twine &message) {
      mlir::emitError(clusterLoc(module)) << "dtfm-fit-memory: " << message;
      signalPassFailure();
    };
    if (recompute != "auto" && recompute != "all" && recompute != "none")
      return fail("recompute must be auto, all or none, got '" +
                  recompute.getValue() + "'");
    std::string error;
    FailureOr<::dtfm::planner::Cluster> cluster = moduleCluster(module, error);
    if (failed(cluster))
      return fail(error);
    std::vector<::dtfm::runtime::DeviceMemory> memory;
    if (failed(predict(module, *cluster, memory)))
      return signalPassFailure();

    llvm::StringMap<func::FuncOp> programOf;
    module.walk([&](func::FuncOp func) {
      if (auto device = func->getAttrOfType<StringAttr>(kDeviceAttrName))
        programOf[device.getValue()] = func;
    });
    Builder b(module.getContext());
    bool changed = false;
    if (recompute != "none")
      for (const ::dtfm::runtime::DeviceMemory &m : memory) {
        func::FuncOp func = programOf.lookup(m.device);
        if (m.fits() || !func || recomputes(func))
          continue;
        func->setAttr(kRecomputeAttrName, b.getBoolAttr(true));
        changed = true;
      }
    if (changed && failed(predict(module, *cluster, memory)))
      return signalPassFailure();
    // The plan records each program's peak (and carries it into plan.pb's
    // program attributes).
    for (const ::dtfm::runtime::DeviceMemory &m : memory)
      if (func::FuncOp func = programOf.lookup(m.device))
        func->setAttr(kPeakMemoryAttrName,
                      b.getI64IntegerAttr(
                          static_cast<int64_t>(m.predicted.total())));
    for (const ::dtfm::runtime::DeviceMemory &m : memory) {
      if (m.fits())
        continue;
      func::FuncOp func = programOf.lookup(m.device);
      return fail("device " + m.device + " needs " +
                  gigabytes(m.predicted.total()) +
                  (func && recomputes(func) ? " with its activations recomputed"
                                            : "") +
                  " and has " + gigabytes(m.capacityBytes) +
                  ": the plan does not fit (more stages, more devices or "
                  "smaller micro-batches)");
    }
    markAllAnalysesPreserved();
  }

  static std::string gigabytes(double bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.4g GB", bytes / 1e9);
    return text;
  }

  static bool recomputes(func::FuncOp func) {
    auto flag = func->getAttrOfType<BoolAttr>(kRecomputeAttrName);
    return flag && flag.getValue();
  }

  /// Each device program's predicted peak, from the module as exported.
  LogicalResult predict(ModuleOp module, const ::dtfm::planner::Cluster &cluster,
                        std::vector<::dtfm::runtime::DeviceMemory> &memory) {
    ::dtfm::proto::Plan plan;
    if (failed(exportPlan(module, cluster, plan)))
      return failure();
    std::string error;
    if (!::dtfm::runtime::planMemory(plan, memory, error)) {
      mlir::emitError(clusterLoc(module)) << "dtfm-fit-memory: " << error;
      return failure();
    }
    return success();
  }
};

} // namespace
