//===- Executor.h - Run a device program ------------------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Executes one device program of a plan (its typed form, Program.h): for
// each micro-batch its forward and backward ops in program order (backward
// ops recompute what they need -- layernorm statistics, attention and
// softmax probabilities -- from the forward operands they receive),
// gradients averaged over the micro-batches, then the optimizer-phase ops
// once (gradient syncs are the identity on one device; updates write the
// parameter store). Deterministic for a given seed and plan.
//
// StageExecutor is what the worker drives; HostState is the host state
// every backend shares (parameter initialisation, parameter files, the
// optimizer state's format). The phase loop every backend runs is
// PhaseExecutor (PhaseLoop.h); a backend implements the per-op work through
// its kernel table: the CPU's (Cpu/Executor.h, Cpu/KernelTable.h) or the
// GPU's (Cuda/Executor.h).
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_EXECUTOR_H
#define DTFM_RUNTIME_EXECUTOR_H

#include "dtfm/Runtime/Cpu/Kernels.h"
#include "dtfm/Runtime/PlanNames.h"

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace dtfm::runtime {

/// Values of the program's inputs and labels, by their names.
using MicroBatch = std::map<std::string, cpu::Tensor>;

/// A model input or label the program reads.
struct InputSpec {
  std::string name;
  std::vector<int64_t> shape;
  bool isLabel = false;
  bool isInteger = false;
  bool isBoolean = false; // i1: drawn as 0 or 1
  /// The rows or classes the input's values index when an embedding or a
  /// loss reads it directly (its values must be whole numbers in
  /// [0, indexLimit)); 0 when no such op reads it.
  int64_t indexLimit = 0;
};

/// Values of one micro-batch, by value id.
using ValueTable = std::map<int64_t, cpu::Tensor>;

/// CPU seconds of the calling thread: what the calibration and the CPU's
/// memory probe time.
double threadCpuSeconds();

/// What a worker needs of the executor of its device program, whichever
/// device runs it: the CPU (cpu::CpuExecutor, Cpu/Executor.h) or a GPU
/// (cuda::CudaExecutor, Cuda/Executor.h). Values crossing devices and
/// parameters in files are host tensors either way.
class StageExecutor {
public:
  /// Averages gradients of the program's dtfm.grad_sync ops across their
  /// data-parallel group, in place. finishIteration calls it once per
  /// bucket (dtfm.bucket), in bucket order, each time before the updates
  /// that read the bucket (a backend may also pass all buckets at once).
  using SyncFn = std::function<bool(
      const std::vector<std::pair<const ProgramOp *, cpu::Tensor *>> &grads,
      std::string &error)>;

  /// Called on the compute thread with a dtfm.grad_sync op and its gradient
  /// as soon as the iteration's last micro-batch has produced it -- summed
  /// over the micro-batches and scaled, exactly what finishIteration
  /// would pass to the SyncFn -- so that its bucket can be synchronised
  /// while the backward of earlier layers goes on.
  using GradientReadyFn =
      std::function<void(const ProgramOp &sync, const cpu::Tensor &grad)>;

  /// Shares a small value between the members of a group through the
  /// rendezvous: the first member publishes, the others look it up.
  using ShareFn = std::function<bool(const std::string &key, std::string &value,
                                     bool publish, std::string &error)>;

  /// Sums `count` floats at `data` over this program's tensor-parallel
  /// group, in place (dtfm.tp_all_reduce); the worker provides it.
  using GroupSumFn =
      std::function<bool(float *data, size_t count, std::string &error)>;

  virtual ~StageExecutor();

  void setTensorParallelSum(GroupSumFn sum) {
    tensorParallelSum = std::move(sum);
  }

  /// --check-finite: every op's results are read back after it runs, and
  /// the first that holds an infinity or a NaN stops the run, naming the
  /// op, its layer and its operands (parameters by name, each finite or
  /// not). Off by default: it reads every value once more (and a GPU
  /// copies each to the host).
  void setCheckFinite(bool on) { checkFinite = on; }

  /// Sums this worker's two parts of the model's squared gradient norm
  /// over the world, in place: `shared` (gradients averaged over their
  /// data-parallel groups, the same on every member; the total over the
  /// world) and `replica` (a model replica's own gradients: without data
  /// parallelism, and with local steps; the total over this worker's
  /// pipeline). Every worker of the plan calls it once per step.
  using NormSumFn = std::function<bool(double &shared, double &replica,
                                       std::string &error)>;

  /// Global gradient-norm clipping (the plan's clip_grad_norm > 0): after
  /// the gradient syncs and before any update, finishIteration scales every
  /// gradient so that the model's norm is at most `maxNorm`.
  void setGradientClipping(double maxNorm, NormSumFn sum) {
    clipNorm = maxNorm;
    normSum = std::move(sum);
  }

  /// Called once the workers are connected, by every member of this
  /// program's data-parallel group (world ranks `members`, this one at
  /// `position`): an executor with collectives of its own (NCCL on the GPU)
  /// sets them up here and then averages the gradients itself instead of
  /// through finishIteration's SyncFn. The CPU executor has none.
  virtual bool connectGroup(const std::vector<int> &members, int position,
                            const ShareFn &share, std::string &error) {
    return true;
  }

  /// Called once the workers are connected, by every member of this
  /// program's tensor-parallel group (world ranks `members`, this one at
  /// its rank `position`), after setTensorParallelSum: an executor with
  /// collectives of its own (NCCL on the GPU) sets up the group's here and
  /// then sums dtfm.tp_all_reduce and the vocabulary-parallel loss itself.
  /// The CPU executor sums through the worker's GroupSumFn.
  virtual bool connectTensorParallelGroup(const std::vector<int> &members,
                                          int position, const ShareFn &share,
                                          std::string &error) {
    return true;
  }

  /// Called once the workers are connected, with the program's
  /// per-micro-batch dtfm.send / dtfm.recv ops (op index -> the peer's world
  /// rank; this worker is `rank`). An executor that can move those values
  /// between devices itself (NCCL send/recv between distinct GPUs) sets the
  /// links up and adds the peers it takes to `taken`: values to and from
  /// them then never pass through the worker -- runPhase receives them and
  /// sends them itself, in tag order per peer. The CPU executor takes none.
  virtual bool connectPeers(int rank, const std::map<int, int> &linkOps,
                            const ShareFn &share, std::set<int> &taken,
                            std::string &error) {
    return true;
  }

  /// Local steps (DiLoCo, dtfm.sync_every >= 1), in three parts so that
  /// the exchange may overlap later steps (dtfm.sync_overlap). After step
  /// `step`'s optimizer step, `deltas` gets the pseudo-gradients (value at
  /// the last exchange minus now; with int8/int4, plus the outer residual,
  /// rounded as the codec sends them) of the parameters due then
  /// (localStepsDue: all every H steps, or one fragment), concatenated in
  /// the program's order; empty when none is due. False with an error on
  /// a backend that cannot.
  virtual bool outerSend(int64_t step, std::vector<float> &deltas,
                         std::string &error) {
    error = "this backend does not run local steps (dtfm.sync_every)";
    return false;
  }
  /// Holds the averaged pseudo-gradients of what was sent after step
  /// `sentAfterStep` (optimizer state until applied: checkpointed as
  /// opt.outer_pending/).
  virtual bool outerPark(int64_t sentAfterStep,
                         const std::vector<float> &averaged,
                         std::string &error) {
    error = "this backend does not run local steps (dtfm.sync_every)";
    return false;
  }
  /// Whether pseudo-gradients are held (a resumed checkpoint written while
  /// an exchange overlapped the steps), and after which step, at or before
  /// `step`, they were sent.
  virtual bool outerParkedSince(int64_t step, int64_t &sentAfterStep) {
    return false;
  }
  /// Applies what is held: the outer Nesterov step to each parameter's
  /// value at the last exchange, which becomes the parameter again -- or,
  /// with `mixing` > 0 (after an overlap), mixing x the parameter now +
  /// (1 - mixing) x that value.
  virtual bool outerApply(double mixing, std::string &error) {
    error = "this backend does not run local steps (dtfm.sync_every)";
    return false;
  }

  /// The error-feedback residual of a compressed dtfm.grad_sync's gradient
  /// (dtfm.compression): optimizer state of the parameter it updates, zero
  /// at first, checkpointed with it, kept on the host (where the exchange
  /// encodes). nullptr on a backend that keeps none.
  virtual cpu::Tensor *residualOf(const ProgramOp &sync) { return nullptr; }

  /// Whether the gradients the SyncFn receives for compressed syncs are
  /// already as this step's codec carries them, their error feedback
  /// applied and the residuals kept by the executor (a GPU encodes on the
  /// device and hands over only the messages, decoded): the exchange then
  /// sends them as they are instead of calling residualOf.
  virtual bool feedsBackItself() const { return false; }

  /// A value of the phase that just ran, already in the wire's codec: an
  /// executor that encodes pipeline transfers itself (a GPU encodes 8-bit
  /// transfers on the device and copies only the message down) returns
  /// true with `message` for `valueId` sent in `wire`; otherwise the worker
  /// encodes the host value. Valid until the next phase runs.
  virtual bool takeEncodedSend(int64_t valueId, format::WireCodec wire,
                               std::vector<char> &message) {
    return false;
  }

  /// Whether the executor takes a received value in `wire`'s codec as its
  /// message and decodes it on its device (a GPU: only the message goes
  /// up). The worker then checks each message (format::validInt8) and
  /// hands it over with stageEncodedReceive before the phase that binds
  /// the value; the value table holds only its shape.
  virtual bool decodesReceives(format::WireCodec wire) const { return false; }
  virtual void stageEncodedReceive(int microBatch, int64_t valueId,
                                   format::WireCodec wire,
                                   std::vector<char> message) {}

  /// The step about to run (from 1), before its first phase: an executor
  /// that encodes compressed exchanges itself reads the codec of that step
  /// (format::wireCodecAtStep: top-k's dense warm-up).
  virtual void beginStep(int64_t step) {}

  /// Seconds the device computed since the last call, for executors whose
  /// work runs asynchronously (a GPU's, timed with events); -1 where the
  /// compute thread's CPU time is the measure (the CPU executor). The
  /// worker's calibration of device speeds reads it.
  virtual double takeComputeSeconds() { return -1; }

  /// --memory-report on a device with memory of its own (a GPU): the most
  /// bytes of it the executor held at once -- parameters, optimizer state,
  /// gradient sums and the micro-batches' values, what the memory model
  /// predicts; -1 where the process's own memory is the measure (the CPU).
  virtual int64_t devicePeakBytes() const { return -1; }

  /// The device's sustained memory bandwidth in bytes/s, from a short
  /// streaming probe (the calibration's, where the plan gives the device a
  /// bandwidth: docs/CostModel.md's roofline); 0 when it cannot tell. The
  /// CPU's: a triad over arrays far larger than the caches, on the calling
  /// thread's CPU time, the best of a few runs.
  virtual double measureMemoryBandwidth();

  /// Arms `ready` for the next iteration of `microBatches` micro-batches,
  /// whose gradient sums it scales by `gradientScale` (finishIteration's).
  /// False when the backend cannot hand gradients out early (the CUDA
  /// executor keeps them on the device): the SyncFn then does all the work.
  virtual bool streamGradients(int microBatches, double gradientScale,
                               GradientReadyFn ready) {
    return false;
  }

  /// Parameters from their initializers (seeded per parameter name);
  /// `external` ones from `weights` (the plan's weights file), by name.
  virtual bool
  initialize(uint64_t seed, std::string &error,
             const std::map<std::string, cpu::Tensor> *weights = nullptr) = 0;
  /// Parameters from whole tensors (--init-from's weights file, read and
  /// checked against the model by the worker; `source` names it in
  /// errors): every parameter of the program must be there with its whole
  /// shape; a shard takes its slice.
  virtual bool loadParameters(const format::TensorMap &weights,
                              const std::string &source,
                              std::string &error) = 0;

  virtual std::vector<InputSpec> inputs() const = 0;

  /// Parameters and optimizer state ("param/<name>", "opt.m/<name>", ...),
  /// for checkpoints; restoreState takes them back (every parameter of the
  /// program must be there).
  virtual std::map<std::string, cpu::Tensor> state() const = 0;
  virtual bool restoreState(const std::map<std::string, cpu::Tensor> &state,
                            std::string &error) = 0;

  /// One iteration, in pieces (the workers of lib/Runtime/Worker.h move
  /// values between devices in between). runPhase runs the compute ops of
  /// `phase` (forward or backward) for micro-batch `microBatch`: the values its
  /// dtfm.recv ops receive must already be in `values`, and on return the
  /// operands of its dtfm.send ops are there (sends are left to the
  /// caller); `loss` accumulates the micro-batch's loss when this program
  /// computes one. collectGradients adds the micro-batch's optimizer inputs
  /// to the iteration's sums; finishIteration, after the last micro-batch,
  /// scales them by `gradientScale` (1 / micro-batches for the replica's
  /// mean; with uneven replicas the worker weights its share), runs the
  /// gradient syncs through `sync` and the updates.
  virtual bool runPhase(OpPhase phase, int microBatch, ValueTable &values,
                        const MicroBatch &batch, double &loss,
                        std::string &error) = 0;
  virtual void collectGradients(int microBatch, const ValueTable &values) = 0;
  /// Once the phase's sends of `microBatch` are made (and summed): frees
  /// what only they still read (ValueLifetimes).
  virtual void releaseSent(OpPhase phase, int microBatch,
                           ValueTable &values) = 0;
  /// After a forward-only pass of `microBatch` (validation): drops what
  /// the executor holds of it for a backward that will not come (a GPU's
  /// device values; the CPU holds nothing).
  virtual void discardMicroBatch(int microBatch) {}
  /// With sharded optimizer state (dtfm.shard_state) `sync` leaves only
  /// this member's shard (shardOf) of each gradient averaged, the updates
  /// step that shard, and `gather` is then called with the bucket's syncs
  /// and their parameters, of which this member's shard is current, to
  /// make every element current.
  virtual bool finishIteration(double gradientScale, const SyncFn &sync,
                               const SyncFn &gather, std::string &error) = 0;

  /// Every parameter, by name (host copies).
  virtual std::map<std::string, cpu::Tensor> parameters() const = 0;

  /// What the last finishIteration's updates used: the learning rate (its
  /// schedule's at that step; -1 when the program updates nothing) and the
  /// model's gradient norm before clipping (-1 when not computed: no
  /// clip-grad-norm).
  struct OptimizerFigures {
    double lr = -1, gradNorm = -1;
  };
  const OptimizerFigures &lastOptimizerStep() const { return lastStep; }

protected:
  GroupSumFn tensorParallelSum;
  bool checkFinite = false;
  OptimizerFigures lastStep;
  double clipNorm = 0;
  NormSumFn normSum;
};

/// --memory-report's second figure: the bytes malloc has handed out
/// (mallinfo2), sampled after every step of every phase once enabled and
/// at the end of each iteration; the peak, unlike the resident memory,
/// without the holes the heap is left with.
void enableHeapPeak();
void sampleHeapPeak();
int64_t heapInUseBytes();
int64_t heapPeakBytes();

/// Parameters and optimizer state on the host, in the one format of
/// parameter files and checkpoints; every backend initialises, loads and
/// saves through it.
struct HostState {
  struct Moments {
    cpu::Tensor m, v, velocity;
    /// Local steps: the parameter at the last exchange and the outer
    /// optimizer's momentum.
    cpu::Tensor anchor, outerVelocity;
    /// Compressed exchanges: what compression left out, sent next time
    /// (every step's gradients; local steps' pseudo-gradients).
    cpu::Tensor residual, outerResidual;
    /// Local steps with an overlap: the averaged pseudo-gradients received
    /// and not yet applied.
    cpu::Tensor outerPending;
    int64_t step = 0;
  };
  std::map<std::string, cpu::Tensor> params;
  std::map<std::string, Moments> optimizer;

  /// Parameters from their initializers (seeded per parameter name);
  /// `external` ones from `weights`, by name. Clears the optimizer state.
  bool initialize(const StageProgram &program, uint64_t seed,
                  const std::map<std::string, cpu::Tensor> *weights,
                  std::string &error);
  /// Parameters from whole tensors (Executor::loadParameters). Clears the
  /// optimizer state.
  bool load(const StageProgram &program, const format::TensorMap &weights,
            const std::string &source, std::string &error);
  /// "param/<name>", "opt.m/<name>", "opt.v/<name>", "opt.velocity/<name>",
  /// "opt.step/<name>".
  std::map<std::string, cpu::Tensor> state() const;
  bool restore(const StageProgram &program,
               const std::map<std::string, cpu::Tensor> &state,
               std::string &error);
};

/// The model inputs and labels a program reads.
std::vector<InputSpec> programInputs(const StageProgram &program);

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_EXECUTOR_H
