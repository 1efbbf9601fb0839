//===- Search.cpp - Device assignment search (DT-FM and baselines) --------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Search.h"
#include "dtfm/Support/NameTable.h"
#include "dtfm/Planner/Genetic.h"
#include "dtfm/Planner/Louvain.h"
#include "dtfm/Planner/Tsp.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

using namespace dtfm::planner;

static constexpr dtfm::NameEntry<SearchAlgorithm> kAlgorithmNames[] = {
    {SearchAlgorithm::RankOrder, "rank-order"},
    {SearchAlgorithm::Random, "random"},
    {SearchAlgorithm::KernighanLin, "kl"},
    {SearchAlgorithm::OpFence, "op-fence"},
    {SearchAlgorithm::GeneticPaper, "genetic-paper"},
    {SearchAlgorithm::Genetic, "genetic"}};

const char *dtfm::planner::searchAlgorithmName(SearchAlgorithm algorithm) {
  return nameOf(kAlgorithmNames, algorithm);
}

std::vector<SearchAlgorithm> dtfm::planner::allSearchAlgorithms() {
  return {SearchAlgorithm::RankOrder, SearchAlgorithm::Random,
          SearchAlgorithm::KernighanLin, SearchAlgorithm::OpFence,
          SearchAlgorithm::GeneticPaper, SearchAlgorithm::Genetic};
}

std::optional<SearchAlgorithm>
dtfm::planner::parseSearchAlgorithm(const std::string &name) {
  return valueNamed(kAlgorithmNames, name);
}

namespace {

/// The cost of a layout, with tie-breakers: many swaps leave the DT-FM cost
/// unchanged (it is a max of maxima), so descents also accept swaps that keep
/// it and improve, in order,
///  1. concentration: minus the sum over group pairs of the squared number
///     of devices matchable below the pair's bottleneck -- a pipeline edge
///     only gets cheaper when all D_DP pairs do, so reward pairs of groups
///     close to that (convex, so it prefers finishing one pair to spreading);
///  2. the sum of every group's DP cost plus the pipeline path length.
/// Both let the descent walk across plateaus of the primary cost.
struct Score {
  double cost = 0;
  double concentration = 0;
  double tieBreak = 0;
  bool betterThan(const Score &other) const {
    const double eps = 1e-12;
    if (cost < other.cost - eps)
      return true;
    if (cost > other.cost + eps)
      return false;
    if (concentration < other.concentration - eps)
      return true;
    if (concentration > other.concentration + eps)
      return false;
    return tieBreak < other.tieBreak - eps;
  }
};

/// A partition with its per-group data-parallel costs and coarsened pipeline
/// weights cached, so that the cost after swapping two devices is found by
/// recomputing only what the swap touches: two groups' DP costs, their rows
/// of the coarsened graph, and the TSP.
class LayoutState {
public:
  LayoutState(const CostModel &model, Partition partition, int64_t &counter)
      : model(model), groups(std::move(partition)), counter(&counter) {
    numGroups = static_cast<int>(groups.size());
    groupOf.assign(model.getCluster().size(), -1);
    for (int g = 0; g < numGroups; ++g)
      for (int d : groups[g])
        groupOf[d] = g;
    groupDp.resize(numGroups);
    weight.assign(numGroups * numGroups, 0);
    matchable.assign(numGroups * numGroups, 0);
    for (int g = 0; g < numGroups; ++g)
      groupDp[g] = model.groupDataParallelCost(groups[g]);
    for (int a = 0; a < numGroups; ++a)
      for (int b = a + 1; b < numGroups; ++b)
        setPair(a, b, groups[a], groups[b], weight, matchable);
    total = combine(groupDp, weight, matchable);
  }

  double cost() const { return total.cost; }
  Score score() const { return total; }
  const Partition &partition() const { return groups; }
  int group(int device) const { return groupOf[device]; }

  /// The cost if devices `a` and `b` (in different groups) traded places.
  double costAfterSwap(int a, int b) const { return scoreAfterSwap(a, b).cost; }

