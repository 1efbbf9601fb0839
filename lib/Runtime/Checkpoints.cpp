//===- Checkpoints.cpp - A worker's checkpoint generations ----------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Checkpoints.h"

#include "dtfm/Support/Hash.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <map>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace dtfm::runtime;
using dtfm::format::Tensor;
namespace format = dtfm::format;

std::string CheckpointStore::path(int64_t step) const {
  return dir + "/" + device + ".step-" + std::to_string(step) + ".ckpt";
}

std::string CheckpointStore::manifestPath(int64_t step) const {
  return dir + "/" + device + ".step-" + std::to_string(step) + ".manifest";
}

std::vector<int64_t> CheckpointStore::steps() const {
  std::vector<int64_t> found;
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return found;
  std::string prefix = device + ".step-";
  while (dirent *e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind(prefix, 0) != 0)
      continue;
    std::string rest = name.substr(prefix.size());
    size_t dot = rest.find('.');
    if (dot == std::string::npos ||
        (rest.substr(dot) != ".ckpt" && rest.substr(dot) != ".manifest"))
      continue;
    std::string number = rest.substr(0, dot);
    if (number.empty() || number.size() > 18 ||
        number.find_first_not_of("0123456789") != std::string::npos)
      continue;
    found.push_back(std::atoll(number.c_str()));
  }
  ::closedir(d);
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  return found;
}

std::optional<uint64_t>
CheckpointStore::recordedPlanHash(const format::TensorMap &state) {
  auto meta = state.find(kMetaEntry);
  if (meta == state.end() || meta->second.numel() != 5)
    return std::nullopt;
  uint64_t hash = 0;
  for (int i = 0; i < 4; ++i) {
    float part = meta->second.data[1 + i];
    // Checked before the conversion: a NaN or out-of-range float has no
    // integer value.
    if (!(part >= 0 && part < 65536) || part != std::floor(part))
      return std::nullopt;
    hash |= static_cast<uint64_t>(part) << (16 * i);
  }
  return hash;
}

namespace {

/// What a manifest line says. Version 1 (before commit records) has no job.
struct ManifestLine {
  int version = 0;
  int64_t step = 0;
  uint64_t plan = 0, bytes = 0, fnv = 0, job = 0;
};

std::string manifestText(const ManifestLine &m) {
  char line[200];
  if (m.version == 1)
    std::snprintf(line, sizeof line,
                  "dtfm-checkpoint 1 step %" PRId64 " plan %016" PRIx64
                  " bytes %" PRIu64 " fnv1a %016" PRIx64 "\n",
                  m.step, m.plan, m.bytes, m.fnv);
  else
    std::snprintf(line, sizeof line,
                  "dtfm-checkpoint 2 step %" PRId64 " plan %016" PRIx64
                  " bytes %" PRIu64 " fnv1a %016" PRIx64 " job %016" PRIx64
                  "\n",
                  m.step, m.plan, m.bytes, m.fnv, m.job);
  return line;
}

/// A manifest line in its one spelling (what manifestText writes back).
std::optional<ManifestLine> parseManifest(const std::string &text) {
  ManifestLine m;
  long long step = 0;
  unsigned long long plan = 0, bytes = 0, fnv = 0, job = 0;
  if (std::sscanf(text.c_str(),
                  "dtfm-checkpoint 2 step %lld plan %llx bytes %llu fnv1a "
                  "%llx job %llx",
                  &step, &plan, &bytes, &fnv, &job) == 5)
    m.version = 2;
  else if (std::sscanf(text.c_str(),
                       "dtfm-checkpoint 1 step %lld plan %llx bytes %llu "
                       "fnv1a %llx",
                       &step, &plan, &bytes, &fnv) == 4)
    m.version = 1;
  else
    return std::nullopt;
  m.step = step;
  m.plan = plan;
  m.bytes = bytes;
  m.fnv = fnv;
  m.job = job;
  if (step < 0 || manifestText(m) != text)
    return std::nullopt;
  return m;
}

/// One file a commit record lists.
struct CommitEntry {
  uint64_t plan = 0, bytes = 0, fnv = 0;
};

/// A commit record: the generation's step and job, and its files by device.
struct Commit {
  int64_t step = 0;
  uint64_t job = 0;
  std::map<std::string, CommitEntry> files;
};

/// The largest commit record read (4096 devices take under 1 MiB).
constexpr uint64_t kMaxCommitBytes = uint64_t(16) << 20;

std::optional<Commit> parseCommit(const std::string &text) {
  Commit commit;
  size_t at = 0;
  bool header = false;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos)
      return std::nullopt; // every line ends: a cut record is no record
    std::string line = text.substr(at, end - at);
    at = end + 1;
    long long step = 0;
    unsigned long long job = 0, plan = 0, bytes = 0, fnv = 0;
    char device[160] = {0};
    if (!header) {
      if (std::sscanf(line.c_str(), "dtfm-commit 1 step %lld job %llx",
                      &step, &job) != 2 ||
          step < 0)
        return std::nullopt;
      commit.step = step;
      commit.job = job;
      header = true;
      continue;
    }
    if (std::sscanf(line.c_str(),
                    "file %159s plan %llx bytes %llu fnv1a %llx", device,
                    &plan, &bytes, &fnv) != 4 ||
        !format::isFileSafeDeviceName(device) ||
        !commit.files.emplace(device, CommitEntry{plan, bytes, fnv}).second)
      return std::nullopt;
  }
  if (!header || commit.files.empty())
    return std::nullopt;
  return commit;
}

