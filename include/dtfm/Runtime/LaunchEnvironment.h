//===- LaunchEnvironment.h - A worker's identity from its launcher -*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Clusters start training processes with torchrun, SLURM's srun or a
// Kubernetes Job, and those launchers give each process its identity in
// well-known environment variables. `dtfm-run --execute` without --rank,
// --rendezvous and --store reads them, in this order (the first launcher
// whose rank variable is set wins; explicit flags always win):
//
//   torchrun    RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
//               MASTER_PORT (TORCHELASTIC_RUN_ID the run's id). torchrun
//               sets LOCAL_RANK; that tells it from Kubeflow's PyTorchJob.
//               Under its static rendezvous (TORCHELASTIC_USE_AGENT_STORE)
//               torchrun's agent holds MASTER_PORT: rank 0 serves on the
//               next port.
//   SLURM       SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, the first host of
//               SLURM_JOB_NODELIST (or MASTER_ADDR), MASTER_PORT or else a
//               port derived from SLURM_JOB_ID (the job's id is the run's).
//   Kubernetes  RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT without
//               LOCAL_RANK (a PyTorchJob: one process per pod, WORLD_SIZE
//               counts pods), or JOB_COMPLETION_INDEX (an Indexed Job) with
//               WORLD_SIZE, MASTER_ADDR and MASTER_PORT given by the
//               manifest.
//
// Plain C++, no MLIR; the environment is read through a lookup function so
// that the tests give their own.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_LAUNCHENVIRONMENT_H
#define DTFM_RUNTIME_LAUNCHENVIRONMENT_H

#include <functional>
#include <string>
#include <vector>

namespace dtfm::runtime {

/// Where a worker's rank and rendezvous came from.
struct LaunchIdentity {
  /// "torchrun", "SLURM" or "Kubernetes"; empty when no launcher's
  /// variables are set.
  std::string launcher;
  int rank = -1, worldSize = -1;
  /// The process's index among those on its host (-1: unknown); it picks
  /// the host's GPU.
  int localRank = -1;
  /// The variable it came from ("LOCAL_RANK", "SLURM_LOCALID").
  std::string localFrom;
  /// This host's name as the launcher knows it (SLURMD_NODENAME), or
  /// empty: the system's host name.
  std::string host;
  /// How many hosts the job's processes run on (0: unknown): more than one
  /// and no process may advertise a loopback address. LOCAL_WORLD_SIZE
  /// against WORLD_SIZE (torchrun), SLURM_STEP_NUM_NODES or SLURM_NNODES
  /// (SLURM), one pod per process (Kubernetes).
  int hosts = 0;
  /// HOST:PORT of rank 0's rendezvous store.
  std::string rendezvous;
  /// The job's id when the launcher gives one (SLURM_JOB_ID,
  /// TORCHELASTIC_RUN_ID).
  std::string runId;
  /// The variables each value came from, for messages:
  /// "SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_NODELIST, MASTER_PORT".
  std::string rankFrom, worldFrom, rendezvousFrom;

  bool found() const { return !launcher.empty(); }
  /// "rank 3 of 8 from SLURM_PROCID, rendezvous node0:29500
  /// (SLURM_JOB_NODELIST, a port from SLURM_JOB_ID)".
  std::string describe() const;
};

/// Reads the identity from the environment (`lookup` returns a variable's
/// value or null). An absent launcher leaves `out` not found and returns
/// true; a launcher whose variables are missing, malformed or inconsistent
/// (a rank outside the world, no port, an empty node list) returns false
/// with one line naming the variable.
using EnvironmentLookup = std::function<const char *(const char *name)>;
bool launchIdentityFrom(const EnvironmentLookup &lookup, LaunchIdentity &out,
                        std::string &error);

/// A run id fit to prefix store keys: 1 to 128 letters, digits, '.', '_'
/// or '-'.
bool validRunId(const std::string &id);

/// The interface whose address the peers connect to, when no --iface names
/// one: GLOO_SOCKET_IFNAME (its first name, as Gloo takes it), else the
/// first of `interfaces` that NCCL_SOCKET_IFNAME selects in NCCL's syntax
/// ("eth" a prefix, "=eth0" exact, "^docker,lo" all but those; comma
/// lists). `name` is left empty when neither is set; false with `error`
/// when the variable names no interface in `interfaces`.
bool interfaceFromEnvironment(const EnvironmentLookup &lookup,
                              const std::vector<std::string> &interfaces,
                              std::string &name, std::string &from,
                              std::string &error);

/// This host's interfaces that are up with an IPv4 address, in the
/// system's order.
std::vector<std::string> hostInterfaces();

/// --device-map FILE: which of the plan's devices each host runs, one line
/// per host, "HOST DEVICE [DEVICE...]" ('#' starts a comment). A process
/// with local rank L on HOST runs the L-th device of its line, whatever its
/// launcher's global rank: the map pins plan devices to hosts.
struct DeviceMap {
  struct Host {
    std::string name;
    std::vector<std::string> devices;
    int line = 0;
  };
  std::vector<Host> hosts;
  std::string path; ///< for messages
};

/// Reads a device map; false with "FILE:LINE: ..." in `error`.
bool parseDeviceMap(const std::string &text, const std::string &path,
                    DeviceMap &out, std::string &error);

/// Checks `map` against the plan's devices (each on exactly one host) and
/// the cluster's nodes (each node's devices on one host, each host's in
/// one node: `nodes` lists the devices of each node), then finds the plan
/// rank of the process with `localRank` (named by `localFrom`) on `host`
/// (its full name or the part before the first '.'). False with a
/// one-line `error`.
bool rankFromDeviceMap(const DeviceMap &map,
                       const std::vector<std::string> &planDevices,
                       const std::vector<std::vector<std::string>> &nodes,
                       const std::string &host, int localRank,
                       const std::string &localFrom, int &rank,
                       std::string &error);

/// The first host of a SLURM node list: "node[03-05,9],gpu1" gives
/// "node03", "a,b" gives "a". False with `error` when it is malformed.
bool firstHostOfNodeList(const std::string &list, std::string &host,
                         std::string &error);

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_LAUNCHENVIRONMENT_H
