//===- GradientSync.cpp - A worker's part in its group's exchange ---------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "Worker/GradientSync.h"
#include "dtfm/Plan/Sharding.h"

#include <algorithm>

using namespace dtfm;
using namespace dtfm::runtime;
using namespace dtfm::runtime::worker;
using plan::ElementRange;
using plan::OpKind;
using plan::OpPhase;
using plan::shardOf;

bool GradientSync::syncGradients(const Gradients &grads, std::string &error) {
  if (streamingNow)
    return awaitBuckets(grads, error);
  if (group < 0)
    return true; // a group of one: the identity
  return grads.front().first->attrs.shardState ? exchangeSharded(grads, error)
                                               : exchangeAll(grads, error);
}

bool GradientSync::exchangeSharded(const Gradients &grads, std::string &error) {
  // Through the bucket's own layout, one member's shards per chunk.
  auto slot = slotOf.find(grads.front().first->index);
  if (slot == slotOf.end()) {
    error = "gradient allreduce: op #" +
            std::to_string(grads.front().first->index) + " is in no bucket";
    return false;
  }
  Bucket &bucket = buckets[slot->second.bucket];
  size_t total = 0;
  for (const auto &[op, grad] : grads) {
    auto it = slotOf.find(op->index);
    total += grad->data.size();
    if (it == slotOf.end() || it->second.bucket != slot->second.bucket ||
        total > bucket.elements) {
      error = "gradient allreduce: bucket " + std::to_string(bucket.index) +
              " was not filled as planned";
      return false;
    }
    pack(it->second, grad->data.data(), grad->data.size());
  }
  Clock::time_point start = Clock::now();
  if (!exchangeBucket(bucket, error))
    return false;
  record("grad sync", start, Clock::now());
  float scale = average();
  for (size_t i = bucket.bounds[groupPosition];
       i < bucket.bounds[groupPosition + 1]; ++i)
    bucket.data[i] *= scale;
  for (const auto &[op, grad] : grads)
    unpack(slotOf.at(op->index), *grad);
  return true;
}

bool GradientSync::exchangeAll(const Gradients &grads, std::string &error) {
  size_t total = 0, capacity = 0;
  const OpAttrs &wire = grads.front().first->attrs;
  format::WireCodec compression =
      wireThisStep(wire.compression, wire.topkWarmup);
  for (const auto &[op, grad] : grads) {
    total += grad->data.size();
    capacity += format::keptEntries(wire.compression, grad->data.size(),
                                    wire.topkRatio);
  }
  std::vector<float> bucket(total);
  size_t at = 0;
  for (const auto &[op, grad] : grads) {
    if (compression != format::WireCodec::Dense) {
      if (!compressWithFeedback(*op, grad->data.data(), grad->data.size(),
                                bucket.data() + at, error))
        return false;
    } else {
      std::copy(grad->data.begin(), grad->data.end(), bucket.begin() + at);
    }
    at += grad->data.size();
  }
  Clock::time_point start = Clock::now();
  if (!exchange(compression, bucket.data(), bucket.size(), capacity, error))
    return false;
  record("grad sync", start, Clock::now());
  // Every member of a group has the same programs: the same group size.
  float scale = average();
  at = 0;
  for (const auto &[op, grad] : grads) {
    for (float &x : grad->data)
      x = bucket[at++] * scale;
  }
  return true;
}

bool GradientSync::exchange(format::WireCodec codec, float *data, size_t count,
                            size_t kept, std::string &error) {
  return transport->allreduceSum(group, codec, data, count, kept, error);
}

