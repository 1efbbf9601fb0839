//===- Checkpoints.cpp - A worker's checkpoint files ----------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Checkpoints.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>

using namespace dtfm::runtime;
using dtfm::format::Tensor;

static const char *const kMetaEntry = "meta/step-and-plan";

std::string CheckpointStore::path(int64_t step) const {
  return dir + "/" + device + ".step-" + std::to_string(step) + ".ckpt";
}

std::vector<int64_t> CheckpointStore::steps() const {
  std::vector<int64_t> found;
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return found;
  std::string prefix = device + ".step-";
  while (dirent *e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind(prefix, 0) != 0 || name.size() < prefix.size() + 6 ||
        name.substr(name.size() - 5) != ".ckpt")
      continue;
    std::string number =
        name.substr(prefix.size(), name.size() - prefix.size() - 5);
    if (number.empty() || number.size() > 18 ||
        number.find_first_not_of("0123456789") != std::string::npos)
      continue;
    found.push_back(std::atoll(number.c_str()));
  }
  ::closedir(d);
  std::sort(found.begin(), found.end());
  return found;
}

bool CheckpointStore::save(int64_t step, format::TensorMap state,
                           std::string &error) const {
  Tensor meta({5});
  meta.data[0] = static_cast<float>(step & 0xffffff);
  for (int i = 0; i < 4; ++i)
    meta.data[1 + i] = static_cast<float>((planHash >> (16 * i)) & 0xffff);
  state[kMetaEntry] = meta;
  return format::writeTensorFile(path(step), state, error);
}

void CheckpointStore::prune(size_t keep) const {
  std::vector<int64_t> all = steps();
  for (size_t i = 0; i + keep < all.size(); ++i)
    std::remove(path(all[i]).c_str());
}

bool CheckpointStore::load(int64_t step, format::TensorMap &state,
                           std::string &error) const {
  std::string file = path(step);
  state.clear();
  if (!format::readTensorFile(file, state, error))
    return false;
  auto meta = state.find(kMetaEntry);
  bool samePlan = meta != state.end() && meta->second.numel() == 5;
  for (int i = 0; samePlan && i < 4; ++i)
    samePlan = static_cast<uint64_t>(meta->second.data[1 + i]) ==
               ((planHash >> (16 * i)) & 0xffff);
  if (!samePlan) {
    error = file + ": a checkpoint of another plan";
    return false;
  }
  state.erase(meta);
  return true;
}
