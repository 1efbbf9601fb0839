//===- Cluster.cpp - Devices and links of a heterogeneous cluster ---------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// What a cluster is and what the planner derives from it (checks, its
// fingerprint, nodes, tensor-parallel groups, sub-clusters); reading and
// writing it in every encoding is ClusterIo.cpp.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Cluster.h"
#include "dtfm/Planner/CostModel.h"
#include "dtfm/Support/Hash.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <unordered_map>

using namespace dtfm::planner;

void SquareMatrix::symmetrize() {
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) {
      double mean = ((*this)(i, j) + (*this)(j, i)) / 2.0;
      (*this)(i, j) = (*this)(j, i) = mean;
    }
}

static std::string linkName(const Cluster &c, size_t a, size_t b) {
  return "link " + c.devices[a].name + " <-> " + c.devices[b].name;
}

bool Cluster::validate(std::string &error) const {
  size_t n = devices.size();
  if (n == 0) {
    error = "cluster has no devices";
    return false;
  }
  if (delayMs.size() != n || bandwidthGbps.size() != n) {
    error = "cluster has " + std::to_string(n) + " devices but " +
            std::to_string(delayMs.size()) + "x" +
            std::to_string(delayMs.size()) + " delays and " +
            std::to_string(bandwidthGbps.size()) + "x" +
            std::to_string(bandwidthGbps.size()) + " bandwidths";
    return false;
  }
  for (const Device &d : devices) {
    if (!(d.peakFlops >= 0) || !(d.efficiency > 0 && d.efficiency <= 1) ||
        !(d.memoryBytes >= 0) || !std::isfinite(d.peakFlops) ||
        !std::isfinite(d.memoryBytes) || !(d.memoryBandwidth >= 0) ||
        !std::isfinite(d.memoryBandwidth)) {
      error = "device " + d.name +
              ": expected peak_flops >= 0, 0 < efficiency <= 1, "
              "memory_bytes >= 0 and memory_bytes_per_second >= 0";
      return false;
    }
  }
  for (size_t a = 0; a < n; ++a)
    for (size_t b = 0; b < n; ++b) {
      if (a == b)
        continue;
      double delay = delayMs(a, b), bw = bandwidthGbps(a, b);
      if (!std::isfinite(delay) || delay < 0) {
        error = linkName(*this, a, b) +
                ": delay must be finite and >= 0, got " +
                std::to_string(delay) + " ms";
        return false;
      }
      if (!std::isfinite(bw) || bw <= 0) {
        error = linkName(*this, a, b) +
                ": bandwidth must be finite and > 0, got " +
                std::to_string(bw) + " Gbps";
        return false;
      }
    }
  return true;
}

uint64_t dtfm::planner::clusterFingerprint(const Cluster &cluster) {
  uint64_t hash = kFnv1aOffset;
  auto mix = [&](const std::string &text) {
    hash = fnv1a(std::string_view("\xff", 1), fnv1a(text, hash)); // separator
  };
  // Each distinct value is formatted once: a cluster of N devices has N^2
  // links but few link kinds (2 million snprintf calls took 1 s at 1024
  // devices). The hash is of the same text as ever: fingerprints recorded
  // in plans and checkpoints still match.
  std::unordered_map<uint64_t, std::string> formatted;
  auto number = [&](double value) {
    uint64_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    auto [it, inserted] = formatted.try_emplace(bits);
    if (inserted) {
      char buffer[32];
      std::snprintf(buffer, sizeof(buffer), "%.17g", value);
      it->second = buffer;
    }
    mix(it->second);
  };
  for (const Device &d : cluster.devices) {
    mix(d.name);
    mix(d.region);
    number(d.peakFlops);
    number(d.efficiency);
    number(d.memoryBytes);
    mix(d.node);
    // Only where given, so that clusters without keep their fingerprints.
    if (d.memoryBandwidth != 0)
      number(d.memoryBandwidth);
  }
  for (size_t i = 0; i < cluster.size(); ++i)
    for (size_t j = 0; j < cluster.size(); ++j)
      if (i != j) {
        number(cluster.delayMs(i, j));
        number(cluster.bandwidthGbps(i, j));
      }
  return hash;
}

