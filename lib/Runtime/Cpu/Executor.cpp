//===- Executor.cpp - The CPU executor: the CPU kernels on host tensors ---===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Cpu/Executor.h"
#include "dtfm/Runtime/Cpu/KernelTable.h"

#include <algorithm>

using namespace dtfm::runtime;
using namespace dtfm::runtime::cpu;

std::map<std::string, Tensor> CpuExecutor::state() const {
  std::map<std::string, Tensor> out = host.state();
  describeSlices(out);
  return out;
}

bool CpuExecutor::bindHostValue(const ProgramOp &op, int, const Tensor &value,
                                ValueTable &values, std::string &) {
  if (op.kind != OpKind::Recv) // received values are in place already
    values[op.results[0].id] = value;
  return true;
}

bool CpuExecutor::runOp(const ProgramOp &op, int microBatch, ValueTable &values,
                        double &loss, std::string &error) {
  if (op.kind == OpKind::Param) {
    auto it = host.params.find(op.attrs.name);
    if (it == host.params.end()) {
      error = "unknown parameter '" + op.attrs.name + "'";
      return false;
    }
    // Kernels read parameters in place (operand()); only one the worker
    // sends (a tied weight) is copied into the micro-batch's values -- once
    // per iteration, into micro-batch 0's, whose table the worker sends
    // from.
    paramOfValue[op.results[0].id] = op.attrs.name;
    auto sent = sentValues.find(op.results[0].id);
    if (sent != sentValues.end() && (!sent->second || microBatch == 0))
      values[op.results[0].id] = it->second;
    return true;
  }
  const cpu::KernelEntry &kernels =
      cpu::kernelTable()[static_cast<size_t>(op.computes)];
  cpu::GroupMember group{tensorParallelRank(program),
                         tensorParallelSum ? &tensorParallelSum : nullptr};
  if (!op.isBackward()) {
    if (!kernels.forward) {
      error = "no CPU kernel for this op";
      return false;
    }
    return kernels.forward(
               cpu::ForwardCall{op, values, host, paramOfValue, loss, group},
               error) &&
           sumOverTensorParallelGroup(op, values, error);
  }
  // The gradients of one forward op: its operands (and the gradient of its
  // result, last, unless it is the loss) in, one gradient per `wrt` out.
  if (!kernels.backward) {
    error = std::string("no CPU backward for ") + opName(op.computes);
    return false;
  }
  bool isLoss = op.computes == OpKind::CrossEntropy;
  int numOperands = static_cast<int>(op.operands.size()) - (isLoss ? 0 : 1);
  if (numOperands < 0) {
    error = "dtfm.backward without the gradient of its result";
    return false;
  }
  std::vector<const Tensor *> operands(numOperands);
  for (int i = 0; i < numOperands; ++i)
    operands[i] = &operand(op.operands[i], values);
  const Tensor *dOut = isLoss ? nullptr : &values.at(op.operands.back());
  const std::vector<int64_t> &wrt = op.attrs.wrt;
  if (wrt.size() != op.results.size()) {
    error = "dtfm.backward with " + std::to_string(wrt.size()) +
            " wrt indices for " + std::to_string(op.results.size()) +
            " results";
    return false;
  }
  std::vector<Tensor> grads(numOperands);
  std::vector<Tensor *> want(numOperands, nullptr);
  for (int64_t index : wrt) {
    if (index < 0 || index >= numOperands) {
      error = "dtfm.backward wrt index out of range";
      return false;
    }
    grads[index] = Tensor(operands[index]->shape);
    want[index] = &grads[index];
  }
  if (!kernels.backward(cpu::BackwardCall{op, operands, dOut, want, group},
                        error))
    return false;
  for (size_t k = 0; k < wrt.size(); ++k) {
    Tensor g = std::move(grads[wrt[k]]);
    g.shape = op.results[k].shape;
    values[op.results[k].id] = std::move(g);
  }
  return sumOverTensorParallelGroup(op, values, error);
}

bool CpuExecutor::sumOverTensorParallelGroup(const ProgramOp &op,
                                             ValueTable &values,
                                             std::string &error) {
  // dtfm.tp_all_reduce sums its value in the forward, or with in_backward
  // its gradient in the backward; its kernels copied the operand.
  if (op.computes != OpKind::TpAllReduce ||
      op.isBackward() != op.attrs.inBackward)
    return true;
  if (!tensorParallelSum) {
    error = "no tensor-parallel group to sum over";
    return false;
  }
  Tensor &sum = values.at(op.results[0].id);
  return tensorParallelSum(sum.data.data(), sum.data.size(), error);
}

