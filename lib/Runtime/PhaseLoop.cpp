//===- PhaseLoop.cpp - The phase loop every backend runs ------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/PhaseLoop.h"
#include "dtfm/Runtime/Checkpoints.h"
#include "dtfm/Format/WireCodec.h"

#include "plan.pb.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

using namespace dtfm::runtime;
using cpu::Tensor;

PhaseExecutor::PhaseExecutor(const StageProgram &program)
    : program(program), lifetimes(valueLifetimes(program)) {
  for (const ParameterUpdate &u : parameterUpdates(program))
    if (u.sync)
      parameterOfSync[u.sync->index] = u.param->attrs.name;
}

void PhaseExecutor::describeSlices(std::map<std::string, Tensor> &state) const {
  for (const auto &[name, range] : shardedParameters(program))
    state["shard/" + name] = encodeShard(range);
  for (const auto &[name, slice] : tensorParallelSlices(program))
    state["tp/" + name] = encodeSlice(slice);
}

bool PhaseExecutor::runPhase(OpPhase phase, int microBatch, ValueTable &values,
                             const MicroBatch &batch, double &loss,
                             std::string &error) {
  if (!beginPhase(phase, microBatch, values, error))
    return false;
  int p = static_cast<int>(phase);
  const std::vector<PhaseStep> &steps = program.steps[p];
  for (size_t position = 0; position < steps.size(); ++position) {
    const ProgramOp &op = program.ops[steps[position].op];
    auto fail = [&](const std::string &message) {
      error = "op #" + std::to_string(op.index) + " " + opName(op.kind) +
              (steps[position].recompute ? " (recomputed)" : "") + ": " +
              message;
      return false;
    };
    if (!runStep(op, steps[position].recompute, microBatch, values, batch, loss,
                 error))
      return fail(error);
    sampleHeapPeak();
    for (int64_t id : lifetimes.freeAfterStep[p][position])
      releaseValue(microBatch, id, values);
  }
  return endPhase(phase, microBatch, values, loss, error);
}

bool PhaseExecutor::runStep(const ProgramOp &op, bool recompute, int microBatch,
                            ValueTable &values, const MicroBatch &batch,
                            double &loss, std::string &error) {
  switch (op.kind) {
  case OpKind::Send: // the worker (or endPhase) sends
    return true;
  case OpKind::Recv: { // filled by the receive slot
    if (movesItself(op))
      return true;
    auto it = values.find(op.results[0].id);
    if (it == values.end()) {
      error = "its value was never received";
      return false;
    }
    return bindHostValue(op, microBatch, it->second, values, error);
  }
  case OpKind::Input:
  case OpKind::Label: {
    auto it = batch.find(op.attrs.name);
    if (it == batch.end()) {
      error = "no data for '" + op.attrs.name + "'";
      return false;
    }
    if (it->second.shape != op.results[0].shape) {
      error = "data for '" + it->first + "' has the wrong shape";
      return false;
    }
    return bindHostValue(op, microBatch, it->second, values, error);
  }
  default:
    break;
  }
  for (size_t i = 0; i < op.operands.size(); ++i)
    if (!hasValue(microBatch, op.operands[i], values)) {
      error =
          "operand " + std::to_string(i) + " was not computed in this phase";
      return false;
    }
  // A recomputed loss was counted by the forward already.
  double recomputedLoss = 0;
  if (!runOp(op, microBatch, values, recompute ? recomputedLoss : loss, error))
    return false;
  if (checkFinite &&
      !resultsFinite(op, recompute, microBatch, values, error))
    return false;
  afterOp(op, microBatch, values);
  return true;
}

/// The first element of `t` that is an infinity or a NaN, or -1.
static int64_t firstNonFinite(const Tensor &t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t.data[i]))
      return i;
  return -1;
}