  /// The score if `a` and `b` traded places. With an `incumbent`, a swap
  /// that is certainly worse is rejected early and gets a lower bound of its
  /// cost (above the incumbent's) instead of the exact score: first when the
  /// data-parallel cost alone exceeds the incumbent, then when it plus twice
  /// a minimum spanning tree (no longer than any Hamiltonian path) does.
  Score scoreAfterSwap(int a, int b, const Score *incumbent = nullptr) const {
    const double eps = 1e-12;
    int ga = groupOf[a], gb = groupOf[b];
    scratchGroups[0] = groups[ga];
    scratchGroups[1] = groups[gb];
    std::replace(scratchGroups[0].begin(), scratchGroups[0].end(), a, b);
    std::replace(scratchGroups[1].begin(), scratchGroups[1].end(), b, a);
    scratchDp = groupDp;
    scratchDp[ga] = model.groupDataParallelCost(scratchGroups[0]);
    scratchDp[gb] = model.groupDataParallelCost(scratchGroups[1]);
    double dpMax = *std::max_element(scratchDp.begin(), scratchDp.end());
    if (incumbent && dpMax > incumbent->cost + eps)
      return Score{dpMax, 0, 0};
    scratchWeight = weight;
    scratchMatchable = matchable;
    refreshRows(ga, gb, scratchGroups[0], scratchGroups[1], scratchWeight,
                scratchMatchable);
    if (incumbent) {
      double bound = dpMax + 2.0 * spanningTreeWeight(scratchWeight);
      if (bound > incumbent->cost + eps)
        return Score{bound, 0, 0};
    }
    return combine(scratchDp, scratchWeight, scratchMatchable);
  }

  void swap(int a, int b) {
    int ga = groupOf[a], gb = groupOf[b];
    std::replace(groups[ga].begin(), groups[ga].end(), a, b);
    std::replace(groups[gb].begin(), groups[gb].end(), b, a);
    groupOf[a] = gb;
    groupOf[b] = ga;
    groupDp[ga] = model.groupDataParallelCost(groups[ga]);
    groupDp[gb] = model.groupDataParallelCost(groups[gb]);
    refreshRows(ga, gb, groups[ga], groups[gb], weight, matchable);
    total = combine(groupDp, weight, matchable);
  }

private:
  /// Recomputes the coarsened weights of groups ga and gb (given their new
  /// members) against every group.
  void setPair(int a, int b, const std::vector<int> &membersA,
               const std::vector<int> &membersB, std::vector<double> &w,
               std::vector<int> &m) const {
    int below = 0;
    w[a * numGroups + b] = w[b * numGroups + a] =
        model.groupPipelineWeight(membersA, membersB, nullptr, &below);
    m[a * numGroups + b] = m[b * numGroups + a] = below;
  }

  void refreshRows(int ga, int gb, const std::vector<int> &membersA,
                   const std::vector<int> &membersB, std::vector<double> &w,
                   std::vector<int> &m) const {
    auto membersOf = [&](int g) -> const std::vector<int> & {
      return g == ga ? membersA : g == gb ? membersB : groups[g];
    };
    for (int changed : {ga, gb})
      for (int other = 0; other < numGroups; ++other) {
        if (other == changed || (changed == gb && other == ga))
          continue;
        setPair(changed, other, membersOf(changed), membersOf(other), w, m);
      }
  }

  /// Prim's minimum spanning tree over the coarsened graph.
  double spanningTreeWeight(const std::vector<double> &w) const {
    std::vector<double> dist(numGroups,
                             std::numeric_limits<double>::infinity());
    std::vector<bool> in(numGroups, false);
    dist[0] = 0;
    double total = 0;
    for (int step = 0; step < numGroups; ++step) {
      int next = -1;
      for (int v = 0; v < numGroups; ++v)
        if (!in[v] && (next < 0 || dist[v] < dist[next]))
          next = v;
      in[next] = true;
      total += dist[next];
      for (int v = 0; v < numGroups; ++v)
        if (!in[v])
          dist[v] = std::min(dist[v], w[next * numGroups + v]);
    }
    return total;
  }