void CpuExecutor::collect(int64_t id, int microBatch, const Tensor &value) {
  if (!collected[microBatch].insert(id).second)
    return;
  Tensor &sum = gradSum[id];
  if (sum.shape != value.shape)
    sum = Tensor(value.shape);
  for (int64_t j = 0; j < sum.numel(); ++j)
    sum.data[j] += value.data[j];
  const ProgramOp *sync = gradientInputs.at(id);
  if (!ready || !sync || microBatch != streamMicroBatches - 1)
    return;
  // What finishIteration would hand to the SyncFn: the same arithmetic.
  Tensor averaged(sum.shape);
  for (int64_t j = 0; j < sum.numel(); ++j)
    averaged.data[j] = static_cast<float>(sum.data[j] * streamScale);
  ready(*sync, averaged);
}

CpuExecutor::CpuExecutor(const StageProgram &program)
    : PhaseExecutor(program), gradientInputs(runtime::gradientInputs(program)),
      shards(shardedParameters(program)),
      sentValues(runtime::sentValues(program)) {}

const Tensor &CpuExecutor::operand(int64_t id, const ValueTable &values) const {
  auto it = values.find(id);
  if (it != values.end())
    return it->second;
  return host.params.at(paramOfValue.at(id));
}

const Tensor *CpuExecutor::hostValue(int microBatch, int64_t id,
                                     const ValueTable &values, Tensor &,
                                     std::string &error) {
  if (!hasValue(microBatch, id, values)) {
    error = "value #" + std::to_string(id) + " is not computed";
    return nullptr;
  }
  return &operand(id, values);
}

bool CpuExecutor::hasValue(int, int64_t id, const ValueTable &values) const {
  return values.count(id) > 0 || paramOfValue.count(id) > 0;
}

void CpuExecutor::afterOp(const ProgramOp &op, int microBatch,
                          const ValueTable &values) {
  if (op.phase != OpPhase::Backward && op.phase != OpPhase::Weight)
    return;
  for (const ProgramValue &result : op.results)
    if (gradientInputs.count(result.id))
      collect(result.id, microBatch, values.at(result.id));
}

void CpuExecutor::collectGradients(int microBatch, const ValueTable &values) {
  // What no op of the phase produced (a gradient received once per
  // iteration) is added here; the rest was added as it was computed.
  for (const auto &[id, sync] : gradientInputs) {
    auto it = values.find(id);
    if (it != values.end())
      collect(id, microBatch, it->second);
  }
  collected.erase(microBatch);
  if (microBatch == streamMicroBatches - 1)
    ready = nullptr; // armed for one iteration
}

bool CpuExecutor::streamGradients(int microBatches, double gradientScale,
                                  GradientReadyFn fn) {
  streamMicroBatches = microBatches;
  streamScale = gradientScale;
  ready = std::move(fn);
  return true;
}

bool CpuExecutor::clipGradients(const std::vector<Update> &updates,
                                ValueTable &values, std::string &error) {
  double squares[2] = {0, 0}; // replica's own, shared
  std::vector<std::pair<Tensor *, NormPart>> parts;
  for (const Update &update : updates) {
    auto g = values.find(update.gradient);
    if (g == values.end()) {
      error = std::string(opName(update.op->kind)) +
              ": its gradient was never computed";
      return false;
    }
    NormPart part = normPartOf(update, shards);
    parts.push_back({&g->second, part});
    if (!part.counted)
      continue;
    const float *data = g->second.data.data() + part.first;
    int64_t count =
        part.count < 0 ? g->second.numel() - part.first : part.count;
    double sum = 0;
    for (int64_t i = 0; i < count; ++i)
      sum += static_cast<double>(data[i]) * data[i];
    squares[part.shared] += part.weight * sum;
  }
  if (!normSum(squares[1], squares[0], error))
    return false;
  double factor = clipFactor(squares[1], squares[0]);
  if (factor >= 1)
    return true;
  float f = static_cast<float>(factor);
  for (auto &[grad, part] : parts) {
    // With sharded state the other members' ranges hold partial sums that
    // no update reads: only this member's is scaled.
    float *data = grad->data.data() + part.first;
    int64_t count = part.count < 0 ? grad->numel() - part.first : part.count;
    for (int64_t i = 0; i < count; ++i)
      data[i] *= f;
  }
  return true;
}

