//===- OptimizerStep.cpp - The end of an iteration on a GPU ---------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The CUDA executor's optimizer phase: each micro-batch's gradients summed
// on the device, the sums scaled, exchanged over the group (NCCL on the
// device, or through the worker's transport on the host), and the SGD and
// AdamW updates run on the device.
//
//===----------------------------------------------------------------------===//

#include "ExecutorImpl.h"

#include "dtfm/Runtime/Cuda/Kernels.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <map>
#include <vector>

using namespace dtfm;
using namespace dtfm::runtime;
using namespace dtfm::runtime::cuda::impl;

void CudaExecutor::collectGradients(int microBatch, const ValueTable &) {
  cudaSetDevice(device);
  auto found = live.find(microBatch);
  if (found == live.end())
    return;
  std::map<int64_t, DTensor> &table = found->second;
  std::string error;
  for (int index : program.opsOf(OpPhase::Optimizer)) {
    for (int64_t id : program.ops[index].operands) {
      auto it = table.find(id);
      if (it == table.end() || paramOfValue.count(id))
        continue;
      DTensor &sum = gradSum[id];
      if (sum.shape != it->second.shape &&
          !allocate(it->second.shape, true, sum, error))
        continue; // finishIteration reports the missing gradient
      cuda::accumulate(it->second.data(), sum.data(), sum.numel(),
                       computeStream());
    }
  }
  live.erase(found);
}

// makeExecutor refuses sharded optimizer state: no gather is needed.
bool CudaExecutor::finishIteration(double gradientScale, const SyncFn &sync,
                                   const SyncFn &, std::string &error) {
  if (cudaFailed(cudaSetDevice(device), "selecting the CUDA device", error))
    return false;
  cudaStream_t stream = computeStream();
  auto fail = [&](const ProgramOp &op, const std::string &message) {
    error = std::string(opName(op.kind)) + ": " + message;
    return false;
  };
  std::map<int64_t, DTensor> values;
  float scale = static_cast<float>(gradientScale);
  for (auto &[id, sum] : gradSum) {
    cuda::scale(sum.data(), sum.numel(), scale, stream);
    values[id] = std::move(sum);
  }
  gradSum.clear();
  // Gradient syncs, in one bucket through the host (the worker's
  // transport), then back to the device.
  std::vector<const ProgramOp *> syncs;
  for (int index : program.opsOf(OpPhase::Optimizer)) {
    const ProgramOp &op = program.ops[index];
    if (op.kind != OpKind::GradSync)
      continue;
    auto in = values.find(op.operands[0]);
    if (in == values.end())
      return fail(op, "its gradient was never computed");
    values[op.results[0].id] = in->second;
    // With local steps each replica steps on its own gradient (the
    // parameters are exchanged every H steps: outerStep).
    if (op.attrs.syncEvery < 1)
      syncs.push_back(&op);
  }
  if (!anchorLocalSteps(error))
    return false;
  if (comm && !syncs.empty()) { // on the device, averaged in place
    ncclGroupStart();
    for (const ProgramOp *op : syncs) {
      DTensor &g = values.at(op->results[0].id);
      ncclResult_t status =
          ncclAllReduce(g.data(), g.data(), static_cast<size_t>(g.numel()),
                        ncclFloat, ncclSum, comm, stream);
      if (status != ncclSuccess) {
        ncclGroupEnd();
        error = std::string("gradient allreduce (NCCL): ") +
                ncclGetErrorString(status);
        return false;
      }
    }
    ncclResult_t status = ncclGroupEnd();
    if (status != ncclSuccess) {
      error = std::string("gradient allreduce (NCCL): ") +
              ncclGetErrorString(status);
      return false;
    }
    for (const ProgramOp *op : syncs) {
      DTensor &g = values.at(op->results[0].id);
      cuda::scale(g.data(), g.numel(), 1.0f / static_cast<float>(groupSize),
                  stream);
    }
  } else if (sync && !syncs.empty()) {
    std::vector<Tensor> hostGrads(syncs.size());
    std::vector<std::pair<const ProgramOp *, Tensor *>> synced;
    for (size_t i = 0; i < syncs.size(); ++i) {
      if (!download(values.at(syncs[i]->results[0].id), stream, hostGrads[i],
                    error))
        return false;
      synced.push_back({syncs[i], &hostGrads[i]});
    }
    if (!sync(synced, error))
      return false;
    for (size_t i = 0; i < syncs.size(); ++i) {
      DTensor d;
      if (!upload(hostGrads[i], stream, d, error))
        return false;
      values[syncs[i]->results[0].id] = std::move(d);
    }
  }
  std::vector<Update> updates;
  if (!optimizerUpdates(paramOfValue, updates, error))
    return false;
  lastStep = OptimizerFigures();
  if (clipNorm > 0 && normSum) {
    // The squares are summed on the host in double, as the CPU's: each
    // synced gradient comes down once (no sharded state on the GPU).
    double squares[2] = {0, 0}; // replica's own, shared
    const std::map<std::string, plan::ElementRange> noShards;
    for (const Update &update : updates) {
      auto grad = values.find(update.gradient);
      if (grad == values.end())
        return fail(*update.op, "its gradient was never computed");
      NormPart part = normPartOf(update, noShards);
      if (!part.counted)
        continue;
      Tensor host;
      if (!download(grad->second, stream, host, error))
        return false;
      double sum = 0;
      for (float x : host.data)
        sum += static_cast<double>(x) * x;
      squares[part.shared] += part.weight * sum;
    }
    if (!normSum(squares[1], squares[0], error))
      return false;
    double factor = clipFactor(squares[1], squares[0]);
    if (factor < 1)
      for (const Update &update : updates) {
        DTensor &g = values.at(update.gradient);
        cuda::scale(g.data(), g.numel(), static_cast<float>(factor), stream);
      }
  }
  for (const Update &update : updates) {
    const ProgramOp &op = *update.op;
    DTensor &param = params.at(update.parameter);
    auto grad = values.find(update.gradient);
    if (grad == values.end())
      return fail(op, "its gradient was never computed");
    OptimizerState &state = optimizer[update.parameter];
    ++state.step;
    const OpAttrs &a = op.attrs;
    auto f = [](double x) { return static_cast<float>(x); };
    double lr = a.schedule.at(state.step - 1); // as the CPU's
    lastStep.lr = lr;
    if (op.kind == OpKind::AdamwUpdate) {
      if ((!state.m.buffer && !allocate(param.shape, true, state.m, error)) ||
          (!state.v.buffer && !allocate(param.shape, true, state.v, error)))
        return false;
      cuda::adamwStep(param.data(), grad->second.data(), state.m.data(),
                      state.v.data(), param.numel(), state.step, f(lr),
                      a.beta1, a.beta2, f(a.epsilon), f(a.weightDecay),
                      update.freezeSecondMomentAfter, stream);
    } else {
      if (!state.velocity.buffer &&
          !allocate(param.shape, true, state.velocity, error))
        return false;
      cuda::sgdStep(param.data(), grad->second.data(), state.velocity.data(),
                    param.numel(), f(lr), f(a.momentum), f(a.weightDecay),
                    stream);
    }
    if (!checkLaunch(error))
      return fail(op, error);
  }
  return !cudaFailed(cudaStreamSynchronize(stream), "the optimizer step",
                     error);
}
