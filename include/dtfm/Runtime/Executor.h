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
// PhaseExecutor holds what every backend shares: the phase loop (which ops
// run, values from the host, operand checks, diagnostics) and the host
// state (parameter initialisation, parameter files, the optimizer state's
// format). A backend implements the per-op work through its kernel table:
// the CPU's (Cpu/KernelTable.h, ProgramExecutor) or the GPU's
// (Cuda/Executor.h).
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_EXECUTOR_H
#define DTFM_RUNTIME_EXECUTOR_H

#include "dtfm/Runtime/Cpu/Kernels.h"
#include "dtfm/Runtime/Program.h"

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
};

/// Values of one micro-batch, by value id.
using ValueTable = std::map<int64_t, cpu::Tensor>;

/// CPU seconds of the calling thread: what the calibration and the CPU's
/// memory probe time.
double threadCpuSeconds();

/// What a worker needs of the executor of its device program, whichever
/// device runs it: the CPU (ProgramExecutor, below) or a GPU
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

  /// Averages a flat buffer over the program's data-parallel group, in
  /// place (local steps' parameter exchange).
  using AverageFn = std::function<bool(std::vector<float> &values,
                                       std::string &error)>;

  /// Local steps (DiLoCo, dtfm.sync_every > 1): after an iteration's
  /// optimizer step, exchanges each synchronised parameter's pseudo-gradient
  /// (its value at the last exchange minus now) through `average`, applies
  /// the outer Nesterov step to the value at the last exchange and makes
  /// that the parameter again. False with an error on a backend that
  /// cannot.
  virtual bool outerStep(const AverageFn &average, std::string &error) {
    error = "this backend does not run local steps (dtfm.sync_every)";
    return false;
  }

  /// The error-feedback residual of a compressed dtfm.grad_sync's gradient
  /// (dtfm.compression): optimizer state of the parameter it updates, zero
  /// at first, checkpointed with it, kept on the host (where the exchange
  /// encodes). nullptr on a backend that keeps none.
  virtual cpu::Tensor *residualOf(const ProgramOp &sync) { return nullptr; }

  /// Seconds the device computed since the last call, for executors whose
  /// work runs asynchronously (a GPU's, timed with events); -1 where the
  /// compute thread's CPU time is the measure (the CPU executor). The
  /// worker's calibration of device speeds reads it.
  virtual double takeComputeSeconds() { return -1; }

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
  /// Parameters from a file written by saveParameters (or by a test): every
  /// parameter of the program must be there with its shape.
  virtual bool loadParameters(const std::string &path, std::string &error) = 0;
  /// Writes every parameter (binary: "DTFMPAR1", count, then per parameter
  /// its name, rank, dims and fp32 data); temp file + rename.
  virtual bool saveParameters(const std::string &path,
                              std::string &error) const = 0;

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
  /// With sharded optimizer state (dtfm.shard_state) `sync` leaves only
  /// this member's shard (shardOf) of each gradient averaged, the updates
  /// step that shard, and `gather` is then called with the bucket's syncs
  /// and their parameters, of which this member's shard is current, to
  /// make every element current.
  virtual bool finishIteration(double gradientScale, const SyncFn &sync,
                               const SyncFn &gather, std::string &error) = 0;

  /// Every parameter, by name (host copies).
  virtual std::map<std::string, cpu::Tensor> parameters() const = 0;

protected:
  GroupSumFn tensorParallelSum;
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
    /// Compressed exchanges: what compression left out, sent next time.
    cpu::Tensor residual;
    int64_t step = 0;
  };
  std::map<std::string, cpu::Tensor> params;
  std::map<std::string, Moments> optimizer;

  /// Parameters from their initializers (seeded per parameter name);
  /// `external` ones from `weights`, by name. Clears the optimizer state.
  bool initialize(const StageProgram &program, uint64_t seed,
                  const std::map<std::string, cpu::Tensor> *weights,
                  std::string &error);
  /// Parameters from a tensor file: every parameter of the program must be
  /// there with its shape. Clears the optimizer state.
  bool load(const StageProgram &program, const std::string &path,
            std::string &error);
  /// "param/<name>", "opt.m/<name>", "opt.v/<name>", "opt.velocity/<name>",
  /// "opt.step/<name>".
  std::map<std::string, cpu::Tensor> state() const;
  bool restore(const StageProgram &program,
               const std::map<std::string, cpu::Tensor> &state,
               std::string &error);
};

