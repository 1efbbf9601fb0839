//===- KernelTable.h - The CPU backend's kernel per op kind ------*- C++
//-*-===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
//
// One entry per op kind (OpKinds.def): the forward kernel and the backward
// kernel (what a dtfm.backward of that kind runs), or null where the CPU
// has none. The CPU executor dispatches through this table only, and
// supportsProgram is a lookup in it. Adding an op to the CPU backend is one
// entry here and its kernel in Kernels.h (docs/Runtime.md).
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_CPU_KERNELTABLE_H
#define DTFM_RUNTIME_CPU_KERNELTABLE_H

#include "dtfm/Runtime/Executor.h"

namespace dtfm::runtime::cpu {

/// The program's place in its tensor-parallel group, for the
/// vocabulary-parallel kernels: its rank and the group's sum (null outside
/// a group).
struct GroupMember {
  int64_t rank = 0;
  const StageExecutor::GroupSumFn *sum = nullptr;
};

/// What a forward kernel sees: the op, the micro-batch's values (operands
/// in, results out), the parameters (batchnorm's running statistics are
/// updated in place), the loss accumulator and the tensor-parallel group.
struct ForwardCall {
  const ProgramOp &op;
  ValueTable &values;
  HostState &host;
  const std::map<int64_t, std::string> &paramOfValue;
  double &loss;
  const GroupMember &group;

  /// Operand `i`: a value of the micro-batch, or a parameter, which the
  /// CPU reads in place (cpu::CpuExecutor::operand).
  const Tensor &in(int i) const;
  int numOperands() const { return static_cast<int>(op.operands.size()); }
  /// Result `i` (views such as reshape adopt the result's shape).
  void set(int i, Tensor t) const {
    t.shape = op.results[i].shape;
    values[op.results[i].id] = std::move(t);
  }
};

/// What a backward kernel sees: the forward's operands, the gradient of
/// its result (null for the loss), where to add the operands' gradients
/// (null for operands not in `wrt`) and the tensor-parallel group.
struct BackwardCall {
  const ProgramOp &op;
  const std::vector<const Tensor *> &operands;
  const Tensor *dOut;
  const std::vector<Tensor *> &grads;
  const GroupMember &group;

  const Tensor &in(int i) const { return *operands[i]; }
  int numOperands() const { return static_cast<int>(operands.size()); }
  Tensor *at(int i) const { return i < numOperands() ? grads[i] : nullptr; }
};

using ForwardKernel = bool (*)(const ForwardCall &call, std::string &error);
using BackwardKernel = bool (*)(const BackwardCall &call, std::string &error);

struct KernelEntry {
  ForwardKernel forward = nullptr;
  BackwardKernel backward = nullptr;
};

/// The CPU's kernels, indexed by op kind. Structural kinds (param, input,
/// label, recv, send, backward, grad_sync, the updates) have no entry: the
/// phase loop and finishIteration run them.
const OpTable<KernelEntry> &kernelTable();

/// Whether every computing op of `program` has a CPU kernel; otherwise
/// false with `reason` ("op #N dtfm.x has no CPU kernel").
bool supportsProgram(const StageProgram &program, std::string &reason);

} // namespace dtfm::runtime::cpu

#endif // DTFM_RUNTIME_CPU_KERNELTABLE_H
