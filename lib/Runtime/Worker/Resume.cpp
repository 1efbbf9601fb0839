//===- Resume.cpp - The worker's checkpoints and resumption ---------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Each checkpoint generation (with the plan's samples per step, model
// name and data position), Daly's interval (--mtbf), resuming from the newest
// generation every worker can load, and resuming from another plan's generation
// (--resume-from: this program's state assembled from its members'
// shards). Checkpoint files themselves are Checkpoints.cpp's.
//
//===----------------------------------------------------------------------===//

#include "Messages.h"
#include "Worker/WorkerImpl.h"

#include "dtfm/Support/Hash.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

using namespace dtfm;
using namespace dtfm::runtime;
using namespace dtfm::runtime::worker;

/// What a generation records besides the state: the samples per step, and
/// the model by name (the entry's name ends with it).
static constexpr const char *kSamplesPerStepEntry = "meta/samples-per-step";
static constexpr const char *kModelEntryPrefix = "meta/model/";
/// The data position: the sample the next step starts at, and the data's
/// fingerprint (TokenShards::fingerprint; 0: synthetic data).
static constexpr const char *kDataPositionEntry = "meta/data-position";
static constexpr const char *kDataFingerprintEntry = "meta/data-fingerprint";

/// A 64-bit integer as four 16-bit pieces, each exact in a float
/// (checkpoint files hold f32 tensors).
static cpu::Tensor integerEntry(uint64_t value) {
  cpu::Tensor t({4});
  for (int i = 0; i < 4; ++i)
    t.data[i] = static_cast<float>((value >> (16 * i)) & 0xffff);
  return t;
}

/// An integerEntry of `state`: nullopt when absent (an older checkpoint),
/// false after an error when it is not four 16-bit pieces.
static bool readIntegerEntry(const format::TensorMap &state, const char *name,
                             std::optional<uint64_t> &value,
                             std::string &error) {
  value.reset();
  auto it = state.find(name);
  if (it == state.end())
    return true;
  uint64_t v = 0;
  bool valid = it->second.data.size() == 4;
  for (int i = 0; valid && i < 4; ++i) {
    float piece = it->second.data[i];
    valid = piece >= 0 && piece <= 65535 && piece == std::floor(piece);
    v |= valid ? static_cast<uint64_t>(piece) << (16 * i) : 0;
  }
  if (!valid) {
    error = std::string("its '") + name + "' is not a 64-bit integer";
    return false;
  }
  value = v;
  return true;
}

void Worker::continueData(int64_t step, std::optional<uint64_t> position,
                          std::optional<uint64_t> fingerprint) {
  dataStartStep = step + 1;
  // An older checkpoint: its data went on by the step.
  dataStartSample =
      position ? static_cast<int64_t>(*position) : step * samplesPerStep;
  uint64_t now = data.hasTokens() ? data.tokenShards().fingerprint() : 0;
  if (options.rank == 0 && fingerprint && *fingerprint != now)
    std::fprintf(stderr,
                 "dtfm-run: note: the checkpoint of step %lld trained on "
                 "other data (%s); this data goes on from sample %lld of its "
                 "own order\n",
                 static_cast<long long>(step),
                 *fingerprint == 0 ? "synthetic" : "other shards or dtypes",
                 static_cast<long long>(dataStartSample));
}

static void dropMeta(format::TensorMap &state) {
  for (auto it = state.begin(); it != state.end();)
    it = it->first.rfind("meta/", 0) == 0 ? state.erase(it) : std::next(it);
}

bool Worker::checkpoint(int64_t step, std::string &error) {
  // An exchange of local steps still in flight is waited for and held as
  // optimizer state (applied at its step as without the checkpoint).
  if (!parkOuterExchange(error))
    return false;
  format::TensorMap state = executor->state();
  state[kSamplesPerStepEntry] =
      cpu::Tensor({1}, static_cast<float>(format::samplesPerStep(plan)));
  state[kModelEntryPrefix + plan.model()] = cpu::Tensor({1}, 1.0f);
  state[kDataPositionEntry] = integerEntry(static_cast<uint64_t>(
      dataStartSample + (step - dataStartStep + 1) * samplesPerStep));
  state[kDataFingerprintEntry] =
      integerEntry(data.hasTokens() ? data.tokenShards().fingerprint() : 0);
  std::string manifest;
  if (!checkpoints->save(step, std::move(state), manifest, error))
    return false;
  // The commit: rank 0 gathers every worker's manifest line and sends the
  // record back; each worker writes it where its files are.
  std::vector<std::string> entries = {program.device() + " " + manifest};
  std::string record;
  if (transport && options.rank != 0) {
    if (!sendBlob(*transport, 0, kCommit, step, entries[0], error) ||
        !recvBlob(*transport, 0, kCommit, step, record, error))
      return false;
  } else {
    for (int r = 1; transport && r < transport->size(); ++r)
      if (!recvBlob(*transport, r, kCommit, step, entries.emplace_back(),
                    error))
        return false;
    if (!CheckpointStore::commitRecord(step, checkpointJob, entries, record,
                                       error))
      return false;
    for (int r = 1; transport && r < transport->size(); ++r)
      if (!sendBlob(*transport, r, kCommit, step, record, error))
        return false;
  }
  if (!checkpoints->commit(step, record, error))
    return false;
  // Older checkpoints go once every worker has committed this one; the one
  // before stays, in case a worker died between committing and this
  // barrier.
  if (transport && !transport->barrier(error))
    return false;
  checkpoints->prune(2);
  return true;
}