bool PhaseExecutor::resultsFinite(const ProgramOp &op, bool recompute,
                                  int microBatch, const ValueTable &values,
                                  std::string &error) {
  for (size_t r = 0; r < op.results.size(); ++r) {
    Tensor scratch;
    const Tensor *result =
        hostValue(microBatch, op.results[r].id, values, scratch, error);
    if (!result)
      return false;
    int64_t bad = firstNonFinite(*result);
    if (bad < 0)
      continue;
    std::string badValue = std::to_string(result->data[bad]);
    // What it was computed from: a parameter by name, a value by id; and
    // whether each is finite (the first non-finite operand is the cause
    // to look at, a parameter that is not finite the usual one).
    std::map<int64_t, std::string> parameterOf;
    for (const ProgramOp &p : program.ops)
      if (p.kind == OpKind::Param && !p.results.empty())
        parameterOf[p.results[0].id] = p.attrs.name;
    std::string operands;
    for (size_t i = 0; i < op.operands.size(); ++i) {
      int64_t id = op.operands[i];
      auto param = parameterOf.find(id);
      std::string name = param != parameterOf.end()
                             ? "parameter '" + param->second + "'"
                             : "value #" + std::to_string(id);
      Tensor operandScratch;
      const Tensor *operand =
          hostValue(microBatch, id, values, operandScratch, error);
      if (!operand)
        return false;
      int64_t at = firstNonFinite(*operand);
      operands += (i ? ", " : "") + name +
                  (at < 0 ? " (finite)"
                          : " (not finite: element " + std::to_string(at) +
                                " is " + std::to_string(operand->data[at]) +
                                ")");
    }
    // runPhase's message names the op; a backward says what it
    // differentiates.
    error = std::string("--check-finite: the first value that is not "
                        "finite: ") +
            (op.isBackward()
                 ? std::string("the gradient of ") + opName(op.computes) + ", "
                 : "") +
            "result #" + std::to_string(r) + " element " +
            std::to_string(bad) + " is " + badValue + " (" +
            (op.phase == OpPhase::Forward    ? "forward"
             : op.phase == OpPhase::Backward ? "backward"
                                             : "weight gradients") +
            (recompute ? ", recomputed" : "") + ", micro-batch " +
            std::to_string(microBatch) +
            (op.layer.empty() ? "" : ", layer '" + op.layer + "'") +
            "); its operands: " + (operands.empty() ? "none" : operands);
    return false;
  }
  return true;
}

void PhaseExecutor::releaseSent(OpPhase phase, int microBatch,
                                ValueTable &values) {
  for (int64_t id :
       lifetimes.freeAfterSends[static_cast<int>(phase)])
    releaseValue(microBatch, id, values);
}

bool PhaseExecutor::optimizerUpdates(
    const std::map<int64_t, std::string> &paramOfValue,
    std::vector<Update> &updates, std::string &error) const {
  updates.clear();
  std::map<int64_t, const ProgramOp *> syncOfResult, paramOfResult;
  for (int index : program.opsOf(OpPhase::Optimizer)) {
    const ProgramOp &op = program.ops[index];
    if (op.kind == OpKind::GradSync && !op.results.empty())
      syncOfResult[op.results[0].id] = &op;
  }
  for (const ProgramOp &op : program.ops)
    if (op.kind == OpKind::Param && !op.results.empty())
      paramOfResult[op.results[0].id] = &op;
  for (int index : program.opsOf(OpPhase::Optimizer)) {
    const ProgramOp &op = program.ops[index];
    if (op.kind == OpKind::GradSync)
      continue;
    auto fail = [&](const std::string &message) {
      error = std::string(opName(op.kind)) + ": " + message;
      return false;
    };
    if ((op.kind != OpKind::SgdUpdate && op.kind != OpKind::AdamwUpdate) ||
        op.operands.size() < 2)
      return fail("unexpected op in the optimizer phase");
    auto p = paramOfValue.find(op.operands[0]);
    if (p == paramOfValue.end())
      return fail("updates a value that is not a parameter");
    Update &update =
        updates.emplace_back(Update{&op, p->second, op.operands[1]});
    auto sync = syncOfResult.find(op.operands[1]);
    if (op.kind == OpKind::AdamwUpdate && sync != syncOfResult.end() &&
        format::wireCodecInfo(sync->second->attrs.compression).sparse)
      update.freezeSecondMomentAfter = sync->second->attrs.topkWarmup;
    if (sync != syncOfResult.end())
      update.sync = sync->second;
    auto param = paramOfResult.find(op.operands[0]);
    if (param != paramOfResult.end())
      update.param = param->second;
  }
  return true;
}

