//===- WorkerImpl.h - The worker behind runWorker ---------------*- C++ -*-===//
//
// Part of dtfm. Private to lib/Runtime/Worker: the worker's state, shared
// by its files, one per job: Worker.cpp (preparation, connection, the step
// loop, calibration, the end of the run), Slots.cpp (the receive, compute
// and send slots, once-per-iteration values), GradSync.cpp (buckets,
// compressed exchanges with error feedback, sharded state) and Resume.cpp
// (checkpoints and resumption).
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_LIB_RUNTIME_WORKERIMPL_H
#define DTFM_LIB_RUNTIME_WORKERIMPL_H

#include "dtfm/Format/PlanFile.h"
#include "dtfm/Format/Stream.h"
#include "dtfm/Format/WireCodec.h"
#include "dtfm/Plan/SimInput.h"
#include "dtfm/Plan/Simulator.h"
#include "dtfm/Runtime/Checkpoints.h"
#include "dtfm/Runtime/DataSource.h"
#include "dtfm/Runtime/Executor.h"
#include "dtfm/Runtime/StepReport.h"
#include "dtfm/Runtime/Transport.h"
#include "dtfm/Runtime/Worker.h"

#include "plan.pb.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace dtfm::runtime::worker {

using Clock = std::chrono::steady_clock;
using format::Phase;
using format::StreamEntry;

/// A send or receive of the program.
struct Transfer {
  int op = 0; ///< index in the program
  Phase phase = Phase::Forward;
  int peerStage = 0;
  int peerRank = 0;
  int64_t tag = 0;
  bool oncePerIteration = false;
  /// The codec of its value on the wire (dtfm.wire).
  format::WireCodec wire = format::WireCodec::Dense;
  int64_t value = 0; ///< operand (send) or result (recv) value id
  std::vector<int64_t> shape;

  /// Bytes of `elements` values on the wire.
  size_t wireBytes(size_t elements) const {
    return format::wireCodecInfo(wire).messageBytes(elements, elements);
  }
};

/// One device program of a plan, trained (its methods' files: the header's
/// comment).
class Worker {
public:
  Worker(const std::string &planPath, const proto::Plan &plan,
         const WorkerOptions &options)
      : planPath(planPath), plan(plan), options(options),
        program(plan.programs(options.rank)) {}

  int run();

private:
  [[noreturn]] void fatal(const std::string &message);
  bool prepare(std::string &error);
  bool connect(std::string &error);
  bool runStep(int64_t step, double &lossSum, std::string &error);
  /// The compute slot's stream for one step, on this thread or on a
  /// lower-priority one beside the receive and send threads.
  bool runComputeSlot(int64_t step, std::vector<MicroBatch> &batches,
                      std::vector<ValueTable> &values, double &lossSum,
                      std::string &error);
  bool runComputeThread(int64_t step, std::vector<MicroBatch> &batches,
                        std::vector<ValueTable> &values, double &lossSum,
                        std::string &error);
  bool receiveEntry(int64_t step, const StreamEntry &entry, std::string &error);
  bool sendEntry(int64_t step, const StreamEntry &entry, std::string &error);
  /// Values used once per iteration (tied parameters, forward) and their
  /// summed gradients (backward), between any two stages: outside the
  /// streams, at the start and at the end of the iteration.
  bool postTied(int64_t step, std::string &error);
  bool waitTied(Phase phase, std::string &error);
  bool sendOnce(int64_t step, Phase phase, const ValueTable &table,
                std::string &error);
  bool syncGradients(
      const std::vector<std::pair<const ProgramOp *, cpu::Tensor *>> &grads,
      std::string &error);
  /// Overlapped gradient buckets: the executor hands each gradient over as
  /// the last micro-batch's backward produces it (bucketGradient, compute
  /// thread); a sync thread all-reduces each bucket once it is complete,
  /// in bucket order (the same on every member); finishIteration's SyncFn
  /// (awaitBuckets) waits for the buckets it needs.
  bool planBuckets(std::string &error);
  /// 1 / the size of this program's data-parallel group: what turns an
  /// all-reduced sum into the group's mean.
  float groupAverage() const;
  double groupMembers() const; ///< members of this program's sync group (1: none)
  /// Compressed syncs (dtfm.compression): `grad` plus the residual the last
  /// exchange left, as the wire will carry it, into `out` (the codec's
  /// moveWithFeedback: rounded to int8, or its top-k entries, the rest
  /// zero); the residual keeps what is not sent (error feedback: sent +
  /// residual = that sum, exactly).
  bool compressWithFeedback(const ProgramOp &sync, const float *grad,
                            size_t count, float *out, std::string &error);
  /// Sums data[0, count) over this program's group, in place, as `codec`
  /// carries it (sparse codecs: at most `kept` entries each).
  bool exchange(format::WireCodec codec, float *data, size_t count, size_t kept,
                std::string &error);
  void bucketGradient(const ProgramOp &sync, const cpu::Tensor &grad);
  bool runSyncThread(std::string &error);
  bool awaitBuckets(
      const std::vector<std::pair<const ProgramOp *, cpu::Tensor *>> &grads,
      std::string &error);
  /// Gathers the workers' measured speeds on rank 0 and predicts the
  /// iteration from them (Calibration.h).
  bool calibrate(std::string &error);
  bool checkpoint(int64_t step, std::string &error);
  bool resume(int64_t &step, std::string &error);
  /// resume's --resume-from: this program's state assembled from another
  /// plan's generation.
  bool resumeFromOtherPlan(int64_t &step, std::string &error);
  /// The newest of `steps` (ascending) that `load` loads on every worker
  /// (0: none), agreed through the transport, and loaded last (each step
  /// loaded at most once more; `why` says what is wrong with the others).
  /// --mtbf: the checkpoint interval in steps from the first checkpoint's
  /// time and the mean step time (the slowest worker's), Daly's.
  bool tuneCheckpointInterval(double checkpointSeconds, double stepSeconds,
                              int64_t &every, std::string &error);
  bool agreeOnGeneration(const std::vector<int64_t> &steps,
                         const std::function<bool(int64_t, std::string &)> &load,
                         int64_t &agreed, std::map<int64_t, std::string> &why,
                         std::string &error);
  bool finish(std::string &error);
  void record(int slot, const std::string &name, Clock::time_point start,
              Clock::time_point end);

