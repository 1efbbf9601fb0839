//===- LowerBound.h - How fast any plan could train on a cluster -*- C++
//-*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// A lower bound on the iteration time the hetero model (Hetero.h) predicts
// for any plan of a workload on a cluster: any devices, D_DP x D_PP, layout,
// stage split, micro-batch size of the problem's, uneven replicas and memory
// options. It is the minimum over the shapes (D_DP, D_PP, m) that fit the
// cluster's memory in total of three relaxed terms, each a bound the model
// cannot go below whatever the layout:
//
//  - fill: one micro-batch of m samples through the whole model on the
//    fastest device, F_m / v_max, plus its activations forward and their
//    gradients back over D_PP - 1 boundaries. A pipeline's D_PP devices are
//    connected, so at every threshold t they lie in at least
//    ceil(D_PP / c(t)) of the components that the links cheaper than t
//    form (c(t): the largest one's size), and their chain has at least that
//    many minus one links dearer than t: summed over t, the cheapest chain
//    any layout can have (latency and seconds per byte bounded apart).
//  - steady: the other micro-batches, G/m - D_DP of them over all
//    pipelines, at the D_DP x D_PP fastest devices' total speed; or, when
//    that is smaller, n_b - 1 steps each as long as the busiest send stream
//    on the fastest link, or (1F1B) as the fill over the D_PP micro-batches
//    in flight.
//  - sync (D_DP > 1): some stage holds at least 1/D_PP of the gradients,
//    which its D_DP members exchange. The ring crosses the group's slowest
//    cut twice, so its slowest hop costs at least the threshold at which a
//    component of D_DP devices first forms; the parameter server's busiest
//    member pays at least the group's average, which counts every pair in
//    two components at t as dearer than t. Synchronous, the last
//    micro-batch's backward may hide part of it (at most one micro-batch of
//    the whole model on the slowest device); with local steps every H steps
//    1/H of it is left. Every codec the options allow is tried (int8, top-k
//    as a ring allgather), and pipeline transfers at the smallest size
//    AdaTopK or 8-bit transfers give them.
//
// Memory: each pipeline holds every parameter's state (sharded optimizer
// moments counted at 1/D_DP when allowed), so the D_DP x D_PP largest
// memories must hold D_DP copies. Activations, tied parameters, tensor-
// parallel sums, clipping and recomputation only add time and are left out.
//
// For a tensor-parallel degree, bound the grouped cluster and workload the
// search plans it with (groupCluster); plans with a degree per stage are
// compared with the smallest bound over the degrees, which is not proven
// for them.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLANNER_LOWERBOUND_H
#define DTFM_PLANNER_LOWERBOUND_H

#include "dtfm/Planner/ShapeSearch.h"

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace dtfm::planner {

/// The bound and the shape at which it is reached, with its three terms
/// (seconds = fill + steady + sync).
struct LowerBound {
  double seconds = std::numeric_limits<double>::infinity();
  int dataParallel = 0, pipelineParallel = 0;
  int64_t microBatchSize = 0;
  double fillSeconds = 0, steadySeconds = 0, syncSeconds = 0;
  bool feasible() const {
    return seconds < std::numeric_limits<double>::infinity();
  }
};

/// The cluster's links as the bound sees them: for latency and for seconds
/// per byte apart, the size of the largest component that links no dearer
/// than t form, as a step function of t (from a minimum spanning tree, so
/// O(N^2) time and O(N) memory at any size).
class LinkThresholds {
public:
  LinkThresholds() = default;
  /// `weight(a, b)` of each pair of the `devices` devices (the cheaper
  /// direction).
  LinkThresholds(int devices, const std::function<double(int, int)> &weight);

  /// The cheapest link (0 with fewer than two devices).
  double cheapest() const { return bottleneck(2); }
  /// The least t at which some component of links <= t has `members`
  /// devices: the slowest hop of any connected group of that many.
  double bottleneck(int members) const { return lookup(bottlenecks, members); }
  /// Integral over t of (members - min(c(t), members)): a lower bound on
  /// the sum of one member's links to the others, averaged over the
  /// members of any group of `members` devices.
  double spread(int members) const { return lookup(spreads, members); }
  /// Integral over t of (ceil(members / min(c(t), members)) - 1): a lower
  /// bound on the links of any chain through `members` devices.
  double chain(int members) const { return lookup(chains, members); }

private:
  /// Breakpoints: from `at[k]` on, the largest component has `size[k]`
  /// devices (at[0] = 0, size[0] = 1).
  std::vector<double> at{0.0};
  std::vector<int> size{1};
  /// The three per number of members (index 0 and 1: 0).
  std::vector<double> bottlenecks{0.0, 0.0}, spreads{0.0, 0.0},
      chains{0.0, 0.0};
  /// More members than devices: no such group.
  static double lookup(const std::vector<double> &table, int members) {
    if (members < 0 || static_cast<size_t>(members) >= table.size())
      return members < 2 ? 0.0 : std::numeric_limits<double>::infinity();
    return table[members];
  }
};

/// The bound for one cluster and workload, precomputed once and evaluated
/// for any number of local steps.
class LowerBoundModel {
public:
  /// `problem` as the shape search takes it (its fixed D_DP / D_PP, when
  /// set, restrict the shapes bounded); false with a one-line `error` for
  /// a problem the search would refuse too (no cluster or devices, a global
  /// batch < 1, no micro-batch size, an empty model).
  static bool create(const ShapeProblem &problem, LowerBoundModel &model,
                     std::string &error);

  /// Local steps every `syncEvery` steps (0: synchronous; >= 1), each
  /// exchange overlapping `syncOverlap` steps (then its exposed part is
  /// not bounded: 0); an infeasible bound (seconds infinite) when no shape
  /// holds the model's state. Fragments only add latencies: the whole
  /// exchange's bound holds for them.
  LowerBound bound(int64_t syncEvery, int64_t syncOverlap = 0) const;

private:
  ShapeProblem problem; ///< cluster cleared after create
  int devices = 0;
  /// Device speeds and memories, largest first, as prefix sums.
  std::vector<double> fastestSpeeds, largestMemories;
  double slowestSpeed = 0, largestRidge = 0;
  /// The costliest tensor-parallel group sums: per sum and per byte.
  double largestSumLatency = 0, largestSumSecondsPerByte = 0;
  LinkThresholds latency, secondsPerByte;
};

/// "lower bound 5.1 s (dp 8 x pp 8, micro-batch 1: fill 1.2 s, steady
/// 3.1 s, sync 0.8 s)": for summaries and benchmarks.
std::string describeLowerBound(const LowerBound &bound);

} // namespace dtfm::planner

#endif // DTFM_PLANNER_LOWERBOUND_H
