//===- Louvain.h - Community detection on a weighted graph -------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Louvain modularity maximisation (Blondel et al. 2008), used by OP-Fence
// (FusionLLM) to cluster devices by link bandwidth: devices joined by fast
// links end up in one community, so that slow links separate communities.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLANNER_LOUVAIN_H
#define DTFM_PLANNER_LOUVAIN_H

#include "dtfm/Planner/Cluster.h"

#include <vector>

namespace dtfm::planner {

/// Modularity of `community` (one label per node) on the symmetric weights
/// (row-major n x n, diagonal = self-loop weight).
double modularity(const std::vector<double> &weight, int n,
                  const std::vector<int> &community);

/// Louvain: local moving of single nodes to the neighbouring community with
/// the best modularity gain (nodes visited in index order, ties to the lower
/// community label, so the result is deterministic), then aggregation of
/// communities into nodes, until nothing moves. Returns labels 0..k-1
/// numbered by first appearance.
std::vector<int> louvain(const std::vector<double> &weight, int n);

/// Communities of a cluster's devices with bandwidth as edge weight.
std::vector<int> clusterDevicesByBandwidth(const Cluster &cluster);

} // namespace dtfm::planner

#endif // DTFM_PLANNER_LOUVAIN_H