  Score combine(const std::vector<double> &dp, const std::vector<double> &w,
                const std::vector<int> &m) const {
    ++*counter;
    Score score;
    // Inside searches a few TSP starts suffice; the final layout is
    // re-evaluated with the full solver.
    double path = openLoopTsp(w, numGroups, &scratchOrder, kExactTspLimit,
                              /*seed=*/0, /*starts=*/4);
    score.cost = *std::max_element(dp.begin(), dp.end()) + 2.0 * path;
    for (double groupCost : dp)
      score.tieBreak += groupCost;
    for (int a = 0; a < numGroups; ++a)
      for (int b = a + 1; b < numGroups; ++b) {
        double below = m[a * numGroups + b];
        score.concentration -= below * below;
      }
    score.tieBreak += 2.0 * path;
    return score;
  }

  const CostModel &model;
  Partition groups;
  int64_t *counter;
  int numGroups = 0;
  std::vector<int> groupOf;
  std::vector<double> groupDp;
  std::vector<double> weight;
  std::vector<int> matchable;
  Score total;
  mutable std::vector<int> scratchOrder;
  mutable Partition scratchGroups{2};
  mutable std::vector<double> scratchDp, scratchWeight;
  mutable std::vector<int> scratchMatchable;
};

/// Shared state of one search run.
struct SearchContext {
  const CostModel &model;
  const SearchOptions &options;
  std::mt19937_64 rng;
  Deadline deadline;
  int64_t evaluations = 0;
  int n, dDP, dPP;

  SearchContext(const CostModel &model, const SearchOptions &options)
      : model(model), options(options), rng(options.seed),
        deadline(options.timeBudgetSeconds) {
    dDP = options.dataParallel;
    dPP = options.pipelineParallel;
    n = dDP * dPP;
  }

  /// w_{d,d'} of the local-search gains: the pipeline transfer time.
  double w(int a, int b) const { return model.pipelineLinkCost(a, b); }

  Partition rankOrder() const { return rankOrderPartition(dDP, dPP); }
  Partition strided() const { return stridedPartition(dDP, dPP); }
  Partition randomPartition() {
    return dtfm::planner::randomPartition(dDP, dPP, rng);
  }
};

//===----------------------------------------------------------------------===//
// Local searches
//===----------------------------------------------------------------------===//

/// The two endpoints of the fastest link inside a group.
std::pair<int, int> fastestLink(const SearchContext &ctx,
                                const std::vector<int> &group) {
  std::pair<int, int> best{group[0], group.size() > 1 ? group[1] : group[0]};
  double bestCost = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < group.size(); ++i)
    for (size_t j = i + 1; j < group.size(); ++j) {
      double c = ctx.w(group[i], group[j]);
      if (c < bestCost) {
        bestCost = c;
        best = {group[i], group[j]};
      }
    }
  return best;
}

/// The paper's gain for moving x (whose fast partner is px) out of its
/// group into `to`: mean cost from x to `to` minus the cost of x's fast link.
double paperGainTerm(const SearchContext &ctx, int x, int px,
                     const std::vector<int> &to) {
  double mean = 0;
  for (int d : to)
    mean += ctx.w(x, d);
  mean /= static_cast<double>(to.size());
  return mean - ctx.w(x, px);
}

