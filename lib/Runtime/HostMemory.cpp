//===- HostMemory.cpp - What this host's memory can take ------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/HostMemory.h"

#include "dtfm/Format/FileIo.h"
#include "dtfm/Plan/MemoryModel.h"

#include "plan.pb.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

using namespace dtfm;
using namespace dtfm::runtime;

namespace {

/// A whole decimal count (trailing blanks allowed); nullopt otherwise.
std::optional<double> count(const std::string &text) {
  size_t end = text.find_last_not_of(" \t\n");
  if (end == std::string::npos)
    return std::nullopt;
  std::string digits = text.substr(0, end + 1);
  if (digits.empty() || digits.size() > 20 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::strtod(digits.c_str(), nullptr);
}

std::string readSmall(const std::string &path) {
  std::string text, error;
  if (!format::readWholeFile(path, text, error, 1 << 20))
    return "";
  return text;
}

std::string gigabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, bytes >= 1e12 ? "%.0f GB" : "%.3g GB",
                bytes / 1e9);
  return text;
}

} // namespace

std::optional<double> dtfm::runtime::memAvailable(const std::string &meminfo) {
  std::istringstream in(meminfo);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("MemAvailable:", 0) == 0) {
      std::istringstream fields(line.substr(13));
      double kb = -1;
      std::string unit;
      if (fields >> kb >> unit && kb >= 0 && unit == "kB")
        return kb * 1024;
    }
  return std::nullopt;
}

std::optional<double>
dtfm::runtime::cgroupHeadroom(const std::string &limit,
                              const std::string &usage) {
  std::optional<double> max = count(limit), used = count(usage);
  // v1 says "no limit" with a page-rounded LONG_MAX.
  if (!max || !used || *max >= 9.0e18)
    return std::nullopt;
  return std::max(0.0, *max - *used);
}

std::optional<HostMemory> dtfm::runtime::hostMemory() {
  std::optional<HostMemory> out;
  if (std::optional<double> available = memAvailable(readSmall("/proc/meminfo")))
    out = HostMemory{*available, "MemAvailable"};
  // This process's cgroup (v2: one line "0::/path").
  std::string cgroup = readSmall("/proc/self/cgroup"), path;
  std::istringstream lines(cgroup);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("0::", 0) == 0)
      path = line.substr(3);
  std::optional<double> headroom;
  std::string source;
  if (!path.empty() && path.find("..") == std::string::npos) {
    std::string dir = "/sys/fs/cgroup" + (path == "/" ? std::string() : path);
    headroom = cgroupHeadroom(readSmall(dir + "/memory.max"),
                              readSmall(dir + "/memory.current"));
    source = "the cgroup's memory.max less memory.current";
  }
  if (!headroom) {
    headroom = cgroupHeadroom(
        readSmall("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
        readSmall("/sys/fs/cgroup/memory/memory.usage_in_bytes"));
    source = "the cgroup's memory.limit_in_bytes less its usage";
  }
  if (headroom && (!out || *headroom < out->availableBytes))
    out = HostMemory{*headroom, source};
  return out;
}

int64_t dtfm::runtime::procStatusBytes(const char *field) {
  std::istringstream status(readSmall("/proc/self/status"));
  std::string line;
  std::string prefix = std::string(field) + ":";
  while (std::getline(status, line))
    if (line.rfind(prefix, 0) == 0)
      return std::strtoll(line.c_str() + prefix.size(), nullptr, 10) * 1024;
  return 0;
}

std::string dtfm::runtime::hostMemoryProblem(const proto::Plan &plan,
                                             const std::vector<int> &ranks,
                                             const HostMemory &host,
                                             double perProcessBytes) {
  double needed = 0;
  for (int rank : ranks) {
    plan::WorkerMemory memory;
    std::string error;
    if (!plan::predictWorkerMemory(plan, rank, memory, error))
      return error;
    needed += memory.total() + perProcessBytes;
  }
  if (needed <= host.availableBytes)
    return "";
  bool one = ranks.size() == 1;
  std::string workers =
      one ? std::string("the worker")
          : "the " + std::to_string(ranks.size()) + " workers";
  return workers + " this host starts would need " + gigabytes(needed) +
         (one ? " at its peak (the plan's predicted tensors, and "
              : " at their peak (the plan's predicted tensors, and ") +
         gigabytes(perProcessBytes) + (one ? " for the process), but "
                                           : " for each process), but ") +
         gigabytes(host.availableBytes) + " is available (" + host.source +
         "): free memory, start fewer workers on this host, or plan with "
         "recomputation or sharded optimizer state (--dtfm-fit-memory)";
}