void dtfm::planner::inferNodes(Cluster &cluster, double minBandwidthGbps) {
  size_t n = cluster.size();
  std::vector<int> nodeOf(n, -1);
  int nodes = 0;
  for (size_t first = 0; first < n; ++first) {
    if (nodeOf[first] >= 0)
      continue;
    std::vector<size_t> todo{first};
    nodeOf[first] = nodes;
    while (!todo.empty()) {
      size_t a = todo.back();
      todo.pop_back();
      for (size_t b = 0; b < n; ++b)
        if (b != a && nodeOf[b] < 0 &&
            cluster.bandwidthGbps(a, b) >= minBandwidthGbps) {
          nodeOf[b] = nodes;
          todo.push_back(b);
        }
    }
    ++nodes;
  }
  for (size_t i = 0; i < n; ++i)
    cluster.devices[i].node = "node" + std::to_string(nodeOf[i]);
}

std::vector<std::vector<int>>
dtfm::planner::nodeMembers(const Cluster &cluster) {
  std::vector<std::vector<int>> nodes;
  std::map<std::string, size_t> indexOf;
  for (size_t i = 0; i < cluster.size(); ++i) {
    const Device &d = cluster.devices[i];
    std::string node = d.node.empty() ? "\x01" + d.name : d.node;
    auto [it, fresh] = indexOf.emplace(node, nodes.size());
    if (fresh)
      nodes.emplace_back();
    nodes[it->second].push_back(static_cast<int>(i));
  }
  return nodes;
}

bool dtfm::planner::tensorParallelGroups(const Cluster &cluster, int degree,
                                         std::vector<std::vector<int>> &groups,
                                         std::string &error) {
  groups.clear();
  if (degree < 1) {
    error = "tensor-parallel degree must be at least 1, got " +
            std::to_string(degree);
    return false;
  }
  size_t largest = 0;
  for (const std::vector<int> &devices : nodeMembers(cluster)) {
    largest = std::max(largest, devices.size());
    for (size_t k = 0; k + degree <= devices.size(); k += degree)
      groups.emplace_back(devices.begin() + k, devices.begin() + k + degree);
  }
  if (groups.empty()) {
    error = "tensor parallelism stays inside a node, and no node of cluster '" +
            cluster.name + "' has " + std::to_string(degree) +
            " devices (the largest has " + std::to_string(largest) + ")";
    return false;
  }
  return true;
}

Cluster
dtfm::planner::groupCluster(const Cluster &cluster,
                            const std::vector<std::vector<int>> &groups) {
  Cluster grouped;
  grouped.name = cluster.name;
  size_t n = groups.size();
  grouped.delayMs = SquareMatrix(n);
  grouped.bandwidthGbps = SquareMatrix(n);
  for (size_t a = 0; a < n; ++a) {
    Device device = cluster.devices[groups[a].front()];
    for (int member : groups[a]) {
      const Device &d = cluster.devices[member];
      if (d.speed() < device.speed()) {
        device.peakFlops = d.peakFlops;
        device.efficiency = d.efficiency;
      }
      device.memoryBytes = std::min(device.memoryBytes, d.memoryBytes);
      device.memoryBandwidth =
          std::min(device.memoryBandwidth, d.memoryBandwidth);
    }
    size_t t = groups[a].size();
    double latency = 0, perByte = 0;
    for (size_t r = 0; t > 1 && r < t; ++r) {
      int from = groups[a][r], to = groups[a][(r + 1) % t];
      latency = std::max(latency, cluster.latencySeconds(from, to));
      perByte = std::max(
          perByte, serialisationSeconds(1.0, cluster.bandwidthGbps(from, to)));
    }
    // A group of one has no hops: 0 for both.
    device.groupSumLatencySeconds = ringAllReduceSeconds(t, latency);
    device.groupSumSecondsPerByte =
        ringAllReduceSeconds(t, perByte) / static_cast<double>(t);
    grouped.devices.push_back(device);
    for (size_t b = 0; b < n; ++b) {
      if (a == b)
        continue;
      double delay = 0, bandwidth = 0;
      for (size_t r = 0; r < groups[a].size(); ++r) {
        int from = groups[a][r], to = groups[b][r % groups[b].size()];
        delay = std::max(delay, cluster.delayMs(from, to));
        double link = cluster.bandwidthGbps(from, to);
        bandwidth = r == 0 ? link : std::min(bandwidth, link);
      }
      grouped.delayMs(a, b) = delay;
      grouped.bandwidthGbps(a, b) = bandwidth;
    }
  }
  return grouped;
}