/// DT-FM's local search: for each pair of groups, the four swaps between
/// the endpoints of each group's fastest link, tried in order of the paper's
/// gain (positive gains only) and applied when the exact cost improves.
/// Repeats until a pass over all pairs changes nothing.
void paperLocalSearch(SearchContext &ctx, LayoutState &state) {
  const double eps = 1e-12;
  for (bool improved = true; improved && !ctx.deadline.expired();) {
    improved = false;
    // The deadline between pairs too: one sweep over D_PP^2 / 2 pairs of
    // large groups takes seconds.
    for (int gj = 0; gj < ctx.dPP && !ctx.deadline.expired(); ++gj)
      for (int gk = gj + 1; gk < ctx.dPP; ++gk) {
        const Partition &p = state.partition();
        if (p[gj].size() < 2 || p[gk].size() < 2)
          continue;
        auto [a1, a2] = fastestLink(ctx, p[gj]);
        auto [b1, b2] = fastestLink(ctx, p[gk]);
        struct Candidate {
          int x, y;
          double gain;
        };
        std::vector<Candidate> candidates;
        for (auto [x, px] : {std::pair{a1, a2}, std::pair{a2, a1}})
          for (auto [y, py] : {std::pair{b1, b2}, std::pair{b2, b1}}) {
            double gain = paperGainTerm(ctx, x, px, p[gk]) +
                          paperGainTerm(ctx, y, py, p[gj]);
            if (gain > 0)
              candidates.push_back({x, y, gain});
          }
        std::stable_sort(candidates.begin(), candidates.end(),
                         [](const Candidate &l, const Candidate &r) {
                           return l.gain > r.gain;
                         });
        for (const Candidate &c : candidates) {
          if (state.costAfterSwap(c.x, c.y) < state.cost() - eps) {
            state.swap(c.x, c.y);
            improved = true;
            break;
          }
        }
      }
  }
}

/// The circular variant: a random cycle of three groups g0 -> g1 -> g2 ->
/// g0, each sending one endpoint of its fastest link to the next, chosen by
/// the summed paper gain; applied when the exact cost improves. `tries`
/// random cycles.
void circularLocalSearch(SearchContext &ctx, LayoutState &state, int tries) {
  if (ctx.dPP < 3 || ctx.dDP < 2)
    return;
  const double eps = 1e-12;
  std::uniform_int_distribution<int> pick(0, ctx.dPP - 1);
  for (int t = 0; t < tries && !ctx.deadline.expired(); ++t) {
    int g[3] = {pick(ctx.rng), 0, 0};
    do
      g[1] = pick(ctx.rng);
    while (g[1] == g[0]);
    do
      g[2] = pick(ctx.rng);
    while (g[2] == g[0] || g[2] == g[1]);
    const Partition &p = state.partition();
    int chosen[3];
    double gain = 0;
    for (int i = 0; i < 3; ++i) {
      auto [x1, x2] = fastestLink(ctx, p[g[i]]);
      const std::vector<int> &next = p[g[(i + 1) % 3]];
      double g1 = paperGainTerm(ctx, x1, x2, next);
      double g2 = paperGainTerm(ctx, x2, x1, next);
      chosen[i] = g1 >= g2 ? x1 : x2;
      gain += std::max(g1, g2);
    }
    if (gain <= 0)
      continue;
    // The 3-cycle c0 -> g1, c1 -> g2, c2 -> g0 as two swaps.
    double before = state.cost();
    state.swap(chosen[0], chosen[1]); // c0 -> g1, c1 -> g0
    state.swap(chosen[1], chosen[2]); // c1 -> g2, c2 -> g0
    if (state.cost() >= before - eps) {
      state.swap(chosen[1], chosen[2]);
      state.swap(chosen[0], chosen[1]);
    }
  }
}

/// dtfm's exact-cost descent: first-improvement swaps between devices of
/// different groups, scanned in a random order, until a full scan finds none.
void exactSwapDescent(SearchContext &ctx, LayoutState &state) {
  std::vector<std::pair<int, int>> pairs;
  for (int a = 0; a < ctx.n; ++a)
    for (int b = a + 1; b < ctx.n; ++b)
      pairs.push_back({a, b});
  std::shuffle(pairs.begin(), pairs.end(), ctx.rng);
  size_t sinceImprovement = 0, i = 0;
  while (sinceImprovement < pairs.size() && !ctx.deadline.expired()) {
    auto [a, b] = pairs[i];
    i = (i + 1) % pairs.size();
    ++sinceImprovement;
    if (state.group(a) == state.group(b))
      continue;
    Score current = state.score();
    if (state.scoreAfterSwap(a, b, &current).betterThan(current)) {
      state.swap(a, b);
      sinceImprovement = 0;
    }
  }
}

