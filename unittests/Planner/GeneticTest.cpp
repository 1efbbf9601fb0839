//===- GeneticTest.cpp - The genetic engine over device partitions --------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Genetic.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <set>

using namespace dtfm::planner;

namespace {

/// Every device 0..n-1 exactly once, in `groups` groups of `size`.
void expectBalanced(const Partition &p, int groups, int size) {
  ASSERT_EQ(static_cast<int>(p.size()), groups);
  std::vector<int> all;
  for (const std::vector<int> &g : p) {
    EXPECT_EQ(static_cast<int>(g.size()), size);
    all.insert(all.end(), g.begin(), g.end());
  }
  std::sort(all.begin(), all.end());
  for (int d = 0; d < groups * size; ++d)
    ASSERT_EQ(all[d], d);
}

/// An objective where the order of the groups matters: a random cost per
/// (device, stage), summed, plus a random cost per pair of devices in
/// neighbouring stages. Stage-ordered partitions, as searchWithObjective
/// takes them.
struct RandomObjective {
  int n = 0, pp = 0;
  std::vector<double> place, link;

  RandomObjective(int n, int pp, uint64_t seed) : n(n), pp(pp) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> cost(0, 1);
    for (int i = 0; i < n * pp; ++i)
      place.push_back(cost(rng));
    for (int i = 0; i < n * n; ++i)
      link.push_back(cost(rng));
  }
  double operator()(const Partition &p) const {
    double total = 0;
    for (int s = 0; s < pp; ++s)
      for (int d : p[s]) {
        total += place[d * pp + s];
        if (s + 1 < pp)
          for (int e : p[s + 1])
            total += link[d * n + e];
      }
    return total;
  }
};

/// The minimum of `objective` over every stage-ordered balanced partition
/// (every assignment of a stage to each device with D_DP devices per stage).
double exhaustiveOptimum(const LayoutObjective &objective, int dp, int pp) {
  int n = dp * pp;
  double best = std::numeric_limits<double>::infinity();
  Partition current(pp);
  std::function<void(int)> place = [&](int d) {
    if (d == n) {
      best = std::min(best, objective(current));
      return;
    }
    for (int s = 0; s < pp; ++s) {
      if (static_cast<int>(current[s].size()) == dp)
        continue;
      current[s].push_back(d);
      place(d + 1);
      current[s].pop_back();
    }
  };
  place(0);
  return best;
}

} // namespace

TEST(Genetic, PartitionsAreBalanced) {
  expectBalanced(rankOrderPartition(3, 4), 4, 3);
  expectBalanced(stridedPartition(3, 4), 4, 3);
  EXPECT_EQ(rankOrderPartition(2, 2), (Partition{{0, 1}, {2, 3}}));
  EXPECT_EQ(stridedPartition(2, 2), (Partition{{0, 2}, {1, 3}}));
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 20; ++trial) {
    Partition a = randomPartition(4, 3, rng), b = randomPartition(4, 3, rng);
    expectBalanced(a, 3, 4);
    expectBalanced(crossoverPartitions(a, b, rng), 3, 4);
  }
}

TEST(Genetic, CrossoverOfAPartitionWithItselfKeepsIt) {
  // Relabelling matches every group to itself, so every device is already
  // where the second parent puts it.
  std::mt19937_64 rng(1);
  Partition p = randomPartition(3, 4, rng);
  for (std::vector<int> &g : p)
    std::sort(g.begin(), g.end());
  EXPECT_EQ(crossoverPartitions(p, p, rng), p);
}

TEST(Genetic, SearchWithObjectiveFindsTheExhaustiveOptimum) {
  // 8 devices as 2 x 4 and 4 x 2: 2520 resp. 70 stage-ordered partitions.
  for (auto [dp, pp] : {std::pair{2, 4}, std::pair{4, 2}})
    for (uint64_t instance = 0; instance < 4; ++instance) {
      RandomObjective objective(dp * pp, pp, 100 + instance);
      double optimum = exhaustiveOptimum(objective, dp, pp);
      SearchOptions options;
      options.dataParallel = dp;
      options.pipelineParallel = pp;
      options.seed = instance;
      options.offspring = 60;
      int64_t evaluations = 0;
      Partition best = searchWithObjective(
          objective, options, {rankOrderPartition(dp, pp)}, &evaluations);
      expectBalanced(best, pp, dp);
      EXPECT_NEAR(objective(best), optimum, 1e-12)
          << dp << " x " << pp << ", instance " << instance;
      EXPECT_GT(evaluations, 0);
    }
}

