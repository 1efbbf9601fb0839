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

#include "dtfm/Format/Int8.h"
#include "dtfm/Runtime/Cuda/Kernels.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <map>
#include <vector>

using namespace dtfm;
using namespace dtfm::runtime;
using namespace dtfm::runtime::cuda::impl;

void CudaExecutor::collect(int microBatch, int64_t id, const DTensor &value) {
  if (!collected[microBatch].insert(id).second)
    return;
  std::string error;
  DTensor &sum = gradSum[id];
  if (sum.shape != value.shape && !allocate(value.shape, true, sum, error)) {
    gradSum.erase(id); // finishIteration reports the missing gradient
    return;
  }
  cuda::accumulate(value.data(), sum.data(), sum.numel(), computeStream());
}

void CudaExecutor::collectGradients(int microBatch, const ValueTable &) {
  cudaSetDevice(device);
  auto found = live.find(microBatch);
  if (found == live.end())
    return;
  // What no op of the phase made (a gradient received once per iteration)
  // is added here; the rest was added as it was made (afterOp).
  for (const auto &[id, sync] : gradientInputs) {
    auto it = found->second.find(id);
    if (it != found->second.end())
      collect(microBatch, id, it->second);
  }
  collected.erase(microBatch);
  live.erase(found);
}

bool CudaExecutor::layoutShardedBucket(std::vector<DTensor *> tensors,
                                       ShardedBucket &bucket,
                                       std::string &error) {
  for (DTensor *t : tensors) {
    bucket.tensors.push_back(t->data());
    bucket.elements.push_back(t->numel());
  }
  bucket.layout =
      plan::layoutShards(bucket.elements, groupSize, /*equalChunks=*/true);
  return allocate({bucket.layout.totalElements()}, true, bucket.packed,
                  error) &&
         allocate({bucket.chunk()}, true, bucket.mine, error);
}

void CudaExecutor::copyShards(const ShardedBucket &bucket, float *buffer,
                              bool toBuffer, int member,
                              cudaStream_t stream) {
  std::vector<cuda::CopySegment> segments;
  const plan::ShardedLayout &layout = bucket.layout;
  int64_t members = static_cast<int64_t>(layout.chunkStart.size()) - 1;
  for (size_t t = 0; t < bucket.tensors.size(); ++t)
    for (int64_t k = 0; k < members; ++k) {
      if (member >= 0 && k != member)
        continue;
      plan::ElementRange shard =
          plan::shardOf(bucket.elements[t], k, members);
      if (shard.size() == 0)
        continue;
      float *piece = buffer + layout.pieces[t][k] -
                     (member >= 0 ? layout.chunkStart[k] : 0);
      float *inTensor = bucket.tensors[t] + shard.begin;
      segments.push_back(toBuffer
                             ? cuda::CopySegment{inTensor, piece, shard.size()}
                             : cuda::CopySegment{piece, inTensor, shard.size()});
    }
  cuda::copySegments(segments.data(), segments.size(), stream);
}

static bool ncclFailed(ncclResult_t status, const std::string &what,
                       std::string &error) {
  if (status == ncclSuccess)
    return false;
  error = what + " (NCCL): " + ncclGetErrorString(status);
  return true;
}

