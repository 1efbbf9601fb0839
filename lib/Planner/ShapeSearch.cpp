//===- ShapeSearch.cpp - Choosing the plan's shape ------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/ShapeSearch.h"
#include "dtfm/Planner/Tsp.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

using namespace dtfm::planner;

namespace {

using Clock = std::chrono::steady_clock;

std::string format(const char *fmt, double a, double b = 0, double c = 0) {
  char buffer[160];
  std::snprintf(buffer, sizeof buffer, fmt, a, b, c);
  return buffer;
}

class Searcher {
public:
  Searcher(const ShapeProblem &problem, const ShapeSearchOptions &options)
      : problem(problem), options(options), cluster(*problem.cluster),
        start(Clock::now()) {}

  bool run(ShapeSearchResult &result, std::string &error);

private:
  double elapsed() const {
    return std::chrono::duration<double>(Clock::now() - start).count();
  }
  /// Whether the share `fraction` of the budget is spent (and remember it).
  bool outOfTime(double fraction) {
    if (options.budgetSeconds <= 0 ||
        elapsed() < fraction * options.budgetSeconds)
      return false;
    exhausted = true;
    return true;
  }

  void buildUnits();
  /// Orders the regions along the shortest path through them.
  void orderRegions();
  std::vector<int> devicesOf(const std::vector<bool> &inUnits) const;
  /// The micro-batch size phase 1 uses for `dp` (0: none divides G).
  int64_t defaultSize(int dp) const;
  /// Best seed layout (optionally refined) of one shape on `devices`.
  ShapeChoice scoreShape(const std::vector<int> &devices, int dp, int pp,
                         int64_t size, bool refine);
  /// Best over the factorisations of the subset (phase 1 sizes).
  ShapeChoice scoreSubset(const std::vector<bool> &inUnits);
  /// Why `unit` is idle: its links and speed, and `with`, the best plan
  /// found on the chosen devices plus it (null: not scored, the budget was
  /// spent).
  std::string idleReason(const std::vector<int> &unit, const ShapeChoice &best,
                         const ShapeChoice *with) const;

