//===- StagePartition.h - Uneven pipeline stages on a chain ------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Splits a chain of blocks (layers, in topological order) into contiguous,
// non-empty pipeline stages, one per stage device in pipeline order,
// minimising the slowest stage's compute time
//
//   max_j  (sum of the stage's training FLOPs) / S_j,   S_j = lambda_j peak_j
//
// subject to every stage fitting its device's memory: parameter state
// (weights, gradients, optimizer moments: `stateBytesPerParameterByte` x the
// stage's parameter bytes) plus the activations kept for the micro-batches in
// flight under the schedule (GPipe: all n_b; 1F1B: min(n_b, D - j) at stage
// j of D). Exact dynamic programming over cut points, O(D L^2).
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLANNER_STAGEPARTITION_H
#define DTFM_PLANNER_STAGEPARTITION_H

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dtfm::planner {

/// One block of the chain, for one micro-batch.
struct ChainBlock {
  double flops = 0;           ///< forward + backward
  double parameterBytes = 0;  ///< parameters it owns
  double activationBytes = 0; ///< activations kept for backward
  /// The part of `flops` the backward does (0: not known; then the
  /// block's gradients count as complete only at the end of the backward).
  double backwardFlops = 0;
};

/// A parameter owned by one block and read by another (GPT's tied token
/// embedding and head). When the two land on different stages the runtime
/// sends the weight once per iteration and its gradient back.
struct TiedParameter {
  int owner = 0;  ///< block that owns (and updates) it
  int reader = 0; ///< another block reading it
  double bytes = 0;
};

/// The device (or data-parallel group, taken at its slowest and smallest
/// member) that runs one stage.
struct StageDevice {
  std::string name;
  double speed = 0;       ///< FLOP/s actually reached
  double memoryBytes = 0; ///< capacity
};

enum class PipelineSchedule { GPipe, OneFOneB };

/// The schedules' one spelling (pass options, #dtfm.schedule): "gpipe",
/// "1f1b"; kPipelineScheduleChoices lists them for error messages.
const char *pipelineScheduleName(PipelineSchedule schedule);
std::optional<PipelineSchedule> parsePipelineSchedule(std::string_view name);
inline constexpr const char *kPipelineScheduleChoices = "1f1b or gpipe";

struct StagePartitionOptions {
  /// Bytes of state per byte of parameters: weights + gradients + two Adam
  /// moments at the parameters' precision = 4.
  double stateBytesPerParameterByte = 4;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  int microBatches = 1;
};

struct StagePlan {
  /// Stage j owns blocks [bounds[j], bounds[j+1]).
  std::vector<int> bounds;
  std::vector<double> stageSeconds; ///< compute time per micro-batch
  std::vector<double> stageMemoryBytes;
  double bottleneckSeconds = 0;
};

/// Micro-batches whose activations stage `stage` of `stages` holds at once.
int inFlightMicroBatches(const StagePartitionOptions &options, int stage,
                         int stages);

/// Memory stage `stage` needs when it owns blocks [first, last).
double stageMemoryBytes(const std::vector<ChainBlock> &blocks, int first,
                        int last, int stage, int stages,
                        const StagePartitionOptions &options);

/// The plan of given bounds (bounds[0] = 0 < ... < bounds[D] = blocks), or
/// false with a one-line `error` when they are malformed or a stage does not
/// fit its device.
bool planForBounds(const std::vector<ChainBlock> &blocks,
                   const std::vector<StageDevice> &devices,
                   const StagePartitionOptions &options,
                   const std::vector<int> &bounds, StagePlan &plan,
                   std::string &error);

/// The optimal plan, or false with a one-line `error`: too few blocks for
/// the stages, a device without speed, or (memory) the device that even the
/// most memory-balanced split overfills, with the bytes needed and its
/// capacity.
bool partitionChain(const std::vector<ChainBlock> &blocks,
                    const std::vector<StageDevice> &devices,
                    const StagePartitionOptions &options, StagePlan &plan,
                    std::string &error);

} // namespace dtfm::planner

#endif // DTFM_PLANNER_STAGEPARTITION_H
