//===- ClusterAnalysis.cpp - The cluster a module is planned for ----------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Analysis/ClusterAnalysis.h"
#include "dtfm/Dialect/Dtfm/IR/DtfmDialect.h"

#include <map>

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

LogicalResult mlir::dtfm::tensorParallelGroupsOf(
    ModuleOp module, const ::dtfm::planner::Cluster &cluster,
    std::vector<std::vector<int>> &groups, std::string &error) {
  groups.clear();
  auto recorded = module->getAttrOfType<ArrayAttr>(kTpGroupsAttrName);
  if (!recorded) {
    int64_t degree = tensorParallelDegree(module);
    if (degree == 1)
      return success();
    if (degree < 1 || degree > static_cast<int64_t>(cluster.size()) ||
        !::dtfm::planner::tensorParallelGroups(
            cluster, static_cast<int>(degree), groups, error)) {
      if (error.empty())
        error = degree == 0
                    ? "the model has a tensor-parallel degree per stage but "
                      "no dtfm.tp_groups to say whose"
                    : "tensor-parallel degree " + std::to_string(degree) +
                          " for a cluster of " +
                          std::to_string(cluster.size()) + " devices";
      return failure();
    }
    return success();
  }
  std::map<std::string, int> indexOf;
  for (size_t i = 0; i < cluster.size(); ++i)
    indexOf[cluster.devices[i].name] = static_cast<int>(i);
  std::vector<bool> taken(cluster.size(), false);
  for (Attribute entry : recorded) {
    groups.emplace_back();
    for (Attribute member : cast<ArrayAttr>(entry)) {
      std::string name = cast<StringAttr>(member).str();
      auto it = indexOf.find(name);
      if (it == indexOf.end() || taken[it->second]) {
        error = "dtfm.tp_groups names device '" + name + "'" +
                (it == indexOf.end() ? ", which cluster '" + cluster.name +
                                           "' lacks"
                                     : std::string(" twice"));
        return failure();
      }
      taken[it->second] = true;
      const std::string &node = cluster.devices[it->second].node;
      const std::string &first = cluster.devices[groups.back().empty()
                                                     ? it->second
                                                     : groups.back().front()]
                                     .node;
      if (node != first || (node.empty() && !groups.back().empty())) {
        error = "dtfm.tp_groups: device '" + name +
                "' is not on the node of its group's first member "
                "(tensor parallelism stays inside a node)";
        return failure();
      }
      groups.back().push_back(it->second);
    }
  }
  return success();
}

FailureOr<::dtfm::planner::Cluster>
mlir::dtfm::planningCluster(ModuleOp module, std::string &error) {
  FailureOr<::dtfm::planner::Cluster> cluster = moduleCluster(module, error);
  if (failed(cluster))
    return cluster;
  std::vector<std::vector<int>> groups;
  if (failed(tensorParallelGroupsOf(module, *cluster, groups, error)))
    return failure();
  if (groups.empty())
    return cluster;
  // Devices in no group plan as themselves.
  std::vector<bool> grouped(cluster->size(), false);
  for (const std::vector<int> &group : groups)
    for (int member : group)
      grouped[member] = true;
  if (module->hasAttr(kTpGroupsAttrName))
    for (size_t i = 0; i < cluster->size(); ++i)
      if (!grouped[i])
        groups.push_back({static_cast<int>(i)});
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
