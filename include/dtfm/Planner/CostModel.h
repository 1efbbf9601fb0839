//===- CostModel.h - DT-FM's communication cost of a layout ------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// DT-FM (Yuan et al., NeurIPS 2022, section 3) assigns N = D_DP x D_PP devices
// to D_PP data-parallel groups C_1..C_{D_PP}; group C_j holds one pipeline
// stage, each of its D_DP devices one micro-batch group.
//
//   DATAP-COST(C_j) = max_{d in C_j} sum_{d' in C_j - {d}}
//                         2 (alpha_{d,d'} + c_DP / (D_DP beta_{d,d'}))
//   DATAP-COST      = max_j DATAP-COST(C_j)        (sharded parameter server)
//   w(C_j, C_j')    = min over perfect matchings M of
//                         max_{(d,d') in M} (alpha_{d,d'} + c_PP / beta_{d,d'})
//   PIPELINEP-COST  = 2 * OPEN-LOOP-TSP(w)  (activations forward and their
//                                            gradients backward)
//   cost            = DATAP-COST + PIPELINEP-COST
//
// The factor 2 of the paper's eq. 3 is applied to the TSP length, exactly as
// the paper's reference scheduler does.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLANNER_COSTMODEL_H
#define DTFM_PLANNER_COSTMODEL_H

#include "dtfm/Planner/Cluster.h"

#include <vector>

namespace dtfm::planner {

/// Bytes each device exchanges: c_DP (gradients of one stage's parameters)
/// and c_PP (activations of one micro-batch group at a stage boundary).
struct CommVolume {
  double dataParallelBytes = 0;
  double pipelineBytes = 0;
};

/// D_PP groups of D_DP device indices each; groups[j] runs stage j before the
/// pipeline order is chosen.
using Partition = std::vector<std::vector<int>>;

/// Everything the cost model says about a partition.
struct LayoutCost {
  double dataParallel = 0; ///< DATAP-COST, seconds
  double pipeline = 0;     ///< PIPELINEP-COST = 2 * TSP, seconds
  double total() const { return dataParallel + pipeline; }
  /// Group indices in pipeline order (stage 0 first).
  std::vector<int> order;
  /// matchings[k][i] = position in group order[k+1] of the device that takes
  /// micro-batch group i from position i of group order[k].
  std::vector<std::vector<int>> matchings;
};

/// Evaluates partitions of one cluster for one workload; caches nothing
/// between calls, so it is safe to share between threads.
class CostModel {
public:
  /// Precomputes both link costs for every device pair (searches evaluate
  /// them millions of times).
  CostModel(const Cluster &cluster, CommVolume volume, int dataParallelDegree);

  const Cluster &getCluster() const { return cluster; }
  CommVolume getVolume() const { return volume; }

  /// Seconds for one data-parallel exchange between two devices:
  /// 2 (alpha + c_DP / (D_DP beta)).
  double dataParallelLinkCost(int a, int b) const { return dpLink(a, b); }
  /// Seconds for one pipeline transfer between two devices:
  /// alpha + c_PP / beta.
  double pipelineLinkCost(int a, int b) const { return ppLink(a, b); }

  /// DATAP-COST of one group (DT-FM's sharded parameter server).
  double groupDataParallelCost(const std::vector<int> &group) const;
  /// Ring all-reduce of c_DP over `group` in the given cyclic order:
  /// 2 (D - 1) steps, each as slow as the slowest ring link moving c_DP / D:
  /// 2 (D - 1) max_i (alpha_i + c_DP / (D beta_i)). Equal to the parameter
  /// server (whose worst device sums D - 1 of the same terms) on uniform
  /// links; cheaper only when the ring's order avoids the group's slowest
  /// pairs, which the parameter server's worst device always pays.
  double groupRingAllReduceCost(const std::vector<int> &group) const;
  /// Bottleneck matching weight between two groups; fills `match` when given.
  /// `matchableBelow` as in bottleneckPerfectMatching.
  double groupPipelineWeight(const std::vector<int> &a,
                             const std::vector<int> &b,
                             std::vector<int> *match = nullptr,
                             int *matchableBelow = nullptr) const;

