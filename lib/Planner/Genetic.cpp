//===- Genetic.cpp - One genetic search over device partitions ------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Genetic.h"

#include <algorithm>
#include <limits>
#include <numeric>

using namespace dtfm::planner;

//===----------------------------------------------------------------------===//
// Balanced partitions
//===----------------------------------------------------------------------===//

Partition dtfm::planner::rankOrderPartition(int dataParallel,
                                            int pipelineParallel) {
  Partition p(pipelineParallel);
  for (int d = 0; d < dataParallel * pipelineParallel; ++d)
    p[d / dataParallel].push_back(d);
  return p;
}

Partition dtfm::planner::stridedPartition(int dataParallel,
                                          int pipelineParallel) {
  Partition p(pipelineParallel);
  for (int d = 0; d < dataParallel * pipelineParallel; ++d)
    p[d % pipelineParallel].push_back(d);
  return p;
}

Partition dtfm::planner::randomPartition(int dataParallel, int pipelineParallel,
                                         std::mt19937_64 &rng) {
  int n = dataParallel * pipelineParallel;
  std::vector<int> devices(n);
  std::iota(devices.begin(), devices.end(), 0);
  std::shuffle(devices.begin(), devices.end(), rng);
  Partition p(pipelineParallel);
  for (int i = 0; i < n; ++i)
    p[i / dataParallel].push_back(devices[i]);
  return p;
}

Partition dtfm::planner::crossoverPartitions(const Partition &p1,
                                             const Partition &p2,
                                             std::mt19937_64 &rng) {
  int groups = static_cast<int>(p1.size());
  int n = 0;
  for (const std::vector<int> &group : p1)
    n += static_cast<int>(group.size());
  std::vector<int> groupOf1(n), groupOf2(n);
  for (int g = 0; g < groups; ++g) {
    for (int d : p1[g])
      groupOf1[d] = g;
    for (int d : p2[g])
      groupOf2[d] = g;
  }
  // Greedy relabelling of p2's groups by overlap with p1's.
  std::vector<std::vector<int>> overlap(groups, std::vector<int>(groups, 0));
  for (int d = 0; d < n; ++d)
    ++overlap[groupOf2[d]][groupOf1[d]];
  std::vector<int> label(groups, -1);
  std::vector<bool> taken(groups, false);
  for (int round = 0; round < groups; ++round) {
    int bi = -1, bj = -1, bestOverlap = -1;
    for (int i = 0; i < groups; ++i)
      for (int j = 0; j < groups; ++j)
        if (label[i] < 0 && !taken[j] && overlap[i][j] > bestOverlap) {
          bestOverlap = overlap[i][j];
          bi = i;
          bj = j;
        }
    label[bi] = bj;
    taken[bj] = true;
  }
  std::vector<int> child = groupOf1;
  std::vector<int> devices(n);
  std::iota(devices.begin(), devices.end(), 0);
  std::shuffle(devices.begin(), devices.end(), rng);
  std::vector<bool> fixed(n, false);
  for (int i = 0; i < n / 2; ++i) {
    int d = devices[i];
    int target = label[groupOf2[d]];
    fixed[d] = true;
    if (child[d] == target)
      continue;
    // Swap with a not-yet-fixed device of the target group.
    for (int e = 0; e < n; ++e) {
      if (child[e] == target && !fixed[e]) {
        child[e] = child[d];
        child[d] = target;
        break;
      }
    }
  }
  Partition result(groups);
  for (int d = 0; d < n; ++d)
    result[child[d]].push_back(d);
  return result;
}

//===----------------------------------------------------------------------===//
// The engine
//===----------------------------------------------------------------------===//

