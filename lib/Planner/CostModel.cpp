//===- CostModel.cpp - DT-FM's communication cost of a layout -------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/CostModel.h"
#include "dtfm/Planner/Matching.h"
#include "dtfm/Planner/Tsp.h"

#include <algorithm>

using namespace dtfm::planner;

CostModel::CostModel(const Cluster &cluster, CommVolume volume,
                     int dataParallelDegree)
    : cluster(cluster), volume(volume), dDP(dataParallelDegree),
      dpLink(cluster.size()), ppLink(cluster.size()) {
  double shard = volume.dataParallelBytes / std::max(1, dDP);
  for (size_t a = 0; a < cluster.size(); ++a)
    for (size_t b = 0; b < cluster.size(); ++b) {
      if (a == b)
        continue;
      dpLink(a, b) = 2.0 * cluster.transferSeconds(a, b, shard);
      ppLink(a, b) = cluster.transferSeconds(a, b, volume.pipelineBytes);
    }
}

namespace {
/// DATAP-COST over `link` (the two-way exchange cost of a device pair).
template <typename LinkCost>
double parameterServerCost(const std::vector<int> &group, LinkCost link) {
  double worst = 0;
  for (int d : group) {
    double sum = 0;
    for (int other : group)
      if (other != d)
        sum += link(d, other);
    worst = std::max(worst, sum);
  }
  return worst;
}

template <typename LinkCost>
double ringCost(const std::vector<int> &group, LinkCost link) {
  size_t n = group.size();
  if (n < 2)
    return 0;
  double slowest = 0;
  for (size_t i = 0; i < n; ++i)
    slowest = std::max(slowest, link(group[i], group[(i + 1) % n]) / 2);
  return ringAllReduceSeconds(n, slowest);
}

} // namespace

double CostModel::groupDataParallelCost(const std::vector<int> &group) const {
  return parameterServerCost(
      group, [this](int a, int b) { return dataParallelLinkCost(a, b); });
}

double CostModel::groupRingAllReduceCost(const std::vector<int> &group) const {
  return ringCost(group,
                  [this](int a, int b) { return dataParallelLinkCost(a, b); });
}

GroupLinks::GroupLinks(const Cluster &cluster, const std::vector<int> &group)
    : cluster(&cluster), group(group) {
  size_t n = group.size();
  if (n < 2)
    return;
  for (size_t i = 0; i < n; ++i)
    hops.push_back({cluster.latencySeconds(group[i], group[(i + 1) % n]),
                    cluster.bandwidthGbps(group[i], group[(i + 1) % n])});
}

double GroupLinks::dataParallelCost(double bytes,
                                    int dataParallelDegree) const {
  size_t n = group.size();
  if (spokes.empty() && n > 0) { // on first use: the ring needs none
    spokes.resize(n);
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < n; ++j)
        if (i != j) {
          spokes[i].latencySeconds +=
              cluster->latencySeconds(group[i], group[j]);
          spokes[i].secondsPerByte += serialisationSeconds(
              1.0, cluster->bandwidthGbps(group[i], group[j]));
        }
    // Only the spokes no other beats in both latency and seconds per byte
    // can be the slowest (rounding is monotonic: the maximum is the same).
    std::sort(spokes.begin(), spokes.end(), [](const Spoke &a, const Spoke &b) {
      return a.latencySeconds != b.latencySeconds
                 ? a.latencySeconds > b.latencySeconds
                 : a.secondsPerByte > b.secondsPerByte;
    });
    std::vector<Spoke> front;
    for (const Spoke &spoke : spokes)
      if (front.empty() || spoke.secondsPerByte > front.back().secondsPerByte)
        front.push_back(spoke);
    spokes = std::move(front);
  }
  // DATAP-COST: the member whose two-way exchanges with all others take
  // longest.
  double shard = bytes / std::max(1, dataParallelDegree), worst = 0;
  for (const Spoke &spoke : spokes)
    worst = std::max(
        worst, 2.0 * (spoke.latencySeconds + shard * spoke.secondsPerByte));
  return worst;
}

double GroupLinks::slowestHop(double bytes) const {
  double slowest = 0;
  for (const Hop &hop : hops)
    slowest = std::max(
        slowest, linkSeconds(hop.latencySeconds, hop.bandwidthGbps, bytes));
  return slowest;
}