/// Kernighan-Lin between two groups: repeatedly tentatively swap the unlocked
/// pair with the best classic gain (reduction of the summed intra-group link
/// costs), lock it, and keep the prefix of swaps with the best cumulative
/// gain. Returns whether anything changed.
bool kernighanLinPass(SearchContext &ctx, LayoutState &state, int gj,
                      int gk) {
  std::vector<int> A = state.partition()[gj], B = state.partition()[gk];
  auto internal = [&](int x, const std::vector<int> &group) {
    double s = 0;
    for (int d : group)
      if (d != x)
        s += ctx.w(x, d);
    return s;
  };
  std::vector<bool> lockedA(A.size(), false), lockedB(B.size(), false);
  std::vector<std::pair<int, int>> swaps;
  std::vector<double> cumulative;
  double sum = 0;
  for (size_t step = 0; step < A.size(); ++step) {
    double bestGain = -std::numeric_limits<double>::infinity();
    size_t bi = 0, bj = 0;
    for (size_t i = 0; i < A.size(); ++i) {
      if (lockedA[i])
        continue;
      for (size_t j = 0; j < B.size(); ++j) {
        if (lockedB[j])
          continue;
        int x = A[i], y = B[j];
        // Sum of intra-group costs removed minus added by the swap.
        double gain = internal(x, A) + internal(y, B) -
                      (internal(x, B) - ctx.w(x, y)) -
                      (internal(y, A) - ctx.w(x, y));
        if (gain > bestGain) {
          bestGain = gain;
          bi = i;
          bj = j;
        }
      }
    }
    std::swap(A[bi], B[bj]);
    lockedA[bi] = lockedB[bj] = true;
    swaps.push_back({A[bi], B[bj]}); // after the swap: A[bi] came from B
    sum += bestGain;
    cumulative.push_back(sum);
  }
  size_t bestPrefix = 0;
  double bestSum = 1e-12;
  for (size_t k = 0; k < cumulative.size(); ++k)
    if (cumulative[k] > bestSum) {
      bestSum = cumulative[k];
      bestPrefix = k + 1;
    }
  for (size_t k = 0; k < bestPrefix; ++k)
    state.swap(swaps[k].second, swaps[k].first);
  return bestPrefix > 0;
}

//===----------------------------------------------------------------------===//
// Algorithms
//===----------------------------------------------------------------------===//

Partition searchRandom(SearchContext &ctx) {
  Partition best;
  double bestCost = std::numeric_limits<double>::infinity();
  for (int k = 0; k < std::max(1, ctx.options.randomSamples); ++k) {
    if (k > 0 && ctx.deadline.expired())
      break;
    Partition p = ctx.randomPartition();
    ++ctx.evaluations;
    double c = ctx.model.totalCost(p);
    if (c < bestCost) {
      bestCost = c;
      best = std::move(p);
      if (ctx.options.progress)
        ctx.options.progress(k, bestCost);
    }
  }
  return best;
}

Partition searchKernighanLin(SearchContext &ctx) {
  Partition best;
  double bestCost = std::numeric_limits<double>::infinity();
  for (int start = 0; start < 4; ++start) {
    if (start > 0 && ctx.deadline.expired())
      break;
    LayoutState state(ctx.model, ctx.randomPartition(), ctx.evaluations);
    for (bool changed = true; changed && !ctx.deadline.expired();) {
      changed = false;
      // A pass between two groups of D_DP costs D_DP^4 link lookups: the
      // deadline is checked before each.
      for (int gj = 0; gj < ctx.dPP && !ctx.deadline.expired(); ++gj)
        for (int gk = gj + 1; gk < ctx.dPP && !ctx.deadline.expired(); ++gk)
          changed |= kernighanLinPass(ctx, state, gj, gk);
    }
    if (state.cost() < bestCost) {
      bestCost = state.cost();
      best = state.partition();
      if (ctx.options.progress)
        ctx.options.progress(start, bestCost);
    }
  }
  return best;
}

