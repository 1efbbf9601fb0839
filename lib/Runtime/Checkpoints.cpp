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
  return format::writeFileAtomically(path(step), bytes, error) &&
         format::writeFileAtomically(
             manifestPath(step),
             manifest(step, bytes), error);
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
