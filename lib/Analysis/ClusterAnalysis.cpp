//===- ClusterAnalysis.cpp - The cluster a module is planned for ----------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Analysis/ClusterAnalysis.h"
#include "dtfm/Dialect/Dtfm/IR/DtfmDialect.h"

using namespace mlir;
using namespace mlir::dtfm;

ClusterAttr mlir::dtfm::getModuleCluster(ModuleOp module) {
  return module->getAttrOfType<ClusterAttr>(kClusterAttrName);
}

FailureOr<::dtfm::planner::Cluster>
mlir::dtfm::moduleCluster(ModuleOp module, std::string &error) {
  ClusterAttr cluster = getModuleCluster(module);
  if (!cluster) {
    error = kNoClusterMessage.str();
    return failure();
  }
  return cluster.toCluster();
}

int64_t mlir::dtfm::tensorParallelDegree(ModuleOp module) {
  auto degree = module->getAttrOfType<IntegerAttr>(kTensorParallelAttrName);
  return degree ? degree.getInt() : 1;
}

FailureOr<::dtfm::planner::Cluster>
mlir::dtfm::planningCluster(ModuleOp module, std::string &error) {
  FailureOr<::dtfm::planner::Cluster> cluster = moduleCluster(module, error);
  int64_t degree = tensorParallelDegree(module);
  if (failed(cluster) || degree == 1)
    return cluster;
  std::vector<std::vector<int>> groups;
  if (degree < 1 || degree > static_cast<int64_t>(cluster->size()) ||
      !::dtfm::planner::tensorParallelGroups(*cluster, static_cast<int>(degree),
                                             groups, error)) {
    if (error.empty())
      error = "tensor-parallel degree " + std::to_string(degree) +
              " for a cluster of " + std::to_string(cluster->size()) +
              " devices";
    return failure();
  }
  return ::dtfm::planner::groupCluster(*cluster, groups);
}

LogicalResult mlir::dtfm::importCluster(ModuleOp module, StringRef path,
                                        std::string &error) {
  ::dtfm::planner::Cluster cluster;
  if (!::dtfm::planner::loadClusterFile(path.str(), cluster, error))
    return failure();
  module->setAttr(kClusterAttrName,
                  ClusterAttr::get(module.getContext(), cluster, path));
  return success();
}