/// Numbers the values of `classOf` over the devices (in order of first
/// appearance) into `classes`; whether every link between two devices is
/// the same as every other between their two classes (bit for bit), so
/// that the classes give the links exactly. Fewer than two classes for
/// more than two devices, or one device per class, saves nothing: false.
static bool sameLinksPerClass(const Cluster &cluster,
                              std::string (*classOf)(const Device &),
                              std::vector<uint32_t> &classes) {
  size_t n = cluster.size();
  std::map<std::string, uint32_t> number;
  classes.clear();
  for (const Device &d : cluster.devices)
    classes.push_back(
        number.emplace(classOf(d), static_cast<uint32_t>(number.size()))
            .first->second);
  size_t count = number.size();
  if (count >= n)
    return false;
  // The first link seen between two classes; every other must equal it.
  std::vector<int64_t> first(count * count, -1);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) {
      if (i == j) {
        // Read back as 0: the classes hold no device's link to itself.
        if (cluster.delayMs(i, i) != 0 || cluster.bandwidthGbps(i, i) != 0)
          return false;
        continue;
      }
      int64_t &seen = first[classes[i] * count + classes[j]];
      if (seen < 0) {
        seen = static_cast<int64_t>(i * n + j);
        continue;
      }
      size_t a = static_cast<size_t>(seen) / n,
             b = static_cast<size_t>(seen) % n;
      if (!(cluster.delayMs(i, j) == cluster.delayMs(a, b)) ||
          !(cluster.bandwidthGbps(i, j) == cluster.bandwidthGbps(a, b)))
        return false;
    }
  return true;
}

bool dtfm::planner::linksByClass(const Cluster &cluster, LinkClasses &links) {
  for (auto classOf : {+[](const Device &d) { return d.region; },
                       +[](const Device &d) { return d.node; }}) {
    std::vector<uint32_t> classes;
    if (!sameLinksPerClass(cluster, classOf, classes))
      continue;
    size_t count = *std::max_element(classes.begin(), classes.end()) + 1;
    links.classOf = std::move(classes);
    links.count = count;
    links.delayMs.assign(count * count, 0);
    links.bandwidthGbps.assign(count * count, 0);
    for (size_t i = 0; i < cluster.size(); ++i)
      for (size_t j = 0; j < cluster.size(); ++j)
        if (i != j) {
          size_t at = links.classOf[i] * count + links.classOf[j];
          links.delayMs[at] = cluster.delayMs(i, j);
          links.bandwidthGbps[at] = cluster.bandwidthGbps(i, j);
        }
    return true;
  }
  return false;
}

bool dtfm::planner::expandLinkClasses(const LinkClasses &links,
                                      Cluster &cluster, std::string &error) {
  size_t n = cluster.size(), count = links.count;
  bool inRange = std::all_of(links.classOf.begin(), links.classOf.end(),
                             [&](uint32_t c) { return c < count; });
  if (links.classOf.size() != n || !inRange || count == 0 || count > n ||
      links.delayMs.size() != count * count ||
      links.bandwidthGbps.size() != count * count) {
    error = "links by class need a class below C for each of the " +
            std::to_string(n) + " devices and C x C links (C = " +
            std::to_string(count) + "), got " +
            std::to_string(links.classOf.size()) + " classes and " +
            std::to_string(links.delayMs.size()) + " and " +
            std::to_string(links.bandwidthGbps.size()) + " links";
    return false;
  }
  cluster.delayMs = SquareMatrix(n);
  cluster.bandwidthGbps = SquareMatrix(n);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j)
      if (i != j) {
        size_t at = links.classOf[i] * count + links.classOf[j];
        cluster.delayMs(i, j) = links.delayMs[at];
        cluster.bandwidthGbps(i, j) = links.bandwidthGbps[at];
      }
  return true;
}

Cluster dtfm::planner::subCluster(const Cluster &cluster,
                                  const std::vector<int> &keep) {
  Cluster sub;
  sub.name = cluster.name;
  size_t n = keep.size();
  sub.delayMs = SquareMatrix(n);
  sub.bandwidthGbps = SquareMatrix(n);
  for (size_t i = 0; i < n; ++i) {
    sub.devices.push_back(cluster.devices[keep[i]]);
    for (size_t j = 0; j < n; ++j) {
      sub.delayMs(i, j) = cluster.delayMs(keep[i], keep[j]);
      sub.bandwidthGbps(i, j) = cluster.bandwidthGbps(keep[i], keep[j]);
    }
  }
  return sub;
}