std::optional<Commit> readCommit(const std::string &dir, int64_t step,
                                 std::string &error) {
  std::string path = CheckpointStore::commitPath(dir, step), text;
  if (::access(path.c_str(), F_OK) != 0) {
    error = path + ": missing (the generation of step " +
            std::to_string(step) + " was never committed)";
    return std::nullopt;
  }
  if (!format::readWholeFile(path, text, error, kMaxCommitBytes))
    return std::nullopt;
  std::optional<Commit> commit = parseCommit(text);
  if (!commit || commit->step != step) {
    error = path + ": not the commit record of step " + std::to_string(step);
    return std::nullopt;
  }
  return commit;
}

/// The manifest at `path` ("" when there is none), bounded.
std::optional<ManifestLine> readManifest(const std::string &path) {
  std::string text, error;
  if (!format::readWholeFile(path, text, error, 4096))
    return std::nullopt;
  return parseManifest(text);
}

} // namespace

std::string CheckpointStore::commitPath(const std::string &dir,
                                        int64_t step) {
  return dir + "/step-" + std::to_string(step) + ".commit";
}

std::string CheckpointStore::manifest(int64_t step,
                                      const std::string &bytes) const {
  ManifestLine m;
  m.version = 2;
  m.step = step;
  m.plan = planHash;
  m.bytes = bytes.size();
  m.fnv = fnv1a(bytes);
  m.job = fnv1a(job);
  return manifestText(m);
}

bool CheckpointStore::save(int64_t step, format::TensorMap state,
                           std::string &manifestLine,
                           std::string &error) const {
  Tensor meta({5});
  meta.data[0] = static_cast<float>(step & 0xffffff);
  for (int i = 0; i < 4; ++i)
    meta.data[1 + i] = static_cast<float>((planHash >> (16 * i)) & 0xffff);
  state[kMetaEntry] = meta;
  std::string bytes = format::encodeTensors(state);
  manifestLine = manifest(step, bytes);
  // Durable, the manifest last: both are on disk before the generation is
  // committed, and before an older one is pruned.
  return format::writeFileAtomically(path(step), bytes, error,
                                     /*durable=*/true) &&
         format::writeFileAtomically(manifestPath(step), manifestLine, error,
                                     /*durable=*/true);
}

