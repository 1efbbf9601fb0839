//===- Tsp.h - Open-loop travelling salesman ---------------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLANNER_TSP_H
#define DTFM_PLANNER_TSP_H

#include <cstdint>
#include <vector>

namespace dtfm::planner {

/// Largest instance solved exactly by default.
inline constexpr int kExactTspLimit = 16;

/// Shortest Hamiltonian path (any start, any end) over a symmetric n x n
/// weight matrix (row-major). Exact Held-Karp dynamic programming for
/// n <= exactLimit (O(2^n n^2)); beyond, the best of multi-start nearest
/// neighbour paths (from `starts` start nodes, all when 0, plus 4 random
/// paths) improved by 2-opt and Or-opt moves until no move helps
/// (deterministic for a given `seed`). Returns the path length; fills
/// `order` with the visiting order when given.
double openLoopTsp(const std::vector<double> &weight, int n,
                   std::vector<int> *order = nullptr,
                   int exactLimit = kExactTspLimit, uint64_t seed = 0,
                   int starts = 0);

/// Length of the open path `order` under `weight`.
double pathLength(const std::vector<double> &weight, int n,
                  const std::vector<int> &order);

} // namespace dtfm::planner

#endif // DTFM_PLANNER_TSP_H
