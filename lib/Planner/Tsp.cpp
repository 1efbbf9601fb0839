//===- Tsp.cpp - Open-loop travelling salesman ----------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Tsp.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>

using namespace dtfm::planner;

double dtfm::planner::pathLength(const std::vector<double> &weight, int n,
                                 const std::vector<int> &order) {
  double length = 0;
  for (size_t i = 1; i < order.size(); ++i)
    length += weight[order[i - 1] * n + order[i]];
  return length;
}

/// Held-Karp over subsets: best[mask][last] = shortest path visiting `mask`
/// and ending at `last`.
static double heldKarp(const std::vector<double> &w, int n,
                       std::vector<int> *order) {
  const double inf = std::numeric_limits<double>::infinity();
  size_t subsets = size_t(1) << n;
  std::vector<double> best(subsets * n, inf);
  std::vector<int8_t> parent(subsets * n, -1);
  for (int v = 0; v < n; ++v)
    best[(size_t(1) << v) * n + v] = 0;
  for (size_t mask = 1; mask < subsets; ++mask) {
    for (int last = 0; last < n; ++last) {
      double here = best[mask * n + last];
      if (here == inf)
        continue;
      for (int next = 0; next < n; ++next) {
        if (mask & (size_t(1) << next))
          continue;
        size_t grown = mask | (size_t(1) << next);
        double candidate = here + w[last * n + next];
        if (candidate < best[grown * n + next]) {
          best[grown * n + next] = candidate;
          parent[grown * n + next] = static_cast<int8_t>(last);
        }
      }
    }
  }
  size_t full = subsets - 1;
  int end = 0;
  for (int v = 1; v < n; ++v)
    if (best[full * n + v] < best[full * n + end])
      end = v;
  if (order) {
    order->clear();
    size_t mask = full;
    for (int v = end; v != -1;) {
      order->push_back(v);
      int previous = parent[mask * n + v];
      mask &= ~(size_t(1) << v);
      v = previous;
    }
    std::reverse(order->begin(), order->end());
  }
  return best[full * n + end];
}

/// Improves an open path with 2-opt (reverse a segment) and Or-opt (move a
/// run of 1-3 nodes elsewhere, either direction) until neither helps.
static void improvePath(const std::vector<double> &w, int n,
                        std::vector<int> &path) {
  auto cost = [&](int a, int b) { return w[path[a] * n + path[b]]; };
  const double eps = 1e-12;
  bool improved = true;
  while (improved) {
    improved = false;
    // 2-opt on an open path: reversing path[i..j] changes the edges
    // (i-1, i) and (j, j+1), either of which may be absent at the ends.
    for (int i = 0; i < n - 1 && !improved; ++i)
      for (int j = i + 1; j < n && !improved; ++j) {
        double before = (i > 0 ? cost(i - 1, i) : 0) +
                        (j < n - 1 ? cost(j, j + 1) : 0);
        double after = (i > 0 ? cost(i - 1, j) : 0) +
                       (j < n - 1 ? cost(i, j + 1) : 0);
        if (after + eps < before) {
          std::reverse(path.begin() + i, path.begin() + j + 1);
          improved = true;
        }
      }
    if (improved)
      continue;
    // Or-opt: move the segment path[i..i+len-1] between two other nodes.
    double current = pathLength(w, n, path);
    for (int len = 1; len <= 3 && !improved; ++len)
      for (int i = 0; i + len <= n && !improved; ++i) {
        std::vector<int> segment(path.begin() + i, path.begin() + i + len);
        std::vector<int> rest(path.begin(), path.begin() + i);
        rest.insert(rest.end(), path.begin() + i + len, path.end());
        for (int reversed = 0; reversed < 2 && !improved; ++reversed) {
          std::vector<int> seg = segment;
          if (reversed)
            std::reverse(seg.begin(), seg.end());
          for (size_t at = 0; at <= rest.size() && !improved; ++at) {
            if (at == static_cast<size_t>(i) && !reversed)
              continue;
            std::vector<int> candidate(rest.begin(), rest.begin() + at);
            candidate.insert(candidate.end(), seg.begin(), seg.end());
            candidate.insert(candidate.end(), rest.begin() + at, rest.end());
            if (pathLength(w, n, candidate) + eps < current) {
              path = std::move(candidate);
              improved = true;
            }
          }
        }
      }
  }
}

double dtfm::planner::openLoopTsp(const std::vector<double> &weight, int n,
                                  std::vector<int> *order, int exactLimit,
                                  uint64_t seed, int starts) {
  if (n <= 1) {
    if (order)
      *order = n == 1 ? std::vector<int>{0} : std::vector<int>{};
    return 0;
  }
  if (n <= exactLimit)
    return heldKarp(weight, n, order);

  // Nearest-neighbour paths from every start, plus a few random ones, each
  // polished by local search; the best wins.
  std::mt19937_64 rng(seed);
  std::vector<int> best;
  double bestLength = std::numeric_limits<double>::infinity();
  auto consider = [&](std::vector<int> path) {
    improvePath(weight, n, path);
    double length = pathLength(weight, n, path);
    if (length < bestLength) {
      bestLength = length;
      best = std::move(path);
    }
  };
  int startCount = starts > 0 && starts < n ? starts : n;
  for (int s = 0; s < startCount; ++s) {
    // Spread the start nodes evenly when not starting from all of them.
    int start = static_cast<int>(static_cast<long>(s) * n / startCount);
    std::vector<int> path{start};
    std::vector<bool> used(n, false);
    used[start] = true;
    for (int step = 1; step < n; ++step) {
      int from = path.back(), next = -1;
      for (int v = 0; v < n; ++v)
        if (!used[v] && (next < 0 || weight[from * n + v] <
                                         weight[from * n + next]))
          next = v;
      used[next] = true;
      path.push_back(next);
    }
    consider(std::move(path));
  }
  for (int k = 0; k < 4; ++k) {
    std::vector<int> path(n);
    std::iota(path.begin(), path.end(), 0);
    std::shuffle(path.begin(), path.end(), rng);
    consider(std::move(path));
  }
  if (order)
    *order = best;
  return bestLength;
}