bool CudaExecutor::syncBucket(const std::vector<const ProgramOp *> &syncs,
                              std::map<int64_t, DTensor> &values,
                              const SyncFn &sync, std::string &error) {
  cudaStream_t stream = computeStream();
  bool sharded = syncs.front()->attrs.shardState;
  if (comm && sharded) {
    // ZeRO-1: the bucket's gradients packed by member (equal chunks, as
    // NCCL takes them), reduce-scattered, this member's chunk averaged and
    // put back into its shard of each gradient.
    std::vector<DTensor *> grads;
    for (const ProgramOp *op : syncs)
      grads.push_back(&values.at(op->results[0].id));
    ShardedBucket bucket;
    if (!layoutShardedBucket(grads, bucket, error))
      return false;
    copyShards(bucket, bucket.packed.data(), true, -1, stream);
    if (ncclFailed(ncclReduceScatter(bucket.packed.data(), bucket.mine.data(),
                                     static_cast<size_t>(bucket.chunk()),
                                     ncclFloat, ncclSum, comm, stream),
                   "gradient reduce-scatter", error))
      return false;
    cuda::scale(bucket.mine.data(), bucket.chunk(),
                1.0f / static_cast<float>(groupSize), stream);
    copyShards(bucket, bucket.mine.data(), false, groupPosition, stream);
    return checkLaunch(error);
  }
  if (comm) { // on the device, averaged in place
    ncclGroupStart();
    for (const ProgramOp *op : syncs) {
      DTensor &g = values.at(op->results[0].id);
      ncclResult_t status =
          ncclAllReduce(g.data(), g.data(), static_cast<size_t>(g.numel()),
                        ncclFloat, ncclSum, comm, stream);
      if (status != ncclSuccess) {
        ncclGroupEnd();
        return !ncclFailed(status, "gradient allreduce", error);
      }
    }
    if (ncclFailed(ncclGroupEnd(), "gradient allreduce", error))
      return false;
    for (const ProgramOp *op : syncs) {
      DTensor &g = values.at(op->results[0].id);
      cuda::scale(g.data(), g.numel(), 1.0f / static_cast<float>(groupSize),
                  stream);
    }
    return checkLaunch(error);
  }
  if (!sync)
    return true;
  // Through the host (the worker's transport), then back to the device;
  // sharded, only this member's shard of each comes back averaged. A
  // compressed gradient comes down as its message (encodeWithFeedback).
  std::vector<Tensor> hostGrads(syncs.size());
  std::vector<std::pair<const ProgramOp *, Tensor *>> synced;
  for (size_t i = 0; i < syncs.size(); ++i) {
    const ProgramOp &op = *syncs[i];
    const DTensor &grad = values.at(op.results[0].id);
    format::WireCodec codec = format::wireCodecAtStep(
        op.attrs.compression, op.attrs.topkWarmup, currentStep);
    if (codec != format::WireCodec::Dense
            ? !encodeWithFeedback(op, codec, grad, hostGrads[i], error)
            : !download(grad, stream, hostGrads[i], error))
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
  return true;
}

bool CudaExecutor::encodeWithFeedback(const ProgramOp &sync,
                                      format::WireCodec codec,
                                      const DTensor &grad, Tensor &out,
                                      std::string &error) {
  cudaStream_t stream = computeStream();
  auto parameter = parameterOfSync.find(sync.index);
  if (parameter == parameterOfSync.end()) {
    error = "op #" + std::to_string(sync.index) +
            " dtfm.grad_sync: a compressed gradient of no parameter";
    return false;
  }
  int64_t n = grad.numel();
  DTensor &residual = residuals[parameter->second];
  if (!residual.buffer && !allocate(grad.shape, true, residual, error))
    return false;
  if (residual.numel() != n) {
    error = "the error-feedback residual of '" + parameter->second +
            "' holds " + std::to_string(residual.numel()) +
            " values, its gradient " + std::to_string(n);
    return false;
  }
  out = Tensor(grad.shape);
  auto fetch = [&](const void *from, void *to, size_t bytes) {
    return !cudaFailed(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToHost,
                                       stream),
                       "copying a compressed gradient from the GPU", error);
  };
  if (codec == format::WireCodec::Int8) {
    size_t bytes = format::int8Bytes(static_cast<size_t>(n));
    DTensor message;
    std::vector<char> host(bytes);
    if (!allocate({static_cast<int64_t>((bytes + 3) / 4)}, false, message,
                  error))
      return false;
    cuda::int8WithFeedback(grad.data(), residual.data(), n, message.data(),
                           stream);
    if (!checkLaunch(error) || !fetch(message.data(), host.data(), bytes) ||
        cudaFailed(cudaStreamSynchronize(stream), "waiting for the GPU",
                   error))
      return false;
    if (!format::decodeInt8(host.data(), bytes, static_cast<size_t>(n),
                            out.data.data())) {
      error = "an int8 gradient the GPU encoded does not decode";
      return false;
    }
    return true;
  }
  if (format::wireCodecInfo(codec).sparse) {
    int64_t k = static_cast<int64_t>(format::keptEntries(
        codec, static_cast<size_t>(n), sync.attrs.topkRatio));
    k = std::min(k, n);
    if (n > cuda::kTopKMaxElements) {
      error = "a top-k exchange of " + std::to_string(n) +
              " values on the GPU (at most " +
              std::to_string(cuda::kTopKMaxElements) + ")";
      return false;
    }
    DTensor values, indices, workspace;
    int64_t workFloats = static_cast<int64_t>(
        (cuda::topKWorkspaceBytes(n) + sizeof(float) - 1) / sizeof(float));
    if (!allocate({std::max<int64_t>(1, k)}, false, values, error) ||
        !allocate({std::max<int64_t>(1, k)}, false, indices, error) ||
        !allocate({workFloats}, false, workspace, error))
      return false;
    cuda::topKWithFeedback(grad.data(), residual.data(), n, k, values.data(),
                           reinterpret_cast<uint32_t *>(indices.data()),
                           workspace.data(), stream);
    std::vector<float> kept(static_cast<size_t>(k));
    std::vector<uint32_t> at(static_cast<size_t>(k));
    if (!checkLaunch(error) ||
        !fetch(values.data(), kept.data(), kept.size() * sizeof(float)) ||
        !fetch(indices.data(), at.data(), at.size() * sizeof(uint32_t)) ||
        cudaFailed(cudaStreamSynchronize(stream), "waiting for the GPU",
                   error))
      return false;
    for (size_t j = 0; j < at.size(); ++j) {
      if (at[j] >= static_cast<uint64_t>(n)) {
        error = "a top-k gradient the GPU selected holds index " +
                std::to_string(at[j]) + " of " + std::to_string(n);
        return false;
      }
      out.data[at[j]] = kept[j];
    }
    return true;
  }
  error = std::string("no device encoder for the ") +
          format::wireCodecName(codec) + " codec";
  return false;
}