bool Worker::tuneCheckpointInterval(double checkpointSeconds,
                                    double stepSeconds, int64_t &every,
                                    std::string &error) {
  // The slowest worker's figures (microseconds; a max as a min of
  // negatives).
  int64_t negativeCheckpoint = -static_cast<int64_t>(checkpointSeconds * 1e6);
  int64_t negativeStep = -static_cast<int64_t>(stepSeconds * 1e6);
  if (transport && (!transport->allreduceMin(negativeCheckpoint, error) ||
                    !transport->allreduceMin(negativeStep, error)))
    return false;
  double took = -negativeCheckpoint / 1e6;
  double step = std::max(-negativeStep / 1e6, 1e-6);
  double interval = dalyCheckpointInterval(took, options.mtbfSeconds);
  every = std::clamp<int64_t>(std::llround(interval / step), 1,
                              std::max(options.steps, 1));
  if (options.rank == 0)
    std::printf("checkpoint every %lld steps (Daly's interval %.3g s: a "
                "checkpoint takes %.3g s, a step %.3g s, --mtbf %.6g s)\n",
                static_cast<long long>(every), interval, took, step,
                options.mtbfSeconds);
  return true;
}

bool Worker::resume(int64_t &step, std::string &error) {
  step = 0;
  if (!checkpoints)
    return options.resumeFrom.empty() || resumeFromOtherPlan(step, error);
  std::vector<int64_t> steps = checkpoints->steps();
  // A fresh start only when no worker has a complete generation: files of
  // a first checkpoint that was never committed (a kill, a full disk) are
  // removed, and nothing is lost.
  int64_t noneHere = checkpoints->completeSteps().empty() ? 1 : 0;
  if (transport && !transport->allreduceMin(noneHere, error))
    return false;
  if (noneHere == 1) {
    if (!steps.empty()) {
      std::fprintf(stderr,
                   "dtfm-run: %s: removing the files of a checkpoint that "
                   "was never committed (step %lld); training from the "
                   "start\n",
                   program.device().c_str(),
                   static_cast<long long>(steps.back()));
      checkpoints->prune(SIZE_MAX, 0);
    }
    return options.resumeFrom.empty() || resumeFromOtherPlan(step, error);
  }
  std::map<int64_t, std::string> why;
  format::TensorMap state;
  auto load = [&](int64_t candidate, std::string &problem) {
    return checkpoints->load(candidate, state, problem);
  };
  int64_t agreed = 0;
  if (!agreeOnGeneration(steps, load, agreed, why, error))
    return false;
  if (agreed == 0) {
    std::string mine =
        steps.empty() ? "this worker has none"
        : why.count(steps.back())
            ? why[steps.back()]
            : "this worker's newest, step " + std::to_string(steps.back()) +
                  ", is valid";
    error = "no checkpoint generation in " + options.checkpointDir +
            " is complete and valid on every worker (" + mine +
            "); refusing to start over: move the directory away to train "
            "from the beginning";
    return false;
  }
  // Newer generations are unusable: say why once, and remove them.
  if (!steps.empty() && steps.back() > agreed) {
    int64_t newest = steps.back();
    std::string reason = why.count(newest)
                             ? why[newest]
                             : "incomplete or invalid on another worker";
    std::fprintf(stderr,
                 "dtfm-run: %s: not resuming from step %lld: %s; falling back "
                 "to step %lld\n",
                 program.device().c_str(), static_cast<long long>(newest),
                 reason.c_str(), static_cast<long long>(agreed));
    checkpoints->prune(SIZE_MAX, agreed);
  }
  std::optional<uint64_t> position, fingerprint;
  if (!readIntegerEntry(state, kDataPositionEntry, position, error) ||
      !readIntegerEntry(state, kDataFingerprintEntry, fingerprint, error)) {
    error = checkpoints->path(agreed) + ": " + error;
    return false;
  }
  dropMeta(state);
  if (!executor->restoreState(state, error)) {
    error = checkpoints->path(agreed) + ": " + error;
    return false;
  }
  step = agreed;
  continueData(step, position, fingerprint);
  return true;
}

