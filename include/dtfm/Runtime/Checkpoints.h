//===- Checkpoints.h - A worker's checkpoint generations ---------*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
//
// Each worker writes generation K of its state as two files in the
// checkpoint directory: `<device>.step-K.ckpt` (its tensors) and then
// `<device>.step-K.manifest` (one line: the step, the plan's hash, the
// .ckpt's size and FNV-1a, the job that wrote it), both fsynced, through a
// temporary file and a rename. Once every worker has written its files, the
// generation is committed: `step-K.commit` lists every worker's file (device,
// plan, size, checksum) and the one job that wrote them all, and each worker
// writes it into its directory. A generation is valid for a worker when it
// is committed, its manifest and .ckpt are the ones the commit record lists
// (files of two runs never pass for one generation), the .ckpt decodes,
// belongs to this plan and holds only finite numbers. Worker::resume picks
// the newest generation valid on every worker; older generations are
// deleted only after a newer one is committed (docs/Runtime.md,
// "Checkpoints"). Generations written before commit records (manifest
// version 1) are read as they were: complete with their manifests.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_CHECKPOINTS_H
#define DTFM_RUNTIME_CHECKPOINTS_H

#include "dtfm/Format/TensorFile.h"
#include "dtfm/Runtime/PlanNames.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dtfm::runtime {

class CheckpointStore {
public:
  /// `job`: the job that writes (CheckpointClaim); reading takes any.
  CheckpointStore(std::string dir, std::string device, uint64_t planHash,
                  std::string job = "")
      : dir(std::move(dir)), device(std::move(device)), planHash(planHash),
        job(std::move(job)) {}

  /// The tensor that records a generation's step and plan hash.
  static constexpr const char *kMetaEntry = "meta/step-and-plan";

  /// "<dir>/<device>.step-<step>.ckpt".
  std::string path(int64_t step) const;
  /// "<dir>/<device>.step-<step>.manifest".
  std::string manifestPath(int64_t step) const;
  /// "<dir>/step-<step>.commit": the generation's commit record.
  static std::string commitPath(const std::string &dir, int64_t step);
  /// Steps of which this device has any file (a .ckpt or a manifest),
  /// ascending: complete or not.
  std::vector<int64_t> steps() const;
  /// Those of steps() that are complete: committed (or with a version-1
  /// manifest), ascending.
  std::vector<int64_t> completeSteps() const;
  /// The plan hash that a generation's tensors record in kMetaEntry, when
  /// they record one (four 16-bit parts, each a whole float in range).
  static std::optional<uint64_t> recordedPlanHash(const format::TensorMap &state);
  /// The manifest's line for generation `step` whose .ckpt holds `bytes`.
  std::string manifest(int64_t step, const std::string &bytes) const;
  /// Writes this worker's files of generation `step`: the tensors, then the
  /// manifest (`manifestLine` gets its line, for the commit record).
  bool save(int64_t step, format::TensorMap state, std::string &manifestLine,
            std::string &error) const;
  /// The commit record of generation `step` written by `job`, from every
  /// worker's "<device> <manifest line>" (any order); false with `error`
  /// when one is not such a line or names a device twice.
  static bool commitRecord(int64_t step, const std::string &job,
                           const std::vector<std::string> &entries,
                           std::string &record, std::string &error);
  /// Commits generation `step` in this directory: writes `record` (fsynced)
  /// unless it is there already.
  bool commit(int64_t step, const std::string &record,
              std::string &error) const;
  /// Removes every generation older than the newest `keep` complete ones
  /// (committed; never one of those), and every generation newer than
  /// `newest` when it is given (>= 0): what resume found unusable. A
  /// generation's commit record goes first: it never looks complete.
  /// Temporaries left by writes a kill cut short go too.
  void prune(size_t keep, int64_t newest = -1) const;
  /// Reads generation `step` and checks it (committed, manifest, size,
  /// checksum, the file the commit record lists, this plan, finite values);
  /// on failure a one-line `error` naming the file and what is wrong.
  /// `state` is what save was given.
  bool load(int64_t step, format::TensorMap &state, std::string &error) const;

private:
  std::string dir, device;
  uint64_t planHash;
  std::string job;
};

/// One job's claim on a checkpoint directory: one writer per directory.
///
/// The claim is `<dir>/dtfm.lock`, a file holding the job's id, the host
/// and pid of the process that first claimed it and since when, and an
/// flock on it by every process of the job that uses the directory (a
/// shared lock; an exclusive one only while the record is written). A
/// process of the job named in the record joins; any other is refused in
/// one line naming the holder. The kernel drops a dead process's flock, so
/// a record that no live process holds is stale and is taken over. The
/// claim lasts while the object lives (the elastic coordinator and the
/// local launcher hold it for the whole job, across re-plans; each worker
/// joins it).
class CheckpointClaim {
public:
  /// Claims `dir` for job `job` (DIR must exist); nullptr with a one-line
  /// `error` when another live job holds it, or the lock file cannot be
  /// used (a link, not a regular file, an unwritable folder).
  static std::unique_ptr<CheckpointClaim>
  claim(const std::string &dir, const std::string &job, std::string &error);
  ~CheckpointClaim();
  CheckpointClaim(const CheckpointClaim &) = delete;
  CheckpointClaim &operator=(const CheckpointClaim &) = delete;

  /// "<dir>/dtfm.lock".
  static std::string lockPath(const std::string &dir);
  /// A job id no other job has: host, pid, time and random bits.
  static std::string freshJobId();

private:
  explicit CheckpointClaim(int fd) : fd(fd) {}
  int fd;
};

/// A generation written by any plan: its step and, per device file its
/// commit record lists (or, written before commit records, per manifest),
/// the device and the plan hash.
struct Generation {
  int64_t step = 0;
  std::vector<std::pair<std::string, uint64_t>> files;
};

/// The complete generations in `dir` (committed, or with version-1
/// manifests), newest first.
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
