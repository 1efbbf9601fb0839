//===- Checkpoints.h - A worker's checkpoint generations ---------*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
//
// Each worker writes generation K of its state as two files in the
// checkpoint directory: `<device>.step-K.ckpt` (its tensors) and then, last,
// `<device>.step-K.manifest` (one line: the step, the plan's hash, the
// .ckpt's size and FNV-1a), both through a temporary file and a rename. A
// generation is valid for a worker when its manifest is there and says so
// of the .ckpt, the .ckpt decodes, belongs to this plan and holds only
// finite numbers. Worker::resume picks the newest generation valid on
// every worker (docs/Runtime.md, "Checkpoints").
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_CHECKPOINTS_H
#define DTFM_RUNTIME_CHECKPOINTS_H

#include "dtfm/Format/TensorFile.h"
#include "dtfm/Runtime/PlanNames.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtfm::runtime {

class CheckpointStore {
public:
  CheckpointStore(std::string dir, std::string device, uint64_t planHash)
      : dir(std::move(dir)), device(std::move(device)), planHash(planHash) {}

  /// The tensor that records a generation's step and plan hash.
  static constexpr const char *kMetaEntry = "meta/step-and-plan";

  /// "<dir>/<device>.step-<step>.ckpt".
  std::string path(int64_t step) const;
  /// "<dir>/<device>.step-<step>.manifest".
  std::string manifestPath(int64_t step) const;
  /// Steps of which this device has any file (a .ckpt or a manifest),
  /// ascending: complete or not.
  std::vector<int64_t> steps() const;
  /// The plan hash that a generation's tensors record in kMetaEntry, when
  /// they record one (four 16-bit parts, each a whole float in range).
  static std::optional<uint64_t> recordedPlanHash(const format::TensorMap &state);
  /// The manifest's line for generation `step` whose .ckpt holds `bytes`.
  std::string manifest(int64_t step, const std::string &bytes) const;
  /// Writes generation `step`: the tensors, then the manifest.
  bool save(int64_t step, format::TensorMap state, std::string &error) const;
  /// Removes every generation older than the newest `keep` that have a
  /// manifest (never one of those), and every generation newer than
  /// `newest` when it is given (>= 0): what resume found unusable.
  void prune(size_t keep, int64_t newest = -1) const;
  /// Reads generation `step` and checks it (manifest, size, checksum, this
  /// plan, finite values); on failure a one-line `error` naming the file
  /// and what is wrong. `state` is what save was given.
  bool load(int64_t step, format::TensorMap &state, std::string &error) const;

private:
  std::string dir, device;
  uint64_t planHash;
};

/// A generation written by any plan: its step and, per device file with a
/// manifest, the device and the plan hash its manifest names.
struct Generation {
  int64_t step = 0;
  std::vector<std::pair<std::string, uint64_t>> files;
};

/// The generations in `dir` with at least one manifest, newest first.
std::vector<Generation> listGenerations(const std::string &dir);

/// Each file of `generation`, checked as CheckpointStore::load checks its
/// own plan's; false with the first bad file's one-line error.
bool loadGeneration(const std::string &dir, const Generation &generation,
                    std::vector<format::TensorMap> &states,
                    std::string &error);

/// The element range a sharded state entry covers ("shard/<name>" beside
/// "opt.m/<name>"...): begin and end as four exact 16-bit parts each.
format::Tensor encodeShard(ElementRange range);
std::optional<ElementRange> decodeShard(const format::Tensor &tensor);

/// The tensor-parallel slice a state entry's parameter is ("tp/<name>"):
/// dim, rank and degree, exact small integers.
format::Tensor encodeSlice(const TensorParallelSlice &slice);
std::optional<TensorParallelSlice> decodeSlice(const format::Tensor &tensor);

/// The state of a device program of another plan of the same model, from
/// the files of one generation (another data-parallel width, other stage
/// bounds, another tensor-parallel degree): each of `parameters` (name ->
/// the program's shape) put together whole from the files -- a whole
/// tensor from any file, or the slices of a tensor-parallel group by their
/// "tp/<name>" -- with its optimizer moments assembled from the files'
/// pieces (whole tensors, or shards with their "shard/<name>"); then cut
/// to the program's slice (`slices`, where it is tensor-parallel) and to
/// `shards`' range (where it shards its optimizer state); its step count.
/// Local steps' anchor and outer velocity (the same on every replica) are
/// taken like the parameter; error feedback's residuals, each replica's
/// own, become their mean on every new replica (what the replicas owe the
/// average stays the same). False with a one-line error: a parameter in
/// no file or of another shape, a slice no file holds, a moment whose
/// elements the files do not all cover, or a checkpoint of local steps
/// between two exchanges (the replicas' parameters differ: no other plan
/// can take them).
bool assembleState(
    const std::vector<format::TensorMap> &files,
    const std::map<std::string, std::vector<int64_t>> &parameters,
    const std::map<std::string, ElementRange> &shards,
    const std::map<std::string, TensorParallelSlice> &slices,
    format::TensorMap &out, std::string &error);

/// The checkpoint interval in seconds that loses the least expected time
/// when a checkpoint takes `checkpointSeconds` and failures come every
/// `mtbfSeconds` on average: Daly's higher-order estimate (J. T. Daly, "A
/// higher order estimate of the optimum checkpoint interval for restart
/// dumps", 2006) -- sqrt(2 d M) (1 + sqrt(d / 2M) / 3 + (d / 2M) / 9) - d
/// for d < 2M, Young's sqrt(2 d M) corrected -- and M when d >= 2M.
double dalyCheckpointInterval(double checkpointSeconds, double mtbfSeconds);

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_CHECKPOINTS_H
