//===- Checkpoints.cpp - A worker's checkpoint generations ----------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Checkpoints.h"

#include "dtfm/Support/Hash.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <map>

using namespace dtfm::runtime;
using dtfm::format::Tensor;

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

std::string CheckpointStore::manifest(int64_t step,
                                      const std::string &bytes) const {
  char line[160];
  std::snprintf(line, sizeof line,
                "dtfm-checkpoint 1 step %" PRId64 " plan %016" PRIx64
                " bytes %zu fnv1a %016" PRIx64 "\n",
                step, planHash, bytes.size(), fnv1a(bytes));
  return line;
}

bool CheckpointStore::save(int64_t step, format::TensorMap state,
                           std::string &error) const {
  Tensor meta({5});
  meta.data[0] = static_cast<float>(step & 0xffffff);
  for (int i = 0; i < 4; ++i)
    meta.data[1 + i] = static_cast<float>((planHash >> (16 * i)) & 0xffff);
  state[kMetaEntry] = meta;
  std::string bytes = format::encodeTensors(state);
  // The manifest goes last: a generation without one was never finished.
  // Durable: both are on disk before the manifest's name says the
  // generation is complete, and before an older one is pruned.
  return format::writeFileAtomically(path(step), bytes, error,
                                     /*durable=*/true) &&
         format::writeFileAtomically(manifestPath(step),
                                     manifest(step, bytes), error,
                                     /*durable=*/true);
}

void CheckpointStore::prune(size_t keep, int64_t newest) const {
  std::vector<int64_t> all = steps(), complete;
  for (int64_t step : all) {
    if (newest >= 0 && step > newest) {
      std::remove(manifestPath(step).c_str());
      std::remove(path(step).c_str());
      continue;
    }
    if (std::FILE *f = std::fopen(manifestPath(step).c_str(), "r")) {
      std::fclose(f);
      complete.push_back(step);
    }
  }
  if (complete.size() <= keep)
    return;
  int64_t oldestKept = complete[complete.size() - keep];
  for (int64_t step : all)
    if (step < oldestKept) {
      // The manifest first: a generation is never left looking complete.
      std::remove(manifestPath(step).c_str());
      std::remove(path(step).c_str());
    }
}

bool CheckpointStore::load(int64_t step, format::TensorMap &state,
                           std::string &error) const {
  std::string file = path(step), manifestFile = manifestPath(step);
  state.clear();
  std::string written, bytes;
  if (!format::readWholeFile(manifestFile, written, error)) {
    error = manifestFile + ": missing (the generation was never finished)";
    return false;
  }
  if (!format::readWholeFile(file, bytes, error)) {
    error = file + ": missing (its manifest says it was written)";
    return false;
  }
  if (written != manifest(step, bytes)) {
    char planText[40];
    std::snprintf(planText, sizeof planText, " plan %016" PRIx64 " ", planHash);
    error = written.find(planText) == std::string::npos
                ? file + ": a checkpoint of another plan"
                : file + ": size or checksum differs from its manifest "
                         "(corrupt)";
    return false;
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
  std::map<int64_t, Generation> byStep;
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return {};
  while (dirent *e = ::readdir(d)) {
    std::string name = e->d_name;
    const std::string suffix = ".manifest";
    size_t marker = name.rfind(".step-");
    if (marker == std::string::npos || name.size() <= suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    std::string device = name.substr(0, marker);
    std::string number = name.substr(marker + 6, name.size() - suffix.size() -
                                                     marker - 6);
    if (device.empty() || number.empty() || number.size() > 18 ||
        number.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::string line, error;
    if (!format::readWholeFile(dir + "/" + name, line, error))
      continue;
    long long step = 0;
    char hash[17] = {0};
    if (std::sscanf(line.c_str(), "dtfm-checkpoint 1 step %lld plan %16s",
                    &step, hash) != 2 ||
        step != std::atoll(number.c_str()))
      continue;
    Generation &g = byStep[step];
    g.step = step;
    g.files.push_back({device, std::strtoull(hash, nullptr, 16)});
  }
  ::closedir(d);
  std::vector<Generation> out;
  for (auto it = byStep.rbegin(); it != byStep.rend(); ++it) {
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
