//===- LaunchEnvironment.cpp - A worker's identity from its launcher ------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/LaunchEnvironment.h"

#include "AgentProtocol.h" // agents::number: whole decimals in a range
#include "Rendezvous.h"    // rendezvous::ipv4Interfaces

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <map>
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

bool dtfm::runtime::validRunId(const std::string &id) {
  if (id.empty() || id.size() > 128)
    return false;
  for (char c : id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' &&
        c != '_' && c != '-')
      return false;
  return true;
}

std::vector<std::string> dtfm::runtime::hostInterfaces() {
  std::vector<std::string> names;
  for (const auto &[name, address] : rendezvous::ipv4Interfaces())
    names.push_back(name);
  return names;
}

bool dtfm::runtime::interfaceFromEnvironment(
    const EnvironmentLookup &lookup, const std::vector<std::string> &interfaces,
    std::string &name, std::string &from, std::string &error) {
  name.clear();
  auto list = [](std::string text) {
    std::vector<std::string> items;
    size_t start = 0;
    while (start <= text.size()) {
      size_t comma = text.find(',', start);
      if (comma == std::string::npos)
        comma = text.size();
      if (comma > start)
        items.push_back(text.substr(start, comma - start));
      start = comma + 1;
    }
    return items;
  };
  auto known = [&](const std::string &candidate) {
    for (const std::string &i : interfaces)
      if (i == candidate)
        return true;
    return false;
  };
  const char *gloo = lookup("GLOO_SOCKET_IFNAME");
  if (gloo && *gloo) {
    from = "GLOO_SOCKET_IFNAME";
    std::vector<std::string> names = list(gloo);
    if (names.empty() || !known(names[0])) {
      error = std::string("GLOO_SOCKET_IFNAME='") + gloo +
              "' names no interface of this host that is up with an IPv4 "
              "address";
      return false;
    }
    name = names[0];
    return true;
  }
  const char *nccl = lookup("NCCL_SOCKET_IFNAME");
  if (!nccl || !*nccl)
    return true;
  from = "NCCL_SOCKET_IFNAME";
  std::string spec = nccl;
  bool exclude = !spec.empty() && spec[0] == '^';
  if (exclude)
    spec.erase(0, 1);
  bool exact = !spec.empty() && spec[0] == '=';
  if (exact)
    spec.erase(0, 1);
  std::vector<std::string> patterns = list(spec);
  for (const std::string &candidate : interfaces) {
    bool matches = false;
    for (const std::string &p : patterns)
      matches |= exact ? candidate == p : candidate.rfind(p, 0) == 0;
    if (matches != exclude) {
      name = candidate;
      return true;
    }
  }
  error = std::string("NCCL_SOCKET_IFNAME='") + nccl +
          "' selects no interface of this host that is up with an IPv4 "
          "address";
  return false;
}

bool dtfm::runtime::parseDeviceMap(const std::string &text,
                                  const std::string &path, DeviceMap &out,
                                  std::string &error) {
  out = DeviceMap();
  out.path = path;
  std::map<std::string, int> hostLine, deviceLine;
  size_t start = 0;
  for (int line = 1; start <= text.size(); ++line) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos)
      end = text.size();
    std::string content = text.substr(start, end - start);
    start = end + 1;
    content = content.substr(0, content.find('#'));
    std::vector<std::string> words;
    size_t at = 0;
    while (at < content.size()) {
      while (at < content.size() &&
             std::isspace(static_cast<unsigned char>(content[at])))
        ++at;
      size_t from = at;
      while (at < content.size() &&
             !std::isspace(static_cast<unsigned char>(content[at])))
        ++at;
      if (at > from)
        words.push_back(content.substr(from, at - from));
    }
    if (words.empty())
      continue;
    std::string where = path + ":" + std::to_string(line) + ": ";
    if (words.size() < 2) {
      error = where + "expected a host and its devices, got '" + words[0] +
              "'";
      return false;
    }
    for (const std::string &w : words)
      for (char c : w)
        if (!std::isalnum(static_cast<unsigned char>(c)) &&
            !std::strchr("._-", c)) {
          error = where + "'" + w + "' is not a host or device name "
                  "(letters, digits, '.', '_', '-')";
          return false;
        }
    if (hostLine.count(words[0])) {
      error = where + "host " + words[0] + " is listed twice (also line " +
              std::to_string(hostLine[words[0]]) + ")";
      return false;
    }
    hostLine[words[0]] = line;
    DeviceMap::Host host{words[0], {}, line};
    for (size_t i = 1; i < words.size(); ++i) {
      if (deviceLine.count(words[i])) {
        error = where + "device " + words[i] + " is mapped twice (also line " +
                std::to_string(deviceLine[words[i]]) + ")";
        return false;
      }
      deviceLine[words[i]] = line;
      host.devices.push_back(words[i]);
    }
    out.hosts.push_back(host);
  }
  if (out.hosts.empty()) {
    error = path + ": no host in it (lines of 'HOST DEVICE [DEVICE...]')";
    return false;
  }
  return true;
}

