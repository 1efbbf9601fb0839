//===- Workload.h - The model as every planner sees it ----------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// One description of the model to plan, measured once (from the cost
// analysis by lib/Analysis's buildWorkload, or by a benchmark) and taken by
// the hetero model (Hetero.h), the shape search (ShapeSearch.h) and the
// device assignment (Assignment.h); and the options of the plan's later
// passes that change what training it costs.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLANNER_WORKLOAD_H
#define DTFM_PLANNER_WORKLOAD_H

#include "dtfm/Planner/Cluster.h"
#include "dtfm/Planner/Compression.h"
#include "dtfm/Planner/CostModel.h"
#include "dtfm/Planner/StagePartition.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dtfm::planner {

/// The model for one micro-batch of `microBatchSize` samples.
struct Workload {
  /// The model as a chain of blocks (layers in topological order).
  std::vector<ChainBlock> blocks;
  /// Parameters shared between blocks (see TiedParameter).
  std::vector<TiedParameter> tied;
  /// Mean bytes of one micro-batch's activations crossing a layer boundary:
  /// what a pipeline cut sends.
  double boundaryBytes = 0;
  /// Bytes the gradient syncs carry per byte of parameters: each trainable
  /// parameter's gradient has its own type, frozen ones have none.
  double gradientBytesPerParameterByte = 1;
  /// Elements per gradient byte (1/4 for f32 gradients, 1/2 for f16): what
  /// a compressed exchange counts (format/Int8.h).
  double gradientElementsPerByte = 0.25;
  /// Trainable parameters (elements); DT-FM's c_DP counts 4 bytes each.
  int64_t trainableParameters = 0;
  /// Distinct layers: DT-FM's shapes have at most this many stages.
  int64_t layers = 0;
  /// Samples per micro-batch that the blocks and boundary are measured for.
  int64_t microBatchSize = 1;

  /// Sum of the blocks' parameter bytes, in block order.
  double parameterBytes() const;

  /// The workload for micro-batches of `size` samples: FLOPs, activations
  /// and boundary bytes scale linearly, parameters (tied ones too) do not.
  Workload withMicroBatchSize(int64_t size) const;
};

/// How stage groups all-reduce their gradients (--dtfm-insert-grad-sync's
/// `sync`): `Auto` takes the cheaper of DT-FM's sharded parameter server and
/// a ring.
enum class GradientSync { Auto, ParameterServer, Ring };

/// The syncs' one spelling (pass options, dtfm.grad_sync's algorithm):
/// "auto", "ps", "ring"; kGradientSyncChoices lists them for errors.
const char *gradientSyncName(GradientSync sync);
std::optional<GradientSync> parseGradientSync(std::string_view name);
inline constexpr const char *kGradientSyncChoices = "auto, ps or ring";

/// Seconds of one exchange of `denseBytes` of gradients (values
/// `elementBytes` wide) over `group` in `codec`: a summable codec (dense,
/// int8) through the ring or the parameter server (`ring`), any other (top-k,
/// ratio `topkRatio`) as a ring allgather of every member's message.
double groupExchangeSeconds(const GroupLinks &group, double denseBytes,
                            double elementBytes, int dataParallelDegree,
                            bool ring, format::WireCodec codec,
                            double topkRatio);
double groupExchangeSeconds(const Cluster &cluster,
                            const std::vector<int> &group, double denseBytes,
                            double elementBytes, int dataParallelDegree,
                            bool ring, format::WireCodec codec,
                            double topkRatio);

/// How one data-parallel group synchronises its gradients: the one policy
/// --dtfm-insert-grad-sync writes into the plan and the hetero model costs.
struct GradientSyncPlan {
  /// Ring or parameter server (never Auto).
  GradientSync algorithm = GradientSync::ParameterServer;
  /// What the gradients travel as (never chosen sparse for the user).
  format::WireCodec codec = format::WireCodec::Dense;
  /// A sparse codec's R.
  double ratio = 0;
  /// Seconds of one exchange of `denseBytes` of the group's gradients in
  /// this algorithm and codec (groupExchangeSeconds).
  double exchangeSeconds(double denseBytes) const;

  const GroupLinks *links = nullptr;
  double elementBytes = 4;
  int degree = 1;
};

/// The plan of a group of `degree` members over `links` whose gradients
/// are `denseBytes` of values `elementBytes` wide: under `sync` = Auto the
/// ring when it moves those bytes faster than DT-FM's parameter server;
/// then the codec `compression` takes for them (chooseCodec: under auto,
/// int8 where it saves kInt8MinSaving of the dense exchange). `links` must
/// outlive the plan.
GradientSyncPlan planGradientSync(const GroupLinks &links, double denseBytes,
                                  double elementBytes, int degree,
                                  GradientSync sync,
                                  const CodecChoice &compression);

