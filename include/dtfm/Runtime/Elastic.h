//===- Elastic.h - Re-plan and go on when a device is lost -------*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
//
// `dtfm-run plan.pb --execute --elastic --checkpoint-dir DIR` runs the
// plan's workers -- locally (Launcher.h), or with --agents on the hosts of
// their agents (Agents.h) -- and, when devices are lost -- a worker
// killed by a signal it did not get from the launcher, one that did not
// stop within --timeout of another's failure (stopped, hung), a host whose
// agent is gone -- plans the same model again on the devices left and
// resumes from the newest checkpoint, without a person restarting
// anything:
//
//   1. the plan's recorded inputs (dtfm/Format/PlanInputs.h: the model as
//      --dtfm-plan received it and its options) and the plan's cluster
//      less the lost devices are written to DIR/replan-<n>/;
//   2. the compiler plans them: `dtfm-opt model.mlir --dtfm-plan=...` and
//      `dtfm-translate --export-plan`, run as programs found beside
//      dtfm-run (or in --compiler-dir), so that the runtime stays free of
//      MLIR; with the recorded options, the shape searched (dp and pp
//      free) for the same samples per step, so that the data goes on
//      where it stopped;
//   3. the new plan is verified, and its workers resume from the newest
//      generation the old plan's workers completed (Checkpoints.h,
//      assembleState: another plan of the same model), checkpointing
//      into DIR/replan-<n>/checkpoints.
//
// A device asks to join with `dtfm-run --join DIR request.textproto`
// (DIR/joins/): while the workers run, the launcher plans with it, and when
// that plan is predicted faster, the workers stop at their next checkpoint
// (--stop-file) and the new plan resumes from it; otherwise the device
// stands by for later re-plans.
//
// Each re-plan prints one line: the lost devices, the old and new shape,
// the predicted iteration before and after, the step resumed from and the
// steps lost. A worker that fails by itself with no device lost (a
// diverged loss, a bad file) stops the run as without --elastic: planning
// again would not help.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_ELASTIC_H
#define DTFM_RUNTIME_ELASTIC_H

#include <chrono>
#include <string>
#include <vector>

namespace dtfm::proto {
class Plan;
} // namespace dtfm::proto

namespace dtfm::planner {
struct Cluster;
} // namespace dtfm::planner

namespace dtfm::runtime {

class AgentCoordinator;

struct ElasticOptions {
  /// Stop (with the checkpoints intact) rather than go on with fewer
  /// devices than this.
  int minDevices = 1;
  /// Stop rather than re-plan more often than this.
  int maxReplans = 8;
  /// Where dtfm-opt and dtfm-translate are (empty: beside dtfm-run).
  std::string compilerDir;
  /// The longest one re-planning may take (both programs together).
  std::chrono::seconds planningTimeout{600};
};

/// Checks before any worker starts that `plan` can be re-planned: it
/// records its planning inputs and the compiler is there. False with a
/// one-line `error`.
bool checkElastic(const proto::Plan &plan, const std::string &planPath,
                  ElasticOptions &options, std::string &error);

/// A plan made again without some devices.
struct Replan {
  proto::Plan *plan = nullptr; ///< filled: the new plan, verified
  std::string path;            ///< its file, DIR/plan.pb
  double seconds = 0;          ///< the compiler's time
};

/// Steps 1-2 above: plans `plan`'s recorded model again on its cluster
/// without the devices named in `lost`, in `dir` (which must exist), and
/// reads and verifies the result into `*out.plan`. False with a one-line
/// `error`: an unknown device, no device left, the compiler's first error
/// line, a plan of another number of samples per step.
bool replanWithout(const proto::Plan &plan,
                   const std::vector<std::string> &lost, const std::string &dir,
                   const ElasticOptions &options, Replan &out,
                   std::string &error);

/// The same on any cluster (a device joined, or some lost and others
/// standing by).
bool replanOn(const proto::Plan &plan, const planner::Cluster &cluster,
              const std::string &dir, const ElasticOptions &options,
              Replan &out, std::string &error);

/// "dp 2 x pp 4 on 8 devices -> dp 2 x pp 3 on 6 devices, predicted 0.0026
/// s -> 0.0029 s per iteration" (the simulator's predictions).
std::string describeReplan(const proto::Plan &before, const proto::Plan &after);

/// Where devices ask to join an elastic run checkpointing into
/// `checkpointDir` (dtfm-run --join): `<checkpointDir>/joins`.
std::string joinDirectory(const std::string &checkpointDir);

/// Runs the plan's workers, re-planning as above: locally, or with
/// `agents` on the hosts of their agents (Agents.h; then a device no agent
/// serves any more is gone too, and agents bring join requests).
/// `workerArguments` are each worker's options without the plan,
/// --checkpoint-dir and --resume-from; `logPath` is the step log rank 0
/// writes (the steps reached). Returns the exit status.
int runElastic(const std::string &planPath, const proto::Plan &plan,
               const std::vector<std::string> &workerArguments,
               const std::string &checkpointDir, const std::string &resumeFrom,
               const std::string &logPath, std::chrono::milliseconds timeout,
               const ElasticOptions &options,
               AgentCoordinator *agents = nullptr);

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_ELASTIC_H
