//===- Cluster.cpp - Devices and links of a heterogeneous cluster ---------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Cluster.h"
#include "dtfm/Support/Hash.h"

#include "plan.pb.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

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

bool dtfm::planner::readCsvMatrix(const std::string &path, SquareMatrix &matrix,
                                  std::string &error) {
  std::ifstream in(path);
  if (!in) {
    error = path + ": cannot open file";
    return false;
  }
  std::vector<std::vector<double>> rows;
  std::string line;
  size_t lineNo = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos)
      continue;
    if (line.find_last_not_of(" \t") != std::string::npos &&
        line[line.find_last_not_of(" \t")] == ',') {
      error = path + ":" + std::to_string(lineNo) +
              ": a trailing comma (an empty last column)";
      return false;
    }
    if (rows.size() >= kMaxClusterDevices) {
      error = path + ":" + std::to_string(lineNo) + ": more than " +
              std::to_string(kMaxClusterDevices) + " rows";
      return false;
    }
    std::vector<double> row;
    std::stringstream cells(line);
    std::string cell;
    size_t column = 0;
    while (std::getline(cells, cell, ',')) {
      ++column;
      const char *begin = cell.c_str();
      char *end = nullptr;
      errno = 0;
      double value = std::strtod(begin, &end);
      while (end && (*end == ' ' || *end == '\t'))
        ++end;
      if (end == begin || *end != '\0' || errno == ERANGE ||
          !std::isfinite(value)) {
        error = path + ":" + std::to_string(lineNo) + ":" +
                std::to_string(column) + ": expected a finite number, got '" +
                cell + "'";
        return false;
      }
      row.push_back(value);
    }
    if (!rows.empty() && row.size() != rows.front().size()) {
      error = path + ":" + std::to_string(lineNo) + ": expected " +
              std::to_string(rows.front().size()) + " columns, got " +
              std::to_string(row.size());
      return false;
    }
    rows.push_back(std::move(row));
  }
  if (rows.empty()) {
    error = path + ": empty matrix";
    return false;
  }
  if (rows.size() != rows.front().size()) {
    error = path + ": matrix is not square (" + std::to_string(rows.size()) +
            " rows, " + std::to_string(rows.front().size()) + " columns)";
    return false;
  }
  matrix = SquareMatrix(rows.size());
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t j = 0; j < rows.size(); ++j)
      matrix(i, j) = rows[i][j];
  return true;
}

bool dtfm::planner::readLines(const std::string &path,
                              std::vector<std::string> &lines,
                              std::string &error) {
  std::ifstream in(path);
  if (!in) {
    error = path + ": cannot open file";
    return false;
  }
  lines.clear();
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (!line.empty())
      lines.push_back(line);
  }
  return true;
}

bool dtfm::planner::loadScenarioMatrices(const std::string &dir,
                                         const std::string &prefix,
                                         Cluster &cluster, std::string &error) {
  std::string base = dir + "/" + prefix;
  Cluster result;
  result.name = prefix;
  std::vector<std::string> regions;
  if (!readCsvMatrix(base + "_delay_ms.csv", result.delayMs, error) ||
      !readCsvMatrix(base + "_bandwidth_gbps.csv", result.bandwidthGbps,
                     error) ||
      !readLines(base + "_regions.csv", regions, error))
    return false;
  if (regions.size() != result.delayMs.size()) {
    error = base + "_regions.csv: expected " +
            std::to_string(result.delayMs.size()) + " regions, got " +
            std::to_string(regions.size());
    return false;
  }
  for (size_t i = 0; i < regions.size(); ++i) {
    Device d;
    d.name = "gpu" + std::to_string(i);
    d.region = regions[i];
    d.peakFlops = 125e12;
    d.memoryBytes = 16e9;
    result.devices.push_back(d);
  }
  // Each entry must be valid before the two directions are averaged.
  if (!result.validate(error)) {
    error = base + ": " + error;
    return false;
  }
  result.delayMs.symmetrize();
  result.bandwidthGbps.symmetrize();
  inferNodes(result, kDefaultNodeBandwidthGbps);
  cluster = std::move(result);
  return true;
}

uint64_t dtfm::planner::clusterFingerprint(const Cluster &cluster) {
  uint64_t hash = kFnv1aOffset;
  auto mix = [&](const std::string &text) {
    hash = fnv1a(std::string_view("\xff", 1), fnv1a(text, hash)); // separator
  };
  auto number = [&](double value) {
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "%.17g", value);
    mix(buffer);
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
      perByte =
          std::max(perByte, 8.0 / (cluster.bandwidthGbps(from, to) * 1e9));
    }
    double steps = 2.0 * static_cast<double>(t - 1);
    device.groupSumLatencySeconds = steps * latency;
    device.groupSumSecondsPerByte = steps * perByte / static_cast<double>(t);
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

//===----------------------------------------------------------------------===//
// The cluster a plan file carries
//===----------------------------------------------------------------------===//

void dtfm::planner::clusterToPlan(const Cluster &cluster, proto::Plan &plan) {
  plan.set_cluster_name(cluster.name);
  plan.set_cluster_fingerprint(clusterFingerprint(cluster));
  for (const Device &d : cluster.devices) {
    plan.add_cluster_devices(d.name);
    proto::PlanDevice &device = *plan.add_devices();
    device.set_name(d.name);
    device.set_region(d.region);
    device.set_peak_flops(d.peakFlops);
    device.set_efficiency(d.efficiency);
    device.set_memory_bytes(d.memoryBytes);
    device.set_node(d.node);
    device.set_memory_bytes_per_second(d.memoryBandwidth);
  }
  for (size_t i = 0; i < cluster.size(); ++i)
    for (size_t j = 0; j < cluster.size(); ++j) {
      plan.add_delay_ms(cluster.delayMs(i, j));
      plan.add_bandwidth_gbps(cluster.bandwidthGbps(i, j));
    }
}

bool dtfm::planner::clusterFromPlan(const proto::Plan &plan, Cluster &cluster,
                                    std::string &error) {
  size_t n = plan.devices_size();
  if (n == 0 || static_cast<size_t>(plan.delay_ms_size()) != n * n ||
      static_cast<size_t>(plan.bandwidth_gbps_size()) != n * n) {
    error = "the plan carries no complete cluster (devices and N x N links)";
    return false;
  }
  cluster = Cluster();
  cluster.name = plan.cluster_name();
  cluster.delayMs = SquareMatrix(n);
  cluster.bandwidthGbps = SquareMatrix(n);
  for (const proto::PlanDevice &d : plan.devices())
    cluster.devices.push_back({d.name(), d.region(), d.peak_flops(),
                               d.efficiency(), d.memory_bytes(), d.node(),
                               d.memory_bytes_per_second()});
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) {
      cluster.delayMs(i, j) = plan.delay_ms(i * n + j);
      cluster.bandwidthGbps(i, j) = plan.bandwidth_gbps(i * n + j);
    }
  if (clusterFingerprint(cluster) != plan.cluster_fingerprint()) {
    error = "the plan's cluster does not match its fingerprint (corrupt plan)";
    return false;
  }
  return cluster.validate(error);
}
