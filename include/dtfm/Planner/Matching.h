//===- Matching.h - Bottleneck perfect matching ------------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLANNER_MATCHING_H
#define DTFM_PLANNER_MATCHING_H

#include <vector>

namespace dtfm::planner {

/// Maximum matching in a bipartite graph with `n` left and `n` right nodes
/// (Hopcroft-Karp, O(E sqrt(V))). `adjacent[l]` lists the right neighbours of
/// l. Fills `matchOfLeft[l]` with l's partner or -1; returns the size.
int maximumBipartiteMatching(int n, const std::vector<std::vector<int>> &adjacent,
                             std::vector<int> &matchOfLeft);

/// The bottleneck perfect matching of an n x n cost matrix (row-major): the
/// permutation p minimising max_i cost[i][p(i)], found exactly: the largest
/// row or column minimum first, then a binary search over the sorted
/// distinct costs above it, each with a Hopcroft-Karp feasibility test
/// (O(n^2 log n + n^2.5 log n)). Returns that maximum; fills `match` with p
/// when given.
///
/// `matchableBelow`, when given, receives the size of a maximum matching
/// using only edges strictly cheaper than the bottleneck: how close the pair
/// is to a better bottleneck (n - 1 would need one more cheap pair).
double bottleneckPerfectMatching(const std::vector<double> &cost, int n,
                                 std::vector<int> *match = nullptr,
                                 int *matchableBelow = nullptr);

} // namespace dtfm::planner

#endif // DTFM_PLANNER_MATCHING_H
