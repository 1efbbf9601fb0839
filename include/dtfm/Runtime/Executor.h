//===- Executor.h - Run a device program on the CPU --------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Executes one device program of a plan with the CPU kernels (custom
// operators through their plugins' kernels): for each
// micro-batch its forward and backward ops in program order (backward ops
// recompute what they need -- layernorm statistics, attention and softmax
// probabilities -- from the forward operands they receive), gradients
// averaged over the micro-batches, then the optimizer-phase ops once
// (gradient syncs are the identity on one device; updates write the
// parameter store). Deterministic for a given seed and plan.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_EXECUTOR_H
#define DTFM_RUNTIME_EXECUTOR_H

#include "dtfm/Runtime/Cpu/Kernels.h"

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace dtfm::proto {
class DeviceProgram;
class PlanOp;
} // namespace dtfm::proto

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

/// What a worker needs of the executor of its device program, whichever
/// device runs it: the CPU (ProgramExecutor, below) or a GPU
/// (cuda::CudaExecutor, Cuda/Executor.h). Values crossing devices and
/// parameters in files are host tensors either way.
class StageExecutor {
public:
  /// Averages the gradients of the program's dtfm.grad_sync ops across
  /// their data-parallel groups, all at once (one bucket), in place.
  using SyncFn = std::function<bool(
      const std::vector<std::pair<const proto::PlanOp *, cpu::Tensor *>> &grads,
      std::string &error)>;

  /// Shares a small value between the members of a group through the
  /// rendezvous: the first member publishes, the others look it up.
  using ShareFn = std::function<bool(const std::string &key,
                                     std::string &value, bool publish,
                                     std::string &error)>;

  virtual ~StageExecutor();

  /// Called once the workers are connected, by every member of this
  /// program's data-parallel group (world ranks `members`, this one at
  /// `position`): an executor with collectives of its own (NCCL on the GPU)
  /// sets them up here and then averages the gradients itself instead of
  /// through finishIteration's SyncFn. The CPU executor has none.
  virtual bool connectGroup(const std::vector<int> &members, int position,
                            const ShareFn &share, std::string &error) {
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
  /// `phase` ("fwd" or "bwd") for micro-batch `microBatch`: the values its
  /// dtfm.recv ops receive must already be in `values`, and on return the
  /// operands of its dtfm.send ops are there (sends are left to the
  /// caller); `loss` accumulates the micro-batch's loss when this program
  /// computes one. collectGradients adds the micro-batch's optimizer inputs
  /// to the iteration's sums; finishIteration, after the last micro-batch,
  /// averages them, runs the gradient syncs through `sync` and the updates.
  virtual bool runPhase(const std::string &phase, int microBatch,
                        ValueTable &values, const MicroBatch &batch,
                        double &loss, std::string &error) = 0;
  virtual void collectGradients(int microBatch, const ValueTable &values) = 0;
  virtual bool finishIteration(int microBatches, const SyncFn &sync,
                               std::string &error) = 0;

  /// Every parameter, by name (host copies).
  virtual std::map<std::string, cpu::Tensor> parameters() const = 0;
};

/// The CPU executor.
class ProgramExecutor : public StageExecutor {
public:
  explicit ProgramExecutor(const proto::DeviceProgram &program);

  bool initialize(uint64_t seed, std::string &error,
                  const std::map<std::string, cpu::Tensor> *weights =
                      nullptr) override;
  bool loadParameters(const std::string &path, std::string &error) override;
  bool saveParameters(const std::string &path,
                      std::string &error) const override;
  std::vector<InputSpec> inputs() const override;
  std::map<std::string, cpu::Tensor> state() const override;
  bool restoreState(const std::map<std::string, cpu::Tensor> &state,
                    std::string &error) override;
  bool runPhase(const std::string &phase, int microBatch, ValueTable &values,
                const MicroBatch &batch, double &loss,
                std::string &error) override;
  void collectGradients(int microBatch, const ValueTable &values) override;
  bool finishIteration(int microBatches, const SyncFn &sync,
                       std::string &error) override;
  std::map<std::string, cpu::Tensor> parameters() const override {
    return params;
  }

private:
  const proto::DeviceProgram &program;
  std::map<std::string, cpu::Tensor> params;
  std::map<int64_t, std::string> paramOfValue; // value id -> parameter
  ValueTable gradSum; // optimizer inputs summed over micro-batches
  struct OptimizerState {
    cpu::Tensor m, v, velocity;
    int64_t step = 0;
  };
  std::map<std::string, OptimizerState> optimizer;
};

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_EXECUTOR_H