bool CpuExecutor::finishIteration(double gradientScale, const SyncFn &sync,
                                  const SyncFn &gather, std::string &error) {
  ValueTable values;
  auto fail = [&](const ProgramOp &op, const std::string &message) {
    error = std::string(opName(op.kind)) + ": " + message;
    return false;
  };
  for (auto &[id, sum] : gradSum) {
    for (float &x : sum.data)
      x = static_cast<float>(x * gradientScale);
    values[id] = std::move(sum);
  }
  gradSum.clear();
  const std::vector<int> &optimizerOps = program.opsOf(OpPhase::Optimizer);
  // Gradient syncs by bucket; an update waits only for its gradient's
  // bucket.
  std::map<int64_t, int64_t> bucketOfResult; // sync result id -> bucket
  std::map<int64_t, const ProgramOp *> syncOfResult;
  for (int index : optimizerOps) {
    const ProgramOp &op = program.ops[index];
    if (op.kind != OpKind::GradSync)
      continue;
    syncOfResult[op.results[0].id] = &op;
    auto in = values.find(op.operands[0]);
    if (in == values.end())
      return fail(op, "its gradient was never computed");
    values[op.results[0].id] = in->second;
    // With local steps each replica steps on its own gradient.
    if (op.attrs.syncEvery < 1)
      bucketOfResult[op.results[0].id] = op.attrs.bucket;
  }
  if (!anchorLocalSteps(error))
    return false;
  std::map<int64_t, std::vector<std::pair<const ProgramOp *, Tensor *>>>
      buckets;
  for (int index : optimizerOps) {
    const ProgramOp &op = program.ops[index];
    if (op.kind == OpKind::GradSync && op.attrs.syncEvery < 1)
      buckets[op.attrs.bucket].push_back({&op, &values.at(op.results[0].id)});
  }
  std::vector<Update> updates;
  if (!optimizerUpdates(paramOfValue, updates, error))
    return false;
  lastStep = OptimizerFigures();
  auto step = [&](const Update &update) {
    const ProgramOp &op = *update.op;
    auto g = values.find(update.gradient);
    if (g == values.end())
      return fail(op, "its gradient was never computed");
    Tensor &param = host.params.at(update.parameter);
    HostState::Moments &state = host.optimizer[update.parameter];
    ++state.step;
    const OpAttrs &a = op.attrs;
    cpu::ElementSlice slice;
    auto shard = shards.find(update.parameter);
    if (shard != shards.end())
      slice = {shard->second.begin, shard->second.size()};
    // The step count is checkpointed with the state, so a resumed run
    // goes on with the schedule where it stopped.
    double lr = a.schedule.at(state.step - 1);
    lastStep.lr = lr;
    if (op.kind == OpKind::AdamwUpdate)
      cpu::adamwStep(param, g->second, state.m, state.v, state.step, lr,
                     a.beta1, a.beta2, a.epsilon, a.weightDecay,
                     update.freezeSecondMomentAfter, slice);
    else
      cpu::sgdStep(param, g->second, state.velocity, lr, a.momentum,
                   a.weightDecay, slice);
    return true;
  };
  auto bucketOf = [&](const Update &update) -> int64_t {
    auto it = bucketOfResult.find(update.gradient);
    return it == bucketOfResult.end() ? -1 : it->second;
  };
  // Clipping needs the whole model's gradient before any update: every
  // bucket is synced first, then the norm is reduced over the world.
  bool clipping = clipNorm > 0 && normSum;
  if (clipping) {
    for (auto &[bucket, grads] : buckets)
      if (sync && !sync(grads, error))
        return false;
    if (!clipGradients(updates, values, error))
      return false;
  }
  // Updates that read no synced gradient, then bucket by bucket.
  for (const Update &update : updates)
    if (bucketOf(update) < 0 && !step(update))
      return false;
  for (auto &[bucket, grads] : buckets) {
    if (!clipping && sync && !sync(grads, error))
      return false;
    std::vector<std::pair<const ProgramOp *, Tensor *>> shardedParams;
    for (const Update &update : updates) {
      if (bucketOf(update) != bucket)
        continue;
      if (!step(update))
        return false;
      if (shards.count(update.parameter))
        shardedParams.push_back({syncOfResult.at(update.gradient),
                                 &host.params.at(update.parameter)});
    }
    // Sharded state: each member stepped its shard; the group gathers the
    // rest.
    if (!shardedParams.empty() && gather && !gather(shardedParams, error))
      return false;
  }
  sampleHeapPeak(); // the gradients and the syncs' copies still held
  return true;
}
