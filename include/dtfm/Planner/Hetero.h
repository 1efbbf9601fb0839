//===- Hetero.h - Devices of mixed speed and memory in one plan --*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// algorithm=hetero: search device assignments (data-parallel groups in
// pipeline order) where every candidate's stages are re-balanced for its own
// devices by the exact chain partitioner (StagePartition.h), scored by the
// pipelined iteration time of FusionLLM (eq. 3) refined to the runtime's
// three slots, plus data-parallel synchronisation. For each pipeline (its
// devices chained by the bottleneck matchings of neighbouring groups):
//
//   T = sum_p (C_p + R_p) + (n_b - 1) max_p max(C_p, S_p, W_p / w_p)
//       + max_p DP_p
//
// C_p: compute of stage p per micro-batch (forward + backward) on its
// group's slowest member (FLOPs / lambda peak); R_p: the activation forward
// and its gradient backward across boundary p, latency + bytes / bandwidth
// each; S_p: stage p's send stream per micro-batch (activation to p+1,
// gradient to p-1: bytes / bandwidth only, a link's latency overlaps the
// next transfer); W_p / w_p: stage p keeps w_p micro-batches in flight
// (1F1B: min(n_b, D_PP - p)), each a round trip W_p = sum_{q >= p} (C_q +
// R_q) through the later stages. DP_p: DT-FM's DATAP-COST of group p with
// c_DP = the gradient bytes of stage p's own parameters (or the ring's
// all-reduce, or the cheaper of both, as the plan will sync), plus the
// once-per-iteration exchange of parameters tied to another stage's blocks
// (the weight out, its gradient back). With AdaTopK the
// transfers carry the bytes --dtfm-insert-compression will give them.
//
// Relation to DT-FM's objective: DT-FM assumes equal stages on identical
// devices and scores only communication (DATAP + 2 TSP); here compute and
// memory of each device enter, stages may be uneven, and the pipeline's
// bubble ((n_b - 1) x the slowest step) is modelled.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLANNER_HETERO_H
#define DTFM_PLANNER_HETERO_H

#include "dtfm/Planner/Compression.h"
#include "dtfm/Planner/CostModel.h"
#include "dtfm/Planner/Search.h"
#include "dtfm/Planner/StagePartition.h"
#include "dtfm/Planner/Workload.h"

#include <functional>
#include <limits>

namespace dtfm::planner {

/// One candidate shape of a workload on a cluster.
struct HeteroProblem {
  const Cluster *cluster = nullptr;
  /// The model, per micro-batch.
  Workload workload;
  /// The gradient sync, AdaTopK and stage options the plan will use
  /// (`training.stages.microBatches`: per pipeline).
  TrainingOptions training;
  int dataParallel = 1;
  int pipelineParallel = 1;
  /// Stage bounds fixed beforehand (a model sharded per stage: its layers
  /// cannot move to a stage of another degree); empty: evaluate chooses.
  std::vector<int> fixedBounds;
};

struct HeteroCost {
  bool feasible = false;
  double pipelineSeconds = 0;
  /// After its pipeline, the slowest stage's gradient all-reduce plus its
  /// tied parameters' exchange with other stages.
  double dataParallelSeconds = 0;
  /// Uneven replicas: micro-batches of each pipeline (pipeline i: member i
  /// of stage 0, chained through the matchings), summing to D_DP x n_b;
  /// empty when every pipeline takes n_b.
  std::vector<int> pipelineMicroBatches;
  /// The pipeline time with n_b micro-batches on every pipeline.
  double evenPipelineSeconds = 0;
  /// Local steps: the H the exchange was costed with (sync-every=auto
  /// chooses it per plan; 0: synchronous).
  int64_t syncEvery = 0;
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
  /// What a score needs of the partition alone (its pipelines, links and
  /// stage devices), shared by the splits evaluate scores.
  struct Layout;
  /// `groups`: stageDevices of `stages`, which evaluate has already.
  Layout layoutOf(const Partition &stages,
                  std::vector<StageDevice> groups) const;
  /// A split of the blocks (`plan`) on the partition's layout: the
  /// pipelines' time, then the data-parallel synchronisation's.
  HeteroCost score(const Layout &layout, StagePlan plan) const;

  /// Each pipeline's stages: compute, send stream, round trip.
  struct StageTimes;
  std::vector<std::vector<StageTimes>>
  stageTimesOf(const Layout &layout, const StagePlan &plan) const;
  /// A pipeline's time for any number of micro-batches.
  class PipelineClock;
  /// The pipelines' time, evenly or with uneven replicas.
  void scorePipelines(const Layout &layout, const StagePlan &plan,
                      PipelineClock &clock, HeteroCost &cost) const;
  /// Stage `s`'s gradient and tied-parameter exchanges.
  struct StageSync;
  StageSync stageSyncOf(const Layout &layout, const StagePlan &plan,
                        int s) const;
  /// The synchronisation's time and the local steps' H.
  void scoreDataParallel(const Layout &layout, const StagePlan &plan,
                         HeteroCost &cost) const;

  HeteroProblem problem;
};

/// Uneven replicas are used only when they shorten the predicted pipeline
/// by more than this fraction: below it the model's error dominates.
constexpr double kUnevenMinGain = 0.01;

/// Shares `total` (>= `pipelines`) micro-batches among pipelines, at least
/// one each, minimising the latest pipeline's time; `secondsWith(i, m)` is
/// pipeline i's time with m micro-batches (non-decreasing in m).
std::vector<int>
splitMicroBatches(int pipelines, int total,
                  const std::function<double(int, int)> &secondsWith);

/// Even split of `blocks` into `stages` bounds.
std::vector<int> evenBounds(int blocks, int stages);

/// The hetero search: the genetic engine on the full objective
/// (searchWithObjective in Genetic.h: first-improvement device swaps and
/// swaps of neighbouring stages) seeded with rank order, its transpose, the
/// devices sorted by speed, OP-Fence's layout, and DT-FM's best layout in
/// pipeline order.
/// Returns the best partition in pipeline order.
Partition searchHetero(const HeteroModel &model, const SearchOptions &options,
                       int64_t *evaluations = nullptr);

} // namespace dtfm::planner

#endif // DTFM_PLANNER_HETERO_H
