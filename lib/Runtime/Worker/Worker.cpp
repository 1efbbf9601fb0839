//===- Worker.cpp - One device of a plan, trained for real ----------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The worker's life: preparation (streams, transfers, the executor, data),
// connection (the transport, data-parallel groups, device links), the step
// loop and the end of the run. The slots are in Slots.cpp, the gradient
// sync in GradientSync.cpp, the calibration and the memory report in
// Measure.cpp, checkpoints and resumption in Resume.cpp; step lines in
// StepReport.cpp; checkpoint files in Checkpoints.cpp.
//
//===----------------------------------------------------------------------===//

#include "Messages.h"
#include "Worker/WorkerImpl.h"

#include "dtfm/Format/FileIo.h"
#include "dtfm/Format/HfWeights.h"
#include "dtfm/Format/PlanFile.h"
#include "dtfm/Plan/MemoryModel.h"
#include "dtfm/Plan/SimInput.h"
#include "dtfm/Runtime/Calibration.h"
#include "dtfm/Support/Hash.h"
#include "dtfm/Support/OpShapes.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include <malloc.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace dtfm;
using namespace dtfm::runtime;
using namespace dtfm::runtime::worker;

void Worker::fatal(const std::string &message) {
  std::fprintf(stderr, "dtfm-run: error: %s (rank %d): %s\n",
               program.device().c_str(), options.rank, message.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  // Leave at once: the peers notice the closed connections and stop too;
  // checkpoints are written with temp + rename, so none is half-written.
  std::_Exit(1);
}

/// Whether `weights` (read from `source`) are the parameters of the plan's
/// whole model, each with its whole shape: nothing missing, nothing else
/// (a file of another model, or of another naming, is refused rather than
/// half-loaded).
static bool checkWeightsOfModel(const proto::Plan &plan,
                                const format::TensorMap &weights,
                                const std::string &source,
                                std::string &error) {
  using shapes::shapeText;
  std::map<std::string, std::vector<int64_t>> model;
  for (const proto::DeviceProgram *p : format::distinctPrograms(plan)) {
    StageProgram decoded;
    if (!decodeProgram(plan, *p, decoded, error))
      return false;
    for (const ProgramOp &op : decoded.ops)
      if (op.kind == OpKind::Param)
        model.emplace(op.attrs.name, wholeShape(op));
  }
  for (const auto &[name, shape] : model) {
    auto it = weights.find(name);
    if (it == weights.end()) {
      error = source + ": no tensor '" + name + "', a parameter of model '" +
              plan.model() + "' of shape " + shapeText(shape) + " (the file has " +
              std::to_string(weights.size()) + " tensors)";
      return false;
    }
    if (it->second.shape != shape) {
      error = source + ": tensor '" + name + "' has shape " +
              shapeText(it->second.shape) + ", the model's parameter " +
              shapeText(shape);
      return false;
    }
  }
  for (const auto &[name, tensor] : weights)
    if (!model.count(name)) {
      error = source + ": tensor '" + name + "' is not a parameter of model '" +
              plan.model() + "' (weights of another model?)";
      return false;
    }
  return true;
}

/// Weights named as Hugging Face's GPT-2 or Llama renamed to the preset's
/// names (nothing to do for others).
static bool fromHuggingFaceNames(const std::string &source,
                                 format::TensorMap &weights,
                                 std::string &error) {
  if (!format::hasHuggingFaceNames(weights))
    return true;
  format::TensorMap renamed;
  if (!format::fromHuggingFace(weights, renamed, error)) {
    error = source + ": " + error;
    return false;
  }
  weights = std::move(renamed);
  return true;
}

/// The decoder's shape for Hugging Face's config: its sizes from the
/// weights, its heads, epsilon, rotary base, activation and sequence
/// length from the plan's ops.
static bool decoderShapeOfPlan(const proto::Plan &plan,
                               const format::TensorMap &weights,
                               format::DecoderShape &shape,
                               std::string &error) {
  if (!format::decoderShapeOf(weights, shape, error))
    return false;
  for (const proto::DeviceProgram *p : format::distinctPrograms(plan)) {
    StageProgram decoded;
    if (!decodeProgram(plan, *p, decoded, error))
      return false;
    // A tensor-parallel member's attention has its share of the heads.
    int64_t members = std::max(1, p->tp_group_size());
    for (const ProgramOp &op : decoded.ops) {
      if (op.kind == OpKind::CausalAttention) {
        shape.heads = op.attrs.numHeads * members;
        shape.kvHeads = op.attrs.keyValueHeads() * members;
      } else if (op.kind == OpKind::Rotary) {
        shape.ropeTheta = op.attrs.theta;
      } else if (op.kind == OpKind::LayerNorm || op.kind == OpKind::RmsNorm) {
        shape.normEpsilon = op.attrs.epsilon;
      } else if (op.kind == OpKind::Gelu) {
        shape.tanhGelu = op.attrs.tanhApproximation;
      } else if (op.kind == OpKind::Input && shape.llama &&
                 op.results.size() == 1 && op.results[0].shape.size() == 2) {
        shape.positions = op.results[0].shape[1];
      }
    }
  }
  return true;
}

bool Worker::prepare(std::string &error) {
  size = plan.programs_size();
  // The plan's shape was checked when it was read (format::checkPlanShape):
  // micro-batch counts within [1, kMaxMicroBatches], one per pipeline.
  microBatches = static_cast<int>(format::programMicroBatches(plan, program));
  layout = format::microBatchLayout(plan);
  int lastStage = format::stageCount(plan) - 1;
  for (int r = 0; r < size; ++r) {
    // Unique devices on a grid of stages x pipelines: checked when the
    // plan was read (format::checkPlanShape).
    const proto::DeviceProgram &p = plan.programs(r);
    rankOf[p.device()] = r;
    names.push_back(p.device());
    // A tensor-parallel group computes its loss on every member: its first
    // reports it.
    if (p.stage() == lastStage && p.tp_rank() == 0)
      lastStageRanks.push_back(r);
  }
  {
    std::string bytes; // deterministic: the same plan, the same hash
    if (!format::serializePlan(plan, /*text=*/false, bytes, error))
      return false;
    planHash = fnv1a(bytes);
  }

  format::Streams streams;
  if (!format::streamsFromProgram(plan, program, microBatches,
                                  format::stageCount(plan), streams, error))
    return false;
  recvStream = std::move(streams[0]);
  computeStream = std::move(streams[1]);
  sendStream = std::move(streams[2]);
  // Once-per-iteration values ride with F0 and with the last backward:
  // forwards and backwards must each run in micro-batch order (and the
  // weight-gradient halves, which sum the parameters' gradients in that
  // order as the unsplit backwards do).
  int nextF = 0, nextB = 0, nextW = 0;
  for (const StreamEntry &e : computeStream) {
    int &next = e.phase == Phase::Forward    ? nextF
                : e.phase == Phase::Backward ? nextB
                                             : nextW;
    if (e.microBatch != next) {
      error = "compute stream runs " +
              std::string(1, format::phaseLetter(e.phase)) +
              std::to_string(e.microBatch) + " out of micro-batch order";
      return false;
    }
    ++next;
  }
  if ((nextF != microBatches || nextB != microBatches ||
       (nextW != 0 && nextW != microBatches)) &&
      !(nextB == 0 && nextW == 0 && nextF == microBatches)) {
    error = "compute stream does not run every micro-batch once";
    return false;
  }
  lastPhase = nextW > 0 ? Phase::Weight : Phase::Backward;
  for (const StreamEntry &e : recvStream)
    ++expectedReceives[{e.phase, e.microBatch}];

  if (!decodeProgram(plan, program, typed, error))
    return false;
  if (!sync.prepare(typed, program.device(), error))
    return false;
  for (const ProgramOp &op : typed.ops) {
    bool isSend = op.kind == OpKind::Send, isRecv = op.kind == OpKind::Recv;
    if (!isSend && !isRecv)
      continue;
    const OpAttrs &a = op.attrs;
    if (op.phase == OpPhase::Weight) {
      error = std::string(opName(op.kind)) + " #" + std::to_string(op.index) +
              " in the weight-gradient phase (wgt), which moves nothing";
      return false;
    }
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
    t.phase = plan::streamPhaseOf(op.phase);
    t.peerStage = static_cast<int>(a.peerStage);
    t.peerRank = rankOf[a.peerDevice];
    t.tag = a.tag;
    t.oncePerIteration = a.oncePerIteration;
    t.wire = a.wire;
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
  auto byTag = [](const Transfer &a, const Transfer &b) {
    return a.tag < b.tag;
  };
  std::stable_sort(receives.begin(), receives.end(), byTag);
  std::stable_sort(sends.begin(), sends.end(), byTag);
  for (const Transfer &t : receives) {
    tiedForward |= t.oncePerIteration && t.phase == Phase::Forward;
    tiedBackward |= t.oncePerIteration && t.phase == Phase::Backward;
  }
  for (const Transfer &t : receives) {
    buffers.push_back(std::vector<cpu::Tensor>(
        t.oncePerIteration ? 1 : microBatches, cpu::Tensor(t.shape)));
    encodedBuffers.emplace_back(t.oncePerIteration ? 1 : microBatches);
  }

  executor = makeExecutor(options.backend, typed,
                          options.localRank >= 0 ? options.localRank
                                                 : options.rank,
                          options.gpu, error);
  if (!executor)
    return false;
  executor->setCheckFinite(options.checkFinite);
  deviceTimed = executor->takeComputeSeconds() >= 0;
  inputs = executor->inputs();
  int64_t vocabulary = 0, lossClasses = 0;
  for (const proto::DeviceProgram *p : format::distinctPrograms(plan)) {
    std::map<int64_t, int64_t> rows;
    for (const proto::PlanOp &op : format::sharedPart(plan, *p).ops()) {
      std::optional<OpKind> kind = opKindOf(op.name());
      if ((kind == OpKind::Param || kind == OpKind::Recv) &&
          op.results_size() == 1 && op.results(0).shape_size() == 2)
        rows[op.results(0).id()] = op.results(0).shape(0);
      if (kind == OpKind::Embedding && op.operands_size() == 2 &&
          rows.count(op.operands(1))) {
        // A vocabulary-parallel table holds one of vocab_shard row slices.
        auto shard = op.attrs().find("vocab_shard");
        int64_t slices = shard == op.attrs().end() ? 1 : shard->second.i();
        if (slices < 1 ||
            __builtin_mul_overflow(rows[op.operands(1)], slices, &vocabulary)) {
          error = p->device() + ": a dtfm.embedding with vocab_shard " +
                  std::to_string(slices);
          return false;
        }
      }
      // A padded vocabulary: its classes bound the tokens and labels.
      if (kind == OpKind::CrossEntropy) {
        auto classes = op.attrs().find("classes");
        if (classes != op.attrs().end() &&
            classes->second.value_case() == proto::PlanAttr::kI)
          lossClasses = classes->second.i();
      }
    }
  }
  if (lossClasses > 0 && (vocabulary == 0 || lossClasses < vocabulary))
    vocabulary = lossClasses;
  if (!data.open(options.data, options.seed, vocabulary, error))
    return false;
  samplesPerStep = static_cast<int64_t>(format::samplesPerStep(plan));
  microBatchRows = samplesPerStep / std::max<int64_t>(layout.total, 1);
  for (const InputSpec &spec : inputs)
    if (spec.isInteger && !spec.isBoolean && spec.shape.size() == 2 &&
        !data.checkWindows(spec.shape[1] + 1, error))
      return false;
  if (!options.valData.paths.empty()) {
    // The validation data: token windows read in order, the same every
    // time; forward passes that must not change the model.
    if (!iterationWork(plan).tokenModel) {
      error = "--val-data needs a token model (an integer input [batch, "
              "sequence] and its labels)";
      return false;
    }
    for (const ProgramOp &op : typed.ops)
      if (op.kind == OpKind::BatchNorm && !op.attrs.inference) {
        error = "--val-data: " + op.describe() +
                " normalises by its batch and updates its running statistics "
                "in every forward; validating such a model is not supported "
                "yet";
        return false;
      }
    DataOptions validationData = options.valData;
    validationData.order = DataOrder::Sequential;
    if (!validation.open(validationData, options.seed, vocabulary, error))
      return false;
    for (const InputSpec &spec : inputs)
      if (spec.isInteger && !spec.isBoolean && spec.shape.size() == 2 &&
          !validation.checkWindows(spec.shape[1] + 1, error))
        return false;
  }
  if (options.rank == 0 && !data.hasTokens() && options.data.inputsPath.empty())
    std::fprintf(stderr, "dtfm-run: note: no --data, --tokens or --inputs: "
                         "training on synthetic data drawn from the seed\n");
  // The schedule's length is the plan's: --steps only says where to stop.
  for (const ProgramOp &op : typed.ops) {
    if (op.kind != OpKind::SgdUpdate && op.kind != OpKind::AdamwUpdate)
      continue;
    const optim::LrSchedule &schedule = op.attrs.schedule;
    if (options.rank == 0 && schedule.kind != optim::LrScheduleKind::Constant &&
        options.steps > schedule.totalSteps)
      std::fprintf(stderr,
                   "dtfm-run: note: --steps %d runs past the plan's "
                   "learning-rate schedule (lr-schedule=%s, total-steps "
                   "%lld): from step %lld on the rate stays at min-lr %g\n",
                   options.steps, optim::lrScheduleName(schedule.kind),
                   static_cast<long long>(schedule.totalSteps),
                   static_cast<long long>(schedule.totalSteps + 1),
                   schedule.minLr);
    break;
  }
  // Imported models carry their values in a weights file the plan names.
  std::map<std::string, cpu::Tensor> weights;
  auto named = plan.module_attrs().find("dtfm.weights");
  bool hasWeights = named != plan.module_attrs().end() &&
                    named->second.value_case() == proto::PlanAttr::kS;
  if (hasWeights && options.initPath.empty() &&
      !format::readTensorFile(named->second.s(), weights, error))
    return false;
  if (options.initPath.empty()
          ? !executor->initialize(options.seed, error,
                                  hasWeights ? &weights : nullptr)
          : !format::readTensorFile(options.initPath, weights, error) ||
                !fromHuggingFaceNames(options.initPath, weights, error) ||
                !checkWeightsOfModel(plan, weights, options.initPath,
                                     error) ||
                !executor->loadParameters(weights, options.initPath, error))
    return false;

  // The iteration the plan predicts goes into the step log, which rank 0
  // writes: the other workers do not simulate the whole plan at their
  // start (at 1024 devices that was most of it).
  if (options.rank <= 0) {
    plan::SimInput input;
    plan::SimResult result;
    if (!plan::simulationInput(plan, input, error) ||
        !plan::simulate(input, result, error))
      return false;
    simulatedSeconds = result.iterationSeconds;
  }
  return true;
}

bool Worker::connect(std::string &error) {
  // Clipping: the model's squared gradient norm, summed over the world --
  // slot 0 for the gradients averaged over data-parallel groups, slot
  // 1 + p for pipeline p's own (setGradientClipping).
  if (double clip = plan::planClipGradNorm(plan); clip > 0)
    executor->setGradientClipping(
        clip, [this](double &shared, double &replica, std::string &e) {
          if (!transport)
            return true; // one worker: its sums are the world's
          std::vector<double> sums(layout.counts.size() + 1, 0.0);
          size_t own = static_cast<size_t>(program.pipeline()) + 1;
          sums[0] = shared;
          sums[own] = replica;
          if (!transport->allreduceWorldSum(sums, e)) {
            e = "gradient norm (clip-grad-norm): " + e;
            return false;
          }
          shared = sums[0];
          replica = sums[own];
          return true;
        });
  if (size == 1)
    return true;
  TransportOptions t;
  t.rank = options.rank;
  t.names = names;
  t.storeDir = options.storeDir;
  t.rendezvous = options.rendezvous;
  t.storeServedElsewhere = options.storeServedElsewhere;
  t.timeout = options.timeout;
  t.runId = options.runId;
  t.iface = options.iface;
  t.ifaceFrom = options.ifaceFrom;
  t.peersOnOtherHosts = options.peersOnOtherHosts;
  t.jobToken = options.jobToken;
  t.redisPassword = options.redisPassword;
  {
    // Ranks of another plan, seed or length never train together.
    char identity[96];
    std::snprintf(identity, sizeof identity, "plan %016llx seed %llu steps %d",
                  static_cast<unsigned long long>(planHash),
                  static_cast<unsigned long long>(options.seed),
                  options.steps);
    t.identity = identity;
  }
  if (options.shapeLinks) {
    planner::Cluster cluster;
    if (!planner::clusterFromPlan(plan, cluster, error))
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
        t.links[a * size + b] = {
            cluster.latencySeconds(i, j),
            planner::linkBytesPerSecond(cluster.bandwidthGbps(i, j))};
      }
  }
  // The data-parallel group of this stage (every member computes the same
  // list from the plan).
  int groupIndex = -1;
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
  // The tensor-parallel group (checked when the plan was read: devices of
  // the plan, the same list on every member), summed over on the compute
  // thread at each dtfm.tp_all_reduce.
  int tensorParallelGroup = -1;
  if (program.tp_group_size() > 1) {
    std::vector<int> group;
    for (const std::string &device : program.tp_group())
      group.push_back(rankOf.at(device));
    tensorParallelGroup = static_cast<int>(t.groups.size());
    t.groups.push_back(group);
  }
  linkShapes = t.links;
  transport = Transport::connect(t, error);
  if (!transport)
    return false;
  if (!transport->addressNotice().empty())
    std::fprintf(stderr, "dtfm-run: notice: %s: %s\n",
                 transport->describe(options.rank).c_str(),
                 transport->addressNotice().c_str());
  sync.connect(transport.get(), groupIndex, executor.get(),
               [this](const std::string &name, Clock::time_point start,
                      Clock::time_point end) { record(2, name, start, end); });
  if (tensorParallelGroup >= 0)
    executor->setTensorParallelSum(
        [this, tensorParallelGroup](float *data, size_t count, std::string &e) {
          if (transport->allreduceSum(tensorParallelGroup, data, count, e))
            return true;
          e = "tensor-parallel sum: " + e;
          return false;
        });
  // What an executor's own collectives negotiate through: the rendezvous
  // store under `scope` ("<prefix>.<ranks>" for a group).
  auto storeUnder = [this](const std::string &scope) {
    return [this, scope](const std::string &name, std::string &value,
                         bool publish, std::string &e) {
      return publish ? transport->publish(scope + "/" + name, value, e)
                     : transport->lookup(scope + "/" + name, value, e);
    };
  };
  auto groupScope = [](std::string prefix, const std::vector<int> &group) {
    for (int r : group)
      prefix += "." + std::to_string(r);
    return prefix;
  };
  // Device collectives for the gradients, unless links are shaped (then the
  // gradients pay the cluster's links through the transport's ring).
  if (groupIndex >= 0 && !options.shapeLinks) {
    const std::vector<int> &group = t.groups[groupIndex];
    int position = static_cast<int>(
        std::find(group.begin(), group.end(), options.rank) - group.begin());
    if (!executor->connectGroup(group, position,
                                storeUnder(groupScope("group", group)), error))
      return false;
  }
  // The tensor-parallel group's own collectives (same condition).
  if (tensorParallelGroup >= 0 && !options.shapeLinks) {
    const std::vector<int> &group = t.groups[tensorParallelGroup];
    if (!executor->connectTensorParallelGroup(
            group, static_cast<int>(program.tp_rank()),
            storeUnder(groupScope("tp", group)), error))
      return false;
  }
  // Pipeline links between devices (same condition).
  if (!options.shapeLinks) {
    std::map<int, int> linkOps;
    for (const std::vector<Transfer> *list : {&sends, &receives})
      for (const Transfer &t : *list)
        // A compressed value is encoded on the host.
        if (!t.oncePerIteration && t.wire == format::WireCodec::Dense)
          linkOps[t.op] = t.peerRank;
    if (!executor->connectPeers(options.rank, linkOps, storeUnder("links"),
                                devicePeers, error))
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

/// Rewrites the JSON step log at `path` (when there is one) without the
/// lines of steps after `last`, through a temporary file and a rename.
static bool keepLoggedSteps(const std::string &path, int64_t last,
                            std::string &error) {
  // Only a plain file is rewritten (never /dev/null or a pipe).
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return true;
  std::ifstream in(path);
  std::string kept, line;
  bool dropped = false;
  while (std::getline(in, line)) {
    std::optional<int64_t> step = loggedStep(line);
    if (step && *step > last) {
      dropped = true;
      continue;
    }
    kept += line + "\n";
  }
  return !dropped || format::writeFileAtomically(path, kept, error);
}

/// Where the log of a run that resumes after step `done` goes on from: the
/// tokens seen and the wall time of its last record, that step's (a log
/// that lacks it, or was not kept: the tokens of `done` steps of this
/// plan, the time unknown and counted from 0).
static LogStart logStart(const std::string &logPath, int64_t done,
                         const IterationWork &work) {
  LogStart start{done, work.tokens * done, 0};
  std::vector<LoggedStep> steps;
  bool incomplete = false;
  std::string ignored;
  if (done > 0 && !logPath.empty() &&
      readStepLog(logPath, steps, incomplete, ignored) && !steps.empty() &&
      steps.back().step == done) {
    if (std::isfinite(steps.back().seen))
      start.seen = steps.back().seen;
    if (std::isfinite(steps.back().elapsedSeconds))
      start.elapsedSeconds = steps.back().elapsedSeconds;
  }
  return start;
}

bool Worker::finish(std::string &error) {
  // Parameters: pipeline 0 holds one copy of each (a tensor-parallel
  // group's members a slice each); rank 0 writes them all, whole.
  if (!options.savePath.empty()) {
    std::map<std::string, cpu::Tensor> all;
    std::map<std::string, std::pair<int64_t, std::vector<cpu::Tensor>>> sliced;
    auto add = [&](const StageProgram &from,
                   std::map<std::string, cpu::Tensor> part) {
      for (const ProgramOp &op : from.ops) {
        auto it = part.find(op.attrs.name);
        if (op.kind != OpKind::Param || it == part.end() ||
            it->second.shape != op.results[0].shape)
          continue; // not this program's: left out, as before
        if (op.attrs.tpDim < 0) {
          all.emplace(it->first, std::move(it->second));
          continue;
        }
        auto &[dim, slices] = sliced[op.attrs.name];
        dim = op.attrs.tpDim;
        slices.resize(op.attrs.tpDegree);
        slices.at(tensorParallelRank(from)) = std::move(it->second);
      }
    };
    if (options.rank == 0) {
      add(typed, executor->parameters());
      for (int r = 1; r < size; ++r) {
        if (plan.programs(r).pipeline() != program.pipeline())
          continue;
        std::string blob;
        std::map<std::string, cpu::Tensor> part;
        if (!recvBlob(*transport, r, kParams, 0, blob, error))
          return false;
        std::string why;
        StageProgram from;
        if (!format::decodeTensors(blob, transport->describe(r), part, why) ||
            !decodeProgram(plan, plan.programs(r), from, why)) {
          error = "corrupt parameters from " + transport->describe(r) + " (" +
                  why + ")";
          return false;
        }
        add(from, std::move(part));
      }
      for (auto &[name, entry] : sliced) {
        auto &[dim, slices] = entry;
        for (const cpu::Tensor &slice : slices)
          if (slice.shape != slices.front().shape) {
            error = "parameter '" + name +
                    "': a tensor-parallel slice is "
                    "missing or of another shape";
            return false;
          }
        all[name] = joinSlices(slices, dim);
      }
      format::WeightMetadata metadata{{"dtfm.model", plan.model()}};
      if (options.saveHfNames) {
        format::DecoderShape shape;
        format::TensorMap named;
        if (!decoderShapeOfPlan(plan, all, shape, error) ||
            !format::toHuggingFace(all, shape, named, metadata, error)) {
          error = "--weight-names hf: " + error;
          return false;
        }
        all = std::move(named);
      }
      if (!format::writeSafetensorsFile(options.savePath, all,
                                        options.saveDtype, metadata, error))
        return false;
    } else if (program.pipeline() == plan.programs(0).pipeline()) {
      if (!sendBlob(*transport, 0, kParams, 0,
                    format::encodeTensors(executor->parameters()), error))
        return false;
    }
  }
  if (!options.memoryReportPath.empty() && !reportMemory(error))
    return false;
  if (!options.tracePath.empty()) {
    auto encode = [&] {
      std::ostringstream os;
      os.precision(17);
      for (const plan::SimEvent &e : events)
        os << e.slot << '\t' << e.start << '\t' << e.end << '\t' << e.name
           << '\n';
      return os.str();
    };
    if (options.rank != 0) {
      if (!sendBlob(*transport, 0, kTrace, 0, encode(), error))
        return false;
    } else {
      plan::SimResult result;
      result.events = events;
      for (int r = 1; r < size; ++r) {
        std::string blob;
        if (!recvBlob(*transport, r, kTrace, 0, blob, error))
          return false;
        std::istringstream in(blob);
        plan::SimEvent e;
        e.device = names[r];
        while (in >> e.slot >> e.start >> e.end) {
          in.get();
          std::getline(in, e.name);
          result.events.push_back(e);
        }
      }
      if (!format::writeFileAtomically(options.tracePath,
                                       plan::chromeTrace(result), error))
        return false;
    }
  }
  return !transport || transport->flush(error);
}

int Worker::run() {
  std::string error;
  // One job writes a checkpoint directory: a second is refused here, before
  // it waits for peers or touches a file.
  checkpointJob = options.checkpointJob.empty()
                      ? CheckpointClaim::freshJobId()
                      : options.checkpointJob;
  if (!options.checkpointDir.empty()) {
    checkpointClaim =
        CheckpointClaim::claim(options.checkpointDir, checkpointJob, error);
    if (!checkpointClaim)
      fatal(error);
  }
  if (!options.memoryReportPath.empty())
    markMemoryStart();
  if (!prepare(error))
    fatal(planPath + ": " + error);
  if (!connect(error))
    fatal(error);
  if (transport && !transport->barrier(error))
    fatal(error);
  epoch = Clock::now();
  int64_t done = 0;
  if (!options.checkpointDir.empty())
    checkpoints = std::make_unique<CheckpointStore>(
        options.checkpointDir, program.device(), planHash, checkpointJob);
  if (!resume(done, error))
    fatal(error);
  firstStep = done + 1;
  // Resumed while an exchange of local steps overlapped the steps: it is
  // applied at its step, as in the run that wrote the checkpoint.
  if (done > 0 && executor->outerParkedSince(done, outer.sentAfter))
    outer.active = true;
  if (options.evalOnly) { // no step: no log, no checkpoint
    double loss = 0;
    if (!evaluate(done, loss, error))
      fatal(error);
    if (options.rank == 0) {
      std::printf("validation of %s: loss %.6f (%d batches)\n",
                  options.initPath.c_str(), loss, options.evalBatches);
      std::fflush(stdout);
    }
    return 0;
  }
  if (options.rank == 0) {
    if (done > 0)
      std::printf("resuming from the checkpoint of step %lld in %s\n",
                  static_cast<long long>(done),
                  checkpoints && !checkpoints->steps().empty()
                      ? options.checkpointDir.c_str()
                      : options.resumeFrom.c_str());
    // Seen even if the run is killed before its first step line.
    std::fflush(stdout);
    if (!options.logPath.empty()) {
      // A resumed run goes on with the log of the run it resumes, less the
      // steps after the checkpoint: they are trained again, and the log is
      // the training's record, one line a step.
      if (done > 0 && !keepLoggedSteps(options.logPath, done, error))
        fatal(error);
      log = format::openLogFile(options.logPath, done > 0, error);
      if (!log)
        fatal("the training log: " + error);
    }
  }
  IterationWork work = iterationWork(plan);
  reporter = std::make_unique<StepReporter>(
      transport.get(), options.rank, lastStageRanks,
      static_cast<double>(layout.total), work, options.steps,
      options.progressBar, log,
      options.rank == 0 ? logStart(options.logPath, done, work)
                        : LogStart{});
  Clock::time_point trainingStart = Clock::now();
  // The checkpoint interval: --checkpoint-every, or tuned to --mtbf after
  // the first checkpoint.
  int64_t checkpointEvery = options.checkpointEvery;
  if (options.mtbfSeconds > 0 && checkpointEvery == 0)
    checkpointEvery = 1;
  bool intervalTuned = options.mtbfSeconds <= 0;
  double stepSeconds = 0;
  int64_t stepsTimed = 0;
  for (int64_t step = firstStep; step <= options.steps; ++step) {
    Clock::time_point start = Clock::now();
    double lossSum = 0;
    if (!runStep(step, lossSum, error))
      fatal(error);
    StepFigures figures;
    figures.step = step;
    figures.loss = lossSum;
    Clock::time_point end = Clock::now();
    figures.seconds = std::chrono::duration<double>(end - start).count();
    figures.elapsedSeconds =
        std::chrono::duration<double>(end - trainingStart).count();
    figures.simulatedSeconds = simulatedSeconds;
    figures.calibrated = calibrated;
    figures.sampleHash = stepSampleHash;
    figures.lr = executor->lastOptimizerStep().lr;
    figures.gradNorm = executor->lastOptimizerStep().gradNorm;
    if (!reporter->report(figures, error))
      fatal(error);
    double deviceSeconds = executor->takeComputeSeconds();
    if (deviceTimed && calibrating(step))
      calibrationSeconds += deviceSeconds;
    if (calibrating(step) && !calibrating(step + 1) && !calibrate(error))
      fatal(error);
    stepSeconds += figures.seconds;
    ++stepsTimed;
    if (!options.valData.paths.empty() &&
        ((options.evalEvery > 0 && step % options.evalEvery == 0) ||
         step == options.steps)) {
      double loss = 0;
      if (!evaluate(step, loss, error))
        fatal(error);
      if (options.rank == 0)
        reporter->validated(loss);
      if (!reporter->flush(error))
        fatal(error);
    }
    bool due = !options.checkpointDir.empty() &&
               ((checkpointEvery > 0 && step % checkpointEvery == 0) ||
                step == options.steps);
    Clock::time_point checkpointStart = Clock::now();
    // The step is logged before its checkpoint: a run that resumes from the
    // checkpoint starts after it, so a line still pending would be lost.
    if (due && (!reporter->flush(error) || !checkpoint(step, error)))
      fatal(error);
    if (due && !intervalTuned) {
      intervalTuned = true;
      double took = std::chrono::duration<double>(Clock::now() -
                                                  checkpointStart)
                        .count();
      if (!tuneCheckpointInterval(took, stepSeconds / stepsTimed,
                                  checkpointEvery, error))
        fatal(error);
    }
    if (due && !options.stopFile.empty() && step < options.steps) {
      int64_t goOn = ::access(options.stopFile.c_str(), F_OK) == 0 ? 0 : 1;
      if (transport && !transport->allreduceMin(goOn, error))
        fatal(error);
      if (goOn == 0) { // the step is logged: flushed before its checkpoint
        if (log)
          std::fclose(log);
        return kExitStoppedAtCheckpoint;
      }
    }
  }
  if (!reporter->flush(error))
    fatal(error);
  // An exchange still in flight at the last step: every replica waits for
  // it (the last checkpoint, if any, holds it unapplied).
  if (!parkOuterExchange(error))
    fatal(error);
  if (!finish(error))
    fatal(error);
  if (log)
    std::fclose(log);
  return 0;
}

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
  // Every step allocates the same tensors again. glibc serves large ones
  // with mmap and returns them to the kernel when freed, so each step paid
  // a page fault per page it wrote (about a tenth of a CPU step of the
  // tiny GPT); keep freed memory in the heap instead.
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20); // glibc's documented maximum
  ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // One arena: the compute thread is a new thread every step, and with an
  // arena per thread the memory one step freed sat in an arena the next
  // step's thread did not use -- the tiny GPT's workers peaked 1.5-2.7x
  // above what they hold (MemoryModel.h), growing with the steps; no
  // slower with one (the other threads allocate little).
  ::mallopt(M_ARENA_MAX, 1);
  // A worker the local launcher started dies with it (SIGKILL leaves the
  // launcher no chance to stop its workers): the launcher names itself in
  // the environment, and a worker whose parent is already gone leaves.
  if (const char *launcher = std::getenv(kLauncherPidVariable)) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (std::to_string(::getppid()) != launcher) {
      std::fprintf(stderr, "dtfm-run: error: rank %d: its launcher (pid %s) "
                           "is gone\n",
                   options.rank, launcher);
      return 1;
    }
  }
  Worker worker(planPath, plan, options);
  return worker.run();
}

double Worker::gradientScale() const {
  // Local steps: each replica steps on the mean of its own micro-batches.
  if (sync.syncEvery() >= 1)
    return 1.0 / static_cast<double>(microBatches);
  // Synchronous: the group averages (x 1/members), so members / total makes
  // the synced gradient the mean over the global batch, each replica
  // weighted by its share; with even replicas it is 1 / micro-batches.
  return sync.members() / static_cast<double>(layout.total);
}
