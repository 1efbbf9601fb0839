//===- PhaseLoop.h - The phase loop every backend runs ----------*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
//
// A micro-batch's forward or backward runs its program's steps in order
// (StageProgram::steps): received values and inputs are bound, every other
// op runs through the backend's kernels, and each value is released after
// its last reader (ValueLifetimes). The optimizer's local steps and the
// compressed exchanges' residuals live in the host state on every backend.
// A backend derives from PhaseExecutor and implements its hooks.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_PHASELOOP_H
#define DTFM_RUNTIME_PHASELOOP_H

#include "dtfm/Plan/Sharding.h"
#include "dtfm/Runtime/Executor.h"

#include <map>
#include <string>
#include <vector>

namespace dtfm::runtime {

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
  bool outerSend(int64_t step, std::vector<float> &deltas,
                 std::string &error) override;
  bool outerPark(int64_t sentAfterStep, const std::vector<float> &averaged,
                 std::string &error) override;
  bool outerParkedSince(int64_t step, int64_t &sentAfterStep) override;
  bool outerApply(double mixing, std::string &error) override;
  cpu::Tensor *residualOf(const ProgramOp &sync) override;

protected:
  explicit PhaseExecutor(const StageProgram &program);

  /// Checkpoints: beside the state, where this program's parts lie in the
  /// whole -- each sharded parameter's range ("shard/<name>") and each
  /// tensor-parallel slice ("tp/<name>", Checkpoints.h) -- what another
  /// plan's workers assemble theirs from.
  void describeSlices(std::map<std::string, cpu::Tensor> &state) const;

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
  /// Value `id` of the micro-batch (or the parameter it holds) on the host,
  /// for --check-finite: the CPU's own tensor, or a GPU's copied into
  /// `scratch`; null with `error` when it cannot be read.
  virtual const cpu::Tensor *hostValue(int microBatch, int64_t id,
                                       const ValueTable &values,
                                       cpu::Tensor &scratch,
                                       std::string &error) = 0;
  /// --check-finite after `op` ran: false with a diagnostic when one of its
  /// results holds an infinity or a NaN.
  bool resultsFinite(const ProgramOp &op, bool recompute, int microBatch,
                     const ValueTable &values, std::string &error);
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
    /// The dtfm.param it updates, and the dtfm.grad_sync its gradient comes
    /// from (nullptr: none, no data parallelism).
    const ProgramOp *param = nullptr;
    const ProgramOp *sync = nullptr;
  };
  /// Gradient clipping: how an update's gradient enters the model's squared
  /// norm, so that the sum over the world counts every element of the
  /// model's gradient once.
  struct NormPart {
    /// False on a tensor-parallel rank other than 0 for a parameter every
    /// rank holds whole (rank 0 counts it).
    bool counted = true;
    /// Averaged over its data-parallel group (a synchronous sync): every
    /// member holds the same, and counts it with `weight` 1 / members --
    /// or, with sharded state, only its own shard at weight 1. Otherwise
    /// the replica's own (no data parallelism, local steps).
    bool shared = false;
    double weight = 1;
    /// The elements that count: [first, first + count) (count -1: all).
    int64_t first = 0, count = -1;
  };
  /// `shards`: the parameters whose optimizer state this member shards
  /// (dtfm.shard_state) and its range of each.
  NormPart normPartOf(const Update &update,
                      const std::map<std::string, plan::ElementRange> &shards)
      const;
  /// From the world's sums of the norm parts (setGradientClipping's
  /// NormSumFn): the factor every gradient is scaled by before the updates,
  /// min(1, maxNorm / (norm + 1e-6)) as torch.nn.utils.clip_grad_norm_;
  /// records the norm in lastStep.
  double clipFactor(double sharedSquares, double replicaSquares);
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

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_PHASELOOP_H
