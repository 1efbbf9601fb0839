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

/// The first host of a SLURM node list: "node[03-05,9],gpu1" gives
/// "node03", "a,b" gives "a". False with `error` when it is malformed.
bool firstHostOfNodeList(const std::string &list, std::string &host,
                         std::string &error);

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_LAUNCHENVIRONMENT_H