  /// Full cost, including the best pipeline order and matchings.
  LayoutCost evaluate(const Partition &partition) const;
  /// Only the total (no order or matchings kept).
  double totalCost(const Partition &partition) const;

private:
  const Cluster &cluster;
  CommVolume volume;
  int dDP;
  SquareMatrix dpLink, ppLink;
};

/// A ring all-reduce over `members` (a reduce-scatter then an allgather,
/// n - 1 steps each) whose slowest hop takes `slowestHopSeconds` for one
/// chunk: the one ring formula of the cost model, GroupLinks and grouped
/// devices (groupCluster).
inline double ringAllReduceSeconds(size_t members, double slowestHopSeconds) {
  return 2.0 * static_cast<double>(members - 1) * slowestHopSeconds;
}

/// One group's links, gathered once for the exchange costs of any size:
/// per member the sums of its latencies and seconds per byte to the others
/// (the parameter server's), and the ring's hops. Each cost is then linear
/// in the group's size instead of quadratic: the hetero model costs every
/// stage's exchanges (its buckets, each compression) through one.
class GroupLinks {
public:
  GroupLinks(const Cluster &cluster, const std::vector<int> &group);

  /// `bytes` of gradients shared over `dataParallelDegree` devices, as
  /// CostModel's two costs: the parameter server's exchange and the ring
  /// all-reduce.
  double dataParallelCost(double bytes, int dataParallelDegree) const;
  double ringAllReduceCost(double bytes, int dataParallelDegree) const;
  double syncCost(double bytes, int dataParallelDegree, bool ring) const {
    return ring ? ringAllReduceCost(bytes, dataParallelDegree)
                : dataParallelCost(bytes, dataParallelDegree);
  }
  /// groupRingAllGatherCost's.
  double ringAllGatherCost(double bytesPerMember) const;

private:
  /// The slowest hop of the ring carrying `bytes`.
  double slowestHop(double bytes) const;

  const Cluster *cluster;
  std::vector<int> group;
  struct Spoke {
    double latencySeconds = 0, secondsPerByte = 0;
  };
  /// Per member: sums over the others (filled on first use).
  mutable std::vector<Spoke> spokes;
  struct Hop {
    double latencySeconds = 0, bandwidthGbps = 0;
  };
  std::vector<Hop> hops; ///< member i to member i + 1 (mod n)
};

/// The same two costs for one group and `bytes` of gradients shared over
/// `dataParallelDegree` devices, from the cluster's links directly
/// (GroupLinks): for a group costed once, where precomputing every device
/// pair would cost more than the group itself.
double groupDataParallelCost(const Cluster &cluster,
                             const std::vector<int> &group, double bytes,
                             int dataParallelDegree);
double groupRingAllReduceCost(const Cluster &cluster,
                              const std::vector<int> &group, double bytes,
                              int dataParallelDegree);
/// One of the two: the ring's or the parameter server's.
double groupSyncCost(const Cluster &cluster, const std::vector<int> &group,
                     double bytes, int dataParallelDegree, bool ring);
/// A ring allgather of `bytesPerMember` from every member of `group`: n - 1
/// hops, each the slowest link of the ring carrying one member's bytes
/// (top-k exchanges, whose sparse messages cannot be summed on the way).
double groupRingAllGatherCost(const Cluster &cluster,
                              const std::vector<int> &group,
                              double bytesPerMember);

/// CostModel::groupPipelineWeight of groups `a` and `b` for `bytes` per
/// pipeline link, without precomputing every device pair: for layouts
/// scored a few times each (HeteroModel).
double groupPipelineWeight(const Cluster &cluster, const std::vector<int> &a,
                           const std::vector<int> &b, double bytes,
                           std::vector<int> *match = nullptr);

} // namespace dtfm::planner

#endif // DTFM_PLANNER_COSTMODEL_H
