//===- ChainCuts.h - Every way to cut a chain, for the planner tests ------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_UNITTESTS_PLANNER_CHAINCUTS_H
#define DTFM_UNITTESTS_PLANNER_CHAINCUTS_H

#include <algorithm>
#include <functional>
#include <limits>
#include <vector>

namespace dtfm::planner::oracle {

/// The brute-force oracle of the partitioners: over every way to cut a
/// chain of `blocks` into `stages` non-empty contiguous stages, the least
/// bottleneck max_j stageCost(j, first, last) (inf when every cut has an
/// infinite stage).
inline double bestCut(int blocks, int stages,
                      const std::function<double(int, int, int)> &stageCost) {
  double best = std::numeric_limits<double>::infinity();
  std::vector<int> bounds{0};
  std::function<void(int)> recurse = [&](int stage) {
    if (stage == stages - 1) {
      bounds.push_back(blocks);
      double worst = 0;
      for (int j = 0; j < stages; ++j)
        worst = std::max(worst, stageCost(j, bounds[j], bounds[j + 1]));
      best = std::min(best, worst);
      bounds.pop_back();
      return;
    }
    for (int cut = bounds.back() + 1; cut <= blocks - (stages - stage - 1);
         ++cut) {
      bounds.push_back(cut);
      recurse(stage + 1);
      bounds.pop_back();
    }
  };
  recurse(0);
  return best;
}

} // namespace dtfm::planner::oracle

#endif // DTFM_UNITTESTS_PLANNER_CHAINCUTS_H