bool GradientSync::compressWithFeedback(const ProgramOp &sync,
                                        const float *grad, size_t count,
                                        float *out, std::string &error) {
  if (executor->feedsBackItself()) { // encoded on the device already
    std::copy_n(grad, count, out);
    return true;
  }
  cpu::Tensor *residual = executor->residualOf(sync);
  if (!residual || residual->data.size() != count) {
    error = "gradient allreduce: no error-feedback residual for op #" +
            std::to_string(sync.index);
    return false;
  }
  float *pending = residual->data.data();
  for (size_t i = 0; i < count; ++i)
    pending[i] += grad[i];
  format::WireCodec codec = sync.attrs.compression;
  format::wireCodecInfo(codec).moveWithFeedback(
      pending, count, format::keptEntries(codec, count, sync.attrs.topkRatio),
      out);
  return true;
}

bool GradientSync::prepare(const StageProgram &program,
                           const std::string &device, std::string &error) {
  // Every member of a group has the same programs: the same group size.
  for (const ProgramOp &op : program.ops)
    if (op.kind == OpKind::GradSync) {
      groupMembers = std::max(1.0, static_cast<double>(op.attrs.group.size()));
      if (op.attrs.compression != format::WireCodec::Dense)
        localStepsCodec = op.attrs.compression;
    }
  std::map<int64_t, std::vector<const ProgramOp *>> byBucket;
  for (int index : program.opsOf(OpPhase::Optimizer)) {
    const ProgramOp &op = program.ops[index];
    if (op.kind == OpKind::GradSync)
      byBucket[op.attrs.bucket].push_back(&op);
  }
  auto elementsOf = [](const ProgramOp *op) {
    size_t elements = 1;
    for (int64_t d : op->results[0].shape)
      elements *= static_cast<size_t>(std::max<int64_t>(0, d));
    return elements;
  };
  for (const auto &[index, ops] : byBucket) {
    Bucket &bucket = buckets.emplace_back();
    bucket.index = index;
    const ProgramOp &first = *ops.front();
    size_t members = first.attrs.group.size();
    if (first.attrs.shardState) {
      auto at = std::find(first.attrs.group.begin(), first.attrs.group.end(),
                          device);
      if (members < 2 || at == first.attrs.group.end()) {
        error = "op #" + std::to_string(first.index) +
                " dtfm.grad_sync: dtfm.shard_state needs a group of two or "
                "more devices that names this one (" + device + ")";
        return false;
      }
      groupPosition = static_cast<int>(at - first.attrs.group.begin());
      bucket.bounds.assign(members + 1, 0);
    }
    for (const ProgramOp *op : ops) {
      if (op->attrs.shardState != first.attrs.shardState ||
          op->attrs.group != first.attrs.group) {
        error = "op #" + std::to_string(op->index) +
                " dtfm.grad_sync: the syncs of bucket " +
                std::to_string(index) +
                " disagree on their group or dtfm.shard_state";
        return false;
      }
      if (op->attrs.compression != format::WireCodec::Dense) {
        bucket.compression = op->attrs.compression;
        bucket.topkWarmup = op->attrs.topkWarmup;
      }
      size_t elements = elementsOf(op);
      Slot &slot = slotOf[op->index];
      slot.bucket = buckets.size() - 1;
      slot.offset = bucket.elements;
      bucket.elements += elements;
      bucket.capacity += format::keptEntries(op->attrs.compression, elements,
                                             op->attrs.topkRatio);
    }
    if (!bucket.bounds.empty()) {
      // Sharded: member k's chunk gets every gradient's shard k, in order.
      std::vector<int64_t> elements;
      for (const ProgramOp *op : ops)
        elements.push_back(static_cast<int64_t>(elementsOf(op)));
      plan::ShardedLayout layout = plan::layoutShards(
          elements, static_cast<int64_t>(members), /*equalChunks=*/false);
      bucket.bounds.assign(layout.chunkStart.begin(), layout.chunkStart.end());
      for (size_t t = 0; t < ops.size(); ++t)
        slotOf[ops[t]->index].pieces.assign(layout.pieces[t].begin(),
                                            layout.pieces[t].end());
    }
    bucket.data.assign(bucket.elements, 0.0f);
  }
  for (const ProgramOp &op : program.ops) {
    if (op.kind != OpKind::GradSync)
      continue;
    if (every >= 1 && (op.attrs.syncEvery != every ||
                       op.attrs.syncFragments != fragments ||
                       op.attrs.syncOverlap != overlap ||
                       op.attrs.outerMixing != mixing)) {
      error = "the program's gradient syncs disagree on dtfm.sync_every, "
              "dtfm.sync_fragments, dtfm.sync_overlap or dtfm.outer_mixing";
      return false;
    }
    every = op.attrs.syncEvery;
    fragments = op.attrs.syncFragments;
    overlap = op.attrs.syncOverlap;
    mixing = op.attrs.outerMixing;
    if (every >= 1)
      outerSchedule.push_back(op.attrs);
  }
  return true;
}