  const std::string &planPath;
  const proto::Plan &plan;
  const WorkerOptions &options;
  const proto::DeviceProgram &program;
  StageProgram typed; ///< `program`, decoded
  std::unique_ptr<StageExecutor> executor;
  std::unique_ptr<Transport> transport;
  std::unique_ptr<StepReporter> reporter;
  std::unique_ptr<CheckpointStore> checkpoints;
  std::vector<LinkShape> linkShapes; // size x size when links are shaped
  DataSource data;

  int size = 1, microBatches = 1;
  /// Every pipeline's micro-batches in the iteration (uneven replicas take
  /// different counts): where this pipeline's samples start, and the total.
  format::MicroBatchLayout layout;
  /// What the iteration's gradient sums are scaled by before the sync:
  /// this replica's share of the global batch (gradientScale()).
  double gradientScale() const;
  std::map<std::string, int> rankOf;
  std::vector<std::string> names;
  std::vector<int> lastStageRanks;
  std::vector<StreamEntry> recvStream, computeStream, sendStream;
  std::vector<Transfer> receives, sends;
  /// Peers whose per-micro-batch values the executor moves itself (NCCL
  /// between GPUs): the transport carries none of them.
  std::set<int> devicePeers;
  bool onDevice(const Transfer &t) const {
    return !t.oncePerIteration && devicePeers.count(t.peerRank) > 0;
  }
  std::map<std::pair<Phase, int>, int> expectedReceives; // per (phase, mb)
  bool tiedForward = false, tiedBackward = false; // once-per-iteration recvs
  struct TiedReceive {
    Phase phase;
    int receive;
    int handle;
  };
  std::vector<TiedReceive> tiedPosted;
  Clock::time_point tiedPostedAt;
  /// Preallocated receive buffers: [receive][micro-batch].
  std::vector<std::vector<cpu::Tensor>> buffers;
  std::vector<InputSpec> inputs;
  uint64_t planHash = 0;

  // Step state shared by the three slots.
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::pair<Phase, int>, int> received;
  std::map<std::pair<Phase, int>,
           std::vector<std::pair<int, std::vector<char>>>>
      outbox; // computed values to send, by (phase, mb): (send, bytes)
  std::set<std::pair<Phase, int>> computed;
  std::map<int, cpu::Tensor> onceGradientSums; // by send index

