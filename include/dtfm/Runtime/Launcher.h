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
#include <string>
#include <vector>

namespace dtfm::runtime {

/// `arguments` are the worker's command line without the executable;
/// `devices` names the worker of each rank. Returns the exit status.
int launchLocalWorkers(const std::vector<std::string> &arguments,
                       const std::vector<std::string> &devices,
                       std::chrono::milliseconds timeout);

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_LAUNCHER_H