void GradientSync::connect(Transport *transport, int group,
                           StageExecutor *executor, Recorder record) {
  this->transport = transport;
  this->group = group;
  this->executor = executor;
  this->record = std::move(record);
}

void GradientSync::pack(const Slot &slot, const float *grad, size_t count) {
  Bucket &bucket = buckets[slot.bucket];
  if (slot.pieces.empty()) {
    std::copy_n(grad, count, bucket.data.begin() + slot.offset);
    return;
  }
  int64_t members = static_cast<int64_t>(slot.pieces.size());
  for (int64_t k = 0; k < members; ++k) {
    ElementRange shard = shardOf(static_cast<int64_t>(count), k, members);
    std::copy_n(grad + shard.begin, shard.size(),
                bucket.data.begin() + slot.pieces[k]);
  }
}

bool GradientSync::gatherShards(const Gradients &params, std::string &error) {
  if (group < 0 || params.empty())
    return true;
  Clock::time_point start = Clock::now();
  auto shardedSlot = [&](const ProgramOp *op) -> const Slot * {
    auto it = slotOf.find(op->index);
    return it == slotOf.end() || it->second.pieces.empty() ? nullptr
                                                           : &it->second;
  };
  const Slot *first = shardedSlot(params.front().first);
  if (!first) {
    error = "parameter gather: op #" +
            std::to_string(params.front().first->index) +
            " is in no sharded bucket";
    return false;
  }
  // The bucket's storage is free again: its gradients were taken.
  Bucket &bucket = buckets[first->bucket];
  int64_t members = static_cast<int64_t>(first->pieces.size());
  for (const auto &[op, param] : params) {
    const Slot *slot = shardedSlot(op);
    if (!slot || slot->bucket != first->bucket) {
      error = "parameter gather: op #" + std::to_string(op->index) +
              " is not in sharded bucket " + std::to_string(bucket.index);
      return false;
    }
    ElementRange mine = shardOf(param->numel(), groupPosition, members);
    std::copy_n(param->data.begin() + mine.begin, mine.size(),
                bucket.data.begin() + slot->pieces[groupPosition]);
  }
  if (!transport->allGather(group, bucket.data.data(), bucket.bounds, error)) {
    error = "parameter gather: " + error;
    return false;
  }
  for (const auto &[op, param] : params) {
    const Slot *slot = shardedSlot(op);
    for (int64_t k = 0; k < members; ++k) {
      ElementRange shard = shardOf(param->numel(), k, members);
      std::copy_n(bucket.data.begin() + slot->pieces[k], shard.size(),
                  param->data.begin() + shard.begin);
    }
  }
  record("param gather b" + std::to_string(bucket.index), start, Clock::now());
  return true;
}

bool GradientSync::bucketGradient(const ProgramOp &sync,
                                  const cpu::Tensor &grad, std::string &error) {
  auto slot = slotOf.find(sync.index);
  if (slot == slotOf.end())
    return true;
  Bucket &bucket = buckets[slot->second.bucket];
  if (slot->second.offset + grad.data.size() > bucket.elements)
    return true; // a shape the plan did not announce: left to awaitBuckets
  if (wireThisStep(bucket.compression, bucket.topkWarmup) !=
      format::WireCodec::Dense) {
    if (!compressWithFeedback(sync, grad.data.data(), grad.data.size(),
                              bucket.data.data() + slot->second.offset, error))
      return false;
  } else {
    pack(slot->second, grad.data.data(), grad.data.size());
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    bucket.filled += grad.data.size();
  }
  changed.notify_all();
  return true;
}