PhaseExecutor::NormPart PhaseExecutor::normPartOf(
    const Update &update,
    const std::map<std::string, plan::ElementRange> &shards) const {
  NormPart part;
  bool tensorParallel =
      program.source && program.source->tp_group_size() > 1;
  if (tensorParallel && update.param && update.param->attrs.tpDim < 0 &&
      plan::tensorParallelRank(program) != 0)
    part.counted = false;
  if (!update.sync || update.sync->attrs.syncEvery >= 1)
    return part; // the replica's own gradient
  part.shared = true;
  auto shard = shards.find(update.parameter);
  if (shard != shards.end()) {
    part.first = shard->second.begin;
    part.count = shard->second.size();
  } else {
    part.weight =
        1.0 / static_cast<double>(std::max<size_t>(1, update.sync->attrs.group.size()));
  }
  return part;
}

double PhaseExecutor::clipFactor(double sharedSquares, double replicaSquares) {
  double norm = std::sqrt(std::max(0.0, sharedSquares + replicaSquares));
  lastStep.gradNorm = norm;
  // As clip_grad_norm_: a non-finite norm scales everything to NaN, which
  // the loss check then names.
  return std::min(1.0, clipNorm / (norm + 1e-6));
}

/// The parameters the local-step syncs' gradients update, in program order
/// (each sync sits right before its update), with the first such sync.
static std::vector<std::string>
localStepParameters(const StageProgram &program,
                    const std::map<int, std::string> &parameterOfSync,
                    const ProgramOp *&sync, int64_t dueAfterStep = -1) {
  std::vector<std::string> names;
  sync = nullptr;
  for (int index : program.opsOf(OpPhase::Optimizer)) {
    const ProgramOp &op = program.ops[index];
    auto parameter = parameterOfSync.find(op.index);
    if (op.kind != OpKind::GradSync || op.attrs.syncEvery < 1 ||
        parameter == parameterOfSync.end() ||
        (dueAfterStep >= 0 && !localStepsDue(op.attrs, dueAfterStep)))
      continue;
    if (!sync)
      sync = &op;
    names.push_back(parameter->second);
  }
  return names;
}

bool PhaseExecutor::anchorLocalSteps(std::string &error) {
  const ProgramOp *sync;
  std::vector<std::string> unanchored;
  for (const std::string &name :
       localStepParameters(program, parameterOfSync, sync))
    if (host.optimizer[name].anchor.data.empty())
      unanchored.push_back(name);
  if (unanchored.empty())
    return true;
  if (!parametersToHost(unanchored, error))
    return false;
  for (const std::string &name : unanchored)
    host.optimizer[name].anchor = host.params.at(name);
  return true;
}

bool PhaseExecutor::outerSend(int64_t step, std::vector<float> &deltas,
                              std::string &error) {
  deltas.clear();
  const ProgramOp *sync;
  std::vector<std::string> names =
      localStepParameters(program, parameterOfSync, sync, step);
  if (names.empty())
    return true;
  if (!parametersToHost(names, error))
    return false;
  std::vector<std::pair<Tensor *, HostState::Moments *>> synced;
  size_t total = 0;
  for (const std::string &name : names) {
    Tensor &param = host.params.at(name);
    HostState::Moments &state = host.optimizer[name];
    if (state.anchor.shape != param.shape)
      state.anchor = param; // not stepped yet: nothing moved
    synced.push_back({&param, &state});
    total += param.data.size();
  }
  // Pseudo-gradients: value at the last exchange minus now.
  deltas.resize(total);
  size_t at = 0;
  for (auto [param, state] : synced)
    for (size_t i = 0; i < param->data.size(); ++i)
      deltas[at++] = state->anchor.data[i] - param->data[i];
  // In int8 or int4, with error feedback: what the codec leaves out of
  // this exchange is added to the next one's pseudo-gradients (each
  // replica its own; the whole vector at once, so that the blocks are the
  // exchange's and what is sent travels exactly, even replicas' at least).
  format::WireCodec codec = sync->attrs.compression;
  if (codec != format::WireCodec::Dense) {
    std::vector<float> pending = deltas;
    at = 0;
    for (auto [param, state] : synced) {
      if (state->outerResidual.shape != param->shape)
        state->outerResidual = Tensor(param->shape);
      for (float r : state->outerResidual.data)
        pending[at++] += r;
    }
    format::wireCodecInfo(codec).moveWithFeedback(
        pending.data(), total, format::keptEntries(codec, total, 0),
        deltas.data());
    at = 0;
    for (auto [param, state] : synced)
      for (float &r : state->outerResidual.data)
        r = pending[at++];
  }
  return true;
}

