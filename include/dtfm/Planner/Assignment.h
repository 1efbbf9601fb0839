//===- Assignment.h - Devices to data-parallel groups and stages -*- C++
//-*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// What --dtfm-assign-devices plans: for each candidate shape D_DP x D_PP of
// the cluster (every factorisation with D_PP at most the model's layers,
// unless D_DP or D_PP is given or a shape was chosen before), DT-FM's
// communication volumes of the workload for that shape
//
//   c_DP = 4 bytes x trainable parameters / D_PP (or dp-bytes)
//   c_PP = boundary bytes x micro-batches        (or pp-bytes)
//
// and one search: one of Search.h's algorithms on DT-FM's cost, or
// algorithm=hetero's search on the hetero model (Hetero.h), whose stages are
// re-balanced per candidate and whose candidates must fit in memory. The
// best candidate wins: the lowest DT-FM cost, or for hetero the lowest
// predicted iteration time. Its stages are then laid out in pipeline order,
// every stage's devices permuted so that pipeline i runs on member i of
// each (DT-FM's bottleneck matchings of neighbouring stages).
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLANNER_ASSIGNMENT_H
#define DTFM_PLANNER_ASSIGNMENT_H

#include "dtfm/Planner/Hetero.h"
#include "dtfm/Planner/Search.h"
#include "dtfm/Planner/Workload.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace dtfm::planner {

/// A shape chosen before (--dtfm-choose-shape): the assignment keeps its
/// D_DP x D_PP and micro-batches, and hetero adopts its layout.
struct ChosenShape {
  int dataParallel = 0;
  int pipelineParallel = 0;
  int microBatches = 1;
  /// Group k runs stage k (indices of the cluster planned on).
  Partition layout;
  /// hetero: the stage bounds, when fixed (empty: chosen with the layout).
  std::vector<int> bounds;
};

struct AssignmentOptions {
  /// algorithm=hetero; otherwise `algorithm` on DT-FM's cost.
  bool hetero = false;
  SearchAlgorithm algorithm = SearchAlgorithm::Genetic;
  /// D_DP and D_PP asked for (0: any that divides the cluster).
  int dataParallel = 0;
  int pipelineParallel = 0;
  /// Micro-batches per pipeline.
  int microBatches = 1;
  /// c_DP and c_PP in bytes (0: from the workload).
  double dataParallelBytes = 0;
  double pipelineBytes = 0;
  uint64_t seed = 0;
  /// Wall-clock budget shared by the candidate shapes (0: none, so the plan
  /// is deterministic).
  double budgetSeconds = 0;
  /// Gradient sync and AdaTopK as the plan will use them (hetero's model).
  TrainingOptions training;
  /// Overrides the shape and micro-batches asked for.
  std::optional<ChosenShape> chosen;
  /// Called with (D_DP, D_PP, generation, best cost) whenever a shape's
  /// search improves.
  std::function<void(int, int, int, double)> progress;
};

struct AssignmentResult {
  int dataParallel = 0;
  int pipelineParallel = 0;
  /// DT-FM's volumes for the chosen shape.
  CommVolume volume;
  /// The partition (group k: stage order for hetero, the TSP's `order`
  /// otherwise) and its DT-FM cost, evaluations and search time.
  SearchResult search;
  /// hetero: the predicted iteration time and its stage bounds.
  std::optional<HeteroCost> hetero;
  /// Stage s's devices in pipeline order: pipeline i runs on member i.
  std::vector<std::vector<int>> stages;
  /// DT-FM's DATAP-COST of each of `stages`.
  std::vector<double> stageDataParallelSeconds;
  /// Candidate shapes tried.
  size_t shapesTried = 0;
};

/// Plans `workload` on `cluster`; false with a one-line `error` when the
/// cluster has no shape asked for, or (hetero) no layout fits in memory.
/// hetero needs the workload's chain (blocks, tied parameters, gradient
/// bytes); the other algorithms only its volumes.
bool planAssignment(const Cluster &cluster, const Workload &workload,
                    const AssignmentOptions &options, AssignmentResult &result,
                    std::string &error);

/// Whether the cluster has the shape asked for (the chosen shape's, else the
/// options' D_DP and D_PP where given); false with planAssignment's
/// one-line `error` when they do not multiply to the cluster's size. Lets a
/// caller report it before it builds what planning needs.
bool checkAssignmentShape(const Cluster &cluster,
                          const AssignmentOptions &options, std::string &error);

/// The stages of a DT-FM layout in pipeline order (`cost.order`), each
/// group's devices permuted along `cost.matchings` so that pipeline i runs
/// on member i of every stage.
std::vector<std::vector<int>> stagesInPipelineOrder(const Partition &partition,
                                                    const LayoutCost &cost);

} // namespace dtfm::planner

#endif // DTFM_PLANNER_ASSIGNMENT_H
