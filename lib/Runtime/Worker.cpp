//===- Worker.cpp - One device of a plan, trained for real ----------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Worker.h"
#include "dtfm/Format/Stream.h"

#include "dtfm/Runtime/DataSource.h"
#include "dtfm/Runtime/Executor.h"
#include "dtfm/Runtime/PlanLoader.h"
#include "dtfm/Runtime/Simulator.h"
#include "dtfm/Runtime/Transport.h"

#include "plan.pb.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <unistd.h>

using namespace dtfm;
using namespace dtfm::runtime;
using Clock = std::chrono::steady_clock;

namespace {

using format::Phase;
using format::StreamEntry;


/// A send or receive of the program.
struct Transfer {
  int op = 0; ///< index in the program
  Phase phase = Phase::Forward;
  int peerStage = 0;
  int peerRank = 0;
  int64_t tag = 0;
  bool oncePerIteration = false;
  int64_t value = 0; ///< operand (send) or result (recv) value id
  std::vector<int64_t> shape;
};

/// Message slots: step, phase, micro-batch and tag; control messages (bit
/// 55) by kind and step. Gloo's collectives use the top byte.
uint64_t dataSlot(int64_t step, Phase phase, int microBatch, int microBatches,
                  int64_t tag) {
  uint64_t s = static_cast<uint64_t>(step) * 2 + (phase == Phase::Backward ? 1 : 0);
  s = s * static_cast<uint64_t>(microBatches) + microBatch;
  return (s << 12) | static_cast<uint64_t>(tag & 0xfff);
}

enum ControlKind : uint64_t {
  kLoss = 1,
  kSpeed = 2,
  kParams = 3,
  kTrace = 4,
};

uint64_t controlSlot(ControlKind kind, int64_t step, int part) {
  return (uint64_t(1) << 55) | (uint64_t(kind) << 48) |
         (static_cast<uint64_t>(step) << 8) | static_cast<uint64_t>(part);
}

double threadCpuSeconds() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

uint64_t fingerprint(const std::string &bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

class Worker {
public:
  Worker(const std::string &planPath, const proto::Plan &plan,
         const WorkerOptions &options)
      : planPath(planPath), plan(plan), options(options),
        program(plan.programs(options.rank)) {}

  int run();

private:
  [[noreturn]] void fatal(const std::string &message);
  bool prepare(std::string &error);
  bool connect(std::string &error);
  bool runStep(int64_t step, double &lossSum, std::string &error);
  /// The compute slot's stream for one step, on this thread or on a
  /// lower-priority one beside the receive and send threads.
  bool runComputeSlot(int64_t step, std::vector<MicroBatch> &batches,
                      std::vector<ValueTable> &values, double &lossSum,
                      std::string &error);
  bool runComputeThread(int64_t step, std::vector<MicroBatch> &batches,
                        std::vector<ValueTable> &values, double &lossSum,
                        std::string &error);
  bool receiveEntry(int64_t step, const StreamEntry &entry,
                    std::string &error);
  bool sendEntry(int64_t step, const StreamEntry &entry, std::string &error);
  /// Values used once per iteration (tied parameters, forward) and their
  /// summed gradients (backward), between any two stages: outside the
  /// streams, at the start and at the end of the iteration.
  bool postTied(int64_t step, std::string &error);
  bool waitTied(Phase phase, std::string &error);
  bool sendOnce(int64_t step, Phase phase, const ValueTable &table,
                std::string &error);
  bool syncGradients(
      const std::vector<std::pair<const ProgramOp *, cpu::Tensor *>> &grads,
      std::string &error);
  bool sendBlob(int peer, ControlKind kind, int64_t step,
                const std::string &blob, std::string &error);
  bool recvBlob(int peer, ControlKind kind, int64_t step, std::string &blob,
                std::string &error);
  /// A step rank 0 has finished but not printed (its losses may still be
  /// on the way).
  struct PendingStep {
    int64_t step = 0;
    double seconds = 0, simulatedSeconds = 0, total = 0;
    bool calibrated = false;
    std::vector<double> parts; // loss sums from the last stages
    std::vector<int> handles;
  };
  bool reportStep(int64_t step, double lossSum, double seconds,
                  std::string &error);
  bool printStep(PendingStep &pending, std::string &error);
  std::unique_ptr<PendingStep> reported;
  bool calibrate(std::string &error);
  bool checkpoint(int64_t step, std::string &error);
  bool resume(int64_t &step, std::string &error);
  bool finish(std::string &error);
  void record(int slot, const std::string &name, Clock::time_point start,
              Clock::time_point end);

  const std::string &planPath;
  const proto::Plan &plan;
  const WorkerOptions &options;
  const proto::DeviceProgram &program;
  StageProgram typed; ///< `program`, decoded
  std::unique_ptr<StageExecutor> executor;
  std::unique_ptr<Transport> transport;
  std::vector<LinkShape> linkShapes; // size x size when links are shaped
  DataSource data;

  int size = 1, microBatches = 1, pipelines = 1;
  std::map<std::string, int> rankOf;
  std::vector<std::string> names;
  std::vector<int> lastStageRanks;
  std::vector<StreamEntry> recvStream, computeStream, sendStream;
  std::vector<Transfer> receives, sends;
  /// Peers whose per-micro-batch values the executor moves itself (NCCL
  /// between GPUs): the transport carries none of them.
  std::set<int> devicePeers;
  bool onDevice(const Transfer &t) const {
    return !t.oncePerIteration && devicePeers.count(t.peerRank) > 0;
  }
  std::map<std::pair<Phase, int>, int> expectedReceives; // per (phase, mb)
  bool tiedForward = false, tiedBackward = false; // once-per-iteration recvs
  struct TiedReceive {
    Phase phase;
    int receive;
    int handle;
  };
  std::vector<TiedReceive> tiedPosted;
  Clock::time_point tiedPostedAt;
  /// Preallocated receive buffers: [receive][micro-batch].
  std::vector<std::vector<cpu::Tensor>> buffers;
  std::vector<InputSpec> inputs;
  uint64_t planHash = 0;

  // Step state shared by the three slots.
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::pair<Phase, int>, int> received;
  std::map<std::pair<Phase, int>, std::vector<std::pair<int, std::vector<char>>>>
      outbox; // computed values to send, by (phase, mb): (send, bytes)
  std::set<std::pair<Phase, int>> computed;
  std::map<int, cpu::Tensor> onceGradientSums; // by send index

  // Timing: compute seconds of the calibration steps; trace events.
  double calibrationFlops = 0, calibrationSeconds = 0;
  double simulatedSeconds = 0;
  bool calibrated = false;
  Clock::time_point epoch;
  std::mutex eventsMutex;
  std::vector<SimEvent> events;
  std::FILE *log = nullptr;
  int64_t firstStep = 1;
  int64_t groupIndex = -1; // this rank's data-parallel group, or -1
};

void Worker::fatal(const std::string &message) {
  std::fprintf(stderr, "dtfm-run: error: %s (rank %d): %s\n",
               program.device().c_str(), options.rank, message.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  // Leave at once: the peers notice the closed connections and stop too;
  // checkpoints are written with temp + rename, so none is half-written.
  std::_Exit(1);
}

bool Worker::prepare(std::string &error) {
  size = plan.programs_size();
  microBatches = static_cast<int>(std::max<int64_t>(1, plan.micro_batches()));
  std::set<int64_t> pipelineIds;
  int lastStage = 0;
  for (const proto::DeviceProgram &p : plan.programs())
    lastStage = std::max(lastStage, static_cast<int>(p.stage()));
  for (int r = 0; r < size; ++r) {
    const proto::DeviceProgram &p = plan.programs(r);
    if (rankOf.count(p.device())) {
      error = "device '" + p.device() + "' has two programs";
      return false;
    }
    rankOf[p.device()] = r;
    names.push_back(p.device());
    pipelineIds.insert(p.pipeline());
    if (p.stage() == lastStage)
      lastStageRanks.push_back(r);
  }
  pipelines = static_cast<int>(pipelineIds.size());
  {
    // Map fields serialise in any order unless asked not to.
    std::string bytes;
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    plan.SerializeToCodedStream(&coded);
    coded.Trim();
    planHash = fingerprint(bytes);
  }

  int stages = 0;
  for (const proto::DeviceProgram &p : plan.programs())
    stages = std::max(stages, static_cast<int>(p.stage()) + 1);
  format::Streams streams;
  if (!format::streamsFromProgram(program, microBatches, stages, streams,
                                  error))
    return false;
  recvStream = std::move(streams[0]);
  computeStream = std::move(streams[1]);
  sendStream = std::move(streams[2]);
  // Once-per-iteration values ride with F0 and with the last backward:
  // forwards and backwards must each run in micro-batch order.
  int nextF = 0, nextB = 0;
  for (const StreamEntry &e : computeStream) {
    int &next = e.phase == Phase::Forward ? nextF : nextB;
    if (e.microBatch != next) {
      error = "compute stream runs " + std::string(1, format::phaseLetter(e.phase)) +
              std::to_string(e.microBatch) + " out of micro-batch order";
      return false;
    }
    ++next;
  }
  if ((nextF != microBatches || nextB != microBatches) &&
      !(nextB == 0 && nextF == microBatches)) {
    error = "compute stream does not run every micro-batch once";
    return false;
  }
  for (const StreamEntry &e : recvStream)
    ++expectedReceives[{e.phase, e.microBatch}];

  if (!decodeProgram(program, typed, error))
    return false;
  for (const ProgramOp &op : typed.ops) {
    bool isSend = op.kind == OpKind::Send, isRecv = op.kind == OpKind::Recv;
    if (!isSend && !isRecv)
      continue;
    const OpAttrs &a = op.attrs;
    if (a.peerDevice.empty() || a.peerStage < 0 ||
        op.phase == OpPhase::Optimizer || !rankOf.count(a.peerDevice) ||
        (isSend ? op.operands.size() : op.results.size()) != 1) {
      error = std::string(opName(op.kind)) + " #" + std::to_string(op.index) +
              " lacks peer_device, peer, tag or dtfm.phase, or names an "
              "unknown device";
      return false;
    }
    Transfer t;
    t.op = op.index;
    t.phase = op.phase == OpPhase::Backward ? Phase::Backward : Phase::Forward;
    t.peerStage = static_cast<int>(a.peerStage);
    t.peerRank = rankOf[a.peerDevice];
    t.tag = a.tag;
    t.oncePerIteration = a.oncePerIteration;
    if (t.tag < 0 || t.tag > 0xfff) {
      error = std::string(opName(op.kind)) + " #" + std::to_string(op.index) +
              ": tag out of range";
      return false;
    }
    if (isSend) {
      t.value = op.operands[0];
      sends.push_back(t);
    } else {
      t.value = op.results[0].id;
      t.shape = op.results[0].shape;
      receives.push_back(t);
    }
  }
  auto byTag = [](const Transfer &a, const Transfer &b) { return a.tag < b.tag; };
  std::stable_sort(receives.begin(), receives.end(), byTag);
  std::stable_sort(sends.begin(), sends.end(), byTag);
  for (const Transfer &t : receives) {
    tiedForward |= t.oncePerIteration && t.phase == Phase::Forward;
    tiedBackward |= t.oncePerIteration && t.phase == Phase::Backward;
  }
  for (const Transfer &t : receives)
    buffers.push_back(std::vector<cpu::Tensor>(
        t.oncePerIteration ? 1 : microBatches, cpu::Tensor(t.shape)));

  executor = makeExecutor(options.backend, typed, options.rank,
                          options.planPrecisionMatmuls, error);
  if (!executor)
    return false;
  inputs = executor->inputs();
  int64_t vocabulary = 0;
  for (const proto::DeviceProgram &p : plan.programs()) {
    std::map<int64_t, int64_t> rows;
    for (const proto::PlanOp &op : p.ops()) {
      if (op.name() == "dtfm.param" && op.results_size() == 1 &&
          op.results(0).shape_size() == 2)
        rows[op.results(0).id()] = op.results(0).shape(0);
      if (op.name() == "dtfm.recv" && op.results_size() == 1 &&
          op.results(0).shape_size() == 2)
        rows[op.results(0).id()] = op.results(0).shape(0);
      if (op.name() == "dtfm.embedding" && op.operands_size() == 2 &&
          rows.count(op.operands(1)))
        vocabulary = rows[op.operands(1)];
    }
  }
  if (!data.open(options.tokensPath, options.inputsPath, options.seed,
                 vocabulary, error))
    return false;
  // Imported models carry their values in a weights file the plan names.
  std::map<std::string, cpu::Tensor> weights;
  auto named = plan.module_attrs().find("dtfm.weights");
  bool hasWeights = named != plan.module_attrs().end() &&
                    named->second.value_case() == proto::PlanAttr::kS;
  if (hasWeights && options.initPath.empty() &&
      !format::readTensorFile(named->second.s(), weights, error))
    return false;
  if (!(options.initPath.empty()
            ? executor->initialize(options.seed, error,
                                  hasWeights ? &weights : nullptr)
            : executor->loadParameters(options.initPath, error)))
    return false;

  SimInput input;
  SimResult result;
  if (!simulationInput(plan, input, error) || !simulate(input, result, error))
    return false;
  simulatedSeconds = result.iterationSeconds;
  return true;
}

bool Worker::connect(std::string &error) {
  if (size == 1)
    return true;
  TransportOptions t;
  t.rank = options.rank;
  t.names = names;
  t.storeDir = options.storeDir;
  t.rendezvous = options.rendezvous;
  t.timeout = options.timeout;
  if (options.shapeLinks) {
    planner::Cluster cluster;
    if (!clusterFromPlan(plan, cluster, error))
      return false;
    std::map<std::string, size_t> deviceIndex;
    for (size_t i = 0; i < cluster.devices.size(); ++i)
      deviceIndex[cluster.devices[i].name] = i;
    t.links.resize(static_cast<size_t>(size) * size);
    for (int a = 0; a < size; ++a)
      for (int b = 0; b < size; ++b) {
        if (a == b || !deviceIndex.count(names[a]) ||
            !deviceIndex.count(names[b]))
          continue;
        size_t i = deviceIndex[names[a]], j = deviceIndex[names[b]];
        t.links[a * size + b] = {cluster.latencySeconds(i, j),
                                 cluster.bandwidthGbps(i, j) * 1e9 / 8};
      }
  }
  // The data-parallel group of this stage (every member computes the same
  // list from the plan).
  for (const ProgramOp &op : typed.ops) {
    if (op.kind != OpKind::GradSync || op.attrs.group.empty())
      continue;
    std::vector<int> group;
    for (const std::string &device : op.attrs.group) {
      if (!rankOf.count(device)) {
        error = "gradient sync group names unknown device '" + device + "'";
        return false;
      }
      group.push_back(rankOf[device]);
    }
    if (group.size() > 1) {
      t.groups.push_back(group);
      groupIndex = 0;
    }
    break;
  }
  linkShapes = t.links;
  transport = Transport::connect(t, error);
  if (!transport)
    return false;
  // Device collectives for the gradients, unless links are shaped (then the
  // gradients pay the cluster's links through the transport's ring).
  if (!t.groups.empty() && !options.shapeLinks) {
    const std::vector<int> &group = t.groups[0];
    int position = static_cast<int>(
        std::find(group.begin(), group.end(), options.rank) - group.begin());
    std::string key = "group";
    for (int r : group)
      key += "." + std::to_string(r);
    auto share = [&](const std::string &name, std::string &value,
                     bool publish, std::string &e) {
      return publish ? transport->publish(key + "/" + name, value, e)
                     : transport->lookup(key + "/" + name, value, e);
    };
    if (!executor->connectGroup(group, position, share, error))
      return false;
  }
  // Pipeline links between devices (same condition).
  if (!options.shapeLinks) {
    std::map<int, int> linkOps;
    for (const std::vector<Transfer> *list : {&sends, &receives})
      for (const Transfer &t : *list)
        if (!t.oncePerIteration)
          linkOps[t.op] = t.peerRank;
    auto share = [&](const std::string &name, std::string &value,
                     bool publish, std::string &e) {
      return publish ? transport->publish("links/" + name, value, e)
                     : transport->lookup("links/" + name, value, e);
    };
    if (!executor->connectPeers(options.rank, linkOps, share, devicePeers,
                                error))
      return false;
  }
  std::vector<int> peers = {0};
  for (const Transfer &s : sends)
    peers.push_back(s.peerRank);
  for (const std::vector<int> &group : t.groups)
    peers.insert(peers.end(), group.begin(), group.end());
  transport->openLinks(peers);
  return true;
}

void Worker::record(int slot, const std::string &name, Clock::time_point start,
                    Clock::time_point end) {
  if (options.tracePath.empty())
    return;
  std::lock_guard<std::mutex> lock(eventsMutex);
  events.push_back({program.device(), slot, name,
                    std::chrono::duration<double>(start - epoch).count(),
                    std::chrono::duration<double>(end - epoch).count()});
}

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
    size_t link = static_cast<size_t>(t.peerRank) * size + options.rank;
    if (link < linkShapes.size() && linkShapes[link].bytesPerSecond > 0)
      serialise += buffer.data.size() * 4.0 / linkShapes[link].bytesPerSecond;
    if (!transport->recv(t.peerRank,
                         dataSlot(step, t.phase, entry.microBatch,
                                  microBatches, t.tag),
                         buffer.data.data(), buffer.data.size() * 4, error))
      return false;
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
  record(0, std::string(1, format::phaseLetter(entry.phase)) + std::to_string(entry.microBatch) +
                "<" + from,
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
         transport->postRecv(t.peerRank,
                             dataSlot(step, t.phase, carrier, microBatches,
                                      t.tag),
                             buffers[i][0].data.data(),
                             buffers[i][0].data.size() * 4)});
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
    record(0, std::string(phase == Phase::Forward ? "tied<" : "tied grad<") + from,
           tiedPostedAt, Clock::now());
  return true;
}

bool Worker::sendOnce(int64_t step, Phase phase, const ValueTable &table,
                      std::string &error) {
  for (size_t i = 0; i < sends.size(); ++i) {
    const Transfer &t = sends[i];
    if (t.phase != phase || !t.oncePerIteration)
      continue;
    const cpu::Tensor &payload =
        phase == Phase::Forward ? table.at(t.value) : onceGradientSums.at(static_cast<int>(i));
    const char *raw = reinterpret_cast<const char *>(payload.data.data());
    int carrier = phase == Phase::Forward ? 0 : microBatches - 1;
    if (!transport->send(t.peerRank,
                         dataSlot(step, phase, carrier, microBatches, t.tag),
                         std::vector<char>(raw, raw + payload.data.size() * 4),
                         error))
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
    if (!transport->send(t.peerRank,
                         dataSlot(step, t.phase, entry.microBatch,
                                  microBatches, t.tag),
                         std::move(bytes), error, &left))
      return false;
    leaves = std::max(leaves, left);
  }
  // The send slot is busy while its messages leave (the simulator's model).
  std::this_thread::sleep_until(leaves);
  if (!to.empty())
    record(2, std::string(1, format::phaseLetter(entry.phase)) + std::to_string(entry.microBatch) +
                  ">" + to,
           start, leaves);
  return true;
}

bool Worker::syncGradients(
    const std::vector<std::pair<const ProgramOp *, cpu::Tensor *>> &grads,
    std::string &error) {
  if (groupIndex < 0)
    return true; // a group of one: the identity
  size_t total = 0;
  for (const auto &[op, grad] : grads)
    total += grad->data.size();
  std::vector<float> bucket(total);
  size_t at = 0;
  for (const auto &[op, grad] : grads) {
    std::copy(grad->data.begin(), grad->data.end(), bucket.begin() + at);
    at += grad->data.size();
  }
  Clock::time_point start = Clock::now();
  if (!transport->allreduceSum(static_cast<int>(groupIndex), bucket.data(),
                               bucket.size(), error))
    return false;
  record(2, "grad sync", start, Clock::now());
  // Every member of a group has the same programs: the same group size.
  double members = static_cast<double>(grads.front().first->attrs.group.size());
  float scale = static_cast<float>(1.0 / std::max(1.0, members));
  at = 0;
  for (const auto &[op, grad] : grads) {
    for (float &x : grad->data)
      x = bucket[at++] * scale;
  }
  return true;
}

bool Worker::runStep(int64_t step, double &lossSum, std::string &error) {
  received.clear();
  outbox.clear();
  computed.clear();
  onceGradientSums.clear();
  lossSum = 0;

  std::vector<MicroBatch> batches(microBatches);
  if (!inputs.empty())
    for (int m = 0; m < microBatches; ++m) {
      int64_t index = (step - 1) * pipelines * microBatches +
                      program.pipeline() * microBatches + m;
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

  std::vector<ValueTable> values(microBatches);
  bool computed = overlapped ? runComputeThread(step, batches, values, lossSum,
                                                error)
                             : runComputeSlot(step, batches, values, lossSum,
                                              error);
  if (overlapped) {
    receiver.join();
    sender.join();
  }
  if (!computed)
    return false;
  Clock::time_point start = Clock::now();
  if (!executor->finishIteration(
          microBatches,
          [&](const auto &grads, std::string &e) {
            return syncGradients(grads, e);
          },
          error)) {
    if (error.rfind("gradient allreduce", 0) != 0)
      error = planPath + ": " + error;
    return false;
  }
  record(1, "optimizer", start, Clock::now());
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
    bool needsTied = entry.phase == Phase::Forward ? tiedForward
                                        : tiedBackward &&
                                              entry.microBatch ==
                                                  microBatches - 1;
    if (!overlapped) {
      for (const StreamEntry &r : recvStream)
        if (r.phase == entry.phase && r.microBatch == entry.microBatch &&
            !receiveEntry(step, r, error))
          return false;
    } else {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock, [&] {
        return received[key] == expectedReceives[key];
      });
    }
    // Tied values: waited for once, before the first forward and the last
    // backward.
    if (needsTied && (entry.phase == Phase::Backward || entry.microBatch == 0) &&
        !waitTied(entry.phase, error))
      return false;
    ValueTable &table = values[entry.microBatch];
    for (size_t i = 0; i < receives.size(); ++i) {
      const Transfer &t = receives[i];
      if (t.phase != entry.phase || onDevice(t))
        continue;
      if (!t.oncePerIteration)
        table[t.value] = buffers[i][entry.microBatch];
      else if (t.phase == Phase::Forward || entry.microBatch == microBatches - 1)
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
    record(1, std::string(1, format::phaseLetter(entry.phase)) + std::to_string(entry.microBatch),
           start, end);
    if (step - firstStep < options.calibrationSteps) {
      calibrationSeconds += threadCpuSeconds() - cpuStart;
      calibrationFlops += entry.phase == Phase::Forward ? program.forward_flops()
                                             : program.backward_flops();
    }

    std::vector<std::pair<int, std::vector<char>>> messages;
    for (size_t i = 0; i < sends.size(); ++i) {
      const Transfer &t = sends[i];
      if (t.phase != entry.phase || onDevice(t))
        continue;
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
      const char *raw = reinterpret_cast<const char *>(value.data.data());
      messages.emplace_back(
          static_cast<int>(i),
          std::vector<char>(raw, raw + value.data.size() * 4));
    }
    if (transport &&
        ((entry.phase == Phase::Forward && entry.microBatch == 0) ||
         (entry.phase == Phase::Backward && entry.microBatch == microBatches - 1)) &&
        !sendOnce(step, entry.phase, table, error))
      return false;
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

bool Worker::sendBlob(int peer, ControlKind kind, int64_t step,
                      const std::string &blob, std::string &error) {
  uint64_t length = blob.size();
  const char *raw = reinterpret_cast<const char *>(&length);
  if (!transport->send(peer, controlSlot(kind, step, 0),
                       std::vector<char>(raw, raw + 8), error, nullptr, true))
    return false;
  return length == 0 ||
         transport->send(peer, controlSlot(kind, step, 1),
                         std::vector<char>(blob.begin(), blob.end()), error,
                         nullptr, true);
}

bool Worker::recvBlob(int peer, ControlKind kind, int64_t step,
                      std::string &blob, std::string &error) {
  uint64_t length = 0;
  if (!transport->recv(peer, controlSlot(kind, step, 0), &length, 8, error))
    return false;
  if (length > (uint64_t(1) << 34)) {
    error = "implausible message from " + transport->describe(peer);
    return false;
  }
  blob.assign(length, '\0');
  return length == 0 || transport->recv(peer, controlSlot(kind, step, 1),
                                        blob.data(), length, error);
}

bool Worker::calibrate(std::string &error) {
  // Each worker's speed on a core of its own: compute FLOPs over the compute
  // thread's CPU time in the first steps (FusionLLM §3.5 profiles the same
  // way). Sharing of this machine's cores is modelled below.
  double speed = calibrationSeconds > 0 ? calibrationFlops / calibrationSeconds
                                        : 0;
  std::vector<double> speeds(size, 0);
  speeds[0] = speed;
  if (transport && options.rank != 0) {
    std::string blob(reinterpret_cast<const char *>(&speed), 8);
    return sendBlob(0, kSpeed, 0, blob, error);
  }
  for (int r = 1; r < size; ++r) {
    std::string blob;
    if (!recvBlob(r, kSpeed, 0, blob, error))
      return false;
    if (blob.size() == 8)
      std::memcpy(&speeds[r], blob.data(), 8);
  }
  SimInput input;
  if (!simulationInput(plan, input, error))
    return false;
  // Local workers time-share the machine's cores. Processor sharing, in the
  // mean: when the simulated iteration keeps A compute slots busy on
  // average and A exceeds the cores C, each runs at C / A of its speed;
  // solved as a damped fixed point (A depends on the speeds).
  double cores = options.storeDir.empty()
                     ? 0 // one worker per host (--rendezvous): no sharing
                     : std::max(1u, std::thread::hardware_concurrency());
  double share = 1;
  SimResult result;
  for (int round = 0; round < 30; ++round) {
    for (planner::Device &d : input.cluster.devices)
      for (int r = 0; r < size; ++r)
        if (names[r] == d.name && speeds[r] > 0) {
          d.peakFlops = speeds[r] * share;
          d.efficiency = 1;
        }
    result = SimResult();
    if (!simulate(input, result, error))
      return false;
    if (cores == 0 || result.iterationSeconds <= 0)
      break;
    double busy = 0;
    for (const auto &[device, seconds] : result.busySeconds)
      busy += seconds;
    double active = busy / result.iterationSeconds;
    double next = std::min(1.0, cores / std::max(active, 1e-9));
    if (std::abs(next - share) < 1e-3)
      break;
    share = 0.5 * (share + next);
  }
  simulatedSeconds = result.iterationSeconds;
  calibrated = true;
  return true;
}

bool Worker::reportStep(int64_t step, double lossSum, double seconds,
                        std::string &error) {
  bool last = std::find(lastStageRanks.begin(), lastStageRanks.end(),
                        options.rank) != lastStageRanks.end();
  if (options.rank != 0) {
    if (!last)
      return true;
    const char *raw = reinterpret_cast<const char *>(&lossSum);
    return transport->send(0, controlSlot(kLoss, step, 0),
                           std::vector<char>(raw, raw + 8), error, nullptr,
                           true);
  }
  // Rank 0 posts the receives of this step's losses and prints the step
  // before (whose losses are in by now): waiting here would hold the first
  // stage back from the next iteration.
  auto pending = std::make_unique<PendingStep>();
  pending->step = step;
  pending->seconds = seconds;
  pending->simulatedSeconds = simulatedSeconds;
  pending->calibrated = calibrated;
  pending->total = last ? lossSum : 0;
  pending->parts.assign(lastStageRanks.size(), 0);
  for (size_t i = 0; i < lastStageRanks.size(); ++i)
    if (lastStageRanks[i] != 0)
      pending->handles.push_back(transport->postRecv(
          lastStageRanks[i], controlSlot(kLoss, step, 0), &pending->parts[i],
          8));
  bool ok = !reported || printStep(*reported, error);
  reported = std::move(pending);
  return ok;
}

bool Worker::printStep(PendingStep &pending, std::string &error) {
  for (int handle : pending.handles)
    if (!transport->waitPosted(handle, error))
      return false;
  double total = pending.total;
  for (double part : pending.parts)
    total += part;
  int64_t step = pending.step;
  double seconds = pending.seconds;
  double loss = total / (pipelines * microBatches);
  // Tokens (or samples) and FLOPs of one iteration of the whole plan.
  double tokens = 0, flops = 0;
  bool tokenModel = false;
  for (const proto::DeviceProgram &p : plan.programs()) {
    flops += (p.forward_flops() + p.backward_flops()) * microBatches +
             p.optimizer_flops();
    if (p.stage() != 0)
      continue;
    for (const proto::PlanOp &op : p.ops())
      if (op.name() == "dtfm.input" && op.results_size() == 1) {
        const proto::PlanValue &v = op.results(0);
        tokenModel = v.dtype()[0] == 'i' && v.shape_size() == 2;
        tokens += (tokenModel ? v.shape(0) * v.shape(1)
                              : (v.shape_size() ? v.shape(0) : 1)) *
                  static_cast<double>(microBatches);
        break;
      }
  }
  double rate = seconds > 0 ? tokens / seconds : 0;
  double gflops = seconds > 0 ? flops / seconds / 1e9 : 0;
  char line[256];
  std::snprintf(line, sizeof line,
                "step %lld loss %.6f | %.0f %s | %.3f GFLOP/s | %.2f ms "
                "(simulated %.2f ms%s)",
                static_cast<long long>(step), loss, rate,
                tokenModel ? "tok/s" : "samples/s", gflops, seconds * 1e3,
                pending.simulatedSeconds * 1e3,
                pending.calibrated ? ", calibrated" : "");
  if (options.progressBar) {
    int width = 20;
    int done = static_cast<int>(width * step / std::max(1, options.steps));
    std::printf("\r[%s%s] %s", std::string(done, '#').c_str(),
                std::string(width - done, '.').c_str(), line);
    if (step == options.steps)
      std::printf("\n");
  } else {
    std::printf("%s\n", line);
  }
  std::fflush(stdout);
  if (log) {
    std::fprintf(log,
                 "{\"step\":%lld,\"loss\":%.9g,\"%s\":%.6g,\"gflops\":%.6g,"
                 "\"measured_s\":%.9g,\"simulated_s\":%.9g,"
                 "\"calibrated\":%s}\n",
                 static_cast<long long>(step), loss,
                 tokenModel ? "tokens_per_s" : "samples_per_s", rate, gflops,
                 seconds, pending.simulatedSeconds,
                 pending.calibrated ? "true" : "false");
    std::fflush(log);
  }
  return true;
}

std::string checkpointName(const std::string &device, int64_t step) {
  return device + ".step-" + std::to_string(step) + ".ckpt";
}

/// Steps of this device's complete checkpoints in `dir`, ascending.
std::vector<int64_t> checkpointSteps(const std::string &dir,
                                     const std::string &device) {
  std::vector<int64_t> steps;
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return steps;
  std::string prefix = device + ".step-";
  while (dirent *e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind(prefix, 0) != 0 || name.size() < prefix.size() + 6 ||
        name.substr(name.size() - 5) != ".ckpt")
      continue;
    std::string number =
        name.substr(prefix.size(), name.size() - prefix.size() - 5);
    if (number.empty() ||
        number.find_first_not_of("0123456789") != std::string::npos)
      continue;
    steps.push_back(std::atoll(number.c_str()));
  }
  ::closedir(d);
  std::sort(steps.begin(), steps.end());
  return steps;
}

bool Worker::checkpoint(int64_t step, std::string &error) {
  std::map<std::string, cpu::Tensor> state = executor->state();
  cpu::Tensor meta({5});
  meta.data[0] = static_cast<float>(step & 0xffffff);
  for (int i = 0; i < 4; ++i)
    meta.data[1 + i] = static_cast<float>((planHash >> (16 * i)) & 0xffff);
  state["meta/step-and-plan"] = meta;
  std::string path =
      options.checkpointDir + "/" + checkpointName(program.device(), step);
  if (!format::writeTensorFile(path, state, error))
    return false;
  // Older checkpoints go once every worker has this one; the one before
  // stays, in case a worker died between writing and this barrier.
  if (transport && !transport->barrier(error))
    return false;
  std::vector<int64_t> steps =
      checkpointSteps(options.checkpointDir, program.device());
  for (size_t i = 0; i + 2 < steps.size(); ++i)
    std::remove((options.checkpointDir + "/" +
                 checkpointName(program.device(), steps[i]))
                    .c_str());
  return true;
}

bool Worker::resume(int64_t &step, std::string &error) {
  step = 0;
  if (options.checkpointDir.empty())
    return true;
  std::vector<int64_t> steps =
      checkpointSteps(options.checkpointDir, program.device());
  int64_t latest = steps.empty() ? 0 : steps.back();
  if (transport && !transport->allreduceMin(latest, error))
    return false;
  if (latest == 0)
    return true;
  std::string path =
      options.checkpointDir + "/" + checkpointName(program.device(), latest);
  std::map<std::string, cpu::Tensor> state;
  if (!format::readTensorFile(path, state, error))
    return false;
  auto meta = state.find("meta/step-and-plan");
  bool samePlan = meta != state.end() && meta->second.numel() == 5;
  for (int i = 0; samePlan && i < 4; ++i)
    samePlan = static_cast<uint64_t>(meta->second.data[1 + i]) ==
               ((planHash >> (16 * i)) & 0xffff);
  if (!samePlan) {
    error = path + ": a checkpoint of another plan";
    return false;
  }
  state.erase(meta);
  if (!executor->restoreState(state, error)) {
    error = path + ": " + error;
    return false;
  }
  step = latest;
  return true;
}

bool Worker::finish(std::string &error) {
  // Parameters: pipeline 0 holds one copy of each; rank 0 writes them all.
  if (!options.savePath.empty()) {
    std::map<std::string, cpu::Tensor> all = executor->parameters();
    if (options.rank == 0) {
      for (int r = 1; r < size; ++r) {
        if (plan.programs(r).pipeline() != program.pipeline())
          continue;
        std::string blob;
        std::map<std::string, cpu::Tensor> part;
        if (!recvBlob(r, kParams, 0, blob, error))
          return false;
        std::string why;
        if (!format::decodeTensors(blob, transport->describe(r), part, why)) {
          error = "corrupt parameters from " + transport->describe(r) + " (" +
                  why + ")";
          return false;
        }
        all.insert(part.begin(), part.end());
      }
      if (!format::writeTensorFile(options.savePath, all, error))
        return false;
    } else if (program.pipeline() == plan.programs(0).pipeline()) {
      if (!sendBlob(0, kParams, 0, format::encodeTensors(all), error))
        return false;
    }
  }
  if (!options.tracePath.empty()) {
    auto encode = [&] {
      std::ostringstream os;
      os.precision(17);
      for (const SimEvent &e : events)
        os << e.slot << '\t' << e.start << '\t' << e.end << '\t' << e.name
           << '\n';
      return os.str();
    };
    if (options.rank != 0) {
      if (!sendBlob(0, kTrace, 0, encode(), error))
        return false;
    } else {
      SimResult result;
      result.events = events;
      for (int r = 1; r < size; ++r) {
        std::string blob;
        if (!recvBlob(r, kTrace, 0, blob, error))
          return false;
        std::istringstream in(blob);
        SimEvent e;
        e.device = names[r];
        while (in >> e.slot >> e.start >> e.end) {
          in.get();
          std::getline(in, e.name);
          result.events.push_back(e);
        }
      }
      std::string temp = options.tracePath + ".tmp";
      {
        std::ofstream out(temp, std::ios::binary);
        out << chromeTrace(result);
        if (!out) {
          error = "cannot write '" + options.tracePath + "'";
          return false;
        }
      }
      if (std::rename(temp.c_str(), options.tracePath.c_str()) != 0) {
        std::remove(temp.c_str());
        error = "cannot write '" + options.tracePath + "'";
        return false;
      }
    }
  }
  return !transport || transport->flush(error);
}

int Worker::run() {
  std::string error;
  if (!prepare(error))
    fatal(planPath + ": " + error);
  if (!connect(error))
    fatal(error);
  if (transport && !transport->barrier(error))
    fatal(error);
  epoch = Clock::now();
  int64_t done = 0;
  if (!resume(done, error))
    fatal(error);
  firstStep = done + 1;
  if (options.rank == 0) {
    if (done > 0)
      std::printf("resuming from the checkpoint of step %lld in %s\n",
                  static_cast<long long>(done), options.checkpointDir.c_str());
    if (!options.logPath.empty()) {
      log = std::fopen(options.logPath.c_str(), done > 0 ? "a" : "w");
      if (!log)
        fatal("cannot write the log '" + options.logPath + "'");
    }
  }
  for (int64_t step = firstStep; step <= options.steps; ++step) {
    Clock::time_point start = Clock::now();
    double lossSum = 0;
    if (!runStep(step, lossSum, error))
      fatal(error);
    if (!reportStep(step, lossSum,
                    std::chrono::duration<double>(Clock::now() - start).count(),
                    error))
      fatal(error);
    if (step - firstStep + 1 == options.calibrationSteps && !calibrate(error))
      fatal(error);
    bool due = !options.checkpointDir.empty() &&
               ((options.checkpointEvery > 0 &&
                 step % options.checkpointEvery == 0) ||
                step == options.steps);
    if (due && !checkpoint(step, error))
      fatal(error);
  }
  if (reported && !printStep(*reported, error))
    fatal(error);
  if (!finish(error))
    fatal(error);
  if (log)
    std::fclose(log);
  return 0;
}

} // namespace

int dtfm::runtime::runWorker(const std::string &planPath,
                             const proto::Plan &plan,
                             const WorkerOptions &options) {
  if (options.rank < 0 || options.rank >= plan.programs_size()) {
    std::fprintf(stderr,
                 "dtfm-run: error: --rank %d: the plan has %d device "
                 "programs\n",
                 options.rank, plan.programs_size());
    return 1;
  }
  Worker worker(planPath, plan, options);
  return worker.run();
}
