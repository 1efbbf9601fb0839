//===- Agents.h - Elastic runs across hosts ---------------------*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
//
// A multi-host elastic run has one coordinator and one agent per host:
//
//   coordinator:  dtfm-run plan.pb --execute --elastic --agents PORT
//                          --checkpoint-dir DIR ...
//   each host:    dtfm-run --agent HOST:PORT --devices cpu0,cpu1
//   a new host:   dtfm-run --agent HOST:PORT --join-request request.textproto
//
// The coordinator plans and re-plans as the local elastic launcher does
// (Elastic.h); instead of starting the workers itself, it asks the agent
// of each device to start that device's worker (`dtfm-run plan --execute
// --rank r --store-server HOST:P`, the rendezvous store the coordinator
// serves for that launch) and hears back how each ended. An agent that
// leaves or sends nothing for --timeout (it heartbeats every second) has
// lost its host: its devices are re-planned without, like a killed
// worker's. An agent that comes with a join request asks to join
// (cluster.proto's JoinRequest), as `dtfm-run --join` does locally.
//
// What the hosts share: the checkpoint directory and the run's files (the
// plan, --tokens, --log) at the paths the coordinator names, from its
// working directory -- a shared file system. Every agent proves it sees
// the coordinator's checkpoint directory (a nonce the coordinator wrote
// there) before it is used; one that does not is refused in one line.
//
// Trust: agent and coordinator prove the job token to each other first
// (JobToken.h; an agent never obeys a coordinator without it). Even then
// an agent takes from its coordinator only what a worker needs: paths
// inside the agent's roots (--root DIR; its working directory by default),
// without NULs or `..`; the worker flags of a fixed list; a plugin only
// when the agent itself was started with it. Anything else ends the agent
// with one line naming it.
//
// Protocol (TCP, after the token's exchange; each message a count and that
// many length-prefixed strings, at most 1 MiB in all): agent ->
// coordinator "hello", version,
// devices, join request; coordinator -> agent "welcome" checkpoint dir,
// nonce (or "refused" why); agent -> coordinator "ready" (or "refused"
// why); then coordinator -> agent "start" launch, store port, working
// directory, ranks, arguments / "kill" launch / "exit"; agent ->
// coordinator "end" launch, rank, wait status / "alive".
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_AGENTS_H
#define DTFM_RUNTIME_AGENTS_H

#include "dtfm/Planner/Cluster.h"
#include "dtfm/Runtime/Launcher.h"

#include <chrono>
#include <sys/types.h>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace dtfm::runtime {

struct AgentOptions {
  /// The coordinator, HOST:PORT.
  std::string coordinator;
  /// The devices of the cluster whose workers this host runs.
  std::vector<std::string> devices;
  /// Or a device asking to join: its JoinRequest in text format, and the
  /// file it came from.
  std::string joinRequest, joinRequestPath;
  /// Connecting, and the longest silence of the coordinator.
  std::chrono::milliseconds timeout{60000};
  /// The job token both sides prove (JobToken.h); required.
  std::string jobToken;
  /// The folders every path the coordinator names must lie in (resolved:
  /// links followed); empty: the agent's working directory.
  std::vector<std::string> roots;
  /// The plugins this agent was started with: the only ones its workers
  /// may load.
  std::vector<std::string> plugins;
};

/// Why the worker arguments a coordinator sent (`arguments`: the plan,
/// --execute, flags), run from `workdir`, cannot be started by an agent
/// whose roots (resolved) and plugins are `options`': "" when they can.
std::string workerArgumentsProblem(const std::vector<std::string> &arguments,
                                   const std::string &workdir,
                                   const AgentOptions &options);

/// Whether a worker flag of that list takes a path (--tokens, --log,
/// --checkpoint-dir...).
bool workerFlagTakesPath(const std::string &flag);

/// Why `path` (relative ones from `base`) is not inside one of `roots`
/// (resolved folders): a NUL, a `..` component, a missing folder, or a
/// place outside them; "" when it is inside. `what` names it.
std::string pathOutsideRoots(const std::string &what, const std::string &path,
                             const std::string &base,
                             const std::vector<std::string> &roots);

/// Serves the coordinator until it says the run is over (0) or is lost or
/// refuses this agent (1, with a one-line error).
int runAgent(const AgentOptions &options);

/// Starts `dtfm-run --agent` for `options` as a child process (the process
/// of a launcher's task 0 under --elastic both coordinates and serves its
/// own device); -1 with a one-line `error`. The child stops when the
/// coordinator tells it the run is over, or is silent for the timeout.
pid_t startAgentProcess(const AgentOptions &options, std::string &error);

/// The coordinator's side.
class AgentCoordinator {
public:
  AgentCoordinator();
  ~AgentCoordinator(); ///< tells every agent the run is over

  /// Listens on `port` (0: one the system chooses; port() says which)
  /// for agents that prove `jobToken`, and writes the nonce agents must
  /// find in `checkpointDir`. `timeout` bounds every wait on an agent.
  /// False with a one-line `error`.
  bool listen(int port, const std::string &checkpointDir,
              std::chrono::milliseconds timeout, const std::string &jobToken,
              std::string &error);
  int port() const;

  /// The devices an agent may serve without a join request (the current
  /// cluster's, and those that joined).
  void setKnownDevices(const std::vector<std::string> &devices);
  /// The devices a connected agent serves now.
  std::set<std::string> servedDevices();
  /// Waits until every one of `devices` is served; false with a one-line
  /// `error` naming those that are not within the timeout.
  bool waitForDevices(const std::vector<std::string> &devices,
                      std::string &error);
  /// Join requests that agents brought since the last call.
  std::vector<planner::JoinRequest> takeJoins();

  /// A WorkerLauncher (Launcher.h) over the agents: rank r's worker runs
  /// on the agent serving devices[r]. A worker whose agent is gone ends
  /// Unreachable.
  LaunchOutcome launch(const std::vector<std::string> &arguments,
                       const std::vector<std::string> &devices,
                       std::chrono::milliseconds timeout,
                       const LaunchHooks *hooks);

  struct Impl;

private:
  std::unique_ptr<Impl> impl;
};

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_AGENTS_H
