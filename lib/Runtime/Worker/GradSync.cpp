//===- GradSync.cpp - The worker's gradient synchronisation ---------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The data-parallel group's exchange at the end of the iteration: gradients
// packed into buckets in launch order and all-reduced by a sync thread as
// the backward completes them (overlapped), or all at once; compressed on
// the wire with error feedback (int8, top-k after a dense warm-up);
// reduce-scattered and the parameters all-gathered under sharded optimizer
// state (ZeRO-1); the iteration's gradient scale and the group's average.
//
//===----------------------------------------------------------------------===//

#include "Messages.h"
#include "Worker/WorkerImpl.h"
#include "dtfm/Format/WireCodec.h"

#include <algorithm>
#include <cstring>
#include <thread>

using namespace dtfm;
using namespace dtfm::runtime;
using namespace dtfm::runtime::worker;

bool Worker::syncGradients(
    const std::vector<std::pair<const ProgramOp *, cpu::Tensor *>> &grads,
    std::string &error) {
  if (groupIndex < 0)
    return true; // a group of one: the identity
  if (grads.front().first->attrs.shardState) {
    // Through the bucket's own layout, one member's shards per chunk.
    auto slot = bucketSlot.find(grads.front().first->index);
    if (slot == bucketSlot.end()) {
      error = "gradient allreduce: op #" +
              std::to_string(grads.front().first->index) + " is in no bucket";
      return false;
    }
    SyncBucket &bucket = syncBuckets[slot->second.bucket];
    size_t total = 0;
    for (const auto &[op, grad] : grads) {
      auto it = bucketSlot.find(op->index);
      total += grad->data.size();
      if (it == bucketSlot.end() || it->second.bucket != slot->second.bucket ||
          total > bucket.elements) {
        error = "gradient allreduce: bucket " + std::to_string(bucket.index) +
                " was not filled as planned";
        return false;
      }
      packBucket(it->second, grad->data.data(), grad->data.size());
    }
    Clock::time_point start = Clock::now();
    if (!exchangeBucket(bucket, error))
      return false;
    record(2, "grad sync", start, Clock::now());
    float scale = groupAverage();
    for (size_t i = bucket.bounds[groupPosition];
         i < bucket.bounds[groupPosition + 1]; ++i)
      bucket.data[i] *= scale;
    for (const auto &[op, grad] : grads)
      unpackBucket(bucketSlot.at(op->index), *grad);
    return true;
  }
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
  record(2, "grad sync", start, Clock::now());
  // Every member of a group has the same programs: the same group size.
  float scale = groupAverage();
  at = 0;
  for (const auto &[op, grad] : grads) {
    for (float &x : grad->data)
      x = bucket[at++] * scale;
  }
  return true;
}

bool Worker::exchange(format::WireCodec codec, float *data, size_t count,
                      size_t kept, std::string &error) {
  return transport->allreduceSum(static_cast<int>(groupIndex), codec, data,
                                 count, kept, error);
}

double Worker::gradientScale() const {
  // Local steps: each replica steps on the mean of its own micro-batches.
  if (syncEvery >= 1)
    return 1.0 / static_cast<double>(microBatches);
  // Synchronous: the group averages (x 1/members), so members / total makes
  // the synced gradient the mean over the global batch, each replica
  // weighted by its share; with even replicas it is 1 / micro-batches.
  return groupMembers() / static_cast<double>(layout.total);
}

double Worker::groupMembers() const {
  // Every member of a group has the same programs: the same group size.
  double members = 1;
  for (const ProgramOp &op : typed.ops)
    if (op.kind == OpKind::GradSync)
      members = static_cast<double>(op.attrs.group.size());
  return std::max(1.0, members);
}

float Worker::groupAverage() const {
  return static_cast<float>(1.0 / groupMembers());
}

bool Worker::compressWithFeedback(const ProgramOp &sync, const float *grad,
                                  size_t count, float *out,
                                  std::string &error) {
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

bool Worker::planBuckets(std::string &error) {
  std::map<int64_t, std::vector<const ProgramOp *>> byBucket;
  for (int index : typed.opsOf(OpPhase::Optimizer)) {
    const ProgramOp &op = typed.ops[index];
    if (op.kind == OpKind::GradSync)
      byBucket[op.attrs.bucket].push_back(&op);
  }
  auto elementsOf = [](const ProgramOp *op) {
    size_t elements = 1;
    for (int64_t d : op->results[0].shape)
      elements *= static_cast<size_t>(std::max<int64_t>(0, d));
    return elements;
  };
  std::string device = typed.source ? typed.source->device() : "";
  for (const auto &[index, ops] : byBucket) {
    SyncBucket &bucket = syncBuckets.emplace_back();
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
      BucketSlot &slot = bucketSlot[op->index];
      slot.bucket = syncBuckets.size() - 1;
      slot.offset = bucket.elements;
      bucket.elements += elements;
      bucket.capacity += format::keptEntries(op->attrs.compression, elements,
                                             op->attrs.topkRatio);
      // Sharded: member k's chunk gets every gradient's shard k, in order.
      if (!bucket.bounds.empty())
        for (size_t k = 0; k < members; ++k)
          bucket.bounds[k + 1] +=
            static_cast<size_t>(shardOf(static_cast<int64_t>(elements),
                                        static_cast<int64_t>(k),
                                        static_cast<int64_t>(members))
                                    .size());
    }
    if (!bucket.bounds.empty()) {
      // Chunk sizes to bounds, then each gradient's pieces.
      std::vector<size_t> next(members);
      for (size_t k = 0; k < members; ++k) {
        bucket.bounds[k + 1] += bucket.bounds[k];
        next[k] = bucket.bounds[k];
      }
      for (const ProgramOp *op : ops) {
        BucketSlot &slot = bucketSlot[op->index];
        for (size_t k = 0; k < members; ++k) {
          slot.pieces.push_back(next[k]);
          next[k] += static_cast<size_t>(
              shardOf(static_cast<int64_t>(elementsOf(op)),
                      static_cast<int64_t>(k), static_cast<int64_t>(members))
                  .size());
        }
      }
    }
    bucket.data.assign(bucket.elements, 0.0f);
  }
  return true;
}