bool CheckpointStore::commitRecord(int64_t step, const std::string &job,
                                   const std::vector<std::string> &entries,
                                   std::string &record, std::string &error) {
  std::map<std::string, ManifestLine> files;
  for (const std::string &entry : entries) {
    size_t space = entry.find(' ');
    std::string device = entry.substr(0, space);
    std::optional<ManifestLine> m =
        space == std::string::npos ? std::nullopt
                                   : parseManifest(entry.substr(space + 1));
    if (!m || m->version != 2 || m->step != step ||
        m->job != fnv1a(job) || !format::isFileSafeDeviceName(device) ||
        !files.emplace(device, *m).second) {
      error = "step " + std::to_string(step) +
              ": a worker's files are not this job's generation ('" +
              entry.substr(0, 200) + "')";
      return false;
    }
  }
  char line[200];
  std::snprintf(line, sizeof line, "dtfm-commit 1 step %" PRId64
                " job %016" PRIx64 "\n", step, fnv1a(job));
  record = line;
  for (const auto &[device, m] : files) {
    std::snprintf(line, sizeof line,
                  " plan %016" PRIx64 " bytes %" PRIu64 " fnv1a %016" PRIx64
                  "\n",
                  m.plan, m.bytes, m.fnv);
    record += "file " + device + line;
  }
  return true;
}

bool CheckpointStore::commit(int64_t step, const std::string &record,
                             std::string &error) const {
  std::string path = commitPath(dir, step), there, ignored;
  // Workers sharing a directory write the same record: once is enough.
  if (format::readWholeFile(path, there, ignored, kMaxCommitBytes) &&
      there == record)
    return true;
  return format::writeFileAtomically(path, record, error, /*durable=*/true);
}

std::vector<int64_t> CheckpointStore::completeSteps() const {
  std::vector<int64_t> complete;
  for (int64_t step : steps()) {
    std::optional<ManifestLine> m = readManifest(manifestPath(step));
    if (m && (m->version == 1 ||
              ::access(commitPath(dir, step).c_str(), F_OK) == 0))
      complete.push_back(step);
  }
  return complete;
}

void CheckpointStore::prune(size_t keep, int64_t newest) const {
  std::vector<int64_t> all = steps(), complete;
  auto remove = [&](int64_t step) {
    // The commit record first: a generation is never left looking
    // complete. Workers sharing the directory remove it alike.
    std::remove(commitPath(dir, step).c_str());
    std::remove(manifestPath(step).c_str());
    std::remove(path(step).c_str());
  };
  if (newest >= 0)
    for (int64_t step : all)
      if (step > newest)
        remove(step);
  complete = completeSteps();
  // Temporaries of writes a kill cut short (this device's files and the
  // commit records; every worker has finished writing when prune runs).
  if (DIR *d = ::opendir(dir.c_str())) {
    std::vector<std::string> stale;
    while (dirent *e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name.find(".tmp-") != std::string::npos &&
          (name.rfind("." + device + ".step-", 0) == 0 ||
           name.rfind(".step-", 0) == 0))
        stale.push_back(dir + "/" + name);
    }
    ::closedir(d);
    for (const std::string &path : stale)
      std::remove(path.c_str());
  }
  // Older files go even when their commit record is gone already (a
  // worker sharing the directory pruned first).
  if (complete.size() < keep || complete.empty())
    return;
  int64_t oldestKept = complete[complete.size() - keep];
  for (int64_t step : all)
    if (step < oldestKept)
      remove(step);
}

bool CheckpointStore::load(int64_t step, format::TensorMap &state,
                           std::string &error) const {
  std::string file = path(step), manifestFile = manifestPath(step);
  state.clear();
  std::string written, bytes;
  if (!format::readWholeFile(manifestFile, written, error, 4096)) {
    error = manifestFile + ": missing (the generation was never finished)";
    return false;
  }
  if (!format::readWholeFile(file, bytes, error)) {
    error = file + ": missing (its manifest says it was written)";
    return false;
  }
  std::optional<ManifestLine> m = parseManifest(written);
  if (!m || m->step != step) {
    error = manifestFile + ": not a checkpoint manifest of step " +
            std::to_string(step);
    return false;
  }
  if (m->plan != planHash) {
    error = file + ": a checkpoint of another plan";
    return false;
  }
  if (m->bytes != bytes.size() || m->fnv != fnv1a(bytes)) {
    error = file + ": size or checksum differs from its manifest (corrupt)";
    return false;
  }
  if (m->version == 2) {
    // Committed, by the job that wrote this file, and listing this file.
    std::optional<Commit> commit = readCommit(dir, step, error);
    if (!commit)
      return false;
    auto listed = commit->files.find(device);
    if (commit->job != m->job) {
      error = file + ": written by another run than the one that committed "
                     "step " +
              std::to_string(step) + " (files of two runs)";
      return false;
    }
    if (listed == commit->files.end() || listed->second.plan != m->plan ||
        listed->second.bytes != m->bytes || listed->second.fnv != m->fnv) {
      error = file + ": not the file that the commit record of step " +
              std::to_string(step) + " lists (files of two runs)";
      return false;
    }
  }
  if (!format::decodeTensors(bytes, file, state, error))
    return false;
  if (recordedPlanHash(state) != planHash) {
    error = file + ": a checkpoint of another plan";
    return false;
  }
  state.erase(kMetaEntry);
  for (const auto &[name, tensor] : state)
    for (float v : tensor.data)
      if (!std::isfinite(v)) {
        error = file + ": '" + name + "' holds a non-finite value";
        return false;
      }
  return true;
}