TEST(Genetic, SameSeedSamePlanAndTheSeedDrivesIt) {
  const int dp = 3, pp = 4;
  RandomObjective objective(dp * pp, pp, 7);
  auto run = [&](uint64_t seed, std::vector<double> *progress) {
    SearchOptions options;
    options.dataParallel = dp;
    options.pipelineParallel = pp;
    options.seed = seed;
    options.population = 3;
    options.offspring = 4;
    if (progress)
      options.progress = [progress](int, double cost) {
        progress->push_back(cost);
      };
    int64_t evaluations = 0;
    Partition p = searchWithObjective(objective, options, {}, &evaluations);
    return std::make_pair(p, evaluations);
  };
  std::vector<double> progress;
  auto first = run(1, &progress);
  EXPECT_EQ(run(1, nullptr), first);
  // The best only improves, and the search returns it.
  ASSERT_FALSE(progress.empty());
  EXPECT_TRUE(std::is_sorted(progress.rbegin(), progress.rend()));
  EXPECT_DOUBLE_EQ(progress.back(), objective(first.first));
  // Without seeds every member starts random: different seeds explore
  // differently (the evaluation counts differ for some of them).
  std::set<int64_t> counts;
  for (uint64_t seed = 0; seed < 6; ++seed)
    counts.insert(run(seed, nullptr).second);
  EXPECT_GT(counts.size(), 1u);
}

TEST(Genetic, EngineSeedsFirstThenRandomAndKeepsTheBest) {
  // A local search that records what it starts from and changes nothing;
  // cost: the stage of device 0.
  auto stageOfZero = [](const Partition &p) {
    for (size_t g = 0; g < p.size(); ++g)
      if (std::count(p[g].begin(), p[g].end(), 0))
        return static_cast<double>(g);
    return -1.0;
  };
  std::vector<Partition> starts;
  GeneticLocalSearch record = [&](Partition p) {
    starts.push_back(p);
    return GeneticMember{p, stageOfZero(p)};
  };
  GeneticOptions options;
  options.dataParallel = 2;
  options.pipelineParallel = 3;
  options.population = 4;
  options.offspring = 0;
  Partition last{{2, 3}, {4, 5}, {0, 1}}, middle{{2, 3}, {0, 1}, {4, 5}};
  std::mt19937_64 rng(0);
  Deadline none(0);
  Partition best = geneticSearch(options, {last, middle}, record, rng, none);
  ASSERT_EQ(starts.size(), 4u);
  EXPECT_EQ(starts[0], last);
  EXPECT_EQ(starts[1], middle);
  // The other members are random partitions from the caller's stream.
  std::mt19937_64 replay(0);
  EXPECT_EQ(starts[2], randomPartition(2, 3, replay));
  EXPECT_EQ(starts[3], randomPartition(2, 3, replay));
  // The best member (the first of equals) is returned.
  double minimum = 3;
  Partition expected;
  for (const Partition &p : starts)
    if (stageOfZero(p) < minimum) {
      minimum = stageOfZero(p);
      expected = p;
    }
  EXPECT_EQ(best, expected);
}

TEST(Genetic, SpentBudgetKeepsOnlyTheGuaranteedSeeds) {
  int calls = 0;
  GeneticLocalSearch count = [&](Partition p) {
    ++calls;
    return GeneticMember{p, static_cast<double>(calls)};
  };
  GeneticOptions options;
  options.dataParallel = 2;
  options.pipelineParallel = 2;
  options.population = 6;
  options.offspring = 10;
  std::vector<Partition> seeds(4, rankOrderPartition(2, 2));
  Deadline spent(1e-12);
  while (!spent.expired()) {
  }
  for (int guaranteed : {1, 2, 3}) {
    calls = 0;
    options.guaranteedSeeds = guaranteed;
    std::mt19937_64 rng(0);
    geneticSearch(options, seeds, count, rng, spent);
    // No random member, no child: the budget is spent.
    EXPECT_EQ(calls, guaranteed);
  }
}