Partition dtfm::planner::geneticSearch(const GeneticOptions &options,
                                       const std::vector<Partition> &seeds,
                                       const GeneticLocalSearch &improve,
                                       std::mt19937_64 &rng,
                                       const Deadline &deadline) {
  int size = options.population;
  std::vector<GeneticMember> population;
  for (size_t k = 0; k < seeds.size(); ++k) {
    if (static_cast<int>(population.size()) >= size ||
        (static_cast<int>(k) >= options.guaranteedSeeds && deadline.expired()))
      break;
    population.push_back(improve(seeds[k]));
  }
  while (static_cast<int>(population.size()) < size && !deadline.expired())
    population.push_back(improve(
        randomPartition(options.dataParallel, options.pipelineParallel, rng)));

  double best = std::numeric_limits<double>::infinity();
  auto report = [&](int generation) {
    for (const GeneticMember &m : population)
      if (m.cost < best) {
        best = m.cost;
        if (options.progress)
          options.progress(generation, best);
      }
  };
  report(0);

  // The parents are drawn from a distribution fixed here, after seeding:
  // the population keeps its size from now on.
  std::uniform_int_distribution<size_t> pick(0, population.size() - 1);
  for (int generation = 1; generation <= options.offspring; ++generation) {
    if (deadline.expired() || population.size() < 2)
      break;
    size_t i = pick(rng), j = pick(rng);
    while (j == i)
      j = pick(rng);
    GeneticMember child = improve(crossoverPartitions(
        population[i].partition, population[j].partition, rng));
    auto worst =
        std::max_element(population.begin(), population.end(),
                         [](const GeneticMember &l, const GeneticMember &r) {
                           return l.cost < r.cost;
                         });
    bool duplicate = std::any_of(
        population.begin(), population.end(),
        [&](const GeneticMember &m) { return m.partition == child.partition; });
    if (!duplicate && child.cost < worst->cost) {
      *worst = std::move(child);
      report(generation);
    }
  }
  return std::min_element(population.begin(), population.end(),
                          [](const GeneticMember &l, const GeneticMember &r) {
                            return l.cost < r.cost;
                          })
      ->partition;
}

//===----------------------------------------------------------------------===//
// The engine on any objective
//===----------------------------------------------------------------------===//

Partition dtfm::planner::searchWithObjective(
    const LayoutObjective &objective, const SearchOptions &options,
    const std::vector<Partition> &seeds, int64_t *evaluations) {
  std::mt19937_64 rng(options.seed);
  Deadline deadline(options.timeBudgetSeconds);
  int64_t count = 0;
  int pp = options.pipelineParallel;
  auto evaluate = [&](const Partition &p) {
    ++count;
    return objective(p);
  };
  // Members sorted inside their groups; the groups keep their stage order.
  auto canonical = [](Partition &p) {
    for (std::vector<int> &g : p)
      std::sort(g.begin(), g.end());
  };
  const double eps = 1e-12;
  GeneticLocalSearch descend = [&](Partition p) {
    canonical(p);
    double cost = evaluate(p);
    for (bool improved = true; improved && !deadline.expired();) {
      improved = false;
      // Neighbouring stages trade places.
      for (int s = 0; s + 1 < pp && !improved; ++s) {
        std::swap(p[s], p[s + 1]);
        double c = evaluate(p);
        if (c < cost - eps) {
          cost = c;
          improved = true;
        } else {
          std::swap(p[s], p[s + 1]);
        }
      }
      // Two devices of different stages trade places.
      for (int g = 0; g < pp && !improved && !deadline.expired(); ++g)
        for (int h = g + 1; h < pp && !improved; ++h)
          for (size_t i = 0; i < p[g].size() && !improved; ++i)
            for (size_t j = 0; j < p[h].size() && !improved; ++j) {
              std::swap(p[g][i], p[h][j]);
              double c = evaluate(p);
              if (c < cost - eps) {
                cost = c;
                improved = true;
              } else {
                std::swap(p[g][i], p[h][j]);
              }
            }
    }
    canonical(p);
    return GeneticMember{p, cost};
  };

  // Each evaluation is a full objective here (for hetero, a chain partition
  // per candidate): smaller populations than DT-FM's incremental search.
  bool small = options.dataParallel * pp <= 16;
  GeneticOptions genetic;
  genetic.dataParallel = options.dataParallel;
  genetic.pipelineParallel = pp;
  genetic.population = std::max(2, options.population > 0 ? options.population
                                                          : (small ? 8 : 4));
  // Every seed gets a place.
  genetic.population =
      std::max<int>(genetic.population, static_cast<int>(seeds.size()));
  genetic.offspring =
      options.offspring > 0 ? options.offspring : (small ? 24 : 6);
  genetic.guaranteedSeeds = 1;
  genetic.progress = options.progress;
  Partition best = geneticSearch(genetic, seeds, descend, rng, deadline);
  if (evaluations)
    *evaluations += count;
  return best;
}
