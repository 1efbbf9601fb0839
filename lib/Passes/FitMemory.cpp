//===- FitMemory.cpp - Recompute where a program would not fit ------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The planner sizes stages with its own estimate of memory; the runtime's
// exact figure exists only once the device programs do. This pass takes
// it (Plan/MemoryModel.h on the exported plan), shards the optimizer
// state of each data-parallel group with a program over its device's
// capacity (free in time), then turns activation recomputation on for each
// program still over (extra forward FLOPs), and refuses the plan when one
// still is.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Dialect/Dtfm/IR/DevicePrograms.h"
#include "dtfm/Passes/Passes.h"
#include "dtfm/Plan/MemoryModel.h"
#include "dtfm/Planner/StagePartition.h"
#include "dtfm/Target/Plan/Plan.h"

#include "plan.pb.h"

#include "dtfm/Dialect/Dtfm/IR/DtfmOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <cstdio>
#include <set>

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
    using ::dtfm::planner::MemoryOption;
    std::optional<MemoryOption> again =
        ::dtfm::planner::parseMemoryOption(recompute.getValue());
    std::optional<MemoryOption> shard =
        ::dtfm::planner::parseMemoryOption(shardState.getValue());
    if (!again || !shard)
      return fail(Twine(again ? "shard-state" : "recompute") + " must be " +
                  ::dtfm::planner::kMemoryOptionChoices + ", got '" +
                  (again ? shardState : recompute).getValue() + "'");
    std::string error;
    FailureOr<::dtfm::planner::Cluster> cluster = moduleCluster(module, error);
    if (failed(cluster))
      return fail(error);
    std::vector<::dtfm::plan::DeviceMemory> memory;
    if (failed(predict(module, *cluster, memory)))
      return signalPassFailure();

    llvm::StringMap<func::FuncOp> programOf;
    module.walk([&](func::FuncOp func) {
      if (auto device = func->getAttrOfType<StringAttr>(kDeviceAttrName))
        programOf[device.getValue()] = func;
    });
    Builder b(module.getContext());
    // Sharded state first: the same bytes on the links, no extra work.
    bool changed = false;
    if (*shard != MemoryOption::Never) {
      std::set<std::string> groups; // devices of the groups to shard
      for (const ::dtfm::plan::DeviceMemory &m : memory) {
        func::FuncOp func = programOf.lookup(m.device);
        if (func && (*shard == MemoryOption::Always || !m.fits()))
          for (GradSyncOp sync : shardableSyncs(func))
            for (Attribute device : sync.getGroup())
              groups.insert(cast<StringAttr>(device).getValue().str());
      }
      for (const std::string &device : groups)
        if (func::FuncOp func = programOf.lookup(device))
          for (GradSyncOp sync : shardableSyncs(func))
            if (!sync->hasAttr(kShardStateAttrName)) {
              sync->setAttr(kShardStateAttrName, b.getUnitAttr());
              changed = true;
            }
    }
    if (changed && failed(predict(module, *cluster, memory)))
      return signalPassFailure();
    changed = false;
    if (*again != MemoryOption::Never)
      for (const ::dtfm::plan::DeviceMemory &m : memory) {
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
    for (const ::dtfm::plan::DeviceMemory &m : memory)
      if (func::FuncOp func = programOf.lookup(m.device))
        func->setAttr(kPeakMemoryAttrName,
                      b.getI64IntegerAttr(
                          static_cast<int64_t>(m.predicted.total())));
    for (const ::dtfm::plan::DeviceMemory &m : memory) {
      if (m.fits())
        continue;
      func::FuncOp func = programOf.lookup(m.device);
      std::vector<std::string> options;
      if (func && sharded(func))
        options.push_back("its optimizer state sharded");
      if (func && recomputes(func))
        options.push_back("its activations recomputed");
      std::string with;
      for (size_t i = 0; i < options.size(); ++i)
        with += (i == 0 ? " with " : " and ") + options[i];
      return fail("device " + m.device + " needs " +
                  gigabytes(m.predicted.total()) + with +
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

  /// The program's gradient syncs whose state can be sharded: over a group
  /// of two or more, synchronous and uncompressed.
  static SmallVector<GradSyncOp> shardableSyncs(func::FuncOp func) {
    SmallVector<GradSyncOp> syncs;
    // A replica's syncs are its template's (the group's members share it).
    func = programBody(func);
    if (!func)
      return syncs;
    func.walk([&](GradSyncOp sync) {
      if (sync.getGroup().size() >= 2 &&
          !sync->hasAttr(kCompressionAttrName) &&
          !sync->hasAttr(kSyncEveryAttrName))
        syncs.push_back(sync);
    });
    return syncs;
  }

  static bool sharded(func::FuncOp func) {
    bool any = false;
    func = programBody(func);
    if (!func)
      return false;
    func.walk([&](GradSyncOp sync) {
      any |= sync->hasAttr(kShardStateAttrName);
    });
    return any;
  }

  static bool recomputes(func::FuncOp func) {
    auto flag = func->getAttrOfType<BoolAttr>(kRecomputeAttrName);
    return flag && flag.getValue();
  }

  /// Each device program's predicted peak, from the module as exported.
  LogicalResult predict(ModuleOp module,
                        const ::dtfm::planner::Cluster &cluster,
                        std::vector<::dtfm::plan::DeviceMemory> &memory) {
    ::dtfm::proto::Plan plan;
    if (failed(exportPlan(module, cluster, plan)))
      return failure();
    std::string error;
    if (!::dtfm::plan::planMemory(plan, memory, error)) {
      mlir::emitError(clusterLoc(module)) << "dtfm-fit-memory: " << error;
      return failure();
    }
    return success();
  }
};

} // namespace
