//===- StagePartition.h - Uneven pipeline stages on a chain ------*- C++
//-*-===//
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
// where a device with a memory bandwidth counts each block's FLOPs at its
// ridge (ChainBlock::flopsAt: memory-bound ops cost their bytes, Roofline.h)
//
// subject to every stage fitting its device's memory: parameter state
// (weights, gradients, optimizer moments: `stateBytesPerParameterByte` x the
// stage's parameter bytes) plus the activations kept for the micro-batches in
// flight under the schedule (GPipe: all n_b; 1F1B: min(n_b, D - j) at stage
// j of D). Exact dynamic programming over cut points, O(D L^2).
//
// A stage that would not fit may take the options the runtime has, the
// cheapest in time first: its data-parallel group shards the optimizer
// moments (ZeRO-1: the moments / D_DP, no extra work), then it recomputes
// its activations (it keeps each block's input per micro-batch in flight
// and one block's activations while that block runs again; the forward
// FLOPs again in its backward). The runtime's exact model
// (--dtfm-fit-memory) makes the final choice per device program.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLANNER_STAGEPARTITION_H
#define DTFM_PLANNER_STAGEPARTITION_H

#include "dtfm/Planner/Cluster.h"
#include "dtfm/Planner/Roofline.h"

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
  /// Activations entering the block: what recomputation keeps of it (0:
  /// not known; then recomputing saves nothing of it).
  double inputBytes = -1;
  /// The largest buffer one of its ops holds only while it runs (attention's
  /// probabilities, the loss's softmax), per micro-batch: the runtime's
  /// model counts the one of the step where memory peaks.
  double scratchBytes = 0;
  /// Tensor parallelism: the sums over the group per micro-batch (forward
  /// and backward) and their bytes (dtfm.tp_all_reduce).
  double groupSums = 0, groupSumBytes = 0;
  /// Its ops' FLOPs and bytes moved per micro-batch, forward and backward,
  /// for the roofline (Roofline.h); empty: its time is its FLOPs'.
  RooflineWork forwardWork, backwardWork;
  /// What the runtime holds of a micro-batch between its forward and its
  /// backward (LayerBlock::heldBytes), which the runtime's memory model
  /// counts; -1: not known, activationBytes stands for it.
  double heldBytes = -1;
  /// The part of backwardFlops that computes the block's parameters'
  /// gradients: what a zero-bubble schedule's W runs (0: none or not
  /// known).
  double weightFlops = 0;
  /// What its zero-bubble Ws hold of a micro-batch from its B to its W
  /// (LayerBlock::weightHeldBytes); -1: not known (then the W is taken to
  /// hold what the backward does).
  double weightHeldBytes = -1;

  /// The activations the runtime's model counts per micro-batch.
  double runtimeActivationBytes() const {
    return heldBytes >= 0 ? heldBytes : activationBytes;
  }
  /// What recomputation runs again: the forward (a third of the work when
  /// the backward's share is not known).
  double forwardFlops() const {
    return backwardFlops > 0 ? flops - backwardFlops : flops / 3;
  }
  /// The FLOPs that take as long as its forward and backward on a device of
  /// ridge `ridge` (FLOPs per byte): its FLOPs and what its memory-bound
  /// ops add.
  double flopsAt(double ridge) const {
    return flops + forwardWork.excessAt(ridge) + backwardWork.excessAt(ridge);
  }
  /// The same for its forward alone (what recomputation runs again).
  double forwardFlopsAt(double ridge) const {
    return forwardFlops() + forwardWork.excessAt(ridge);
  }
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
  /// A tensor-parallel group's sums (Device::groupSumSeconds).
  double groupSumLatencySeconds = 0, groupSumSecondsPerByte = 0;
  /// FLOPs per byte where its ops turn compute-bound (Roofline.h; 0: its
  /// memory bandwidth is not known). Blocks cost flopsAt(ridge) here.
  double ridge = 0;

  /// One micro-batch's forward and backward of `flops` (at its ridge) with
  /// `sums` sums over the group totalling `sumBytes`.
  double seconds(double flops, double sums, double sumBytes) const {
    return flops / speed + sums * groupSumLatencySeconds +
           sumBytes * groupSumSecondsPerByte;
  }
};

/// The device a stage's group of `members` (indices into `cluster`) is
/// planned as: its slowest and smallest member, its costliest group sums.
StageDevice stageDeviceOf(const Cluster &cluster,
                          const std::vector<int> &members);

/// ZeroBubbleH1: 1F1B's forwards and input-gradient backwards with each
/// weight-gradient backward split off and put where the stage would wait
/// (Schedule.h), never more micro-batches in flight than 1F1B.
enum class PipelineSchedule { GPipe, OneFOneB, ZeroBubbleH1 };

/// The schedules' one spelling (pass options, #dtfm.schedule): "gpipe",
/// "1f1b", "zb-h1"; kPipelineScheduleChoices lists them for error messages.
const char *pipelineScheduleName(PipelineSchedule schedule);
std::optional<PipelineSchedule> parsePipelineSchedule(std::string_view name);
inline constexpr const char *kPipelineScheduleChoices =
    "1f1b, zb-h1 or gpipe";