bool CudaExecutor::gatherBucket(const std::vector<const ProgramOp *> &syncs,
                                const SyncFn &gather, std::string &error) {
  cudaStream_t stream = computeStream();
  std::vector<std::string> names;
  for (const ProgramOp *op : syncs)
    names.push_back(parameterOfSync.at(op->index));
  if (comm) {
    // This member's shard of each parameter into its chunk, all-gathered,
    // every member's shard back into the parameters.
    std::vector<DTensor *> tensors;
    for (const std::string &name : names)
      tensors.push_back(&params.at(name));
    ShardedBucket bucket;
    if (!layoutShardedBucket(tensors, bucket, error))
      return false;
    copyShards(bucket, bucket.mine.data(), true, groupPosition, stream);
    if (ncclFailed(ncclAllGather(bucket.mine.data(), bucket.packed.data(),
                                 static_cast<size_t>(bucket.chunk()),
                                 ncclFloat, comm, stream),
                   "parameter all-gather", error))
      return false;
    copyShards(bucket, bucket.packed.data(), false, -1, stream);
    return checkLaunch(error);
  }
  if (!gather)
    return true;
  if (!parametersToHost(names, error))
    return false;
  std::vector<std::pair<const ProgramOp *, Tensor *>> gathered;
  for (size_t i = 0; i < syncs.size(); ++i)
    gathered.push_back({syncs[i], &host.params.at(names[i])});
  return gather(gathered, error) && parametersFromHost(names, error);
}

bool CudaExecutor::finishIteration(double gradientScale, const SyncFn &sync,
                                   const SyncFn &gather, std::string &error) {
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
  // Gradient syncs by bucket (dtfm.bucket), each bucket's exchanged in one
  // go: on the device through NCCL where the group has a communicator,
  // else through the host and the worker's transport.
  std::map<int64_t, std::vector<const ProgramOp *>> buckets;
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
      buckets[op.attrs.bucket].push_back(&op);
  }
  if (!anchorLocalSteps(error))
    return false;
  for (const auto &[bucket, syncs] : buckets)
    if (!syncBucket(syncs, values, sync, error))
      return false;
  std::vector<Update> updates;
  if (!optimizerUpdates(paramOfValue, updates, error))
    return false;
  lastStep = OptimizerFigures();
  if (clipNorm > 0 && normSum) {
    // The squares are summed on the host in double, as the CPU's: each
    // synced gradient (with sharded state, this member's shard) comes down
    // once.
    double squares[2] = {0, 0}; // replica's own, shared
    for (const Update &update : updates) {
      auto grad = values.find(update.gradient);
      if (grad == values.end())
        return fail(*update.op, "its gradient was never computed");
      NormPart part = normPartOf(update, shards);
      if (!part.counted)
        continue;
      Tensor host;
      if (!download(grad->second, stream, host, error))
        return false;
      int64_t count =
          part.count < 0 ? host.numel() - part.first : part.count;
      double sum = 0;
      for (int64_t i = 0; i < count; ++i) {
        double x = host.data[part.first + i];
        sum += x * x;
      }
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
    // Sharded state: this member steps its shard, whose moments it alone
    // keeps (flat).
    int64_t first = 0, count = param.numel();
    ShapeVec stateShape = param.shape;
    auto shard = shards.find(update.parameter);
    if (shard != shards.end()) {
      first = shard->second.begin;
      count = shard->second.size();
      stateShape = {count};
    }
    OptimizerState &state = optimizer[update.parameter];
    ++state.step;
    const OpAttrs &a = op.attrs;
    auto f = [](double x) { return static_cast<float>(x); };
    double lr = a.schedule.at(state.step - 1); // as the CPU's
    lastStep.lr = lr;
    auto ensure = [&](DTensor &moment) {
      if (!moment.buffer)
        return allocate(stateShape, true, moment, error);
      if (moment.numel() == count)
        return true;
      error = "the optimizer state of '" + update.parameter + "' holds " +
              std::to_string(moment.numel()) + " elements, its update " +
              std::to_string(count);
      return false;
    };
    if (op.kind == OpKind::AdamwUpdate) {
      if (!ensure(state.m) || !ensure(state.v))
        return false;
      cuda::adamwStep(param.data() + first, grad->second.data() + first,
                      state.m.data(), state.v.data(), count, state.step,
                      f(lr), a.beta1, a.beta2, f(a.epsilon),
                      f(a.weightDecay), update.freezeSecondMomentAfter,
                      stream);
    } else {
      if (!ensure(state.velocity))
        return false;
      cuda::sgdStep(param.data() + first, grad->second.data() + first,
                    state.velocity.data(), count, f(lr), f(a.momentum),
                    f(a.weightDecay), stream);
    }
    if (!checkLaunch(error))
      return fail(op, error);
  }
  // Sharded state: each member stepped its shards; the group gathers the
  // rest, bucket by bucket.
  for (const auto &[bucket, syncs] : buckets)
    if (syncs.front()->attrs.shardState && !gatherBucket(syncs, gather, error))
      return false;
  return !cudaFailed(cudaStreamSynchronize(stream), "the optimizer step",
                     error);
}