/// The model inputs and labels a program reads.
std::vector<InputSpec> programInputs(const StageProgram &program);

/// What the backends share: the phase loop and the host state. A backend
/// implements the hooks below; runPhase calls them in program order.
class PhaseExecutor : public StageExecutor {
public:
  std::vector<InputSpec> inputs() const override {
    return programInputs(program);
  }
  bool runPhase(OpPhase phase, int microBatch, ValueTable &values,
                const MicroBatch &batch, double &loss,
                std::string &error) final;
  void releaseSent(OpPhase phase, int microBatch, ValueTable &values) final;

  /// Local steps and compressed exchanges work on the host state, on every
  /// backend: the pseudo-gradients and the outer step every H steps, the
  /// int8 residuals every step (a backend keeping parameters elsewhere moves
  /// those it needs through parametersToHost / parametersFromHost).
  bool outerStep(const AverageFn &average, std::string &error) override;
  cpu::Tensor *residualOf(const ProgramOp &sync) override;

protected:
  explicit PhaseExecutor(const StageProgram &program);

  /// Makes host.params[name] current for each of `names` (a GPU downloads
  /// them); the CPU's parameters are there already.
  virtual bool parametersToHost(const std::vector<std::string> &names,
                                std::string &error) {
    return true;
  }
  /// Takes host.params[name] back for each of `names` (a GPU uploads them).
  virtual bool parametersFromHost(const std::vector<std::string> &names,
                                  std::string &error) {
    return true;
  }
  /// Local steps: before an iteration's updates, each synchronised
  /// parameter without an anchor (the first step, or a checkpoint written
  /// before local steps) takes its current value as the anchor.
  bool anchorLocalSteps(std::string &error);

  /// Before the phase's first op (a GPU posts device-to-device receives).
  virtual bool beginPhase(OpPhase phase, int microBatch, ValueTable &values,
                          std::string &error) {
    return true;
  }
  /// Whether the backend moves this dtfm.recv's value itself (NCCL); the
  /// loop then leaves it alone.
  virtual bool movesItself(const ProgramOp &op) const { return false; }
  /// A value from the host for `op`'s result: a received activation or
  /// gradient, a model input or a label.
  virtual bool bindHostValue(const ProgramOp &op, int microBatch,
                             const cpu::Tensor &value, ValueTable &values,
                             std::string &error) = 0;
  /// Whether value `id` of the micro-batch has been computed.
  virtual bool hasValue(int microBatch, int64_t id,
                        const ValueTable &values) const = 0;
  /// Runs one op through the backend's kernel table (a dtfm.backward
  /// through its forward kind's backward kernel).
  virtual bool runOp(const ProgramOp &op, int microBatch, ValueTable &values,
                     double &loss, std::string &error) = 0;
  /// After each op that ran through runOp, with its results in `values`.
  virtual void afterOp(const ProgramOp &op, int microBatch,
                       const ValueTable &values) {}
  /// One step of a phase (PhaseStep): binds a received value or an input,
  /// or runs the op through runOp (a recomputed forward op without adding
  /// to the loss again).
  bool runStep(const ProgramOp &op, bool recompute, int microBatch,
               ValueTable &values, const MicroBatch &batch, double &loss,
               std::string &error);
  /// A value of `microBatch` no later op reads (ValueLifetimes): the CPU
  /// frees it; a backend keeping values elsewhere may free its copy too.
  virtual void releaseValue(int microBatch, int64_t id, ValueTable &values) {
    values.erase(id);
  }
  /// After the phase's last op: values for the phase's dtfm.send ops into
  /// `values` (host), losses into `loss`.
  virtual bool endPhase(OpPhase phase, int microBatch, ValueTable &values,
                        double &loss, std::string &error) {
    return true;
  }