std::vector<Generation> dtfm::runtime::listGenerations(const std::string &dir) {
  std::map<int64_t, Generation> committed, legacy;
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return {};
  auto number = [](const std::string &text) -> std::optional<int64_t> {
    if (text.empty() || text.size() > 18 ||
        text.find_first_not_of("0123456789") != std::string::npos)
      return std::nullopt;
    return std::atoll(text.c_str());
  };
  std::vector<std::string> names;
  while (dirent *e = ::readdir(d))
    names.push_back(e->d_name);
  ::closedir(d);
  for (const std::string &name : names) {
    const std::string commitSuffix = ".commit";
    if (name.rfind("step-", 0) == 0 && name.size() > 5 + commitSuffix.size() &&
        name.compare(name.size() - commitSuffix.size(), commitSuffix.size(),
                     commitSuffix) == 0) {
      std::optional<int64_t> step =
          number(name.substr(5, name.size() - 5 - commitSuffix.size()));
      std::string error;
      std::optional<Commit> commit =
          step ? readCommit(dir, *step, error) : std::nullopt;
      if (!commit)
        continue;
      Generation &g = committed[*step];
      g.step = *step;
      for (const auto &[device, entry] : commit->files)
        g.files.push_back({device, entry.plan});
      continue;
    }
    const std::string suffix = ".manifest";
    size_t marker = name.rfind(".step-");
    if (marker == std::string::npos || name.size() <= suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    std::string device = name.substr(0, marker);
    std::optional<int64_t> step = number(
        name.substr(marker + 6, name.size() - suffix.size() - marker - 6));
    if (device.empty() || !step)
      continue;
    // Written before commit records: complete with its manifests.
    std::optional<ManifestLine> m = readManifest(dir + "/" + name);
    if (!m || m->version != 1 || m->step != *step)
      continue;
    Generation &g = legacy[*step];
    g.step = *step;
    g.files.push_back({device, m->plan});
  }
  for (auto &[step, g] : legacy)
    committed.emplace(step, std::move(g));
  std::vector<Generation> out;
  for (auto it = committed.rbegin(); it != committed.rend(); ++it) {
    std::sort(it->second.files.begin(), it->second.files.end());
    out.push_back(it->second);
  }
  return out;
}

bool dtfm::runtime::loadGeneration(const std::string &dir,
                                   const Generation &generation,
                                   std::vector<format::TensorMap> &states,
                                   std::string &error) {
  states.clear();
  for (const auto &[device, hash] : generation.files) {
    CheckpointStore store(dir, device, hash);
    if (!store.load(generation.step, states.emplace_back(), error))
      return false;
  }
  return true;
}

Tensor dtfm::runtime::encodeShard(ElementRange range) {
  Tensor t({8});
  for (int i = 0; i < 4; ++i) {
    t.data[i] = static_cast<float>((static_cast<uint64_t>(range.begin) >>
                                    (16 * i)) & 0xffff);
    t.data[4 + i] = static_cast<float>((static_cast<uint64_t>(range.end) >>
                                        (16 * i)) & 0xffff);
  }
  return t;
}

std::optional<ElementRange>
dtfm::runtime::decodeShard(const format::Tensor &tensor) {
  if (tensor.numel() != 8)
    return std::nullopt;
  uint64_t parts[2] = {0, 0};
  for (int i = 0; i < 8; ++i) {
    float part = tensor.data[i];
    if (!(part >= 0 && part < 65536) || part != std::floor(part))
      return std::nullopt;
    parts[i / 4] |= static_cast<uint64_t>(part) << (16 * (i % 4));
  }
  if (parts[0] > parts[1] || parts[1] > (uint64_t(1) << 62))
    return std::nullopt;
  return ElementRange{static_cast<int64_t>(parts[0]),
                      static_cast<int64_t>(parts[1])};
}

Tensor dtfm::runtime::encodeSlice(const TensorParallelSlice &slice) {
  Tensor t({3});
  t.data = {static_cast<float>(slice.dim), static_cast<float>(slice.rank),
            static_cast<float>(slice.degree)};
  return t;
}

std::optional<TensorParallelSlice>
dtfm::runtime::decodeSlice(const format::Tensor &tensor) {
  if (tensor.numel() != 3)
    return std::nullopt;
  for (float part : tensor.data)
    if (!(part >= 0 && part < 65536) || part != std::floor(part))
      return std::nullopt;
  TensorParallelSlice slice{static_cast<int64_t>(tensor.data[0]),
                            static_cast<int64_t>(tensor.data[1]),
                            static_cast<int64_t>(tensor.data[2])};
  if (slice.degree < 1 || slice.rank >= slice.degree)
    return std::nullopt;
  return slice;
}

namespace dtfm::runtime {
namespace {
/// A parameter and its optimizer moments, as one tensor-parallel slice (or
/// the whole tensor) of it.
struct SliceState {
  Tensor param;
  std::map<std::string, Tensor> moments; // "opt.m/" ... -> shaped as param
  /// State shaped as the parameter and never sharded: local steps' anchor
  /// and outer velocity, error feedback's residuals ("opt.anchor/" ...).
  std::map<std::string, Tensor> replicaState;
};

/// Local steps' state (the same on every replica after an exchange) and
/// error feedback's residual (each replica's own).
constexpr const char *kAnchor = "opt.anchor/";
constexpr const char *kOuterVelocity = "opt.outer_velocity/";
constexpr const char *kResidual = "opt.residual/";
/// Local steps' outer exchange in int8 or int4: what its rounding left out.
constexpr const char *kOuterResidual = "opt.outer_residual/";
/// Local steps with an overlap: the averaged pseudo-gradients not applied
/// yet (everyone's: the average).
constexpr const char *kOuterPending = "opt.outer_pending/";

/// The state of `name` from the files that hold the same slice of it (all
/// of them the whole tensor, or all slice k): the parameter from any, each
/// moment put together from the files' pieces ("shard/<name>" ranges).
bool assembleSlice(const std::vector<const format::TensorMap *> &files,
                   const std::string &name, const std::vector<int64_t> &shape,
                   SliceState &out, std::string &error) {
  int64_t elements = 1;
  for (int64_t d : shape)
    elements *= std::max<int64_t>(0, d);
  const Tensor &param = files.front()->at("param/" + name);
  if (param.shape != shape) {
    error = "parameter '" + name + "' has another shape in the " +
            "checkpoint: a checkpoint of another model";
    return false;
  }
  out.param = param;
  // Local steps: between two exchanges every replica has moved its own
  // way, and no other plan can take them all; at an exchange they agree
  // (each is its anchor), and the anchor and outer velocity are everyone's.
  bool localSteps = false;
  for (const format::TensorMap *file : files)
    localSteps = localSteps || file->count(kAnchor + name);
  if (localSteps)
    for (const format::TensorMap *file : files)
      if (file->at("param/" + name).data != param.data) {
        error = "the replicas' parameter '" + name + "' differs: a " +
                "checkpoint between two exchanges of local steps resumes " +
                "only on its own plan (on another, one written at an " +
                "exchange: a step that sync_every divides)";
        return false;
      }
  for (const char *kind : {kAnchor, kOuterVelocity, kOuterPending}) {
    for (const format::TensorMap *file : files) {
      auto held = file->find(kind + name);
      if (held == file->end())
        continue;
      if (held->second.shape != shape) {
        error = "'" + held->first + "' does not have its parameter's shape";
        return false;
      }
      out.replicaState[kind] = held->second;
      break;
    }
  }
  // Error feedback: what the replicas still owe the average is the mean of
  // their residuals, so each replica of the new plan starts from that mean
  // (the next exchange's average then carries the same debt): every step's
  // gradients' and local steps' outer exchange's alike.
  for (const char *kind : {kResidual, kOuterResidual}) {
    int64_t owing = 0;
    Tensor mean(shape);
    for (const format::TensorMap *file : files) {
      auto held = file->find(kind + name);
      if (held == file->end())
        continue;
      if (held->second.shape != shape) {
        error = "'" + held->first + "' does not have its parameter's shape";
        return false;
      }
      for (size_t i = 0; i < mean.data.size(); ++i)
        mean.data[i] += held->second.data[i];
      ++owing;
    }
    if (owing > 0) {
      for (float &x : mean.data)
        x /= static_cast<float>(owing);
      out.replicaState[kind] = std::move(mean);
    }
  }
  for (const char *kind : {"opt.m/", "opt.v/", "opt.velocity/"}) {
    std::string key = kind + name;
    // The whole moment from its pieces, marking what they cover.
    Tensor whole(shape);
    std::vector<bool> covered(static_cast<size_t>(elements), false);
    bool any = false;
    for (const format::TensorMap *file : files) {
      auto piece = file->find(key);
      if (piece == file->end())
        continue;
      ElementRange range{0, elements};
      auto recorded = file->find("shard/" + name);
      if (recorded != file->end()) {
        std::optional<ElementRange> decoded = decodeShard(recorded->second);
        if (!decoded || decoded->end > elements) {
          error = "'shard/" + name + "' is not a range of its parameter";
          return false;
        }
        range = *decoded;
      }
      if (piece->second.numel() != range.size()) {
        error = "'" + key + "' does not have the size of its range";
        return false;
      }
      std::copy(piece->second.data.begin(), piece->second.data.end(),
                whole.data.begin() + range.begin);
      std::fill(covered.begin() + range.begin, covered.begin() + range.end,
                true);
      any = true;
    }
    if (!any)
      continue; // not trained yet, or another optimizer
    auto hole = std::find(covered.begin(), covered.end(), false);
    if (hole != covered.end()) {
      error = "the checkpoint's files do not cover '" + key + "' (element " +
              std::to_string(hole - covered.begin()) +
              " is in none): a generation with a file missing";
      return false;
    }
    out.moments[kind] = std::move(whole);
  }
  return true;
}
} // namespace
} // namespace dtfm::runtime

bool dtfm::runtime::assembleState(
    const std::vector<format::TensorMap> &files,
    const std::map<std::string, std::vector<int64_t>> &parameters,
    const std::map<std::string, ElementRange> &shards,
    const std::map<std::string, TensorParallelSlice> &slices,
    format::TensorMap &out, std::string &error) {
  out.clear();
  for (const auto &[name, shape] : parameters) {
    // The whole tensor's shape: the program's, times its slices.
    std::vector<int64_t> wholeShape = shape;
    auto mine = slices.find(name);
    if (mine != slices.end())
      wholeShape.at(mine->second.dim) *= mine->second.degree;
    // The files by the slice they hold: all whole (one entry), or slice
    // k of one degree along one dimension.
    std::optional<TensorParallelSlice> layout;
    std::map<int64_t, std::vector<const format::TensorMap *>> byRank;
    for (const format::TensorMap &file : files) {
      if (!file.count("param/" + name))
        continue;
      TensorParallelSlice slice{0, 0, 1};
      if (auto recorded = file.find("tp/" + name); recorded != file.end()) {
        std::optional<TensorParallelSlice> decoded =
            decodeSlice(recorded->second);
        if (!decoded || decoded->dim >= static_cast<int64_t>(shape.size()) ||
            wholeShape[decoded->dim] % decoded->degree != 0) {
          error = "'tp/" + name + "' is not a slice of its parameter";
          return false;
        }
        slice = *decoded;
      }
      if (layout &&
          (layout->dim != slice.dim || layout->degree != slice.degree)) {
        error =
            "the checkpoint's files slice parameter '" + name + "' in two ways";
        return false;
      }
      layout = slice;
      byRank[slice.rank].push_back(&file);
    }
    if (!layout) {
      error = "no file of the checkpoint holds parameter '" + name + "'";
      return false;
    }
    std::vector<int64_t> sliceShape = wholeShape;
    sliceShape[layout->dim] /= layout->degree;
    std::vector<SliceState> parts(layout->degree);
    for (int64_t rank = 0; rank < layout->degree; ++rank) {
      auto held = byRank.find(rank);
      if (held == byRank.end()) {
        error = "no file of the checkpoint holds tensor-parallel slice " +
                std::to_string(rank) + " of parameter '" + name +
                "': a generation with a file missing";
        return false;
      }
      if (!assembleSlice(held->second, name, sliceShape, parts[rank], error))
        return false;
    }
    // Whole, then this program's slice, then its optimizer shard.
    auto cut = [&](auto pick) {
      std::vector<Tensor> pieces;
      for (SliceState &part : parts)
        pieces.push_back(pick(part));
      Tensor whole = layout->degree == 1 ? std::move(pieces.front())
                                         : joinSlices(pieces, layout->dim);
      return mine == slices.end()
                 ? whole
                 : sliceOf(whole, mine->second.dim, mine->second.rank,
                           mine->second.degree);
    };
    out["param/" + name] = cut([](SliceState &p) { return p.param; });
    auto shard = shards.find(name);
    for (const auto &[kind, unused] : parts.front().moments) {
      for (const SliceState &part : parts)
        if (!part.moments.count(kind)) {
          error =
              "the checkpoint's files do not all hold '" + kind + name + "'";
          return false;
        }
      Tensor moment = cut([&](SliceState &p) { return p.moments.at(kind); });
      if (shard != shards.end()) {
        Tensor piece({shard->second.size()});
        std::copy(moment.data.begin() + shard->second.begin,
                  moment.data.begin() + shard->second.end, piece.data.begin());
        moment = std::move(piece);
      }
      out[kind + name] = std::move(moment);
    }
    for (const auto &[kind, unused] : parts.front().replicaState) {
      for (const SliceState &part : parts)
        if (!part.replicaState.count(kind)) {
          error =
              "the checkpoint's files do not all hold '" + kind + name + "'";
          return false;
        }
      out[kind + name] =
          cut([&](SliceState &p) { return p.replicaState.at(kind); });
    }
    for (const format::TensorMap &file : files) {
      auto step = file.find("opt.step/" + name);
      if (step != file.end()) {
        out["opt.step/" + name] = step->second;
        break;
      }
    }
  }
  return true;
}

double dtfm::runtime::dalyCheckpointInterval(double checkpointSeconds,
                                             double mtbfSeconds) {
  double d = checkpointSeconds, m = mtbfSeconds;
  if (!(d >= 0) || !(m > 0))
    return m > 0 ? m : 0;
  if (d >= 2 * m)
    return m;
  double ratio = d / (2 * m);
  return std::sqrt(2 * d * m) * (1 + std::sqrt(ratio) / 3 + ratio / 9) - d;
}

//===----------------------------------------------------------------------===//
// One writer per checkpoint directory
//===----------------------------------------------------------------------===//

namespace {

/// The record a claim's lock file holds.
struct ClaimRecord {
  std::string job, host, pid, since;
};

constexpr const char *kClaimMagic = "dtfm-checkpoint-lock 1";

/// What a hostile record may show in a one-line error: printable, short.
std::string printable(const std::string &text) {
  std::string out;
  for (char c : text.substr(0, 200))
    out += c >= 0x20 && c < 0x7f ? c : '?';
  return out;
}

ClaimRecord readRecord(int fd) {
  char buffer[1024];
  ssize_t n = ::pread(fd, buffer, sizeof buffer, 0);
  ClaimRecord record;
  if (n <= 0)
    return record;
  std::string text(buffer, static_cast<size_t>(n));
  size_t at = 0;
  bool magic = false;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    std::string line =
        text.substr(at, end == std::string::npos ? std::string::npos
                                                 : end - at);
    at = end == std::string::npos ? text.size() : end + 1;
    if (line == kClaimMagic) {
      magic = true;
      continue;
    }
    size_t space = line.find(' ');
    if (!magic || space == std::string::npos)
      continue;
    std::string key = line.substr(0, space), value = line.substr(space + 1);
    if (key == "job")
      record.job = value;
    else if (key == "host")
      record.host = printable(value);
    else if (key == "pid")
      record.pid = printable(value);
    else if (key == "since")
      record.since = printable(value);
  }
  return record;
}

std::string thisHost() {
  char host[256] = {0};
  if (::gethostname(host, sizeof host - 1) != 0)
    return "unknown-host";
  return host;
}

bool writeRecord(int fd, const std::string &job) {
  std::string text = std::string(kClaimMagic) + "\njob " + job + "\nhost " +
                     thisHost() + "\npid " + std::to_string(::getpid()) +
                     "\nsince " + std::to_string(::time(nullptr)) + "\n";
  return ::ftruncate(fd, 0) == 0 &&
         ::pwrite(fd, text.data(), text.size(), 0) ==
             static_cast<ssize_t>(text.size()) &&
         ::fsync(fd) == 0;
}

std::string heldBy(const std::string &dir, const ClaimRecord &record) {
  std::string who = record.job.empty()
                        ? std::string("another job")
                        : "job " + printable(record.job);
  std::string where;
  if (!record.host.empty())
    where += "host " + record.host;
  if (!record.pid.empty())
    where += (where.empty() ? "" : ", ") + std::string("pid ") + record.pid;
  if (!record.since.empty()) {
    char when[64] = "";
    time_t t = static_cast<time_t>(std::atoll(record.since.c_str()));
    struct tm utc {};
    if (::gmtime_r(&t, &utc))
      std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &utc);
    where += (where.empty() ? "" : ", ") + std::string("since ") + when;
  }
  return "--checkpoint-dir " + dir + " is in use by " + who +
         (where.empty() ? "" : " (" + where + ")") +
         ": one run writes a checkpoint directory; wait for it to end or "
         "give another directory";
}

} // namespace

