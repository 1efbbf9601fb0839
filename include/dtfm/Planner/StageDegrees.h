//===- StageDegrees.h - A tensor-parallel degree per stage -------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Plans where pipeline stages run at different tensor-parallel degrees
// (Sailor's V100 stage at TP 4 beside A100s whole). A stage of degree t has
// D_DP groups of t devices, each inside one node; every stage has the same
// D_DP (the runtime runs D_DP identical pipelines).
//
// The groups: larger degrees first (they need the fullest nodes), each from
// the slowest node with enough free devices left, ties in the cluster's
// order -- tensor parallelism divides a stage's work and memory, so it goes
// where devices are slow and small.
//
// The stage bounds: the chain partitioner (StagePartition.h) with stage s
// costed on the model sharded uniformly at its degree (per-member FLOPs and
// memory, its group sums on its node's links, the ops every member repeats)
// on its groups' slowest member. When the chain's first and last stages
// differ in degree, the blocks that own or read a tied parameter (GPT's
// embedding and head) are costed whole in both, as the sharding keeps such
// a table whole. The plan's model is then that chain's blocks of each
// stage, spliced; hetero's model (Hetero.h) scores it with the bounds fixed.
//
// searchStageDegrees tries, for D_PP = 2 .. maxStages, every sequence of
// the degrees the model shards to with at least two distinct degrees, at
// every D_DP whose groups the cluster holds and every micro-batch size
// whose D_DP x size divides the global batch; the uniform degrees are the
// shape search's (ShapeSearch.h), which --dtfm-choose-shape compares with.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLANNER_STAGEDEGREES_H
#define DTFM_PLANNER_STAGEDEGREES_H

#include "dtfm/Planner/Hetero.h"

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace dtfm::planner {

/// Groups of `degrees[s]` devices, `dataParallel` per stage, stage-major
/// (`stageGroups[s][k]`: indices into `cluster`, one node each), chosen as
/// the header says; false with a one-line `error` when the nodes run out.
bool stageTensorParallelGroups(
    const Cluster &cluster, const std::vector<int64_t> &degrees,
    int dataParallel, std::vector<std::vector<std::vector<int>>> &stageGroups,
    std::string &error);

/// The model of a plan with stage s on blocks [bounds[s], bounds[s + 1]) of
/// `stageModels[s]` (the model sharded at its degree): those blocks
/// spliced, everything else from `stageModels[0]`.
Workload spliceStageWorkloads(const std::vector<const Workload *> &stageModels,
                              const std::vector<int> &bounds);

struct StageDegreeProblem {
  /// The devices (not grouped).
  const Cluster *cluster = nullptr;
  /// The model sharded uniformly at each degree it shards to (1: whole),
  /// all per micro-batch of the same size, with the same chain of layers.
  std::map<int64_t, Workload> workloadAt;
  TrainingOptions training;
  int64_t globalBatch = 1;
  std::vector<int64_t> microBatchSizes;
  /// When positive, only this D_DP / D_PP.
  int fixedDataParallel = 0;
  int fixedPipelineParallel = 0;
  /// Stages tried when D_PP is not fixed: 2 .. maxStages.
  int maxStages = 3;
  /// Only plans faster than this matter (the best with one degree): a plan
  /// whose compute alone (n_b x its slowest stage, a lower bound of its
  /// pipeline) takes as long is not scored in full.
  double beat = std::numeric_limits<double>::infinity();
};

struct StageDegreeChoice {
  std::vector<int64_t> degrees; ///< per stage
  int dataParallel = 0;
  int64_t microBatchSize = 0;
  int microBatches = 0;
  /// Stage-major: groups[s][k] is pipeline k's group of stage s.
  std::vector<std::vector<std::vector<int>>> groups;
  HeteroCost cost; ///< cost.plan.bounds: the stage bounds
  double iterationSeconds() const { return cost.iterationSeconds(); }
};

/// Scores the layout of `choice` (its groups, D_DP, micro-batches and the
/// bounds in choice.cost.plan) with `workload`, the model as sharded for it
/// (spliceStageWorkloads, or the sharded module's own): hetero's model with
/// the bounds fixed, each group one device (groupCluster).
HeteroCost scoreStageLayout(const Cluster &cluster, const Workload &workload,
                            const TrainingOptions &training,
                            const StageDegreeChoice &choice,
                            const std::vector<int> &bounds);

/// Scores one plan: `degrees`, `dataParallel`, micro-batches of
/// `microBatchSize`; infeasible (cost.error) when the groups or the memory
/// do not allow it.
StageDegreeChoice scoreStageDegrees(const StageDegreeProblem &problem,
                                    const std::vector<int64_t> &degrees,
                                    int dataParallel, int64_t microBatchSize);

/// The fastest plan with at least two distinct degrees faster than
/// `problem.beat`, and the number of plans scored; false with a one-line
/// `error` when there is none (or the model shards to one degree only).
bool searchStageDegrees(const StageDegreeProblem &problem,
                        StageDegreeChoice &best, int64_t &scored,
                        std::string &error);

} // namespace dtfm::planner

#endif // DTFM_PLANNER_STAGEDEGREES_H
