//===- Plan.h - plan.pb export and import -------------------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_TARGET_PLAN_PLAN_H
#define DTFM_TARGET_PLAN_PLAN_H

#include "dtfm/Planner/Cluster.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>

namespace dtfm::proto {
class Plan;
} // namespace dtfm::proto

namespace mlir::dtfm {

/// Fills `plan` from a module of device programs (after
/// --dtfm-emit-stage-programs) planned for `cluster`. Fails with a
/// diagnostic when the module is not such a module or names another cluster.
LogicalResult exportPlan(ModuleOp module,
                         const ::dtfm::planner::Cluster &cluster,
                         ::dtfm::proto::Plan &plan);

/// Checks, when `cluster` is given, that `plan` was made for that cluster
/// (its format version is checked when it is read: dtfm/Format/PlanFile.h).
/// On failure returns false with a one-line `error`.
bool checkPlan(const ::dtfm::proto::Plan &plan,
               const ::dtfm::planner::Cluster *cluster, std::string &error);

/// Rebuilds the module of device programs from `plan` (after checkPlan).
/// Fails (diagnostic) on malformed contents.
OwningOpRef<ModuleOp> importPlan(MLIRContext *context,
                                 const ::dtfm::proto::Plan &plan);

} // namespace mlir::dtfm

#endif // DTFM_TARGET_PLAN_PLAN_H
