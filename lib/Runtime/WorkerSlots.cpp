//===- WorkerSlots.cpp - The receive, compute and send slots --------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Three threads per worker follow the program's streams (Worker.h): the
// receive slot posts and waits for transfers in stream order, the compute
// slot runs each entry once its receives are in, the send slot hands
// computed values to the transport. Values used once per iteration travel
// outside the streams (postTied / waitTied / sendOnce); the gradient sync
// of the data-parallel group ends the iteration.
//
//===----------------------------------------------------------------------===//

#include "Messages.h"
#include "WorkerImpl.h"
#include "dtfm/Format/Int8.h"
#include "dtfm/Format/Sparse.h"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>

using namespace dtfm;
using namespace dtfm::runtime;
using namespace dtfm::runtime::worker;

bool Worker::receiveEntry(int64_t step, const StreamEntry &entry,
                          std::string &error) {
  Clock::time_point start = Clock::now();
  double serialise = 0; // seconds the entry's bytes occupy its link
  for (size_t i = 0; i < receives.size(); ++i) {
    const Transfer &t = receives[i];
    if (t.phase != entry.phase || t.peerStage != entry.peerStage ||
        t.oncePerIteration || onDevice(t))
      continue;
    cpu::Tensor &buffer = buffers[i][entry.microBatch];
    size_t bytes = t.wireBytes(buffer.data.size());
    size_t link = static_cast<size_t>(t.peerRank) * size + options.rank;
    if (link < linkShapes.size() && linkShapes[link].bytesPerSecond > 0)
      serialise += static_cast<double>(bytes) / linkShapes[link].bytesPerSecond;
    uint64_t slot =
        dataSlot(step, t.phase, entry.microBatch, microBatches, t.tag);
    if (!t.int8) {
      if (!transport->recv(t.peerRank, slot, buffer.data.data(), bytes, error))
        return false;
      continue;
    }
    std::vector<char> message(bytes);
    if (!transport->recv(t.peerRank, slot, message.data(), bytes, error))
      return false;
    if (!format::decodeInt8(message.data(), bytes, buffer.data.size(),
                            buffer.data.data())) {
      error = names[t.peerRank] + " sent a malformed int8 message (tag " +
              std::to_string(t.tag) + ")";
      return false;
    }
  }
  // One thread doing everything cannot take data in while it computes: a
  // receive lasts at least as long as the link needs for its bytes.
  if (options.serialSlots)
    std::this_thread::sleep_until(
        start + std::chrono::duration_cast<Clock::duration>(
                    std::chrono::duration<double>(serialise)));
  std::string from;
  for (const Transfer &t : receives)
    if (t.phase == entry.phase && t.peerStage == entry.peerStage &&
        !t.oncePerIteration) {
      from = names[t.peerRank];
      break;
    }
  record(0,
         std::string(1, format::phaseLetter(entry.phase)) +
             std::to_string(entry.microBatch) + "<" + from,
         start, Clock::now());
  {
    std::lock_guard<std::mutex> lock(mutex);
    ++received[{entry.phase, entry.microBatch}];
  }
  changed.notify_all();
  return true;
}

bool Worker::postTied(int64_t step, std::string &error) {
  tiedPosted.clear();
  tiedPostedAt = Clock::now();
  for (size_t i = 0; i < receives.size(); ++i) {
    const Transfer &t = receives[i];
    if (!t.oncePerIteration)
      continue;
    int carrier = t.phase == Phase::Forward ? 0 : microBatches - 1;
    tiedPosted.push_back(
        {t.phase, static_cast<int>(i),
         transport->postRecv(
             t.peerRank, dataSlot(step, t.phase, carrier, microBatches, t.tag),
             buffers[i][0].data.data(), buffers[i][0].data.size() * 4)});
  }
  return true;
}

bool Worker::waitTied(Phase phase, std::string &error) {
  std::string from;
  for (const TiedReceive &r : tiedPosted) {
    if (r.phase != phase)
      continue;
    if (!transport->waitPosted(r.handle, error))
      return false;
    from = names[receives[r.receive].peerRank];
  }
  if (!from.empty())
    record(0,
           std::string(phase == Phase::Forward ? "tied<" : "tied grad<") + from,
           tiedPostedAt, Clock::now());
  return true;
}