double GroupLinks::ringAllReduceCost(double bytes,
                                     int dataParallelDegree) const {
  if (hops.empty())
    return 0;
  return ringAllReduceSeconds(
      hops.size(), slowestHop(bytes / std::max(1, dataParallelDegree)));
}

double GroupLinks::ringAllGatherCost(double bytesPerMember) const {
  if (hops.empty())
    return 0;
  return static_cast<double>(hops.size() - 1) * slowestHop(bytesPerMember);
}

double dtfm::planner::groupDataParallelCost(const Cluster &cluster,
                                            const std::vector<int> &group,
                                            double bytes,
                                            int dataParallelDegree) {
  return GroupLinks(cluster, group).dataParallelCost(bytes, dataParallelDegree);
}

double dtfm::planner::groupRingAllReduceCost(const Cluster &cluster,
                                             const std::vector<int> &group,
                                             double bytes,
                                             int dataParallelDegree) {
  return GroupLinks(cluster, group)
      .ringAllReduceCost(bytes, dataParallelDegree);
}

double dtfm::planner::groupSyncCost(const Cluster &cluster,
                                    const std::vector<int> &group,
                                    double bytes, int dataParallelDegree,
                                    bool ring) {
  return GroupLinks(cluster, group).syncCost(bytes, dataParallelDegree, ring);
}

double dtfm::planner::groupRingAllGatherCost(const Cluster &cluster,
                                             const std::vector<int> &group,
                                             double bytesPerMember) {
  return GroupLinks(cluster, group).ringAllGatherCost(bytesPerMember);
}

/// The bottleneck matching of groups `a` and `b` (equal sizes) on
/// `linkCost(a_i, b_j)`.
template <typename LinkCost>
static double matchGroups(const std::vector<int> &a, const std::vector<int> &b,
                          LinkCost linkCost, std::vector<int> *match,
                          int *matchableBelow) {
  int n = static_cast<int>(a.size());
  std::vector<double> cost(n * n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      cost[i * n + j] = linkCost(a[i], b[j]);
  return bottleneckPerfectMatching(cost, n, match, matchableBelow);
}

double CostModel::groupPipelineWeight(const std::vector<int> &a,
                                      const std::vector<int> &b,
                                      std::vector<int> *match,
                                      int *matchableBelow) const {
  return matchGroups(
      a, b, [this](int x, int y) { return pipelineLinkCost(x, y); }, match,
      matchableBelow);
}

double dtfm::planner::groupPipelineWeight(const Cluster &cluster,
                                          const std::vector<int> &a,
                                          const std::vector<int> &b,
                                          double bytes,
                                          std::vector<int> *match) {
  return matchGroups(
      a, b,
      [&](int x, int y) {
        return x == y ? 0.0 : cluster.transferSeconds(x, y, bytes);
      },
      match, nullptr);
}

/// Coarsened graph: weights between every pair of groups.
static std::vector<double> coarsen(const CostModel &model,
                                   const Partition &partition) {
  int groups = static_cast<int>(partition.size());
  std::vector<double> weight(groups * groups, 0);
  for (int i = 0; i < groups; ++i)
    for (int j = i + 1; j < groups; ++j)
      weight[i * groups + j] = weight[j * groups + i] =
          model.groupPipelineWeight(partition[i], partition[j]);
  return weight;
}

double CostModel::totalCost(const Partition &partition) const {
  double dp = 0;
  for (const std::vector<int> &group : partition)
    dp = std::max(dp, groupDataParallelCost(group));
  int groups = static_cast<int>(partition.size());
  return dp + 2.0 * openLoopTsp(coarsen(*this, partition), groups);
}

LayoutCost CostModel::evaluate(const Partition &partition) const {
  LayoutCost result;
  for (const std::vector<int> &group : partition)
    result.dataParallel =
        std::max(result.dataParallel, groupDataParallelCost(group));
  int groups = static_cast<int>(partition.size());
  result.pipeline =
      2.0 * openLoopTsp(coarsen(*this, partition), groups, &result.order);
  // A path and its reverse cost the same; start from the lower group index
  // so that equal layouts print alike.
  if (!result.order.empty() && result.order.front() > result.order.back())
    std::reverse(result.order.begin(), result.order.end());
  for (size_t k = 0; k + 1 < result.order.size(); ++k) {
    std::vector<int> match;
    groupPipelineWeight(partition[result.order[k]],
                        partition[result.order[k + 1]], &match);
    result.matchings.push_back(std::move(match));
  }
  return result;
}