bool Worker::agreeOnGeneration(
    const std::vector<int64_t> &steps,
    const std::function<bool(int64_t, std::string &)> &load, int64_t &agreed,
    std::map<int64_t, std::string> &why, std::string &error) {
  // Each generation is loaded once; `why` keeps what is wrong with it.
  int64_t loaded = -1;
  auto valid = [&](int64_t candidate) {
    if (candidate == loaded)
      return true;
    if (why.count(candidate))
      return false;
    std::string problem;
    if (!load(candidate, problem)) {
      why[candidate] = problem;
      return false;
    }
    loaded = candidate;
    return true;
  };
  auto newestValidUpTo = [&](int64_t bound) -> int64_t {
    for (auto it = steps.rbegin(); it != steps.rend(); ++it)
      if (*it <= bound && valid(*it))
        return *it;
    return 0;
  };
  // Each worker offers its newest valid one up to the agreed bound until
  // all have the minimum (the bound falls every round, so this ends, at 0
  // at worst).
  agreed = newestValidUpTo(INT64_MAX);
  for (;;) {
    if (transport && !transport->allreduceMin(agreed, error))
      return false;
    int64_t everyone = agreed == 0 || valid(agreed) ? 1 : 0;
    if (transport && !transport->allreduceMin(everyone, error))
      return false;
    if (everyone == 1)
      break;
    agreed = newestValidUpTo(agreed - 1);
  }
  // The caller's state holds the agreed one: loaded last, or again.
  if (agreed > 0 && loaded != agreed) {
    why.erase(agreed);
    if (!valid(agreed)) {
      error = why[agreed];
      return false;
    }
  }
  return true;
}

bool Worker::resumeFromOtherPlan(int64_t &step, std::string &error) {
  std::vector<Generation> generations = listGenerations(options.resumeFrom);
  std::map<int64_t, const Generation *> byStep;
  std::vector<int64_t> steps;
  for (const Generation &g : generations) {
    byStep[g.step] = &g;
    steps.insert(steps.begin(), g.step); // ascending
  }
  std::map<std::string, std::vector<int64_t>> parameters;
  for (const ProgramOp &op : typed.ops)
    if (op.kind == OpKind::Param)
      parameters[op.attrs.name] = op.results[0].shape;
  std::map<std::string, ElementRange> shards = shardedParameters(typed);
  double samples = format::samplesPerStep(plan);
  std::map<int64_t, std::string> why;
  format::TensorMap state;
  // The loaded generation's data position (the last load is the agreed one).
  std::optional<uint64_t> position, fingerprint;
  double recordedSamples = samples;
  auto load = [&](int64_t candidate, std::string &problem) {
    std::vector<format::TensorMap> files;
    if (!loadGeneration(options.resumeFrom, *byStep.at(candidate), files,
                        problem))
      return false;
    for (const format::TensorMap &file : files) {
      auto model = file.lower_bound(kModelEntryPrefix);
      if (model != file.end() && model->first.rfind(kModelEntryPrefix, 0) == 0 &&
          model->first != kModelEntryPrefix + plan.model()) {
        problem = "step " + std::to_string(candidate) +
                  " is a checkpoint of model '" +
                  model->first.substr(std::strlen(kModelEntryPrefix)) +
                  "', not of this plan's '" + plan.model() + "'";
        return false;
      }
      if (!readIntegerEntry(file, kDataPositionEntry, position, problem) ||
          !readIntegerEntry(file, kDataFingerprintEntry, fingerprint,
                            problem)) {
        problem = "step " + std::to_string(candidate) + ": " + problem;
        return false;
      }
      // With its data position recorded, a checkpoint goes on with another
      // number of samples per step (a batch-size ramp) from that sample.
      auto recorded = file.find(kSamplesPerStepEntry);
      if (recorded != file.end() && recorded->second.numel() == 1)
        recordedSamples = recorded->second.data[0];
      if (!position && recorded != file.end() &&
          recorded->second.numel() == 1 &&
          recorded->second.data[0] != static_cast<float>(samples)) {
        char line[160];
        std::snprintf(line, sizeof line,
                      "step %lld trained %.0f samples per step and this plan "
                      "trains %.0f: the data would not continue where it "
                      "stopped",
                      static_cast<long long>(candidate),
                      recorded->second.data[0], samples);
        problem = line;
        return false;
      }
    }
    if (!assembleState(files, parameters, shards, tensorParallelSlices(typed),
                       state, problem)) {
      problem = "step " + std::to_string(candidate) + ": " + problem;
      return false;
    }
    return true;
  };
  int64_t agreed = 0;
  if (!agreeOnGeneration(steps, load, agreed, why, error)) {
    error = "--resume-from " + options.resumeFrom + ": " + error;
    return false;
  }
  if (agreed == 0) {
    error = "--resume-from " + options.resumeFrom + ": " +
            (steps.empty() ? std::string("no checkpoint generation there")
             : why.count(steps.back())
                 ? why[steps.back()]
                 : "no generation is complete and valid for every worker of "
                   "this plan");
    return false;
  }
  if (!executor->restoreState(state, error)) {
    error = "--resume-from " + options.resumeFrom + ", step " +
            std::to_string(agreed) + ": " + error;
    return false;
  }
  step = agreed;
  if (options.rank == 0 && recordedSamples != static_cast<float>(samples))
    std::printf("the checkpoint trained %.0f samples per step and this plan "
                "trains %.0f: the data goes on from sample %llu\n",
                recordedSamples, samples,
                static_cast<unsigned long long>(position.value_or(0)));
  continueData(step, position, fingerprint);
  return true;
}