std::string CheckpointClaim::lockPath(const std::string &dir) {
  return dir + "/dtfm.lock";
}

std::string CheckpointClaim::freshJobId() {
  uint64_t random = 0;
  if (::getrandom(&random, sizeof random, 0) != sizeof random)
    random = static_cast<uint64_t>(::time(nullptr)) * 0x9e3779b97f4a7c15ull;
  char id[64];
  std::snprintf(id, sizeof id, "%d-%016" PRIx64, static_cast<int>(::getpid()),
                random);
  // Fit as a --run-id (letters, digits, '.', '_', '-'): workers get it so.
  std::string host = thisHost().substr(0, 40);
  for (char &c : host)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-')
      c = '_';
  return host + "-" + id;
}

std::unique_ptr<CheckpointClaim>
CheckpointClaim::claim(const std::string &dir, const std::string &job,
                       std::string &error) {
  std::string path = lockPath(dir);
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC |
                                    O_NONBLOCK,
                  0644);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    error = "--checkpoint-dir " + dir + ": cannot use its lock file " + path +
            (fd < 0 ? " (" + std::string(std::strerror(errno)) + ")"
                    : " (not a regular file)");
    if (fd >= 0)
      ::close(fd);
    return nullptr;
  }
  // An exclusive lock is held only while a record is written: wait that
  // long, never longer.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      // No live process holds the directory: ours (a record left by a dead
      // job is stale and replaced).
      if (!writeRecord(fd, job) || ::flock(fd, LOCK_SH) != 0) {
        error = "--checkpoint-dir " + dir + ": cannot write its lock file " +
                path + " (" + std::strerror(errno) + ")";
        ::close(fd);
        return nullptr;
      }
      // Shared again: another job may have taken it in between.
      ClaimRecord record = readRecord(fd);
      if (record.job == job)
        return std::unique_ptr<CheckpointClaim>(new CheckpointClaim(fd));
      error = heldBy(dir, record);
      ::close(fd);
      return nullptr;
    }
    if (::flock(fd, LOCK_SH | LOCK_NB) == 0) {
      ClaimRecord record = readRecord(fd);
      if (record.job == job) // another process of this job
        return std::unique_ptr<CheckpointClaim>(new CheckpointClaim(fd));
      error = heldBy(dir, record);
      ::close(fd);
      return nullptr;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      error = heldBy(dir, readRecord(fd));
      ::close(fd);
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

CheckpointClaim::~CheckpointClaim() { ::close(fd); }