bool dtfm::runtime::rankFromDeviceMap(
    const DeviceMap &map, const std::vector<std::string> &planDevices,
    const std::vector<std::vector<std::string>> &nodes, const std::string &host,
    int localRank, const std::string &localFrom, int &rank,
    std::string &error) {
  std::map<std::string, int> planRank;
  for (size_t r = 0; r < planDevices.size(); ++r)
    planRank[planDevices[r]] = static_cast<int>(r);
  std::map<std::string, size_t> nodeOf;
  for (size_t n = 0; n < nodes.size(); ++n)
    for (const std::string &d : nodes[n])
      nodeOf[d] = n;
  std::map<std::string, const DeviceMap::Host *> hostOf;
  for (const DeviceMap::Host &h : map.hosts) {
    std::string where = map.path + ":" + std::to_string(h.line) + ": ";
    for (const std::string &d : h.devices) {
      if (!planRank.count(d)) {
        error = where + "device " + d + " is not one of the plan's";
        return false;
      }
      hostOf[d] = &h;
      if (nodeOf.count(d) && nodeOf.count(h.devices[0]) &&
          nodeOf[d] != nodeOf[h.devices[0]]) {
        error = where + "host " + h.name + " holds " + h.devices[0] + " and " +
                d + ", which the plan's cluster puts on different nodes "
                "(name each device's node in the cluster file)";
        return false;
      }
    }
  }
  for (const std::string &d : planDevices)
    if (!hostOf.count(d)) {
      error = map.path + ": the plan's device " + d + " is on no host";
      return false;
    }
  for (const std::vector<std::string> &node : nodes)
    for (const std::string &d : node)
      if (hostOf.count(d) && hostOf.count(node[0]) &&
          hostOf[d] != hostOf[node[0]]) {
        error = map.path + ": " + node[0] + " and " + d + " are one node of "
                "the plan's cluster, but the map puts them on hosts " +
                hostOf[node[0]]->name + " and " + hostOf[d]->name;
        return false;
      }
  std::string shortName = host.substr(0, host.find('.'));
  const DeviceMap::Host *mine = nullptr;
  for (const DeviceMap::Host &h : map.hosts)
    if (h.name == host || h.name == shortName)
      mine = &h;
  if (!mine) {
    error = map.path + ": this host (" + host + ") is not in it";
    return false;
  }
  if (localRank < 0) {
    error = map.path + ": the launcher gives no local rank (LOCAL_RANK, "
            "SLURM_LOCALID) to pick this process's device on " + mine->name;
    return false;
  }
  if (static_cast<size_t>(localRank) >= mine->devices.size()) {
    error = map.path + ":" + std::to_string(mine->line) + ": host " +
            mine->name + " runs " + std::to_string(mine->devices.size()) +
            " device(s), but this process is local rank " +
            std::to_string(localRank) + " (" + localFrom + ")";
    return false;
  }
  rank = planRank[mine->devices[static_cast<size_t>(localRank)]];
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
    if (env.text("TORCHELASTIC_USE_AGENT_STORE") == "True") {
      // torchrun's static rendezvous: its agent on the first node serves
      // its own store on MASTER_PORT; rank 0 serves dtfm's on the next.
      int port = 0;
      env.number("MASTER_PORT", 1, 65534, port);
      if (port == 0 || port == 65535) {
        error = "MASTER_PORT is 65535: torchrun's agent holds it, and there "
                "is no next port for dtfm's rendezvous";
        return fail("torchrun");
      }
      out.rendezvous = env.text("MASTER_ADDR") + ":" + std::to_string(port + 1);
      out.rendezvousFrom = "MASTER_ADDR, MASTER_PORT + 1, as torchrun's "
                           "agent holds MASTER_PORT";
    }
    out.localFrom = "LOCAL_RANK";
    out.runId = env.text("TORCHELASTIC_RUN_ID");
    if (!out.runId.empty() && !validRunId(out.runId)) {
      error = "TORCHELASTIC_RUN_ID='" + out.runId + "' is not fit as the run's id (letters, "
              "digits, '.', '_' and '-', at most 128; --run-id overrides it)";
      return fail("torchrun");
    }
    int perHost = -1;
    if (!env.optionalNumber("LOCAL_WORLD_SIZE", kMaxWorld, perHost))
      return fail("torchrun");
    if (perHost > 0)
      out.hosts = (out.worldSize + perHost - 1) / perHost;
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
    out.localFrom = "SLURM_LOCALID";
    out.host = env.text("SLURMD_NODENAME");
    out.runId = env.text("SLURM_JOB_ID");
    if (!out.runId.empty() && !validRunId(out.runId)) {
      error = "SLURM_JOB_ID='" + out.runId + "' is not fit as the run's id (letters, "
              "digits, '.', '_' and '-', at most 128; --run-id overrides it)";
      return fail("SLURM");
    }
    const char *nodes =
        env.has("SLURM_STEP_NUM_NODES") ? "SLURM_STEP_NUM_NODES" : "SLURM_NNODES";
    if (!env.optionalNumber(nodes, kMaxWorld, out.hosts))
      return fail("SLURM");
    out.hosts = std::max(out.hosts, 0);
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
    out.localFrom = "one process per pod";
    out.hosts = out.worldSize;
    return true;
  }
  return true;
}
