//===- HostMemory.h - What this host's memory can take ----------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Before workers start, the plan's predicted peak (MemoryModel.h) of the
// workers this host runs is compared with what the host can give them: the
// kernel's MemAvailable and, inside a cgroup (a container, a SLURM job), the
// cgroup's limit less what it uses. A plan that cannot fit is refused in one
// line instead of dying in bad_alloc or at the hands of the OOM killer.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_HOSTMEMORY_H
#define DTFM_RUNTIME_HOSTMEMORY_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtfm::proto {
class Plan;
} // namespace dtfm::proto

namespace dtfm::runtime {

/// The memory the host can give, and where the figure comes from
/// ("MemAvailable", "cgroup memory.max").
struct HostMemory {
  double availableBytes = 0;
  std::string source;
};

/// /proc/meminfo's MemAvailable (bytes), when `meminfo` has it.
std::optional<double> memAvailable(const std::string &meminfo);
/// A cgroup's headroom: its limit (`limit`: cgroup v2's memory.max or
/// v1's memory.limit_in_bytes; "max" or a huge v1 value: none) less its
/// usage (`usage`); nullopt when there is no limit or the text is not a
/// count.
std::optional<double> cgroupHeadroom(const std::string &limit,
                                     const std::string &usage);
/// This host's memory for new workers: the smaller of MemAvailable and this
/// process's cgroup headroom (v2, then v1); nullopt when neither can be
/// read (then nothing is checked).
std::optional<HostMemory> hostMemory();

/// A field of /proc/self/status in bytes ("VmRSS", "VmHWM"; 0 if absent).
int64_t procStatusBytes(const char *field);

/// "" when the workers of `ranks` fit in `host`: each needs its predicted
/// peak plus `perProcessBytes` (the executable, its libraries and the plan:
/// what this process holds resident). Else the one-line refusal; a plan
/// that cannot be decoded gives its error.
std::string hostMemoryProblem(const proto::Plan &plan,
                              const std::vector<int> &ranks,
                              const HostMemory &host, double perProcessBytes);

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_HOSTMEMORY_H
