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

LogicalResult mlir::dtfm::importCluster(ModuleOp module, StringRef path,
                                        std::string &error) {
  ::dtfm::planner::Cluster cluster;
  if (!::dtfm::planner::loadClusterFile(path.str(), cluster, error))
    return failure();
  module->setAttr(kClusterAttrName,
                  ClusterAttr::get(module.getContext(), cluster, path));
  return success();
}