  /// An optimizer update of the program: the op, the parameter it updates
  /// and the value id of its (averaged, synced) gradient.
  struct Update {
    const ProgramOp *op;
    std::string parameter;
    int64_t gradient;
    /// AdamW whose gradient arrives top-k compressed after a warm-up: the
    /// sync's dtfm.topk_warmup (0: the second moment is never frozen).
    int64_t freezeSecondMomentAfter = 0;
  };
  /// The optimizer phase's updates in program order (gradient syncs left
  /// out); fails naming an op that is not an update of a parameter
  /// (`paramOfValue`: the parameter of each dtfm.param value).
  bool optimizerUpdates(const std::map<int64_t, std::string> &paramOfValue,
                        std::vector<Update> &updates, std::string &error) const;

  const StageProgram &program;
  /// When each value of a micro-batch can be freed.
  const ValueLifetimes lifetimes;
  /// Parameters and optimizer state in the one format of parameter files
  /// and checkpoints: the CPU executor's own; the GPU's copy for loading
  /// and saving, and the home of its host-side state (anchors, outer
  /// velocities, residuals).
  HostState host;
  /// The parameter each dtfm.grad_sync's gradient updates, by op index.
  std::map<int, std::string> parameterOfSync;
};

/// The CPU executor: the CPU kernel table on host tensors.
class ProgramExecutor : public PhaseExecutor {
public:
  explicit ProgramExecutor(const StageProgram &program);

  bool initialize(
      uint64_t seed, std::string &error,
      const std::map<std::string, cpu::Tensor> *weights = nullptr) override {
    return host.initialize(program, seed, weights, error);
  }
  bool loadParameters(const std::string &path, std::string &error) override {
    return host.load(program, path, error);
  }
  bool saveParameters(const std::string &path,
                      std::string &error) const override;
  /// The host state, and for each sharded parameter the range its moments
  /// cover ("shard/<name>", Checkpoints.h): what another plan's workers
  /// assemble theirs from.
  std::map<std::string, cpu::Tensor> state() const override;
  bool restoreState(const std::map<std::string, cpu::Tensor> &state,
                    std::string &error) override {
    return host.restore(program, state, error);
  }
  void collectGradients(int microBatch, const ValueTable &values) override;
  bool streamGradients(int microBatches, double gradientScale,
                       GradientReadyFn ready) override;
  bool finishIteration(double gradientScale, const SyncFn &sync,
                       const SyncFn &gather, std::string &error) override;
  std::map<std::string, cpu::Tensor> parameters() const override {
    return host.params;
  }

protected:
  bool bindHostValue(const ProgramOp &op, int microBatch,
                     const cpu::Tensor &value, ValueTable &values,
                     std::string &error) override;
  bool hasValue(int microBatch, int64_t id,
                const ValueTable &values) const override;
  /// Value `id` of a micro-batch, or the parameter it names (read in
  /// place: the micro-batches do not copy the parameters).
  const cpu::Tensor &operand(int64_t id, const ValueTable &values) const;
  bool runOp(const ProgramOp &op, int microBatch, ValueTable &values,
             double &loss, std::string &error) override;
  void afterOp(const ProgramOp &op, int microBatch,
               const ValueTable &values) override;

private:
  /// Adds value `id` of the micro-batch to its iteration sum (once per
  /// micro-batch) and, on the last micro-batch, hands the gradient of the
  /// dtfm.grad_sync that reads it to the armed GradientReadyFn.
  void collect(int64_t id, int microBatch, const cpu::Tensor &value);
  /// After a dtfm.tp_all_reduce (or its backward) that sums: the sum of its
  /// result over the tensor-parallel group.
  bool sumOverTensorParallelGroup(const ProgramOp &op, ValueTable &values,
                                  std::string &error);

  std::map<int64_t, std::string> paramOfValue; // value id -> parameter
  ValueTable gradSum; // optimizer inputs summed over micro-batches
  std::set<int64_t> collected; // ids summed for the current micro-batch
  int collectingMicroBatch = -1;
  /// The optimizer inputs that are not parameters (gradients), and the
  /// dtfm.grad_sync reading each (from the program, at construction).
  std::map<int64_t, const ProgramOp *> gradientInputs;
  /// Parameters under sharded optimizer state, with this member's shard.
  std::map<std::string, ElementRange> shards;
  /// What the program sends (runtime::sentValues).
  std::map<int64_t, bool> sentValues;
  int streamMicroBatches = 0; // armed by streamGradients for one iteration
  double streamScale = 1;
  GradientReadyFn ready;
};

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_EXECUTOR_H
