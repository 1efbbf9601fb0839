//===- WorkerImpl.h - The worker behind runWorker ---------------*- C++ -*-===//
//
// Part of dtfm. Private to lib/Runtime/Worker: the worker's state, shared
// by its files, one per job: Worker.cpp (preparation, connection, the step
// loop, the end of the run), Slots.cpp (the receive, compute and send
// slots, once-per-iteration values), Measure.cpp (the calibration, the
// memory report) and Resume.cpp (checkpoints and resumption). Its gradient
// sync is an object of its own (GradientSync.h: buckets, compressed
// exchanges with error feedback, sharded state, local steps).
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

#include "Worker/GradientSync.h"

#include "plan.pb.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
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
        program(plan.programs(options.rank)),
        shared(format::sharedPart(plan, program)) {}

  int run();

private:
  [[noreturn]] void fatal(const std::string &message);
  bool prepare(std::string &error);
  bool connect(std::string &error);
  bool runStep(int64_t step, double &lossSum, std::string &error);
  /// One pass of the micro-batches `batches` through the slots, as message
  /// slot `step`: forward and backward, or (`forwardOnly`, validation)
  /// the forward entries of the streams alone.
  bool runPasses(int64_t step, std::vector<MicroBatch> &batches,
                 double &lossSum, bool forwardOnly, std::string &error);
  /// Validation after step `step`: the mean loss over --eval-batches
  /// batches of the validation data (rank 0's `meanLoss`; every worker
  /// takes part).
  bool evaluate(int64_t step, double &meanLoss, std::string &error);
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
  bool postTied(int64_t step, bool forwardOnly, std::string &error);
  bool waitTied(Phase phase, std::string &error);
  bool sendOnce(int64_t step, Phase phase, const ValueTable &table,
                std::string &error);
  /// Gathers the workers' measured speeds on rank 0 and predicts the
  /// iteration from them (Calibration.h).
  bool calibrate(std::string &error);
  bool checkpoint(int64_t step, std::string &error);
  bool resume(int64_t &step, std::string &error);
  /// resume's --resume-from: this program's state assembled from another
  /// plan's generation.
  bool resumeFromOtherPlan(int64_t &step, std::string &error);
  /// After resuming at `step`: the data goes on from the checkpoint's
  /// position (or step x samples per step for an older checkpoint); a note
  /// when its fingerprint says it trained on other data.
  void continueData(int64_t step, std::optional<uint64_t> position,
                    std::optional<uint64_t> fingerprint);
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
  /// What `program` shares with its replicas (format::sharedPart): its
  /// FLOPs, streams and ops are read there.
  const proto::DeviceProgram &shared;
  StageProgram typed; ///< `program`, decoded
  std::unique_ptr<StageExecutor> executor;
  std::unique_ptr<Transport> transport;
  std::unique_ptr<StepReporter> reporter;
  std::unique_ptr<CheckpointStore> checkpoints;
  std::unique_ptr<CheckpointClaim> checkpointClaim;
  /// The job this worker's checkpoints belong to (its claim's).
  std::string checkpointJob;
  std::vector<LinkShape> linkShapes; // size x size when links are shaped
  DataSource data;
  /// --val-data, when given (read in order from its start each time).
  DataSource validation;
  /// Validation batches run so far: their message slots follow
  /// kValidationSlotBase.
  int64_t validationPasses = 0;
  /// runPasses' forwardOnly: each micro-batch's values are dropped once
  /// its forward is sent (no backward reads them).
  bool forwardOnlyPass = false;

  int size = 1, microBatches = 1;
  /// Every pipeline's micro-batches in the iteration (uneven replicas take
  /// different counts): where this pipeline's samples start, and the total.
  format::MicroBatchLayout layout;
  /// What the iteration's gradient sums are scaled by before the sync:
  /// this replica's share of the global batch (gradientScale()).
  double gradientScale() const;
  /// The data-parallel group's exchanges (GradientSync.h).
  GradientSync sync;
  /// Local steps with an overlap (dtfm.sync_overlap): the exchange sent
  /// after step `sentAfter`, averaging on its own thread while the next
  /// steps train, until it is parked in the executor (at its apply step,
  /// at a checkpoint, at the end) and applied.
  struct OuterExchange {
    bool active = false;
    int64_t sentAfter = 0;
    std::thread thread;
    std::vector<float> values;
    bool ok = false;
    std::string error;
  } outer;
  /// Local steps: applies the exchange due after `step`, then sends those
  /// due (and with no overlap applies them at once).
  bool runOuterSteps(int64_t step, std::string &error);
  /// Waits for an exchange in flight and parks its result in the executor
  /// (optimizer state: a checkpoint holds it).
  bool parkOuterExchange(std::string &error);
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
  /// A micro-batch's last compute phase: W where the backward is split
  /// (its values and gradients are done with then), else B.
  Phase lastPhase = Phase::Backward;
  struct TiedReceive {
    Phase phase;
    int receive;
    int handle;
  };
  std::vector<TiedReceive> tiedPosted;
  Clock::time_point tiedPostedAt;
  /// Preallocated receive buffers: [receive][micro-batch].
  std::vector<std::vector<cpu::Tensor>> buffers;
  /// Received messages the executor decodes itself
  /// (StageExecutor::decodesReceives): [receive][micro-batch].
  std::vector<std::vector<std::vector<char>>> encodedBuffers;
  std::vector<InputSpec> inputs;
  uint64_t planHash = 0;
  /// The data position: step `dataStartStep` starts at sample
  /// `dataStartSample` (a checkpoint's position on resumption), and every
  /// step takes `samplesPerStep` from there, each micro-batch
  /// `microBatchRows`.
  int64_t dataStartStep = 1, dataStartSample = 0;
  int64_t samplesPerStep = 0, microBatchRows = 0;
  /// The first sample of micro-batch `m` of this pipeline at `step`.
  int64_t firstSampleOf(int64_t step, int m) const {
    return dataStartSample + (step - dataStartStep) * samplesPerStep +
           (layout.offsets[program.pipeline()] + m) * microBatchRows;
  }
  /// The sum of the sample hashes of this worker's micro-batches of the
  /// step (DataSource::microBatch), which the last stages report.
  uint64_t stepSampleHash = 0;

  // Step state shared by the three slots.
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::pair<Phase, int>, int> received;
  std::map<std::pair<Phase, int>,
           std::vector<std::pair<int, std::vector<char>>>>
      outbox; // computed values to send, by (phase, mb): (send, bytes)
  std::set<std::pair<Phase, int>> computed;
  std::map<int, cpu::Tensor> onceGradientSums; // by send index

  // Timing: compute seconds of the calibration steps; trace events.
  double calibrationFlops = 0, calibrationSeconds = 0;
  /// The forward and backward entries the calibration timed: their work as
  /// the roofline sees it gives, at the probed memory bandwidth, the speed
  /// that reproduces the measured seconds (planner::speedForSeconds).
  int64_t calibratedForwards = 0, calibratedBackwards = 0;
  /// Device-timed executors (a GPU): the calibration measures the device's
  /// seconds.
  bool deviceTimed = false;
  /// Whether `step` is one the calibration measures. It skips the run's
  /// first step, which initialises a GPU's libraries and on the CPU touches
  /// every buffer for the first time (measured a third slower than the
  /// next ones), unless the CPU has no other step to measure.
  bool calibrating(int64_t step) const {
    bool skipFirst =
        deviceTimed || options.steps - firstStep >= options.calibrationSteps;
    int64_t since = step - firstStep - (skipFirst ? 1 : 0);
    return since >= 0 && since < options.calibrationSteps;
  }
  double simulatedSeconds = 0;
  bool calibrated = false;
  Clock::time_point epoch;
  /// --memory-report's start: the process's own memory, warmed up. One
  /// large matmul brings in the BLAS's packing buffers and the kernels'
  /// code, which the model does not count (they do not grow with the plan);
  /// its tensors are handed back to the system before the start is read.
  void markMemoryStart();
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
};

} // namespace dtfm::runtime::worker

#endif // DTFM_LIB_RUNTIME_WORKERIMPL_H
