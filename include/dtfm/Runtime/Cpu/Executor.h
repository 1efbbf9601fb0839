//===- Executor.h - The CPU executor ----------------------------*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_CPU_EXECUTOR_H
#define DTFM_RUNTIME_CPU_EXECUTOR_H

#include "dtfm/Runtime/PhaseLoop.h"

#include <map>
#include <set>
#include <string>

namespace dtfm::runtime::cpu {

/// The CPU executor: the CPU kernel table on host tensors.
class CpuExecutor : public PhaseExecutor {
public:
  explicit CpuExecutor(const StageProgram &program);

  bool initialize(
      uint64_t seed, std::string &error,
      const std::map<std::string, cpu::Tensor> *weights = nullptr) override {
    return host.initialize(program, seed, weights, error);
  }
  bool loadParameters(const format::TensorMap &weights,
                      const std::string &source,
                      std::string &error) override {
    return host.load(program, weights, source, error);
  }
  /// The host state and where its parts lie (describeSlices).
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
  const cpu::Tensor *hostValue(int microBatch, int64_t id,
                               const ValueTable &values, cpu::Tensor &scratch,
                               std::string &error) override;

private:
  /// Adds value `id` of the micro-batch to its iteration sum (once per
  /// micro-batch) and, on the last micro-batch, hands the gradient of the
  /// dtfm.grad_sync that reads it to the armed GradientReadyFn.
  void collect(int64_t id, int microBatch, const cpu::Tensor &value);
  /// After a dtfm.tp_all_reduce (or its backward) that sums: the sum of its
  /// result over the tensor-parallel group.
  bool sumOverTensorParallelGroup(const ProgramOp &op, ValueTable &values,
                                  std::string &error);
  /// Clipping (setGradientClipping): the model's norm from every update's
  /// synced gradient in `values` (this member's parts, summed over the
  /// world), then each gradient scaled down to it.
  bool clipGradients(const std::vector<Update> &updates, ValueTable &values,
                     std::string &error);

  std::map<int64_t, std::string> paramOfValue; // value id -> parameter
  ValueTable gradSum;          // optimizer inputs summed over micro-batches
  /// Per micro-batch whose gradients are being summed, the ids summed so
  /// far (a zero-bubble schedule interleaves one micro-batch's weight
  /// gradients with the next ones' backwards).
  std::map<int, std::set<int64_t>> collected;
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

} // namespace dtfm::runtime::cpu

#endif // DTFM_RUNTIME_CPU_EXECUTOR_H