bool Worker::sendOnce(int64_t step, Phase phase, const ValueTable &table,
                      std::string &error) {
  for (size_t i = 0; i < sends.size(); ++i) {
    const Transfer &t = sends[i];
    if (t.phase != phase || !t.oncePerIteration)
      continue;
    const cpu::Tensor &payload = phase == Phase::Forward
                                     ? table.at(t.value)
                                     : onceGradientSums.at(static_cast<int>(i));
    const char *raw = reinterpret_cast<const char *>(payload.data.data());
    int carrier = phase == Phase::Forward ? 0 : microBatches - 1;
    if (!transport->send(
            t.peerRank, dataSlot(step, phase, carrier, microBatches, t.tag),
            std::vector<char>(raw, raw + payload.data.size() * 4), error))
      return false;
  }
  return true;
}

bool Worker::sendEntry(int64_t step, const StreamEntry &entry,
                       std::string &error) {
  std::vector<std::pair<int, std::vector<char>>> messages;
  {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] {
      return computed.count({entry.phase, entry.microBatch}) > 0;
    });
    auto &box = outbox[{entry.phase, entry.microBatch}];
    for (auto it = box.begin(); it != box.end();) {
      if (sends[it->first].peerStage == entry.peerStage) {
        messages.push_back(std::move(*it));
        it = box.erase(it);
      } else {
        ++it;
      }
    }
  }
  Clock::time_point start = Clock::now(), leaves = start;
  std::string to;
  for (auto &[index, bytes] : messages) {
    const Transfer &t = sends[index];
    to = names[t.peerRank];
    Clock::time_point left;
    if (!transport->send(
            t.peerRank,
            dataSlot(step, t.phase, entry.microBatch, microBatches, t.tag),
            std::move(bytes), error, &left))
      return false;
    leaves = std::max(leaves, left);
  }
  // The send slot is busy while its messages leave (the simulator's model).
  std::this_thread::sleep_until(leaves);
  if (!to.empty())
    record(2,
           std::string(1, format::phaseLetter(entry.phase)) +
               std::to_string(entry.microBatch) + ">" + to,
           start, leaves);
  return true;
}

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
  SyncCompression compression =
      wireThisStep(wire.compression, wire.topkWarmup);
  for (const auto &[op, grad] : grads) {
    total += grad->data.size();
    capacity += format::topkCount(grad->data.size(), wire.topkRatio);
  }
  std::vector<float> bucket(total);
  size_t at = 0;
  for (const auto &[op, grad] : grads) {
    if (compression != SyncCompression::None) {
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

bool Worker::exchange(SyncCompression compression, float *data, size_t count,
                      size_t capacity, std::string &error) {
  int group = static_cast<int>(groupIndex);
  switch (compression) {
  case SyncCompression::Int8:
    return transport->allreduceSumInt8(group, data, count, error);
  case SyncCompression::TopK:
    return transport->allgatherSumSparse(group, data, count, capacity, error);
  case SyncCompression::None:
    break;
  }
  return transport->allreduceSum(group, data, count, error);
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
  if (sync.attrs.compression == SyncCompression::TopK)
    format::moveTopK(pending, count,
                     format::topkCount(count, sync.attrs.topkRatio), out);
  else
    format::moveInt8(pending, count, out);
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
      if (op->attrs.compression != SyncCompression::None) {
        bucket.compression = op->attrs.compression;
        bucket.topkWarmup = op->attrs.topkWarmup;
      }
      size_t elements = elementsOf(op);
      BucketSlot &slot = bucketSlot[op->index];
      slot.bucket = syncBuckets.size() - 1;
      slot.offset = bucket.elements;
      bucket.elements += elements;
      bucket.capacity += format::topkCount(elements, op->attrs.topkRatio);
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
      SyncCompression::None) {
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

bool Worker::runStep(int64_t step, double &lossSum, std::string &error) {
  currentStep = step;
  received.clear();
  outbox.clear();
  computed.clear();
  onceGradientSums.clear();
  lossSum = 0;

  std::vector<MicroBatch> batches(microBatches);
  if (!inputs.empty())
    for (int m = 0; m < microBatches; ++m) {
      int64_t index = (step - 1) * layout.total +
                      layout.offsets[program.pipeline()] + m;
      if (!data.microBatch(index, inputs, batches[m], error))
        return false;
    }

  if (transport && (tiedForward || tiedBackward) && !postTied(step, error))
    return false;
  // Overlapped slots: receive and send threads beside this (compute) one.
  std::thread receiver, sender;
  bool overlapped = !options.serialSlots && transport;
  std::string receiveError, sendError;
  if (overlapped) {
    receiver = std::thread([&] {
      for (const StreamEntry &e : recvStream)
        if (!receiveEntry(step, e, receiveError))
          fatal(receiveError);
    });
    sender = std::thread([&] {
      for (const StreamEntry &e : sendStream)
        if (!sendEntry(step, e, sendError))
          fatal(sendError);
    });
  }

  // Gradient buckets all-reduced while the backward goes on (when the
  // executor can hand gradients over early and the slots overlap).
  std::thread syncer;
  std::string syncError;
  streamingBuckets =
      overlapped && groupIndex >= 0 && !syncBuckets.empty() && syncEvery < 1 &&
      executor->streamGradients(microBatches, gradientScale(),
                                [this](const ProgramOp &sync,
                                       const cpu::Tensor &g) {
                                  bucketGradient(sync, g);
                                });
  if (streamingBuckets) {
    for (SyncBucket &bucket : syncBuckets) {
      bucket.filled = 0;
      bucket.synced = false;
    }
    syncAborted = false;
    syncer = std::thread([&] {
      if (!runSyncThread(syncError))
        fatal(syncError);
    });
  }
  auto stopSync = [&] {
    if (!syncer.joinable())
      return;
    {
      std::lock_guard<std::mutex> lock(mutex);
      syncAborted = true;
    }
    changed.notify_all();
    syncer.join();
  };

  std::vector<ValueTable> values(microBatches);
  bool computed = overlapped
                      ? runComputeThread(step, batches, values, lossSum, error)
                      : runComputeSlot(step, batches, values, lossSum, error);
  if (overlapped) {
    receiver.join();
    sender.join();
  }
  if (!computed) {
    stopSync();
    return false;
  }
  Clock::time_point start = Clock::now();
  bool finished = executor->finishIteration(
      gradientScale(),
      [&](const auto &grads, std::string &e) {
        return streamingBuckets ? awaitBuckets(grads, e)
                                : syncGradients(grads, e);
      },
      [&](const auto &params, std::string &e) {
        return gatherShards(params, e);
      },
      error);
  stopSync();
  if (!finished) {
    if (error.rfind("gradient allreduce", 0) != 0)
      error = planPath + ": " + error;
    return false;
  }
  record(1, "optimizer", start, Clock::now());
  // Local steps: every syncEvery steps the replicas exchange parameters.
  if (syncEvery >= 1 && groupIndex >= 0 && step % syncEvery == 0) {
    // Pseudo-gradients in the int8 format too when the syncs are.
    SyncCompression wire = SyncCompression::None;
    for (const ProgramOp &op : typed.ops)
      if (op.kind == OpKind::GradSync &&
          op.attrs.compression == SyncCompression::Int8)
        wire = SyncCompression::Int8;
    float scale = groupAverage();
    // Uneven replicas weight their pseudo-gradients by their share of the
    // global batch (members x share: 1 when even).
    double share = static_cast<double>(microBatches) * groupMembers() /
                   static_cast<double>(layout.total);
    Clock::time_point outer = Clock::now();
    bool exchanged = executor->outerStep(
        [&](std::vector<float> &values, std::string &e) {
          if (share != 1.0)
            for (float &x : values)
              x = static_cast<float>(x * share);
          if (!exchange(wire, values.data(), values.size(), 0, e))
            return false;
          for (float &x : values)
            x *= scale;
          return true;
        },
        error);
    if (!exchanged)
      return false;
    record(2, "outer sync", outer, Clock::now());
  }
  if (transport && !transport->flush(error))
    return false;
  return true;
}

bool Worker::runComputeThread(int64_t step, std::vector<MicroBatch> &batches,
                              std::vector<ValueTable> &values, double &lossSum,
                              std::string &error) {
  // Compute runs at a lower priority than the receive, send and link
  // threads, so that they move data as soon as it is there even when the
  // workers outnumber the cores (nice can only be raised without
  // privileges, hence a thread of its own).
  bool ok = false;
  std::thread compute([&] {
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 5);
    ok = runComputeSlot(step, batches, values, lossSum, error);
  });
  compute.join();
  return ok;
}

bool Worker::runComputeSlot(int64_t step, std::vector<MicroBatch> &batches,
                            std::vector<ValueTable> &values, double &lossSum,
                            std::string &error) {
  bool overlapped = !options.serialSlots && transport;
  for (const StreamEntry &entry : computeStream) {
    std::pair<Phase, int> key{entry.phase, entry.microBatch};
    bool needsTied = entry.phase == Phase::Forward
                         ? tiedForward
                         : tiedBackward && entry.microBatch == microBatches - 1;
    if (!overlapped) {
      for (const StreamEntry &r : recvStream)
        if (r.phase == entry.phase && r.microBatch == entry.microBatch &&
            !receiveEntry(step, r, error))
          return false;
    } else {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock,
                   [&] { return received[key] == expectedReceives[key]; });
    }
    // Tied values: waited for once, before the first forward and the last
    // backward.
    if (needsTied &&
        (entry.phase == Phase::Backward || entry.microBatch == 0) &&
        !waitTied(entry.phase, error))
      return false;
    ValueTable &table = values[entry.microBatch];
    for (size_t i = 0; i < receives.size(); ++i) {
      const Transfer &t = receives[i];
      if (t.phase != entry.phase || onDevice(t))
        continue;
      if (!t.oncePerIteration)
        table[t.value] = buffers[i][entry.microBatch];
      else if (t.phase == Phase::Forward ||
               entry.microBatch == microBatches - 1)
        table[t.value] = buffers[i][0];
      else // a summed gradient arrives with the last backward only
        table[t.value] = cpu::Tensor(t.shape);
    }
    Clock::time_point start = Clock::now();
    double cpuStart = threadCpuSeconds();
    OpPhase phase =
        entry.phase == Phase::Forward ? OpPhase::Forward : OpPhase::Backward;
    if (!executor->runPhase(phase, entry.microBatch, table,
                            batches[entry.microBatch], lossSum, error)) {
      error = planPath + ": " + error;
      return false;
    }
    Clock::time_point end = Clock::now();
    record(1,
           std::string(1, format::phaseLetter(entry.phase)) +
               std::to_string(entry.microBatch),
           start, end);
    if (calibrating(step)) {
      if (!deviceTimed)
        calibrationSeconds += threadCpuSeconds() - cpuStart;
      calibrationFlops += entry.phase == Phase::Forward
                              ? program.forward_flops()
                              : program.backward_flops() +
                                    program.recompute_flops();
      ++(entry.phase == Phase::Forward ? calibratedForwards
                                       : calibratedBackwards);
    }

    std::vector<std::pair<int, std::vector<char>>> messages;
    for (size_t i = 0; i < sends.size(); ++i) {
      const Transfer &t = sends[i];
      if (t.phase != entry.phase || onDevice(t))
        continue;
      if (t.oncePerIteration && t.phase == Phase::Forward)
        continue; // micro-batch 0's copy leaves through sendOnce
      const cpu::Tensor &value = table.at(t.value);
      if (t.oncePerIteration) {
        if (t.phase == Phase::Backward) {
          cpu::Tensor &sum = onceGradientSums[static_cast<int>(i)];
          if (sum.shape != value.shape)
            sum = cpu::Tensor(value.shape);
          for (size_t j = 0; j < sum.data.size(); ++j)
            sum.data[j] += value.data[j];
        }
        continue;
      }
      std::vector<char> message;
      if (t.int8) {
        format::encodeInt8(value.data.data(), value.data.size(), message);
      } else {
        const char *raw = reinterpret_cast<const char *>(value.data.data());
        message.assign(raw, raw + value.data.size() * 4);
      }
      messages.emplace_back(static_cast<int>(i), std::move(message));
    }
    if (transport &&
        ((entry.phase == Phase::Forward && entry.microBatch == 0) ||
         (entry.phase == Phase::Backward &&
          entry.microBatch == microBatches - 1)) &&
        !sendOnce(step, entry.phase, table, error))
      return false;
    executor->releaseSent(phase, entry.microBatch, table);
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto &box = outbox[key];
      for (auto &m : messages)
        box.push_back(std::move(m));
      computed.insert(key);
    }
    changed.notify_all();
    if (!overlapped)
      for (const StreamEntry &s : sendStream)
        if (s.phase == entry.phase && s.microBatch == entry.microBatch &&
            !sendEntry(step, s, error))
          return false;
    if (entry.phase == Phase::Backward) {
      executor->collectGradients(entry.microBatch, table);
      table.clear();
    }
  }
  return true;
}
