//===- GradientSync.h - A worker's part in its group's exchange -*- C++ -*-===//
//
// Part of dtfm. Private to lib/Runtime/Worker.
//
//===----------------------------------------------------------------------===//
//
// The data-parallel group's exchange at the end of the iteration, for one
// worker: its program's dtfm.grad_sync ops packed into buckets in launch
// order (dtfm.bucket) and all-reduced by a sync thread as the backward
// completes them, or all at once; compressed on the wire with error
// feedback (int8, top-k after a dense warm-up); reduce-scattered and the
// parameters all-gathered under sharded optimizer state (ZeRO-1); and, with
// local steps (dtfm.sync_every), the parameters' exchange every H steps.
// The worker (WorkerImpl.h) owns one and calls it from its step loop.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_LIB_RUNTIME_WORKER_GRADIENTSYNC_H
#define DTFM_LIB_RUNTIME_WORKER_GRADIENTSYNC_H

#include "dtfm/Format/WireCodec.h"
#include "dtfm/Runtime/Executor.h"
#include "dtfm/Runtime/Transport.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dtfm::runtime::worker {

class GradientSync {
public:
  using Clock = std::chrono::steady_clock;
  using Gradients = std::vector<std::pair<const ProgramOp *, cpu::Tensor *>>;
  /// Where a finished exchange goes in the worker's trace (its sync slot).
  using Recorder = std::function<void(
      const std::string &name, Clock::time_point start, Clock::time_point end)>;

  GradientSync() = default;
  GradientSync(const GradientSync &) = delete;
  GradientSync &operator=(const GradientSync &) = delete;
  ~GradientSync() { stopStreaming(); }

  /// Lays out the buckets of `program`'s syncs (this worker is `device` of
  /// their group) and reads their dtfm.sync_every; false with a one-line
  /// `error` when they disagree or a sharded group does not name `device`.
  bool prepare(const StageProgram &program, const std::string &device,
               std::string &error);
  /// Once the transport is up: `group` is the transport's index of the
  /// data-parallel group (-1: a group of one, nothing to exchange), the
  /// executor keeps the error-feedback residuals.
  void connect(Transport *transport, int group, StageExecutor *executor,
               Recorder record);

  /// Whether there is a group to exchange with (connect's `group` >= 0).
  bool hasGroup() const { return group >= 0; }
  /// Members of the group (1: none); 1 / that, what turns a sum into the
  /// group's mean.
  double members() const { return groupMembers; }
  float average() const { return static_cast<float>(1.0 / groupMembers); }
  /// dtfm.sync_every: parameters exchanged every H steps (0: gradients
  /// every step).
  int64_t syncEvery() const { return every; }
  /// Whether some parameter's local steps exchange falls after step `step`
  /// (localStepsDue: every H steps, or one fragment's step).
  bool outerDue(int64_t step) const;
  /// dtfm.sync_overlap: steps an exchange trains on before it is applied;
  /// dtfm.outer_mixing: the replica's share of the value then.
  int64_t outerOverlap() const { return overlap; }
  double outerMixing() const { return mixing; }

  /// Starts step `step` (a sparse codec is dense for its warm-up steps).
  void beginStep(int64_t step) { currentStep = step; }
  /// Whether the buckets can be exchanged while the backward goes on: a
  /// group with gradient syncs, without local steps.
  bool canStream() const { return group >= 0 && !buckets.empty() && every < 1; }
  /// Starts the sync thread for this step's buckets, which bucketGradient
  /// fills; `fatal` ends the run when an exchange fails.
  void startStreaming(std::function<void(const std::string &)> fatal);
  /// Stops the sync thread (a no-op when none runs).
  void stopStreaming();
  /// The executor's GradientReadyFn while streaming: `grad` of `sync` into
  /// its bucket; false with `error` when its residual is missing.
  bool bucketGradient(const ProgramOp &sync, const cpu::Tensor &grad,
                      std::string &error);

