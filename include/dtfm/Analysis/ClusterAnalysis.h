//===- ClusterAnalysis.h - The cluster a module is planned for --*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The planning passes read the cluster from the module's `dtfm.cluster`
// attribute (set once by --dtfm-import-cluster) instead of re-opening the
// cluster file.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_ANALYSIS_CLUSTERANALYSIS_H
#define DTFM_ANALYSIS_CLUSTERANALYSIS_H

#include "dtfm/Dialect/Dtfm/IR/DtfmAttrs.h"
#include "dtfm/Planner/Cluster.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace mlir::dtfm {

/// The one-line error of a module without `dtfm.cluster`.
inline constexpr llvm::StringLiteral kNoClusterMessage =
    "no cluster in the module: run --dtfm-import-cluster=file=FILE first (or "
    "--dtfm-plan=cluster=FILE)";

/// The module's `dtfm.cluster`, or null.
ClusterAttr getModuleCluster(ModuleOp module);

/// The cluster the module is planned for (its `dtfm.cluster`). Fails with
/// `error` set to kNoClusterMessage when the module has none.
FailureOr<::dtfm::planner::Cluster> moduleCluster(ModuleOp module,
                                                  std::string &error);

/// The cluster the planning passes plan on: the module's cluster, or with
/// a model sharded for tensor parallelism its groups
/// (tensorParallelGroupsOf) as single devices (planner::groupCluster),
/// named by their first member. --dtfm-emit-stage-programs gives each member its
/// program.
FailureOr<::dtfm::planner::Cluster> planningCluster(ModuleOp module,
                                                    std::string &error);

/// The module's tensor-parallel degree (1 when not sharded, 0 when its
/// stages have degrees of their own).
int64_t tensorParallelDegree(ModuleOp module);

/// The tensor-parallel groups of `cluster` the module is planned on, as
/// indices: its `dtfm.tp_groups` (a degree per stage), else the cluster's
/// nodes cut into groups of the module's degree (none for degree 1). Fails
/// with a one-line `error` on groups that name a device twice, one the
/// cluster lacks, or devices of different nodes.
LogicalResult tensorParallelGroupsOf(ModuleOp module,
                                     const ::dtfm::planner::Cluster &cluster,
                                     std::vector<std::vector<int>> &groups,
                                     std::string &error);

/// Reads the cluster file at `path` and sets it on `module` as
/// `dtfm.cluster` (with `path` as its source). On failure returns failure
/// with the loader's one-line `error` (naming the file).
LogicalResult importCluster(ModuleOp module, llvm::StringRef path,
                            std::string &error);

} // namespace mlir::dtfm

#endif // DTFM_ANALYSIS_CLUSTERANALYSIS_H