bool GradientSync::runSyncThread(std::string &error) {
  float scale = average();
  for (Bucket &bucket : buckets) {
    {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock,
                   [&] { return bucket.filled >= bucket.elements || aborted; });
      if (aborted)
        return true; // the compute slot reports its own error
    }
    Clock::time_point start = Clock::now();
    if (!exchangeBucket(bucket, error))
      return false;
    for (float &x : bucket.data)
      x *= scale;
    record("grad sync b" + std::to_string(bucket.index), start, Clock::now());
    {
      std::lock_guard<std::mutex> lock(mutex);
      bucket.synced = true;
    }
    changed.notify_all();
  }
  return true;
}

bool GradientSync::awaitBuckets(const Gradients &grads, std::string &error) {
  for (const auto &[op, grad] : grads) {
    auto slot = slotOf.find(op->index);
    if (slot == slotOf.end()) {
      error = "gradient allreduce: op #" + std::to_string(op->index) +
              " is in no bucket";
      return false;
    }
    Bucket &bucket = buckets[slot->second.bucket];
    {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock, [&] { return bucket.synced || aborted; });
      if (!bucket.synced) {
        error = "gradient allreduce: stopped";
        return false;
      }
    }
    if (bucket.filled != bucket.elements ||
        slot->second.offset + grad->data.size() > bucket.elements) {
      error = "gradient allreduce: bucket " + std::to_string(bucket.index) +
              " was not filled as planned";
      return false;
    }
    unpack(slot->second, *grad);
  }
  return true;
}

bool GradientSync::exchangeBucket(Bucket &bucket, std::string &error) {
  if (!bucket.bounds.empty())
    return transport->reduceScatterSum(group, bucket.data.data(), bucket.bounds,
                                       error);
  return exchange(wireThisStep(bucket.compression, bucket.topkWarmup),
                  bucket.data.data(), bucket.data.size(), bucket.capacity,
                  error);
}

void GradientSync::unpack(const Slot &slot, cpu::Tensor &grad) const {
  const Bucket &bucket = buckets[slot.bucket];
  if (slot.pieces.empty()) {
    std::copy_n(bucket.data.begin() + slot.offset, grad.data.size(),
                grad.data.begin());
    return;
  }
  // Sharded: only this member's shard was reduced.
  ElementRange mine =
      shardOf(grad.numel(), groupPosition,
              static_cast<int64_t>(slot.pieces.size()));
  std::copy_n(bucket.data.begin() + slot.pieces[groupPosition], mine.size(),
              grad.data.begin() + mine.begin);
}

void GradientSync::startStreaming(
    std::function<void(const std::string &)> fatal) {
  for (Bucket &bucket : buckets) {
    bucket.filled = 0;
    bucket.synced = false;
  }
  aborted = false;
  streamingNow = true;
  syncer = std::thread([this, fatal = std::move(fatal)] {
    std::string error;
    if (!runSyncThread(error))
      fatal(error);
  });
}

void GradientSync::stopStreaming() {
  if (syncer.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      aborted = true;
    }
    changed.notify_all();
    syncer.join();
  }
  streamingNow = false;
}

bool GradientSync::outerDue(int64_t step) const {
  for (const OpAttrs &attrs : outerSchedule)
    if (localStepsDue(attrs, step))
      return true;
  return false;
}

bool GradientSync::averageParameters(std::vector<float> &values, double share,
                                     std::string &error) {
  if (share != 1.0)
    for (float &x : values)
      x = static_cast<float>(x * share);
  if (!exchange(localStepsCodec, values.data(), values.size(), 0, error))
    return false;
  float scale = average();
  for (float &x : values)
    x *= scale;
  return true;
}