/// When a stage takes a memory option (--dtfm-plan's shard-state and
/// recompute): never, only when it would not fit otherwise, or always.
enum class MemoryOption { Never, WhenNeeded, Always };

/// The options' one spelling: "none", "auto", "all";
/// kMemoryOptionChoices lists them for error messages.
const char *memoryOptionName(MemoryOption option);
std::optional<MemoryOption> parseMemoryOption(std::string_view name);
inline constexpr const char *kMemoryOptionChoices = "auto, all or none";

struct StagePartitionOptions {
  /// Bytes of state per byte of parameters (the simple model: that plus
  /// the activations in flight), or 0: as the runtime holds it
  /// (Plan/MemoryModel.h: every tensor in f32, so per parameter element
  /// 4 bytes of weights, 4 of gradient sums, 4 of sync buckets on a
  /// data-parallel stage and `optimizerBytesPerElement`), with the
  /// activations also in f32 and a receive buffer per micro-batch.
  double stateBytesPerParameterByte = 0;
  /// With an explicit stateBytesPerParameterByte: its optimizer moments'
  /// part, which sharded state divides over a stage's data-parallel group.
  double optimizerBytesPerParameterByte = 2;
  /// Parameter elements per parameter byte (1/4 for f32 models, 1/2 for
  /// f16: Workload::gradientElementsPerByte).
  double elementsPerParameterByte = 0.25;
  /// The optimizer's state per parameter element in the runtime: AdamW's m
  /// and v, 8; SGD's velocity, 4.
  double optimizerBytesPerElement = 8;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  int microBatches = 1;
  /// Members of each stage's data-parallel group.
  int dataParallel = 1;
  /// Bytes of one micro-batch's activations crossing a stage boundary
  /// (Workload::boundaryBytes): the runtime holds a receive buffer per
  /// micro-batch for each direction a stage receives in.
  double boundaryBytes = 0;
  /// Parameters shared between blocks (Workload::tied). In the runtime's
  /// model, when the two blocks are on different stages the owner's stage
  /// also holds the copy it sends and the gradient it gets back, and the
  /// reader's the weight it receives, its gradient sums and the copy of
  /// them it sends.
  std::vector<TiedParameter> tied;
  MemoryOption shardState = MemoryOption::Never;
  MemoryOption recompute = MemoryOption::Never;
};

/// Bytes per parameter byte of a stage's state (weights, gradients, buckets,
/// optimizer) and the optimizer's part of it, for a stage whose group has
/// `options.dataParallel` members; and the bytes the runtime keeps per byte
/// of the model's activations.
double stateBytesPerParameterByte(const StagePartitionOptions &options);
double optimizerBytesPerParameterByte(const StagePartitionOptions &options);
double activationBytesScale(const StagePartitionOptions &options);

/// A stage's memory with the options it takes.
struct StageMemory {
  double bytes = 0;
  bool sharded = false, recomputed = false;
  /// FLOPs its backward runs again per micro-batch (recomputed: the
  /// forward of its blocks); its time is that of their forwardFlopsAt.
  double recomputeFlops = 0;
};

struct StagePlan {
  /// Stage j owns blocks [bounds[j], bounds[j+1]).
  std::vector<int> bounds;
  /// Compute time per micro-batch (recomputation included).
  std::vector<double> stageSeconds;
  /// The tensor-parallel group sums of each stage per micro-batch (their
  /// count and bytes): part of stageSeconds on the stage's device, and
  /// what another group's links make of them (Device::groupSumSeconds).
  std::vector<double> stageGroupSums, stageGroupSumBytes;
  std::vector<double> stageMemoryBytes;
  std::vector<StageMemory> stageMemory;
  double bottleneckSeconds = 0;
};

/// Micro-batches whose activations stage `stage` of `stages` holds at once.
int inFlightMicroBatches(const StagePartitionOptions &options, int stage,
                         int stages);

/// Memory stage `stage` needs when it owns blocks [first, last), with the
/// options it takes on a device of `capacity` bytes: those `Always` asks
/// for, then the cheapest in time of those allowed that make it fit
/// (sharding before recomputation); when none does, all that are allowed
/// (its smallest footprint).
StageMemory stageMemory(const std::vector<ChainBlock> &blocks, int first,
                        int last, int stage, int stages,
                        const StagePartitionOptions &options, double capacity);

/// The FLOPs blocks [first, last) take per micro-batch on a device of ridge
/// `ridge` (ChainBlock::flopsAt), with their forward again when
/// `recomputed`: a stage's time there is this over the device's speed.
double stageFlopsAt(const std::vector<ChainBlock> &blocks, int first, int last,
                    bool recomputed, double ridge);

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

/// The same with stage j costed on the chain `stageBlocks[j]`: the model as
/// stage j's devices run it (a degree per stage: the model sharded
/// uniformly at that stage's tensor-parallel degree). The chains list the
/// same blocks in the same order; false with a one-line `error` when they
/// differ in length or there is not one per stage.
bool partitionChain(
    const std::vector<const std::vector<ChainBlock> *> &stageBlocks,
    const std::vector<StageDevice> &devices,
    const StagePartitionOptions &options, StagePlan &plan, std::string &error);

} // namespace dtfm::planner

#endif // DTFM_PLANNER_STAGEPARTITION_H