  const ShapeProblem &problem;
  const ShapeSearchOptions &options;
  const Cluster &cluster;
  Clock::time_point start;
  bool exhausted = false;
  int64_t scored = 0;
  std::vector<std::vector<int>> units;
  /// Each region's place on the shortest path through the regions (the
  /// pipeline's cheapest link between two, for one boundary's bytes).
  std::map<std::string, int> regionRank;
  bool regionsInNameOrder = true;
  std::map<std::vector<bool>, ShapeChoice> subsetCache;
  /// Every shape scored: best of its seeds (or refined).
  std::vector<ShapeChoice> all;
};

void Searcher::buildUnits() {
  std::map<std::tuple<std::string, double, double>, size_t> indexOf;
  for (size_t d = 0; d < cluster.size(); ++d) {
    const Device &device = cluster.devices[d];
    auto key = std::make_tuple(device.region, device.speed(),
                               device.memoryBytes);
    auto [it, inserted] = indexOf.try_emplace(key, units.size());
    if (inserted)
      units.emplace_back();
    units[it->second].push_back(static_cast<int>(d));
  }
}

void Searcher::orderRegions() {
  std::map<std::string, int> indexOf;
  for (const Device &device : cluster.devices)
    indexOf.emplace(device.region, 0);
  int regions = 0;
  for (auto &[region, index] : indexOf)
    index = regions++;
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> weight(regions * regions, inf);
  for (size_t a = 0; a < cluster.size(); ++a)
    for (size_t b = 0; b < cluster.size(); ++b) {
      int ra = indexOf[cluster.devices[a].region],
          rb = indexOf[cluster.devices[b].region];
      if (ra == rb)
        continue;
      double &w = weight[ra * regions + rb];
      w = std::min(w, cluster.transferSeconds(a, b,
                                              problem.workload.boundaryBytes));
    }
  for (int r = 0; r < regions; ++r)
    weight[r * regions + r] = 0;
  // The path costs both directions alike.
  for (int a = 0; a < regions; ++a)
    for (int b = a + 1; b < regions; ++b)
      weight[a * regions + b] = weight[b * regions + a] =
          std::max(weight[a * regions + b], weight[b * regions + a]);
  std::vector<int> order;
  if (regions > 2)
    openLoopTsp(weight, regions, &order);
  else
    for (int r = 0; r < regions; ++r)
      order.push_back(r);
  // A path and its reverse cost the same: start from the lower index.
  if (!order.empty() && order.front() > order.back())
    std::reverse(order.begin(), order.end());
  std::vector<std::string> names(regions);
  for (const auto &[region, index] : indexOf)
    names[index] = region;
  for (int k = 0; k < regions; ++k) {
    regionRank[names[order[k]]] = k;
    regionsInNameOrder &= order[k] == k;
  }
}

std::vector<int> Searcher::devicesOf(const std::vector<bool> &inUnits) const {
  std::vector<int> devices;
  for (size_t u = 0; u < units.size(); ++u)
    if (inUnits[u])
      devices.insert(devices.end(), units[u].begin(), units[u].end());
  std::sort(devices.begin(), devices.end());
  return devices;
}

int64_t Searcher::defaultSize(int dp) const {
  auto fits = [&](int64_t size) {
    return size > 0 && problem.globalBatch % (dp * size) == 0;
  };
  if (fits(problem.workload.microBatchSize) &&
      std::count(problem.microBatchSizes.begin(), problem.microBatchSizes.end(),
                 problem.workload.microBatchSize))
    return problem.workload.microBatchSize;
  for (int64_t size : problem.microBatchSizes)
    if (fits(size))
      return size;
  return 0;
}

ShapeChoice Searcher::scoreShape(const std::vector<int> &devices, int dp,
                                 int pp, int64_t size, bool refine) {
  ++scored;
  // Scored on the whole cluster in its own indices: a sub-cluster's two
  // link matrices would be allocated for every shape (268 MB at 4096
  // devices), and the model reads only the partition's devices.
  HeteroProblem hp;
  hp.cluster = &cluster;
  hp.workload = problem.workload.withMicroBatchSize(size);
  hp.training = problem.training;
  hp.dataParallel = dp;
  hp.pipelineParallel = pp;
  int microBatches = static_cast<int>(problem.globalBatch / (dp * size));
  hp.training.stages.microBatches = microBatches;
  HeteroModel model(hp);

  // Seeds: `devices` ordered by region (stable, so by index within one),
  // and by speed.
  int n = static_cast<int>(devices.size());
  std::vector<int> byRegion = devices, bySpeed;
  std::stable_sort(byRegion.begin(), byRegion.end(), [&](int a, int b) {
    return cluster.devices[a].region < cluster.devices[b].region;
  });
  bySpeed = byRegion;
  std::stable_sort(bySpeed.begin(), bySpeed.end(), [&](int a, int b) {
    return cluster.devices[a].speed() > cluster.devices[b].speed();
  });
  Partition rank(pp), strided(pp), fastest(pp);
  for (int i = 0; i < n; ++i) {
    rank[i / dp].push_back(byRegion[i]);
    strided[i % pp].push_back(byRegion[i]);
    fastest[i / dp].push_back(bySpeed[i]);
  }
  std::vector<Partition> seeds = {rank, strided, fastest};
  // Rank order with the regions along the shortest path through them
  // (where it is not their names' order): the pipeline crosses each slow
  // link once, as DT-FM's layout does.
  if (!regionsInNameOrder) {
    std::vector<int> byPath = byRegion;
    std::stable_sort(byPath.begin(), byPath.end(), [&](int a, int b) {
      return regionRank.at(cluster.devices[a].region) <
             regionRank.at(cluster.devices[b].region);
    });
    Partition path(pp);
    for (int i = 0; i < n; ++i)
      path[i / dp].push_back(byPath[i]);
    if (path != rank)
      seeds.push_back(std::move(path));
  }
  Partition best;
  HeteroCost bestCost;
  for (const Partition &seed : seeds) {
    HeteroCost cost = model.evaluate(seed);
    if (best.empty() || cost.iterationSeconds() < bestCost.iterationSeconds()) {
      best = seed;
      bestCost = std::move(cost);
    }
  }
  if (refine && bestCost.feasible) {
    // First-improvement swaps of two devices of different stages, and of
    // neighbouring stages, until none improves or the cap is reached.
    int evaluations = 0;
    bool improved = true;
    auto tryCandidate = [&](Partition &candidate) {
      ++evaluations;
      HeteroCost cost = model.evaluate(candidate);
      if (cost.iterationSeconds() < bestCost.iterationSeconds() * (1 - 1e-12)) {
        best = candidate;
        bestCost = std::move(cost);
        return true;
      }
      return false;
    };
    while (improved && evaluations < options.refineEvaluations &&
           !outOfTime(1.0)) {
      improved = false;
      for (int s = 0; s + 1 < pp && !improved; ++s) {
        Partition candidate = best;
        std::swap(candidate[s], candidate[s + 1]);
        improved = tryCandidate(candidate);
      }
      for (int s1 = 0; s1 < pp && !improved; ++s1)
        for (int s2 = s1 + 1; s2 < pp && !improved; ++s2)
          for (int i = 0; i < dp && !improved; ++i)
            for (int j = 0; j < dp && !improved; ++j) {
              if (evaluations >= options.refineEvaluations)
                break;
              Partition candidate = best;
              std::swap(candidate[s1][i], candidate[s2][j]);
              improved = tryCandidate(candidate);
            }
    }
  }
  ShapeChoice choice;
  choice.schedule = hp.training.stages.schedule;
  if (problem.chooseSchedule && bestCost.feasible &&
      choice.schedule != PipelineSchedule::ZeroBubbleH1) {
    HeteroProblem zeroBubble = hp;
    zeroBubble.training.stages.schedule = PipelineSchedule::ZeroBubbleH1;
    HeteroCost cost = HeteroModel(zeroBubble).evaluate(best);
    if (cost.feasible &&
        cost.iterationSeconds() < bestCost.iterationSeconds() * (1 - 1e-12)) {
      bestCost = std::move(cost);
      choice.schedule = PipelineSchedule::ZeroBubbleH1;
    }
  }
  choice.devices = devices;
  choice.dataParallel = dp;
  choice.pipelineParallel = pp;
  choice.microBatchSize = size;
  choice.microBatches = microBatches;
  choice.stages = best;
  choice.cost = std::move(bestCost);
  return choice;
}

ShapeChoice Searcher::scoreSubset(const std::vector<bool> &inUnits) {
  auto cached = subsetCache.find(inUnits);
  if (cached != subsetCache.end())
    return cached->second;
  std::vector<int> devices = devicesOf(inUnits);
  int n = static_cast<int>(devices.size());
  int maxStages =
      std::min<int>(n, static_cast<int>(problem.workload.blocks.size()));
  ShapeChoice best;
  for (int pp = 1; pp <= maxStages; ++pp) {
    if (n % pp != 0)
      continue;
    int dp = n / pp;
    if ((problem.fixedPipelineParallel > 0 &&
         pp != problem.fixedPipelineParallel) ||
        (problem.fixedDataParallel > 0 && dp != problem.fixedDataParallel))
      continue;
    int64_t size = defaultSize(dp);
    if (size == 0)
      continue;
    ShapeChoice choice = scoreShape(devices, dp, pp, size, false);
    all.push_back(choice);
    if (best.stages.empty() ||
        choice.iterationSeconds() < best.iterationSeconds())
      best = std::move(choice);
  }
  // Shapes that leave some of the subset's devices out: per D_PP, the
  // widest D_DP that some micro-batch size allows (or the given D_DP x
  // D_PP), on the fastest devices. 7 devices of one kind for a global batch
  // of 16 (one of 8 lost) have no other shape; 64 V100s have 8 x 5 on 40
  // beside 4 x 8 and 8 x 8 on all; one sample on two 2-device groups has
  // 1 x 1. Among equally fast devices, the worst connected are left out
  // (the lowest mean bandwidth to the rest of the subset; then the last by
  // index): world-wide, Oregon's devices before Ireland's when the rest are
  // in Europe and the US east (GPT-3 1.3B on DT-FM's 64 V100s: 8 x 5 on 40
  // without Oregon, 11.85 s, where the last by index left Ireland out and
  // 4 x 8 on 32 won at 15.82 s).
  std::vector<double> connectivity(cluster.size(), 0.0);
  for (int a : devices) {
    double sum = 0;
    for (int b : devices)
      if (a != b)
        sum += cluster.bandwidthGbps(a, b);
    connectivity[a] = n > 1 ? sum / (n - 1) : 0;
  }
  std::vector<int> preferred = devices;
  std::stable_sort(preferred.begin(), preferred.end(), [&](int a, int b) {
    if (cluster.devices[a].speed() != cluster.devices[b].speed())
      return cluster.devices[a].speed() > cluster.devices[b].speed();
    return connectivity[a] > connectivity[b];
  });
  for (int pp = 1; pp <= maxStages; ++pp) {
    if (problem.fixedPipelineParallel > 0 &&
        pp != problem.fixedPipelineParallel)
      continue;
    for (int dp = n / pp; dp >= 1; --dp) {
      if (problem.fixedDataParallel > 0 && dp != problem.fixedDataParallel)
        continue;
      int64_t size = defaultSize(dp);
      if (size == 0)
        continue;
      if (dp * pp == n)
        break; // every device: scored above
      std::vector<int> used(preferred.begin(), preferred.begin() + dp * pp);
      std::sort(used.begin(), used.end());
      ShapeChoice choice = scoreShape(used, dp, pp, size, false);
      all.push_back(choice);
      if (best.stages.empty() ||
          choice.iterationSeconds() < best.iterationSeconds())
        best = std::move(choice);
      break;
    }
  }
  subsetCache[inUnits] = best;
  return best;
}

std::string Searcher::idleReason(const std::vector<int> &unit,
                                 const ShapeChoice &best,
                                 const ShapeChoice *with) const {
  const Device &device = cluster.devices[unit[0]];
  double bestGbps = 0, bestDelay = std::numeric_limits<double>::infinity();
  double fastest = 0;
  for (int used : best.devices) {
    fastest = std::max(fastest, cluster.devices[used].speed());
    for (int d : unit) {
      bestGbps = std::max(bestGbps, cluster.bandwidthGbps(d, used));
      bestDelay = std::min(bestDelay, cluster.delayMs(d, used));
    }
  }
  std::string reason = "region " + device.region + ": " +
                       format("%.3g Gbps and %.3g ms at best to the devices "
                              "in use",
                              bestGbps, bestDelay);
  if (device.speed() < fastest)
    reason += format(", %.2gx slower than the fastest in use",
                     fastest / device.speed());
  if (!with)
    reason += "; adding them was not scored (the search budget was spent)";
  else if (with->stages.empty() || !with->cost.feasible)
    reason += "; no plan adding them fits in memory";
  else
    reason += format("; adding them costs %.3g s/iteration (%.4g s vs %.4g s)",
                     with->iterationSeconds() - best.iterationSeconds(),
                     with->iterationSeconds(), best.iterationSeconds());
  return reason;
}

bool Searcher::run(ShapeSearchResult &result, std::string &error) {
  if (problem.workload.blocks.empty() || cluster.size() == 0) {
    error = "nothing to plan: no blocks or no devices";
    return false;
  }
  if (problem.globalBatch <= 0 || problem.workload.microBatchSize <= 0) {
    error = "the global batch and the micro-batch size must be positive";
    return false;
  }
  buildUnits();
  orderRegions();

  // Phase 1: greedy elimination from every unit, and greedy addition from
  // the best single unit (small fast subsets elimination may not reach).
  auto better = [](const ShapeChoice &a, const ShapeChoice &b) {
    return !a.stages.empty() && a.cost.feasible &&
           (b.stages.empty() || a.iterationSeconds() < b.iterationSeconds());
  };
  auto greedy = [&](std::vector<bool> current, bool add) {
    ShapeChoice currentBest = scoreSubset(current);
    while (!outOfTime(0.6)) {
      std::vector<bool> bestNext;
      ShapeChoice bestChoice;
      size_t inUse = std::count(current.begin(), current.end(), true);
      for (size_t u = 0; u < units.size() && !outOfTime(0.6); ++u) {
        if (current[u] != !add || (!add && inUse == 1))
          continue;
        std::vector<bool> next = current;
        next[u] = add;
        ShapeChoice choice = scoreSubset(next);
        if (better(choice, bestChoice)) {
          bestNext = next;
          bestChoice = std::move(choice);
        }
      }
      if (bestNext.empty() || !better(bestChoice, currentBest))
        break;
      current = bestNext;
      currentBest = std::move(bestChoice);
    }
  };
  greedy(std::vector<bool>(units.size(), true), /*add=*/false);
  {
    std::vector<bool> bestSingle;
    ShapeChoice bestChoice;
    for (size_t u = 0; u < units.size() && !outOfTime(0.6); ++u) {
      std::vector<bool> single(units.size(), false);
      single[u] = true;
      ShapeChoice choice = scoreSubset(single);
      if (better(choice, bestChoice)) {
        bestSingle = single;
        bestChoice = std::move(choice);
      }
    }
    if (!bestSingle.empty())
      greedy(bestSingle, /*add=*/true);
  }

  // Phase 2: every micro-batch size for the best shapes, then refinement.
  auto byTime = [](const ShapeChoice &a, const ShapeChoice &b) {
    return a.iterationSeconds() < b.iterationSeconds();
  };
  std::vector<ShapeChoice> ranked = all;
  std::stable_sort(ranked.begin(), ranked.end(), byTime);
  std::set<std::tuple<std::vector<int>, int, int>> refinedKeys;
  for (const ShapeChoice &shape : ranked) {
    if (static_cast<int>(refinedKeys.size()) >= options.refinedShapes ||
        !shape.cost.feasible || outOfTime(1.0))
      break;
    if (!refinedKeys
             .insert({shape.devices, shape.dataParallel,
                      shape.pipelineParallel})
             .second)
      continue;
    ShapeChoice bestSize = shape;
    for (int64_t size : problem.microBatchSizes) {
      if (size == shape.microBatchSize ||
          problem.globalBatch % (shape.dataParallel * size) != 0)
        continue;
      ShapeChoice choice = scoreShape(shape.devices, shape.dataParallel,
                                      shape.pipelineParallel, size, false);
      all.push_back(choice);
      if (choice.iterationSeconds() < bestSize.iterationSeconds())
        bestSize = std::move(choice);
    }
    if (outOfTime(1.0))
      break;
    all.push_back(scoreShape(shape.devices, shape.dataParallel,
                             shape.pipelineParallel, bestSize.microBatchSize,
                             true));
  }

  // Phase 3: no idle unit would help the chosen devices (checked at the
  // phase-1 effort; these scores also explain the idle devices), while the
  // budget lasts: at 4096 devices each round scored 64 subsets of 2048 or
  // more devices, two minutes past a 10 s budget.
  auto unitsOf = [&](const std::vector<int> &devices) {
    std::vector<bool> in(units.size(), false);
    for (size_t u = 0; u < units.size(); ++u)
      in[u] = std::binary_search(devices.begin(), devices.end(), units[u][0]);
    return in;
  };
  for (size_t round = 0; round < units.size() && !outOfTime(1.0); ++round) {
    std::stable_sort(all.begin(), all.end(), byTime);
    if (all.empty() || !all.front().cost.feasible)
      break;
    double bestSeconds = all.front().iterationSeconds();
    std::vector<bool> chosen = unitsOf(all.front().devices);
    bool improved = false;
    for (size_t u = 0; u < units.size() && !outOfTime(1.0); ++u) {
      if (chosen[u])
        continue;
      std::vector<bool> more = chosen;
      more[u] = true;
      improved |= scoreSubset(more).iterationSeconds() < bestSeconds;
    }
    if (!improved)
      break;
  }

  std::stable_sort(all.begin(), all.end(), byTime);
  if (all.empty()) {
    error = "no shape of the devices' subsets has a micro-batch size that "
            "divides the global batch of " +
            std::to_string(problem.globalBatch) + " samples" +
            (problem.fixedDataParallel || problem.fixedPipelineParallel
                 ? " with the given dp and pp"
                 : "");
    return false;
  }
  if (!all.front().cost.feasible) {
    ShapeChoice everything = scoreSubset(std::vector<bool>(units.size(), true));
    const ShapeChoice &shown = everything.stages.empty() ? all.front()
                                                         : everything;
    error = "no plan shape fits in memory (with " +
            std::to_string(shown.devices.size()) + " of " +
            std::to_string(cluster.size()) + " devices, D_DP " +
            std::to_string(shown.dataParallel) + " x D_PP " +
            std::to_string(shown.pipelineParallel) + ": " + shown.cost.error +
            ")";
    return false;
  }
  result.best = all.front();
  // Runner-ups differ in D_DP, D_PP or the number of devices (each at its
  // best micro-batch size).
  std::set<std::tuple<int, int, size_t>> seen{
      {result.best.dataParallel, result.best.pipelineParallel,
       result.best.devices.size()}};
  for (const ShapeChoice &choice : all) {
    if (static_cast<int>(result.runnersUp.size()) >= options.runnersUp ||
        !choice.cost.feasible)
      break;
    if (seen.insert({choice.dataParallel, choice.pipelineParallel,
                     choice.devices.size()})
            .second)
      result.runnersUp.push_back(choice);
  }
  std::vector<bool> chosen = unitsOf(result.best.devices);
  for (size_t u = 0; u < units.size(); ++u) {
    if (chosen[u]) {
      std::vector<int> left;
      for (int d : units[u])
        if (!std::binary_search(result.best.devices.begin(),
                                result.best.devices.end(), d))
          left.push_back(d);
      if (!left.empty())
        result.idle.push_back(
            {left, "the chosen D_DP x D_PP leaves them out of their kind's " +
                       std::to_string(units[u].size()) +
                       " devices: no shape using all of them is faster, or "
                       "has a micro-batch size dividing the global batch of " +
                       std::to_string(problem.globalBatch)});
      continue;
    }
    std::vector<bool> more = chosen;
    more[u] = true;
    if (!subsetCache.count(more) && outOfTime(1.0)) {
      result.idle.push_back({units[u], idleReason(units[u], result.best,
                                                  nullptr)});
      continue;
    }
    ShapeChoice with = scoreSubset(more);
    result.idle.push_back({units[u], idleReason(units[u], result.best, &with)});
  }
  result.shapesScored = scored;
  result.budgetExhausted = exhausted;
  result.searchSeconds = elapsed();
  return true;
}

} // namespace

std::vector<int64_t>
dtfm::planner::microBatchSizeCandidates(int64_t modelSize,
                                        int64_t globalBatch) {
  std::vector<int64_t> candidates;
  for (int64_t d = std::max<int64_t>(1, modelSize / 4); d <= modelSize * 4; ++d)
    if (globalBatch % d == 0)
      candidates.push_back(d);
  return candidates;
}

double dtfm::planner::defaultSearchBudgetSeconds(size_t devices) {
  return devices <= kLargeClusterDevices ? 3.0 : 10.0;
}

bool dtfm::planner::searchShapes(const ShapeProblem &problem,
                                 const ShapeSearchOptions &options,
                                 ShapeSearchResult &result,
                                 std::string &error) {
  result = ShapeSearchResult();
  Searcher searcher(problem, options);
  return searcher.run(result, error);
}