  struct SyncBucket {
    int64_t index = 0;     // dtfm.bucket
    size_t elements = 0;   // floats of all its gradients
    std::vector<float> data;
    size_t filled = 0;     // floats handed over this step
    bool synced = false;   // all-reduced and averaged this step
    format::WireCodec compression = format::WireCodec::Dense; // on the wire
    size_t capacity = 0;    // sparse codecs: the entries its gradients keep
    int64_t topkWarmup = 0; // sparse codecs: steps sent dense first
    /// Sharded optimizer state (dtfm.shard_state): `data` holds one chunk
    /// per group member, [bounds[k], bounds[k + 1]): member k's shard of
    /// each gradient, in bucket order. Empty: not sharded.
    std::vector<size_t> bounds;
  };
  std::vector<SyncBucket> syncBuckets; // in launch order
  /// Where one dtfm.grad_sync's gradient lies in its bucket: at `offset`,
  /// whole; sharded, its member k's shard (shardOf) at pieces[k].
  struct BucketSlot {
    size_t bucket = 0; // position in syncBuckets
    size_t offset = 0;
    std::vector<size_t> pieces;
  };
  std::map<int, BucketSlot> bucketSlot; // by dtfm.grad_sync op index
  /// This worker's place in its data-parallel group (the syncs' `group`).
  int groupPosition = 0;
  /// Copies a gradient (or parameter) of `count` floats into its slot of
  /// its bucket: whole, or as the members' shards.
  void packBucket(const BucketSlot &slot, const float *grad, size_t count);
  /// The bucket's gradients out of its slot after the exchange: whole, or
  /// sharded, this member's shard alone (the rest of `grad` is left).
  void unpackBucket(const BucketSlot &slot, cpu::Tensor &grad) const;
  /// The bucket's exchange: a reduce-scatter when sharded, else as its
  /// wire carries it this step (exchange).
  bool exchangeBucket(SyncBucket &bucket, std::string &error);
  /// Sharded buckets: all-gathers the parameters of the syncs in `params`,
  /// of which this member's shard is current (finishIteration's gather).
  bool gatherShards(
      const std::vector<std::pair<const ProgramOp *, cpu::Tensor *>> &params,
      std::string &error);
  bool streamingBuckets = false; // this step hands gradients over early
  int64_t currentStep = 0;       // the step runStep is running
  /// What a sync planned as `planned` sends this step: a sparse codec
  /// (top-k) is dense (no error feedback) for its first `topkWarmup` steps.
  format::WireCodec wireThisStep(format::WireCodec planned,
                                 int64_t topkWarmup) const {
    return format::wireCodecInfo(planned).sparse && currentStep <= topkWarmup
               ? format::WireCodec::Dense
               : planned;
  }
  /// Local steps (dtfm.sync_every): parameters exchanged every syncEvery
  /// steps instead of gradients every step.
  int64_t syncEvery = 0; // 0: gradients every step
  bool syncAborted = false;      // the compute slot failed: stop waiting

  // Timing: compute seconds of the calibration steps; trace events.
  double calibrationFlops = 0, calibrationSeconds = 0;
  /// The forward and backward entries the calibration timed: their work as
  /// the roofline sees it gives, at the probed memory bandwidth, the speed
  /// that reproduces the measured seconds (planner::speedForSeconds).
  int64_t calibratedForwards = 0, calibratedBackwards = 0;
  /// Device-timed executors (a GPU): the calibration measures the device's
  /// seconds and skips the first step, which initialises libraries.
  bool deviceTimed = false;
  /// Whether `step` is one the calibration measures.
  bool calibrating(int64_t step) const {
    int64_t since = step - firstStep - (deviceTimed ? 1 : 0);
    return since >= 0 && since < options.calibrationSteps;
  }
  double simulatedSeconds = 0;
  bool calibrated = false;
  Clock::time_point epoch;
  /// Resident bytes before the plan's state was allocated (--memory-report).
  int64_t startResidentBytes = 0;
  /// malloc's bytes in use at that moment (heapInUseBytes).
  int64_t startHeapBytes = 0;
  /// --memory-report: every rank's start and peak resident bytes to rank 0,
  /// which writes them with the predictions.
  bool reportMemory(std::string &error);
  std::mutex eventsMutex;
  std::vector<plan::SimEvent> events;
  std::FILE *log = nullptr;
  int64_t firstStep = 1;
  int64_t groupIndex = -1; // this rank's data-parallel group, or -1
};

} // namespace dtfm::runtime::worker

#endif // DTFM_LIB_RUNTIME_WORKERIMPL_H
