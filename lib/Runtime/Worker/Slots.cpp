//===- Slots.cpp - The receive, compute and send slots --------------------===//
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
// of the data-parallel group (GradientSync.cpp) ends the iteration.
//
//===----------------------------------------------------------------------===//

#include "Messages.h"
#include "Worker/WorkerImpl.h"
#include "dtfm/Format/Int8.h"
#include "dtfm/Format/WireCodec.h"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <iterator>
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
    if (t.wire == format::WireCodec::Dense) {
      if (!transport->recv(t.peerRank, slot, buffer.data.data(), bytes, error))
        return false;
      continue;
    }
    std::vector<char> message(bytes);
    if (!transport->recv(t.peerRank, slot, message.data(), bytes, error))
      return false;
    size_t values = buffer.data.size();
    if (executor->decodesReceives(t.wire)) {
      // Checked here, decoded on the executor's device.
      if (!format::validInt8(message.data(), bytes, values)) {
        error = names[t.peerRank] + " sent an int8 message with a scale " +
                "that is not finite and >= 0 (tag " + std::to_string(t.tag) +
                ")";
        return false;
      }
      encodedBuffers[i][entry.microBatch] = std::move(message);
      continue;
    }
    std::string malformed;
    if (!format::wireCodecInfo(t.wire).decode(message.data(), bytes, values,
                                              values, buffer.data.data(),
                                              /*add=*/false, malformed)) {
      error = names[t.peerRank] + " sent " + malformed + " (tag " +
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

bool Worker::postTied(int64_t step, bool forwardOnly, std::string &error) {
  tiedPosted.clear();
  tiedPostedAt = Clock::now();
  for (size_t i = 0; i < receives.size(); ++i) {
    const Transfer &t = receives[i];
    if (!t.oncePerIteration || (forwardOnly && t.phase != Phase::Forward))
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

bool Worker::runStep(int64_t step, double &lossSum, std::string &error) {
  sync.beginStep(step);
  executor->beginStep(step);
  lossSum = 0;

  std::vector<MicroBatch> batches(microBatches);
  stepSampleHash = 0;
  if (!inputs.empty())
    for (int m = 0; m < microBatches; ++m) {
      BatchPosition position;
      position.microBatch =
          (step - 1) * layout.total + layout.offsets[program.pipeline()] + m;
      position.firstSample = firstSampleOf(step, m);
      uint64_t hash = 0;
      if (!data.microBatch(position, inputs, batches[m], hash, error))
        return false;
      stepSampleHash += hash;
    }

  // Gradient buckets all-reduced while the backward goes on (when the
  // executor can hand gradients over early and the slots overlap).
  bool overlapped = !options.serialSlots && transport;
  if (overlapped && sync.canStream() &&
      executor->streamGradients(
          microBatches, gradientScale(),
          [this](const ProgramOp &op, const cpu::Tensor &g) {
            std::string e;
            if (!sync.bucketGradient(op, g, e))
              fatal(e);
          }))
    sync.startStreaming([this](const std::string &e) { fatal(e); });
  if (!runPasses(step, batches, lossSum, /*forwardOnly=*/false, error)) {
    sync.stopStreaming();
    return false;
  }
  Clock::time_point start = Clock::now();
  bool finished = executor->finishIteration(
      gradientScale(),
      [&](const auto &grads, std::string &e) {
        return sync.syncGradients(grads, e);
      },
      [&](const auto &params, std::string &e) {
        return sync.gatherShards(params, e);
      },
      error);
  sync.stopStreaming();
  if (!finished) {
    if (error.rfind("gradient allreduce", 0) != 0)
      error = planPath + ": " + error;
    return false;
  }
  record(1, "optimizer", start, Clock::now());
  if (sync.hasGroup() && sync.syncEvery() >= 1 &&
      !runOuterSteps(step, error))
    return false;
  if (transport && !transport->flush(error))
    return false;
  return true;
}

bool Worker::parkOuterExchange(std::string &error) {
  if (!outer.thread.joinable())
    return true;
  outer.thread.join();
  if (!outer.ok) {
    error = outer.error;
    return false;
  }
  return executor->outerPark(outer.sentAfter, outer.values, error);
}

bool Worker::runOuterSteps(int64_t step, std::string &error) {
  int64_t overlap = sync.outerOverlap();
  Clock::time_point start = Clock::now();
  // An exchange that has had its overlap's steps: applied now (what the
  // step waited for it is the exchange left exposed).
  if (outer.active && outer.sentAfter + overlap == step) {
    if (!parkOuterExchange(error) ||
        !executor->outerApply(sync.outerMixing(), error))
      return false;
    outer.active = false;
    record(2, "outer sync", start, Clock::now());
  }
  if (!sync.outerDue(step))
    return true;
  if (outer.active) {
    error = "local steps: an exchange is due after step " +
            std::to_string(step) + " while the one sent after step " +
            std::to_string(outer.sentAfter) + " is still in flight";
    return false;
  }
  // Uneven replicas weight their pseudo-gradients by their share of the
  // global batch (members x share: 1 when even).
  double share = static_cast<double>(microBatches) * sync.members() /
                 static_cast<double>(layout.total);
  start = Clock::now();
  outer.values.clear();
  if (!executor->outerSend(step, outer.values, error))
    return false;
  outer.active = true;
  outer.sentAfter = step;
  if (overlap == 0) {
    outer.ok = sync.averageParameters(outer.values, share, error);
    if (!outer.ok || !executor->outerPark(step, outer.values, error) ||
        !executor->outerApply(0.0, error))
      return false;
    outer.active = false;
    record(2, "outer sync", start, Clock::now());
    return true;
  }
  outer.ok = false;
  outer.thread = std::thread([this, share] {
    outer.ok = sync.averageParameters(outer.values, share, outer.error);
  });
  return true;
}

bool Worker::runPasses(int64_t step, std::vector<MicroBatch> &batches,
                       double &lossSum, bool forwardOnly, std::string &error) {
  received.clear();
  outbox.clear();
  computed.clear();
  onceGradientSums.clear();
  // Validation runs the streams' forward entries alone, in their order
  // (the slots read the streams from the worker; they are put back after).
  std::vector<StreamEntry> streams[3];
  if (forwardOnly)
    for (auto [all, kept] :
         {std::pair{&recvStream, &streams[0]}, {&computeStream, &streams[1]},
          {&sendStream, &streams[2]}}) {
      std::copy_if(all->begin(), all->end(), std::back_inserter(*kept),
                   [](const StreamEntry &e) {
                     return e.phase == Phase::Forward;
                   });
      std::swap(*all, *kept);
    }
  auto restore = [&] {
    if (forwardOnly) {
      std::swap(recvStream, streams[0]);
      std::swap(computeStream, streams[1]);
      std::swap(sendStream, streams[2]);
    }
  };
  if (transport && (tiedForward || (tiedBackward && !forwardOnly)) &&
      !postTied(step, forwardOnly, error)) {
    restore();
    return false;
  }
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
  std::vector<ValueTable> values(microBatches);
  forwardOnlyPass = forwardOnly;
  bool ok = overlapped ? runComputeThread(step, batches, values, lossSum, error)
                       : runComputeSlot(step, batches, values, lossSum, error);
  forwardOnlyPass = false;
  // The receive and send threads may wait on peers that wait on this
  // worker's compute: joining them would report their timeout, not the
  // cause. Leave at once with it (the peers see the connections close).
  if (!ok && overlapped)
    fatal(error);
  if (overlapped) {
    receiver.join();
    sender.join();
  }
  restore();
  return ok;
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
    bool needsTied =
        entry.phase == Phase::Forward    ? tiedForward
        : entry.phase == Phase::Backward ? tiedBackward &&
                                               entry.microBatch ==
                                                   microBatches - 1
                                         : false; // W moves nothing
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
      if (!t.oncePerIteration && t.wire != format::WireCodec::Dense &&
          executor->decodesReceives(t.wire)) {
        // The executor binds the message; the table holds the value's shape.
        executor->stageEncodedReceive(
            entry.microBatch, t.value, t.wire,
            std::move(encodedBuffers[i][entry.microBatch]));
        cpu::Tensor placeholder;
        placeholder.shape = t.shape;
        table[t.value] = std::move(placeholder);
      } else if (!t.oncePerIteration)
        table[t.value] = buffers[i][entry.microBatch];
      else if (t.phase == Phase::Forward ||
               entry.microBatch == microBatches - 1)
        table[t.value] = buffers[i][0];
      else // a summed gradient arrives with the last backward only
        table[t.value] = cpu::Tensor(t.shape);
    }
    Clock::time_point start = Clock::now();
    double cpuStart = threadCpuSeconds();
    OpPhase phase = plan::opPhaseOf(entry.phase);
    if (!executor->runPhase(phase, entry.microBatch, table,
                            batches[entry.microBatch], lossSum, error)) {
      error = planPath + ": step " + std::to_string(step) + ": " + error;
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
      // A split backward's B and W each count their part (W the
      // program's weight_flops); a micro-batch's backward counts once.
      calibrationFlops +=
          entry.phase == Phase::Forward ? shared.forward_flops()
          : entry.phase == Phase::Backward
              ? shared.backward_flops() - shared.weight_flops() +
                    shared.recompute_flops()
              : shared.weight_flops();
      if (entry.phase != Phase::Weight)
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
      std::vector<char> message;
      if (!t.oncePerIteration &&
          executor->takeEncodedSend(t.value, t.wire, message)) {
        messages.emplace_back(static_cast<int>(i), std::move(message));
        continue;
      }
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
      size_t values = value.data.size();
      if (!format::wireCodecInfo(t.wire).encode(value.data.data(), values,
                                                values, message, error))
        return false;
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
    if (entry.phase == lastPhase) {
      executor->collectGradients(entry.microBatch, table);
      table.clear();
    } else if (forwardOnlyPass) {
      table.clear();
      executor->discardMicroBatch(entry.microBatch);
    }
  }
  return true;
}
