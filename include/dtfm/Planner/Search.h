//===- Search.h - Device assignment search (DT-FM and baselines) -*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Searches partitions of N = D_DP x D_PP devices into D_PP data-parallel
// groups minimising the DT-FM cost (CostModel.h):
//
//   rank-order  groups of consecutive device indices, the layout Megatron-LM
//               uses (data-parallel ranks innermost).
//   random      the best of K random balanced partitions.
//   kl          Kernighan-Lin passes (locked tentative swaps, best prefix)
//               between every pair of groups with the classic gain on the
//               pipeline link costs, from the best of a few random starts.
//   genetic     DT-FM's hybrid genetic algorithm: a population of balanced
//               partitions; offspring by taking a random half of the devices'
//               groups from a second parent (repairing balance by swaps);
//               local search with the paper's candidates -- the endpoints of
//               the fastest link inside each of two groups, four swaps, ranked
//               by the paper's gain -- and its circular variant over three
//               groups; then (dtfm's addition) a swap descent on the exact
//               cost with incremental re-evaluation. The offspring replaces
//               the worst member when it is better and not a duplicate.
//   genetic-paper  the same without dtfm's exact-cost descent.
//   op-fence    FusionLLM's OP-Fence in this setting: Louvain communities of
//               devices by bandwidth each own a contiguous range of pipeline
//               stages (a connected sub-DAG), so slow links between
//               communities are crossed only where one range ends; the
//               communities are chained greedily by mean bandwidth, starting
//               from the largest.
//
// `genetic` and `genetic-paper` run the genetic engine of Genetic.h.
//
// All algorithms are deterministic for a given seed unless a time budget
// cuts them short.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLANNER_SEARCH_H
#define DTFM_PLANNER_SEARCH_H

#include "dtfm/Planner/CostModel.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace dtfm::planner {

enum class SearchAlgorithm { RankOrder, Random, KernighanLin, Genetic,
                             GeneticPaper, OpFence };

/// "rank-order", "random", "kl", "genetic", "genetic-paper", "op-fence".
const char *searchAlgorithmName(SearchAlgorithm algorithm);
std::optional<SearchAlgorithm> parseSearchAlgorithm(const std::string &name);
/// All algorithms, in the order above.
std::vector<SearchAlgorithm> allSearchAlgorithms();

struct SearchOptions {
  int dataParallel = 0;  ///< D_DP
  int pipelineParallel = 0; ///< D_PP
  uint64_t seed = 0;
  /// Wall-clock budget in seconds; 0 means none (fully deterministic).
  double timeBudgetSeconds = 0;
  /// Random: how many partitions are drawn.
  int randomSamples = 100;
  /// Genetic: population size and number of offspring; 0 picks by size:
  /// 12 and 60 up to 16 devices (evaluations are cheap there), 6 and 12
  /// beyond (enough to match the paper's scheduler on its 64-GPU scenarios).
  int population = 0;
  int offspring = 0;
  /// Called with (generation, best cost) whenever the best improves.
  std::function<void(int, double)> progress;
};

struct SearchResult {
  Partition partition;
  LayoutCost cost;
  /// Full cost-model evaluations (incremental ones included).
  int64_t evaluations = 0;
  double wallSeconds = 0;
};

/// OP-Fence's layout of the cluster's D_DP x D_PP devices, in stage order
/// (it needs no cost model: communities by bandwidth).
Partition opFenceLayout(const Cluster &cluster, int dataParallel,
                        int pipelineParallel);

/// Runs `algorithm`. The options' D_DP x D_PP must equal the cluster size.
SearchResult searchLayout(const CostModel &model, SearchAlgorithm algorithm,
                          const SearchOptions &options);

} // namespace dtfm::planner

#endif // DTFM_PLANNER_SEARCH_H
