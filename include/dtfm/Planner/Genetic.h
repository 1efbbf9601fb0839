//===- Genetic.h - One genetic search over device partitions ----*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The hybrid genetic algorithm behind both device-assignment searches that
// evolve partitions (DT-FM's `genetic` in Search.h, and the objective-driven
// search of algorithm=hetero): a population of balanced partitions of
// D_DP x D_PP devices into D_PP groups, each member improved by a local
// search; per generation two distinct random parents give one child by
// crossover (a random half of the devices takes the group the second parent
// gives them, balance kept by swaps); after its local search the child
// replaces the worst member when it is better and not a duplicate.
//
// The searches differ only in their local search, their objective, their
// seeds and their population sizes, which the caller supplies.
//
// Determinism: one random stream, the caller's, drives the random members,
// the choice of parents, the crossover and whatever the local search draws,
// always in the same order; for a given seed the result is the same unless
// the deadline cuts the search short.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLANNER_GENETIC_H
#define DTFM_PLANNER_GENETIC_H

#include "dtfm/Planner/Search.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace dtfm::planner {

/// Stops a search when its budget is spent; started at construction.
class Deadline {
public:
  /// `seconds` of 0 (or less): never expires.
  explicit Deadline(double seconds)
      : start(std::chrono::steady_clock::now()), seconds(seconds) {}
  bool expired() const { return seconds > 0 && elapsed() >= seconds; }
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  }

private:
  std::chrono::steady_clock::time_point start;
  double seconds;
};

//===----------------------------------------------------------------------===//
// Balanced partitions
//===----------------------------------------------------------------------===//

/// Group g = devices g D_DP .. (g + 1) D_DP - 1: Megatron-LM's rank order,
/// data-parallel ranks innermost.
Partition rankOrderPartition(int dataParallel, int pipelineParallel);

/// Group j = devices j, j + D_PP, j + 2 D_PP, ...: rank order with the
/// pipeline innermost (consecutive devices, often one machine, form one
/// pipeline).
Partition stridedPartition(int dataParallel, int pipelineParallel);

/// The devices shuffled once by `rng`, then cut into groups of D_DP.
Partition randomPartition(int dataParallel, int pipelineParallel,
                          std::mt19937_64 &rng);

/// Child of two balanced partitions with the same number of groups: p1's
/// groups, with a random half of the devices moved to the group p2 gives
/// them (p2's groups first relabelled greedily to agree with p1's as much as
/// possible), balance kept by swapping with a device not yet placed.
Partition crossoverPartitions(const Partition &p1, const Partition &p2,
                              std::mt19937_64 &rng);

//===----------------------------------------------------------------------===//
// The engine
//===----------------------------------------------------------------------===//

/// A member of the population: its partition in the local search's canonical
/// form (so that duplicates compare equal), and its cost (lower is better).
struct GeneticMember {
  Partition partition;
  double cost = 0;
};

/// Improves a starting partition and returns it as a member. It may draw
/// from the search's random stream and should respect its deadline.
using GeneticLocalSearch = std::function<GeneticMember(Partition)>;

struct GeneticOptions {
  int dataParallel = 1;     ///< D_DP: devices per group
  int pipelineParallel = 1; ///< D_PP: groups
  /// Members kept; seeds first, then random partitions while the budget
  /// lasts.
  int population = 2;
  /// Generations, one child each.
  int offspring = 0;
  /// The first `guaranteedSeeds` seeds join the population even when the
  /// deadline has passed (the search needs a member to return); later ones
  /// only while it lasts.
  int guaranteedSeeds = 1;
  /// Called with (generation, best cost) whenever the best improves
  /// (generation 0: the initial population).
  std::function<void(int, double)> progress;
};

/// Runs the genetic search from `seeds` and returns the best member's
/// partition. `rng` and `deadline` are the caller's, shared with its local
/// search.
Partition geneticSearch(const GeneticOptions &options,
                        const std::vector<Partition> &seeds,
                        const GeneticLocalSearch &improve, std::mt19937_64 &rng,
                        const Deadline &deadline);

//===----------------------------------------------------------------------===//
// The engine on any objective
//===----------------------------------------------------------------------===//

/// An objective over partitions whose group k runs pipeline stage k (lower
/// is better; infinity for infeasible).
using LayoutObjective = std::function<double(const Partition &)>;

/// The genetic search on any objective where the order of the groups
/// matters: as local search, first-improvement swaps of two neighbouring
/// stages and of two devices of different stages, each fully re-evaluated.
/// Starts from `seeds` (each gets a place; then random partitions); the
/// options' seed, budget, population, offspring and progress apply. Returns
/// the best partition, in stage order; adds its evaluations to
/// `evaluations` when given.
Partition searchWithObjective(const LayoutObjective &objective,
                              const SearchOptions &options,
                              const std::vector<Partition> &seeds,
                              int64_t *evaluations = nullptr);

} // namespace dtfm::planner

#endif // DTFM_PLANNER_GENETIC_H