/// DT-FM's hybrid genetic algorithm on the engine (Genetic.h): members
/// improved by the paper's local search, its circular variant and (unless
/// `exactDescent` is off) dtfm's exact-cost descent, all incremental.
Partition searchGenetic(SearchContext &ctx, bool exactDescent) {
  GeneticLocalSearch improve = [&](Partition p) {
    LayoutState state(ctx.model, std::move(p), ctx.evaluations);
    paperLocalSearch(ctx, state);
    circularLocalSearch(ctx, state, ctx.dPP);
    // The descent tries every swap, the paper's candidates included, so
    // nothing is left for the paper's local search afterwards.
    if (exactDescent)
      exactSwapDescent(ctx, state);
    GeneticMember m{state.partition(), state.cost()};
    // The order of the groups is the TSP's to choose: canonical up to it.
    for (std::vector<int> &g : m.partition)
      std::sort(g.begin(), g.end());
    std::sort(m.partition.begin(), m.partition.end());
    return m;
  };
  bool small = ctx.n <= 16;
  GeneticOptions genetic;
  genetic.dataParallel = ctx.dDP;
  genetic.pipelineParallel = ctx.dPP;
  genetic.population =
      std::max(2, ctx.options.population > 0 ? ctx.options.population
                                             : (small ? 12 : 6));
  genetic.offspring =
      ctx.options.offspring > 0 ? ctx.options.offspring : (small ? 60 : 12);
  // Rank order and its transpose always start.
  genetic.guaranteedSeeds = 2;
  genetic.progress = ctx.options.progress;
  return geneticSearch(genetic, {ctx.rankOrder(), ctx.strided()}, improve,
                       ctx.rng, ctx.deadline);
}

} // namespace

Partition dtfm::planner::opFenceLayout(const Cluster &cluster, int dataParallel,
                                       int pipelineParallel) {
  int n = dataParallel * pipelineParallel;
  std::vector<int> community = clusterDevicesByBandwidth(cluster);
  int count = *std::max_element(community.begin(), community.end()) + 1;
  std::vector<std::vector<int>> members(count);
  for (int d = 0; d < n; ++d)
    members[community[d]].push_back(d);
  auto meanBandwidth = [&](int a, int b) {
    double sum = 0;
    for (int x : members[a])
      for (int y : members[b])
        sum += cluster.bandwidthGbps(x, y);
    return sum / (members[a].size() * members[b].size());
  };
  // Chain: start at the largest community, always step to the unvisited one
  // with the fastest mean link (ties to the lower label).
  std::vector<int> chain;
  std::vector<bool> used(count, false);
  int current = 0;
  for (int c = 1; c < count; ++c)
    if (members[c].size() > members[current].size())
      current = c;
  for (int step = 0; step < count; ++step) {
    chain.push_back(current);
    used[current] = true;
    int next = -1;
    for (int c = 0; c < count; ++c)
      if (!used[c] && (next < 0 || meanBandwidth(current, c) >
                                       meanBandwidth(current, next)))
        next = c;
    current = next;
  }
  Partition p(pipelineParallel);
  int position = 0;
  for (int c : chain)
    for (int d : members[c])
      p[position++ / dataParallel].push_back(d);
  return p;
}

SearchResult dtfm::planner::searchLayout(const CostModel &model,
                                         SearchAlgorithm algorithm,
                                         const SearchOptions &options) {
  SearchContext ctx(model, options);
  Partition partition;
  switch (algorithm) {
  case SearchAlgorithm::RankOrder:
    partition = ctx.rankOrder();
    break;
  case SearchAlgorithm::Random:
    partition = searchRandom(ctx);
    break;
  case SearchAlgorithm::KernighanLin:
    partition = searchKernighanLin(ctx);
    break;
  case SearchAlgorithm::Genetic:
    partition = searchGenetic(ctx, /*exactDescent=*/true);
    break;
  case SearchAlgorithm::GeneticPaper:
    partition = searchGenetic(ctx, /*exactDescent=*/false);
    break;
  case SearchAlgorithm::OpFence:
    partition = opFenceLayout(model.getCluster(), ctx.dDP, ctx.dPP);
    break;
  }
  SearchResult result;
  result.cost = model.evaluate(partition);
  result.partition = std::move(partition);
  result.evaluations = ctx.evaluations + 1;
  result.wallSeconds = ctx.deadline.elapsed();
  return result;
}
