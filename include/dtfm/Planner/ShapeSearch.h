//===- ShapeSearch.h - Choosing the plan's shape ------------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// DT-FM fixes D_DP x D_PP = N and uses every device. This search chooses,
// for a global batch of G samples per iteration:
//
//  - the devices to use (the rest stay idle),
//  - D_PP (stages, sized unevenly for their devices) and D_DP (the width of
//    every stage: the runtime runs D_DP identical pipelines, so every stage
//    has the same width),
//  - the micro-batch size m and count n_b = G / (D_DP m),
//
// minimising the predicted iteration time of the hetero model (Hetero.h:
// FusionLLM's pipelined time + data-parallel synchronisation), with every
// stage fitting its devices' memory.
//
// Devices are grouped into units (same region, speed and memory); subsets
// are unions of units. Phase 1, greedy elimination: starting from all units,
// repeatedly drop the unit whose removal lowers the predicted time most,
// while one does; each subset is scored at every factorisation D_DP x D_PP
// of its size with three seed layouts (region-major rank order, strided,
// fastest first), stages rebalanced per layout. Phase 2: the best shapes are
// scored at every micro-batch size and their layouts refined by
// first-improvement device swaps between stages (a bounded number of
// evaluations). Deterministic unless the time budget cuts a phase short
// (reported in budgetExhausted).
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLANNER_SHAPESEARCH_H
#define DTFM_PLANNER_SHAPESEARCH_H

#include "dtfm/Planner/Hetero.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dtfm::planner {

struct ShapeProblem {
  const Cluster *cluster = nullptr;
  /// The model for one micro-batch of `workload.microBatchSize` samples; a
  /// candidate size rescales it (Workload::withMicroBatchSize).
  Workload workload;
  /// Gradient sync, AdaTopK, schedule and state bytes per parameter byte
  /// as the plan will use them (`stages.microBatches` is set per candidate).
  TrainingOptions training;
  /// Samples per iteration (over all pipelines).
  int64_t globalBatch = 1;
  /// Micro-batch sizes the model accepts (each divides no more than it
  /// must: a size is used with D_DP only when D_DP x size divides G).
  std::vector<int64_t> microBatchSizes;
  /// When positive, only shapes with this D_DP / D_PP.
  int fixedDataParallel = 0;
  int fixedPipelineParallel = 0;
  /// Each shape's schedule chosen (schedule=auto): its layout, found under
  /// `training.stages.schedule`, scored under zero bubble (ZB-H1) too,
  /// which it takes where that fits and is faster.
  bool chooseSchedule = false;
};

struct ShapeSearchOptions {
  /// Wall-clock budget of the whole search (0: none).
  double budgetSeconds = 0;
  /// Distinct runner-up shapes to report.
  int runnersUp = 3;
  /// Shapes refined in phase 2, and evaluations per refinement. 300: on
  /// bench-shape's seven clusters and Sailor's two (bench-sailor) 3000 chose
  /// the same plans, 2-5x slower (4 s instead of 0.5 s at 128-160 GPUs).
  int refinedShapes = 4;
  int refineEvaluations = 300;
};

/// One plan shape and its layout.
struct ShapeChoice {
  std::vector<int> devices; ///< used, ascending cluster indices
  int dataParallel = 0;
  int pipelineParallel = 0;
  int64_t microBatchSize = 0;
  int microBatches = 0;
  /// Group k (cluster indices) runs stage k; pipeline i takes member i.
  Partition stages;
  HeteroCost cost;
  /// The micro-batch schedule `cost` is for.
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  double iterationSeconds() const { return cost.iterationSeconds(); }
};

/// Devices left idle and why.
struct IdleDevices {
  std::vector<int> devices;
  std::string reason;
};

struct ShapeSearchResult {
  ShapeChoice best;
  /// Best first; each differs from the others and the best in D_DP, D_PP
  /// or the number of devices.
  std::vector<ShapeChoice> runnersUp;
  std::vector<IdleDevices> idle;
  int64_t shapesScored = 0;
  double searchSeconds = 0;
  bool budgetExhausted = false;
};

/// The micro-batch sizes to try for a model built for `modelSize` samples
/// per micro-batch: those from a quarter to four times it that divide the
/// global batch.
std::vector<int64_t> microBatchSizeCandidates(int64_t modelSize,
                                              int64_t globalBatch);

/// Clusters of more devices than this are large: the shape search's default
/// budget grows, and the searches that re-plan `--dtfm-plan`'s candidates
/// share it (below, they run their fixed rounds: the same plan, byte for
/// byte, on any machine however loaded).
inline constexpr size_t kLargeClusterDevices = 128;

/// The search budget `--dtfm-plan` gives a cluster of `devices` when its
/// `budget` option is 0: 3 s up to kLargeClusterDevices, 10 s beyond.
double defaultSearchBudgetSeconds(size_t devices);

/// Searches; false with a one-line `error` when no shape fits in memory (or
/// no micro-batch size divides the global batch).
bool searchShapes(const ShapeProblem &problem,
                  const ShapeSearchOptions &options, ShapeSearchResult &result,
                  std::string &error);

} // namespace dtfm::planner

#endif // DTFM_PLANNER_SHAPESEARCH_H
