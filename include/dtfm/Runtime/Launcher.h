//===- Launcher.h - Local workers, one process per device --------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// `dtfm-run plan.pb --execute` on one machine: starts this executable once
// per device program (the same arguments plus --rank r --store DIR, with a
// fresh rendezvous directory and one BLAS thread per worker), lets them
// write to this process's stdout and stderr, and waits. When a worker
// fails -- an error, a crash, a kill -- it is named, the others get the
// timeout to stop by themselves (they notice the lost peer) and are killed
// after it; the launcher then exits non-zero. Interrupting the launcher
// stops every worker.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_LAUNCHER_H
#define DTFM_RUNTIME_LAUNCHER_H

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace dtfm::runtime {

/// How one local worker ended.
enum class WorkerEnd {
  /// Exited with status 0.
  Finished,
  /// Exited non-zero by itself: its own error, or a peer it lost.
  Failed,
  /// Killed by a signal the launcher did not send (SIGKILL, a crash, the
  /// kernel's out-of-memory killer): the device is gone.
  Killed,
  /// Did not stop within the timeout after another worker failed (stopped,
  /// hung): killed by the launcher.
  Hung,
  /// Never started.
  NotStarted,
  /// Stopped at a checkpoint because the stop file asked it to
  /// (kExitStoppedAtCheckpoint).
  Stopped,
  /// Its host is gone: the agent that ran it (Agents.h) left or stopped
  /// answering. The device is gone.
  Unreachable,
};

/// True for the ends that mean the device is gone (Killed, Hung,
/// Unreachable): what an elastic run re-plans without.
bool deviceLost(WorkerEnd end);

/// This executable's path (/proc/self/exe); "" with `error` when unknown.
std::string thisExecutable(std::string &error);

/// "exited with status 3", "was killed by signal 9 (Killed)".
std::string describeExitStatus(int status);

/// "dtfm-run: error: worker cpu3 (rank 3) <what>" on stderr.
void reportWorker(const std::string &device, int rank,
                  const std::string &what);
/// "did not stop within N ms of the failure; killed".
std::string hungAndKilled(std::chrono::milliseconds timeout);

/// What launchLocalWorkers saw: the exit status (0 when every worker
/// finished) and how each rank's worker ended.
struct LaunchOutcome {
  int status = 0;
  std::vector<WorkerEnd> ends;
  /// The signal of each Killed worker (0 otherwise).
  std::vector<int> signals;
};

/// `arguments` are the worker's command line without the executable;
/// `devices` names the worker of each rank. Returns the exit status.
int launchLocalWorkers(const std::vector<std::string> &arguments,
                       const std::vector<std::string> &devices,
                       std::chrono::milliseconds timeout);

/// What the elastic launcher does while the workers run: `poll` is called
/// about every 200 ms; once it returns true, `stopFile` is created, and the
/// workers (given it with --stop-file) stop at their next checkpoint.
struct LaunchHooks {
  std::function<bool()> poll;
  std::string stopFile;
};

/// What both launchers' wait loops do with the hooks: call `poll` about
/// every 200 ms while no worker failed, and once it returns true create
/// the stop file (then a worker's kExitStoppedAtCheckpoint was asked for).
class StopFilePoller {
public:
  explicit StopFilePoller(const LaunchHooks *hooks) : hooks(hooks) {}
  void poll(bool failed);
  bool requested() const { return stopRequested; }

private:
  const LaunchHooks *hooks;
  bool stopRequested = false;
  std::chrono::steady_clock::time_point next =
      std::chrono::steady_clock::now();
};

/// Starts the workers of a plan somewhere and waits for them: this
/// machine's (launchLocalWorkersWithOutcome) or the agents' (Agents.h).
using WorkerLauncher = std::function<LaunchOutcome(
    const std::vector<std::string> &arguments,
    const std::vector<std::string> &devices, std::chrono::milliseconds timeout,
    const LaunchHooks *hooks)>;

/// The same, with how each worker ended.
LaunchOutcome launchLocalWorkersWithOutcome(
    const std::vector<std::string> &arguments,
    const std::vector<std::string> &devices,
    std::chrono::milliseconds timeout, const LaunchHooks *hooks = nullptr);

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_LAUNCHER_H