/// sync-every=auto (TrainingOptions::syncEvery = kSyncEveryAuto): the plan
/// takes local steps only where exchanging every step would cost more than
/// kAutoSyncShare of the pipeline's time, and then the smallest H of
/// kSyncEveryCandidates whose 1/H of a parameter exchange costs no more than
/// that share (the largest candidate when none does). Small H keeps the
/// training closest to synchronous (measured: H = 10 ends 3% above dense
/// on the tiny GPT; DiLoCo trains with H = 500 at scale).
inline constexpr int64_t kSyncEveryAuto = -1;
inline constexpr double kAutoSyncShare = 0.1;
inline constexpr int64_t kSyncEveryCandidates[] = {2, 5, 10, 20, 50, 100};

/// The H sync-every=auto takes (0: synchronous) for a plan whose pipeline
/// takes `pipelineSeconds`, whose slowest group leaves `exposedSeconds` of
/// gradient exchange after the backward when synchronous, and takes
/// `exchangeSeconds` for one parameter exchange.
int64_t chooseSyncEvery(double pipelineSeconds, double exposedSeconds,
                        double exchangeSeconds);

/// "auto" (kSyncEveryAuto) or a number of steps in [0, 1e6] (0: gradients
/// every step); false with a one-line `error`.
bool parseSyncEvery(const std::string &text, int64_t &syncEvery,
                    std::string &error);

/// What the plan's later passes do that changes the workload's cost.
struct TrainingOptions {
  GradientSync sync = GradientSync::Auto;
  /// Gradient bucket cap in bytes (Planner/Buckets.h): < 0 picks it per
  /// stage, 0 keeps one bucket.
  double bucketCapBytes = -1;
  /// Local steps (DiLoCo): parameters exchanged every syncEvery steps
  /// instead of gradients every step (0), or kSyncEveryAuto.
  int64_t syncEvery = 0;
  /// Local steps in P fragments (Streaming DiLoCo), each exchange applied
  /// tau steps after it starts (sync-fragments, sync-overlap): every H
  /// steps the replicas wait P x max(0, a fragment's exchange - tau x the
  /// step's time), the fragments taken as equal shares of each stage.
  int64_t syncFragments = 1, syncOverlap = 0;
  /// How the gradients travel (dp-compression): dense, int8 or top-k with
  /// error feedback, or int8 where it pays.
  CodecChoice dpCompression;
  /// AdaTopK on the pipeline's transfers, as --dtfm-insert-compression will
  /// apply it (targetRatio 1: dense).
  CompressionOptions compression;
  /// Schedule, optimizer state and micro-batches per pipeline.
  StagePartitionOptions stages;
  /// hetero: uneven replicas also where only the pipelines' links differ,
  /// not their compute. The step model is too coarse there to be trusted
  /// alone (Hetero.cpp), so --dtfm-plan plans it as one more candidate and
  /// lets the simulator judge (SimulateCandidates.cpp).
  bool unevenByLinks = false;
  /// Global gradient-norm clipping: one reduction of the norm over every
  /// device each step, between the syncs and the updates
  /// (Cluster::scalarReductionSeconds).
  bool clipGradients = false;
};

/// Whether gradient syncs may travel as `codec` (spelled `spelling` in the
/// options) with local steps every `syncEvery` steps (0: none; auto: < 0):
/// top-k only without local steps, int4 only with them (the codec table's
/// localSteps and gradientSyncs); false with a one-line `error`.
bool checkCodecForSyncs(format::WireCodec codec, const std::string &spelling,
                        int64_t syncEvery, std::string &error);

/// Reads the passes' `sync` (auto, ps or ring), `compress-ratio` (>= 1),
/// `bucket-mb` (auto or MiB), `sync-every` (auto or 0 to 1e6) and
/// `dp-compression` (none, int8, topk:R or auto) and `pp-compression`
/// (none, int8 or auto) options into `training`; false with a one-line
/// `error`.
bool parseCommunication(const std::string &sync, double compressRatio,
                        const std::string &bucketMb,
                        const std::string &syncEvery,
                        const std::string &dpCompression,
                        const std::string &ppCompression,
                        TrainingOptions &training, std::string &error);

/// Reads the passes' `recompute` and `shard-state` options (auto, all or
/// none: kMemoryOptionChoices) into `training.stages`, after
/// parseCommunication: sharded state needs synchronous, uncompressed
/// gradient syncs (none is taken with local steps or forced int8/top-k).
/// False with a one-line `error`.
bool parseMemoryOptions(const std::string &recompute,
                        const std::string &shardState,
                        TrainingOptions &training, std::string &error);

} // namespace dtfm::planner

#endif // DTFM_PLANNER_WORKLOAD_H