void Worker::packBucket(const BucketSlot &slot, const float *grad,
                        size_t count) {
  SyncBucket &bucket = syncBuckets[slot.bucket];
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

bool Worker::gatherShards(
    const std::vector<std::pair<const ProgramOp *, cpu::Tensor *>> &params,
    std::string &error) {
  if (groupIndex < 0 || params.empty())
    return true;
  Clock::time_point start = Clock::now();
  auto slotOf = [&](const ProgramOp *op) -> const BucketSlot * {
    auto it = bucketSlot.find(op->index);
    return it == bucketSlot.end() || it->second.pieces.empty() ? nullptr
                                                              : &it->second;
  };
  const BucketSlot *first = slotOf(params.front().first);
  if (!first) {
    error = "parameter gather: op #" +
            std::to_string(params.front().first->index) +
            " is in no sharded bucket";
    return false;
  }
  // The bucket's storage is free again: its gradients were taken.
  SyncBucket &bucket = syncBuckets[first->bucket];
  int64_t members = static_cast<int64_t>(first->pieces.size());
  for (const auto &[op, param] : params) {
    const BucketSlot *slot = slotOf(op);
    if (!slot || slot->bucket != first->bucket) {
      error = "parameter gather: op #" + std::to_string(op->index) +
              " is not in sharded bucket " + std::to_string(bucket.index);
      return false;
    }
    ElementRange mine = shardOf(param->numel(), groupPosition, members);
    std::copy_n(param->data.begin() + mine.begin, mine.size(),
                bucket.data.begin() + slot->pieces[groupPosition]);
  }
  if (!transport->allGather(static_cast<int>(groupIndex), bucket.data.data(),
                            bucket.bounds, error)) {
    error = "parameter gather: " + error;
    return false;
  }
  for (const auto &[op, param] : params) {
    const BucketSlot *slot = slotOf(op);
    for (int64_t k = 0; k < members; ++k) {
      ElementRange shard = shardOf(param->numel(), k, members);
      std::copy_n(bucket.data.begin() + slot->pieces[k], shard.size(),
                  param->data.begin() + shard.begin);
    }
  }
  record(2, "param gather b" + std::to_string(bucket.index), start,
         Clock::now());
  return true;
}

void Worker::bucketGradient(const ProgramOp &sync, const cpu::Tensor &grad) {
  auto slot = bucketSlot.find(sync.index);
  if (slot == bucketSlot.end())
    return;
  SyncBucket &bucket = syncBuckets[slot->second.bucket];
  if (slot->second.offset + grad.data.size() > bucket.elements)
    return; // a shape the plan did not announce: left to awaitBuckets
  if (wireThisStep(bucket.compression, bucket.topkWarmup) !=
      format::WireCodec::Dense) {
    std::string error;
    if (!compressWithFeedback(sync, grad.data.data(), grad.data.size(),
                              bucket.data.data() + slot->second.offset, error))
      fatal(error);
  } else {
    packBucket(slot->second, grad.data.data(), grad.data.size());
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    bucket.filled += grad.data.size();
  }
  changed.notify_all();
}

bool Worker::runSyncThread(std::string &error) {
  float scale = groupAverage();
  for (SyncBucket &bucket : syncBuckets) {
    {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock, [&] {
        return bucket.filled >= bucket.elements || syncAborted;
      });
      if (syncAborted)
        return true; // the compute slot reports its own error
    }
    Clock::time_point start = Clock::now();
    if (!exchangeBucket(bucket, error))
      return false;
    for (float &x : bucket.data)
      x *= scale;
    record(2, "grad sync b" + std::to_string(bucket.index), start,
           Clock::now());
    {
      std::lock_guard<std::mutex> lock(mutex);
      bucket.synced = true;
    }
    changed.notify_all();
  }
  return true;
}

bool Worker::awaitBuckets(
    const std::vector<std::pair<const ProgramOp *, cpu::Tensor *>> &grads,
    std::string &error) {
  for (const auto &[op, grad] : grads) {
    auto slot = bucketSlot.find(op->index);
    if (slot == bucketSlot.end()) {
      error = "gradient allreduce: op #" + std::to_string(op->index) +
              " is in no bucket";
      return false;
    }
    SyncBucket &bucket = syncBuckets[slot->second.bucket];
    {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock, [&] { return bucket.synced || syncAborted; });
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
    unpackBucket(slot->second, *grad);
  }
  return true;
}

bool Worker::exchangeBucket(SyncBucket &bucket, std::string &error) {
  if (!bucket.bounds.empty())
    return transport->reduceScatterSum(static_cast<int>(groupIndex),
                                       bucket.data.data(), bucket.bounds,
                                       error);
  return exchange(wireThisStep(bucket.compression, bucket.topkWarmup),
                  bucket.data.data(), bucket.data.size(), bucket.capacity,
                  error);
}

void Worker::unpackBucket(const BucketSlot &slot, cpu::Tensor &grad) const {
  const SyncBucket &bucket = syncBuckets[slot.bucket];
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
