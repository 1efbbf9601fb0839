//===- LaunchEnvironment.cpp - A worker's identity from its launcher ------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/LaunchEnvironment.h"

#include "AgentProtocol.h" // agents::number: whole decimals in a range

#include <cctype>
#include <cstdint>
#include <limits>

using namespace dtfm::runtime;

namespace {

/// Reads the launcher's variables with one-line errors naming them.
struct Reader {
  const EnvironmentLookup &lookup;
  std::string &error;

  bool has(const char *name) const {
    const char *v = lookup(name);
    return v && *v;
  }
  std::string text(const char *name) const {
    const char *v = lookup(name);
    return v ? v : "";
  }
  bool number(const char *name, int64_t low, int64_t high, int &out) {
    if (!has(name)) {
      error = std::string(name) + " is not set";
      return false;
    }
    std::optional<long long> value = agents::number(text(name), low, high);
    if (!value) {
      error = std::string(name) + "='" + text(name) +
              "' is not a whole number in [" + std::to_string(low) + ", " +
              std::to_string(high) + "]";
      return false;
    }
    out = static_cast<int>(*value);
    return true;
  }
  /// An optional number: -1 when the variable is absent.
  bool optionalNumber(const char *name, int64_t high, int &out) {
    out = -1;
    return !has(name) || number(name, 0, high, out);
  }
};

constexpr int64_t kMaxWorld = 1000000;

/// The rank must lie in the world.
bool rankInWorld(const LaunchIdentity &id, std::string &error) {
  if (id.rank < id.worldSize)
    return true;
  error = id.rankFrom + " " + std::to_string(id.rank) + " is outside " +
          id.worldFrom + " " + std::to_string(id.worldSize);
  return false;
}

} // namespace

bool dtfm::runtime::firstHostOfNodeList(const std::string &list,
                                        std::string &host,
                                        std::string &error) {
  // The first entry: up to a comma outside brackets.
  size_t end = 0;
  int depth = 0;
  for (; end < list.size(); ++end) {
    char c = list[end];
    if (c == '[')
      ++depth;
    else if (c == ']')
      --depth;
    else if (c == ',' && depth == 0)
      break;
    if (depth < 0 || depth > 1)
      break;
  }
  std::string entry = list.substr(0, end);
  size_t open = entry.find('[');
  auto malformed = [&] {
    error = "SLURM_JOB_NODELIST='" + list + "' is not a node list";
    return false;
  };
  if (entry.empty() || depth != 0)
    return malformed();
  if (open == std::string::npos) {
    host = entry;
    return true;
  }
  // "node[03-05,9]": the prefix and the first number of the range, its
  // zero padding kept.
  size_t close = entry.find(']', open);
  if (open == 0 || close == std::string::npos || close + 1 != entry.size())
    return malformed();
  std::string first;
  for (size_t i = open + 1; i < close && std::isdigit(
                                             static_cast<unsigned char>(entry[i]));
       ++i)
    first += entry[i];
  if (first.empty())
    return malformed();
  host = entry.substr(0, open) + first;
  return true;
}

std::string LaunchIdentity::describe() const {
  return "rank " + std::to_string(rank) + " of " + std::to_string(worldSize) +
         " from " + launcher + " (" + rankFrom + ", " + worldFrom +
         "), rendezvous " + rendezvous + " (" + rendezvousFrom + ")";
}

bool dtfm::runtime::launchIdentityFrom(const EnvironmentLookup &lookup,
                                       LaunchIdentity &out,
                                       std::string &error) {
  out = LaunchIdentity();
  Reader env{lookup, error};
  auto fail = [&](const std::string &launcher) {
    error = launcher + " launch: " + error;
    out = LaunchIdentity();
    return false;
  };
  // The rendezvous of torchrun and Kubernetes: MASTER_ADDR:MASTER_PORT.
  auto master = [&]() {
    int port = 0;
    if (!env.has("MASTER_ADDR")) {
      error = "MASTER_ADDR is not set (rank 0's host)";
      return false;
    }
    if (!env.number("MASTER_PORT", 1, 65535, port))
      return false;
    out.rendezvous = env.text("MASTER_ADDR") + ":" + std::to_string(port);
    out.rendezvousFrom = "MASTER_ADDR, MASTER_PORT";
    return true;
  };

  if (env.has("RANK") && env.has("LOCAL_RANK")) {
    out.launcher = "torchrun";
    out.rankFrom = "RANK";
    out.worldFrom = "WORLD_SIZE";
    if (!env.number("RANK", 0, kMaxWorld - 1, out.rank) ||
        !env.number("WORLD_SIZE", 1, kMaxWorld, out.worldSize) ||
        !env.number("LOCAL_RANK", 0, kMaxWorld - 1, out.localRank) ||
        !rankInWorld(out, error) || !master())
      return fail("torchrun");
    out.runId = env.text("TORCHELASTIC_RUN_ID");
    return true;
  }

  if (env.has("SLURM_PROCID")) {
    out.launcher = "SLURM";
    out.rankFrom = "SLURM_PROCID";
    out.worldFrom = "SLURM_NTASKS";
    if (!env.number("SLURM_PROCID", 0, kMaxWorld - 1, out.rank) ||
        !env.number("SLURM_NTASKS", 1, kMaxWorld, out.worldSize) ||
        !env.optionalNumber("SLURM_LOCALID", kMaxWorld - 1, out.localRank) ||
        !rankInWorld(out, error))
      return fail("SLURM");
    std::string host;
    if (env.has("MASTER_ADDR")) {
      host = env.text("MASTER_ADDR");
      out.rendezvousFrom = "MASTER_ADDR";
    } else if (env.has("SLURM_JOB_NODELIST")) {
      if (!firstHostOfNodeList(env.text("SLURM_JOB_NODELIST"), host, error))
        return fail("SLURM");
      out.rendezvousFrom = "SLURM_JOB_NODELIST";
    } else {
      error = "neither MASTER_ADDR nor SLURM_JOB_NODELIST is set (rank 0's "
              "host)";
      return fail("SLURM");
    }
    out.runId = env.text("SLURM_JOB_ID");
    int port = 0;
    if (env.has("MASTER_PORT")) {
      if (!env.number("MASTER_PORT", 1, 65535, port))
        return fail("SLURM");
      out.rendezvousFrom += ", MASTER_PORT";
    } else {
      // Two jobs on one node must not meet: a port from the job's id.
      int job = 0;
      if (!env.number("SLURM_JOB_ID", 0, std::numeric_limits<int>::max(),
                      job)) {
        error += " (and MASTER_PORT is not set either: the port of rank "
                 "0's rendezvous)";
        return fail("SLURM");
      }
      port = 20000 + job % 20000;
      out.rendezvousFrom += ", a port from SLURM_JOB_ID";
    }
    out.rendezvous = host + ":" + std::to_string(port);
    return true;
  }

  if (env.has("RANK") || env.has("JOB_COMPLETION_INDEX")) {
    // Kubeflow's PyTorchJob (RANK, WORLD_SIZE counting pods), or an Indexed
    // Job whose manifest sets WORLD_SIZE: one process per pod.
    out.launcher = "Kubernetes";
    out.rankFrom = env.has("RANK") ? "RANK" : "JOB_COMPLETION_INDEX";
    out.worldFrom = "WORLD_SIZE";
    if (!env.number(out.rankFrom.c_str(), 0, kMaxWorld - 1, out.rank) ||
        !env.number("WORLD_SIZE", 1, kMaxWorld, out.worldSize) ||
        !rankInWorld(out, error) || !master())
      return fail("Kubernetes");
    out.localRank = 0;
    return true;
  }
  return true;
}
