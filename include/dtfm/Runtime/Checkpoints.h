//===- Checkpoints.h - A worker's checkpoint files ---------------*- C++
//-*-===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
//
// Each worker writes its state (HostState's format: parameters and
// optimizer state) to "<dir>/<device>.step-<N>.ckpt", a tensor file
// (dtfm/Format/TensorFile.h) with one more entry: "meta/step-and-plan",
// the step and the plan's fingerprint in 16-bit pieces (exact in fp32), so
// that a checkpoint of another plan is refused by name. Files are written
// through a temporary and a rename: a checkpoint is complete or absent.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_CHECKPOINTS_H
#define DTFM_RUNTIME_CHECKPOINTS_H

#include "dtfm/Format/TensorFile.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dtfm::runtime {

class CheckpointStore {
public:
  CheckpointStore(std::string dir, std::string device, uint64_t planHash)
      : dir(std::move(dir)), device(std::move(device)), planHash(planHash) {}

  /// "<dir>/<device>.step-<step>.ckpt".
  std::string path(int64_t step) const;
  /// Steps of this device's complete checkpoints, ascending.
  std::vector<int64_t> steps() const;
  /// Writes the state of `step`.
  bool save(int64_t step, format::TensorMap state, std::string &error) const;
  /// Removes all but the newest `keep` checkpoints.
  void prune(size_t keep) const;
  /// Reads the checkpoint of `step`; refuses one of another plan. `state`
  /// is what save was given.
  bool load(int64_t step, format::TensorMap &state, std::string &error) const;

private:
  std::string dir, device;
  uint64_t planHash;
};

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_CHECKPOINTS_H
