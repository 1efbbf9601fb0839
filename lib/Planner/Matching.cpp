//===- Matching.cpp - Bottleneck perfect matching -------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Matching.h"

#include <algorithm>
#include <limits>
#include <queue>

using namespace dtfm::planner;

int dtfm::planner::maximumBipartiteMatching(
    int n, const std::vector<std::vector<int>> &adjacent,
    std::vector<int> &matchOfLeft) {
  const int kFree = -1;
  const int kInf = std::numeric_limits<int>::max();
  matchOfLeft.assign(n, kFree);
  std::vector<int> matchOfRight(n, kFree), dist(n);

  // BFS from free left nodes layers the graph; returns whether a free right
  // node is reachable (an augmenting path exists).
  auto bfs = [&]() {
    std::queue<int> queue;
    for (int l = 0; l < n; ++l) {
      dist[l] = matchOfLeft[l] == kFree ? 0 : kInf;
      if (dist[l] == 0)
        queue.push(l);
    }
    bool found = false;
    while (!queue.empty()) {
      int l = queue.front();
      queue.pop();
      for (int r : adjacent[l]) {
        int next = matchOfRight[r];
        if (next == kFree)
          found = true;
        else if (dist[next] == kInf) {
          dist[next] = dist[l] + 1;
          queue.push(next);
        }
      }
    }
    return found;
  };
  // DFS along the layers; iterative depth is at most n so recursion is fine
  // for the group sizes the planner sees (<= a few hundred).
  std::vector<size_t> edgeCursor(n);
  auto dfs = [&](auto &self, int l) -> bool {
    for (size_t &e = edgeCursor[l]; e < adjacent[l].size(); ++e) {
      int r = adjacent[l][e];
      int next = matchOfRight[r];
      if (next == kFree || (dist[next] == dist[l] + 1 && self(self, next))) {
        matchOfLeft[l] = r;
        matchOfRight[r] = l;
        ++e;
        return true;
      }
    }
    dist[l] = kInf;
    return false;
  };

  int size = 0;
  while (bfs()) {
    std::fill(edgeCursor.begin(), edgeCursor.end(), 0);
    for (int l = 0; l < n; ++l)
      if (matchOfLeft[l] == kFree && dfs(dfs, l))
        ++size;
  }
  return size;
}

double dtfm::planner::bottleneckPerfectMatching(const std::vector<double> &cost,
                                                int n,
                                                std::vector<int> *match,
                                                int *matchableBelow) {
  if (matchableBelow)
    *matchableBelow = 0;
  if (n == 0) {
    if (match)
      match->clear();
    return 0;
  }
  // The bottleneck is at least the largest row minimum and column minimum:
  // every row and column must use one of its edges. That bound is one of the
  // costs and often already feasible (uniform clusters, a group matched to
  // an equal one), so it is tried before any sorting.
  double lowerBound = 0;
  for (int i = 0; i < n; ++i) {
    double rowMin = std::numeric_limits<double>::infinity();
    double colMin = rowMin;
    for (int j = 0; j < n; ++j) {
      rowMin = std::min(rowMin, cost[i * n + j]);
      colMin = std::min(colMin, cost[j * n + i]);
    }
    lowerBound = std::max({lowerBound, rowMin, colMin});
  }

  std::vector<std::vector<int>> adjacent(n);
  std::vector<int> matching;
  auto feasible = [&](double threshold) {
    for (int i = 0; i < n; ++i) {
      adjacent[i].clear();
      for (int j = 0; j < n; ++j)
        if (cost[i * n + j] <= threshold)
          adjacent[i].push_back(j);
    }
    return maximumBipartiteMatching(n, adjacent, matching) == n;
  };
  double bottleneck = lowerBound;
  if (!feasible(lowerBound)) {
    // Binary search over the distinct costs above the bound (the largest
    // cost always suffices).
    std::vector<double> thresholds;
    for (int k = 0; k < n * n; ++k)
      if (cost[k] > lowerBound)
        thresholds.push_back(cost[k]);
    std::sort(thresholds.begin(), thresholds.end());
    thresholds.erase(std::unique(thresholds.begin(), thresholds.end()),
                     thresholds.end());
    size_t lo = 0, hi = thresholds.size() - 1;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      if (feasible(thresholds[mid]))
        hi = mid;
      else
        lo = mid + 1;
    }
    bottleneck = thresholds[lo];
    if (match)
      feasible(bottleneck);
  }
  if (match)
    *match = matching;
  if (matchableBelow) {
    // The largest cost strictly below the bottleneck, if any.
    double below = -std::numeric_limits<double>::infinity();
    for (int k = 0; k < n * n; ++k)
      if (cost[k] < bottleneck)
        below = std::max(below, cost[k]);
    if (below > -std::numeric_limits<double>::infinity()) {
      feasible(below);
      *matchableBelow = static_cast<int>(std::count_if(
          matching.begin(), matching.end(), [](int r) { return r >= 0; }));
    }
  }
  return bottleneck;
}
