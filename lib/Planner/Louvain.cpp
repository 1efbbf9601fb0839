//===- Louvain.cpp - Community detection on a weighted graph --------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Louvain.h"

#include <map>

using namespace dtfm::planner;

double dtfm::planner::modularity(const std::vector<double> &weight, int n,
                                 const std::vector<int> &community) {
  std::vector<double> degree(n, 0);
  double total = 0; // 2m
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      degree[i] += weight[i * n + j];
      total += weight[i * n + j];
    }
  if (total <= 0)
    return 0;
  double q = 0;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (community[i] == community[j])
        q += weight[i * n + j] - degree[i] * degree[j] / total;
  return q / total;
}

/// Renumbers labels 0..k-1 by first appearance.
static std::vector<int> compact(const std::vector<int> &labels, int &count) {
  std::map<int, int> renamed;
  std::vector<int> out(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    auto it = renamed.emplace(labels[i], static_cast<int>(renamed.size()));
    out[i] = it.first->second;
  }
  count = static_cast<int>(renamed.size());
  return out;
}

std::vector<int> dtfm::planner::louvain(const std::vector<double> &weight,
                                        int n) {
  std::vector<int> membership(n); // original node -> current super node
  for (int i = 0; i < n; ++i)
    membership[i] = i;
  std::vector<double> w = weight;
  int nodes = n;
  const double eps = 1e-12;
  while (true) {
    std::vector<double> degree(nodes, 0);
    double total = 0;
    for (int i = 0; i < nodes; ++i)
      for (int j = 0; j < nodes; ++j) {
        degree[i] += w[i * nodes + j];
        total += w[i * nodes + j];
      }
    if (total <= 0)
      break;
    std::vector<int> community(nodes);
    std::vector<double> communityDegree(degree);
    for (int i = 0; i < nodes; ++i)
      community[i] = i;
    bool movedAny = false;
    for (bool moved = true; moved;) {
      moved = false;
      for (int i = 0; i < nodes; ++i) {
        // Weight from i to each community, excluding its self-loop.
        std::map<int, double> toCommunity;
        for (int j = 0; j < nodes; ++j)
          if (j != i && w[i * nodes + j] > 0)
            toCommunity[community[j]] += w[i * nodes + j];
        int own = community[i];
        communityDegree[own] -= degree[i];
        // Gain of joining c (up to a constant factor): k_i,c - K_c k_i / 2m.
        auto gain = [&](int c) {
          auto it = toCommunity.find(c);
          double link = it == toCommunity.end() ? 0 : it->second;
          return link - communityDegree[c] * degree[i] / total;
        };
        int best = own;
        double bestGain = gain(own);
        for (const auto &[c, link] : toCommunity) {
          double g = gain(c);
          if (g > bestGain + eps) {
            bestGain = g;
            best = c;
          }
        }
        communityDegree[best] += degree[i];
        if (best != own) {
          community[i] = best;
          moved = movedAny = true;
        }
      }
    }
    if (!movedAny)
      break;
    int count = 0;
    community = compact(community, count);
    for (int &m : membership)
      m = community[m];
    std::vector<double> aggregated(count * count, 0);
    for (int i = 0; i < nodes; ++i)
      for (int j = 0; j < nodes; ++j)
        aggregated[community[i] * count + community[j]] += w[i * nodes + j];
    w = std::move(aggregated);
    nodes = count;
  }
  int count = 0;
  return compact(membership, count);
}

std::vector<int> dtfm::planner::clusterDevicesByBandwidth(
    const Cluster &cluster) {
  int n = static_cast<int>(cluster.size());
  std::vector<double> weight(n * n, 0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (i != j)
        weight[i * n + j] = cluster.bandwidthGbps(i, j);
  return louvain(weight, n);
}