bool PhaseExecutor::outerPark(int64_t sentAfterStep,
                              const std::vector<float> &averaged,
                              std::string &error) {
  const ProgramOp *sync;
  std::vector<std::string> names =
      localStepParameters(program, parameterOfSync, sync, sentAfterStep);
  size_t at = 0;
  for (const std::string &name : names) {
    const Tensor &param = host.params.at(name);
    if (at + param.data.size() > averaged.size())
      break;
    Tensor &pending = host.optimizer[name].outerPending;
    pending = Tensor(param.shape);
    std::copy_n(averaged.begin() + at, pending.data.size(),
                pending.data.begin());
    at += pending.data.size();
  }
  if (at != averaged.size()) {
    error = "the outer exchange after step " + std::to_string(sentAfterStep) +
            " came back with " + std::to_string(averaged.size()) +
            " values for " + std::to_string(at) + " parameter values";
    return false;
  }
  return true;
}

bool PhaseExecutor::outerParkedSince(int64_t step, int64_t &sentAfterStep) {
  for (const auto &[index, name] : parameterOfSync) {
    auto state = host.optimizer.find(name);
    if (state == host.optimizer.end() || state->second.outerPending.data.empty())
      continue;
    const OpAttrs &attrs = program.ops[index].attrs;
    for (int64_t t = step; t > step - std::max<int64_t>(1, attrs.syncEvery) &&
                           t >= 1;
         --t)
      if (localStepsDue(attrs, t)) {
        sentAfterStep = t;
        return true;
      }
  }
  return false;
}

bool PhaseExecutor::outerApply(double mixing, std::string &error) {
  std::vector<std::string> names;
  const ProgramOp *sync = nullptr;
  for (const auto &[index, name] : parameterOfSync) {
    auto state = host.optimizer.find(name);
    if (state != host.optimizer.end() &&
        !state->second.outerPending.data.empty()) {
      names.push_back(name);
      sync = &program.ops[index];
    }
  }
  if (names.empty())
    return true;
  // The parameters now: with an overlap they have trained on since.
  if (!parametersToHost(names, error))
    return false;
  for (const std::string &name : names) {
    Tensor &param = host.params.at(name);
    HostState::Moments &state = host.optimizer[name];
    if (state.anchor.shape != param.shape)
      state.anchor = param;
    cpu::nesterovOuterStep(state.anchor, state.outerPending,
                           state.outerVelocity, sync->attrs.outerLr,
                           sync->attrs.outerMomentum);
    state.outerPending = Tensor();
    // The new global value, or (Streaming DiLoCo's merge, after an
    // overlap) a mix of it and what the replica trained meanwhile.
    if (mixing == 0) {
      param = state.anchor;
      continue;
    }
    for (size_t i = 0; i < param.data.size(); ++i)
      param.data[i] = static_cast<float>(mixing * param.data[i] +
                                         (1 - mixing) * state.anchor.data[i]);
  }
  return parametersFromHost(names, error);
}

Tensor *PhaseExecutor::residualOf(const ProgramOp &sync) {
  auto param = parameterOfSync.find(sync.index);
  if (param == parameterOfSync.end())
    return nullptr;
  Tensor &residual = host.optimizer[param->second].residual;
  if (residual.shape != sync.results[0].shape)
    residual = Tensor(sync.results[0].shape);
  return &residual;
}
