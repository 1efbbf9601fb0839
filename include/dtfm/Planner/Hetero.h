//===- Hetero.h - Devices of mixed speed and memory in one plan --*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// algorithm=hetero: search device assignments (data-parallel groups in
// pipeline order) where every candidate's stages are re-balanced for its own
// devices by the exact chain partitioner (StagePartition.h), scored by the
// pipelined iteration time of FusionLLM (eq. 3) plus data-parallel
// synchronisation:
//
//   T = sum_p (C_p + R_p) + (n_b - 1) max_p max(C_p, R_p) + max_p DP_p
//
// C_p: compute of stage p per micro-batch on its group's slowest member
// (FLOPs / lambda peak); R_p: activations forward and gradients backward
// across the boundary to stage p+1, through the bottleneck matching of the
// two groups (DT-FM's eq. 3 weights); DP_p: DT-FM's DATAP-COST of group p
// with c_DP = the gradient bytes of stage p's own parameters.
//
// Relation to DT-FM's objective: DT-FM assumes equal stages on identical
// devices and scores only communication (DATAP + 2 TSP); here compute and
// memory of each device enter, stages may be uneven, and the pipeline's
// bubble ((n_b - 1) x the slowest step) is modelled.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLANNER_HETERO_H
#define DTFM_PLANNER_HETERO_H

#include "dtfm/Planner/CostModel.h"
#include "dtfm/Planner/Search.h"
#include "dtfm/Planner/StagePartition.h"

#include <limits>

namespace dtfm::planner {

struct HeteroProblem {
  const Cluster *cluster = nullptr;
  /// The model as a chain of blocks (per micro-batch).
  std::vector<ChainBlock> blocks;
  /// Bytes of one micro-batch's activation at a stage boundary.
  double boundaryBytes = 0;
  /// Bytes exchanged per byte of parameters when synchronising gradients.
  double gradientBytesPerParameterByte = 1;
  int dataParallel = 1;
  int pipelineParallel = 1;
  StagePartitionOptions stageOptions;
};

struct HeteroCost {
  bool feasible = false;
  double pipelineSeconds = 0;
  double dataParallelSeconds = 0;
  double iterationSeconds() const {
    return feasible ? pipelineSeconds + dataParallelSeconds
                    : std::numeric_limits<double>::infinity();
  }
  StagePlan plan;
  std::string error; ///< why it is infeasible
};

/// Evaluates partitions whose group k runs stage k.
class HeteroModel {
public:
  explicit HeteroModel(HeteroProblem problem);

  const HeteroProblem &getProblem() const { return problem; }
  /// Without `rebalance` the blocks are split evenly (the first stages take
  /// one more when they do not divide), as DT-FM and rank order assume; with
  /// it, the better of that and the split sized for the groups' devices by
  /// the chain partitioner (which minimises the slowest stage, but may give
  /// a stage more parameters to synchronise).
  HeteroCost evaluate(const Partition &stages, bool rebalance = true) const;

private:
  HeteroCost score(const Partition &stages, StagePlan plan) const;

  HeteroProblem problem;
  CostModel links; ///< pipeline link costs for boundaryBytes
};

/// Even split of `blocks` into `stages` bounds.
std::vector<int> evenBounds(int blocks, int stages);

/// The hetero search: a genetic search (crossover as in `genetic`; local
/// search = first-improvement device swaps and swaps of neighbouring
/// stages, on the full objective) seeded with rank order, its transpose,
/// the devices sorted by speed, and DT-FM's best layout in pipeline order.
/// Returns the best partition in pipeline order.
Partition searchHetero(const HeteroModel &model, const SearchOptions &options,
                       int64_t *evaluations = nullptr);

} // namespace dtfm::planner

#endif // DTFM_PLANNER_HETERO_H