  /// finishIteration's SyncFn: the buckets' exchange (waited for, when
  /// streaming), then each gradient the group's mean.
  bool syncGradients(const Gradients &grads, std::string &error);
  /// finishIteration's gather under sharded state: all-gathers the
  /// parameters of `params`, of which this member's shard is current.
  bool gatherShards(const Gradients &params, std::string &error);
  /// Local steps: the group's mean of `values` (pseudo-gradients, weighted
  /// by `share`, this replica's share of the global batch x members), in
  /// the syncs' codec.
  bool averageParameters(std::vector<float> &values, double share,
                         std::string &error);

private:
  struct Bucket {
    int64_t index = 0;   // dtfm.bucket
    size_t elements = 0; // floats of all its gradients
    std::vector<float> data;
    size_t filled = 0;   // floats handed over this step
    bool synced = false; // all-reduced and averaged this step
    format::WireCodec compression = format::WireCodec::Dense; // on the wire
    size_t capacity = 0;    // sparse codecs: the entries its gradients keep
    int64_t topkWarmup = 0; // sparse codecs: steps sent dense first
    /// Sharded optimizer state (dtfm.shard_state): `data` holds one chunk
    /// per group member, [bounds[k], bounds[k + 1]): member k's shard of
    /// each gradient, in bucket order. Empty: not sharded.
    std::vector<size_t> bounds;
  };
  /// Where one dtfm.grad_sync's gradient lies in its bucket: at `offset`,
  /// whole; sharded, its member k's shard (shardOf) at pieces[k].
  struct Slot {
    size_t bucket = 0; // position in `buckets`
    size_t offset = 0;
    std::vector<size_t> pieces;
  };

  /// What a sync planned as `planned` sends this step: a sparse codec
  /// (top-k) is dense (no error feedback) for its first `topkWarmup` steps.
  format::WireCodec wireThisStep(format::WireCodec planned,
                                 int64_t topkWarmup) const {
    return format::wireCodecAtStep(planned, topkWarmup, currentStep);
  }
  /// Sums data[0, count) over the group, in place, as `codec` carries it
  /// (sparse codecs: at most `kept` entries each).
  bool exchange(format::WireCodec codec, float *data, size_t count, size_t kept,
                std::string &error);
  /// `grad` plus the residual the last exchange left, as the wire will
  /// carry it, into `out` (the codec's moveWithFeedback: rounded to int8,
  /// or its top-k entries, the rest zero); the residual keeps what is not
  /// sent (error feedback: sent + residual = that sum, exactly).
  bool compressWithFeedback(const ProgramOp &sync, const float *grad,
                            size_t count, float *out, std::string &error);
  /// Copies a gradient (or parameter) of `count` floats into its slot of
  /// its bucket: whole, or as the members' shards.
  void pack(const Slot &slot, const float *grad, size_t count);
  /// The bucket's gradients out of its slot after the exchange: whole, or
  /// sharded, this member's shard alone (the rest of `grad` is left).
  void unpack(const Slot &slot, cpu::Tensor &grad) const;
  /// The bucket's exchange: a reduce-scatter when sharded, else as its
  /// wire carries it this step (exchange).
  bool exchangeBucket(Bucket &bucket, std::string &error);
  /// syncGradients without streaming: every gradient of `grads` at once.
  bool exchangeAll(const Gradients &grads, std::string &error);
  bool exchangeSharded(const Gradients &grads, std::string &error);
  /// Streaming: waits for the buckets of `grads` and takes them out.
  bool awaitBuckets(const Gradients &grads, std::string &error);
  /// The sync thread: each bucket, in order, once it is full.
  bool runSyncThread(std::string &error);

  Transport *transport = nullptr;
  StageExecutor *executor = nullptr;
  Recorder record;
  int group = -1;
  double groupMembers = 1;
  /// This worker's place in its group (the syncs' `group`).
  int groupPosition = 0;
  int64_t every = 0, fragments = 1, overlap = 0;
  double mixing = 0;
  /// Local steps: the syncs' schedules (what outerDue asks).
  std::vector<OpAttrs> outerSchedule;
  /// The codec local steps exchange parameters in: the syncs' (one that
  /// carries local steps: the plan's decoder refuses the others).
  format::WireCodec localStepsCodec = format::WireCodec::Dense;
  int64_t currentStep = 0;

  std::vector<Bucket> buckets; // in launch order
  std::map<int, Slot> slotOf;  // by dtfm.grad_sync op index
  std::mutex mutex;            // guards filled, synced, aborted
  std::condition_variable changed;
  bool aborted = false;      // the compute slot failed: stop waiting
  bool streamingNow = false; // this step's buckets go as they fill
  std::thread syncer;
};

} // namespace dtfm::runtime::worker

#endif // DTFM_LIB_RUNTIME_WORKER_GRADIENTSYNC_H
