//===- ClusterIo.cpp - A cluster in and out of every encoding -------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The one home of cluster I/O: the DT-FM scenarios' CSV matrices, cluster
// files (proto text format) read and written, join requests, and the
// cluster a plan file carries.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/FileIo.h"
#include "dtfm/Planner/Cluster.h"

#include "cluster.pb.h"
#include "plan.pb.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

using namespace dtfm::planner;

namespace {
/// Keeps the first syntax error as "file:line:column: message".
class FirstError : public google::protobuf::io::ErrorCollector {
public:
  explicit FirstError(const std::string &path) : path(path) {}
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string &message) override {
    if (text.empty())
      text = path + ":" + std::to_string(line + 1) + ":" +
             std::to_string(column + 1) + ": " + message;
  }
  std::string text;

private:
  std::string path;
};

/// Parses protobuf text `text` into `message`; false with the first
/// syntax error as "path:line:column: message".
bool parseText(const std::string &text, const std::string &path,
               google::protobuf::Message &message, const char *what,
               std::string &error) {
  google::protobuf::TextFormat::Parser parser;
  FirstError errors(path);
  parser.RecordErrorsTo(&errors);
  if (parser.ParseFromString(text, &message))
    return true;
  error = errors.text.empty() ? path + ": malformed " + what : errors.text;
  return false;
}

std::string folderOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string resolve(const std::string &base, const std::string &file) {
  return !file.empty() && file[0] == '/' ? file : base + "/" + file;
}

bool checkLink(const dtfm::proto::LinkSpec &link, const std::string &what,
               std::string &error) {
  if (!(link.delay_ms() >= 0) || !(link.bandwidth_gbps() > 0)) {
    std::ostringstream os;
    os << what << ": expected delay_ms >= 0 and bandwidth_gbps > 0, got "
       << link.delay_ms() << " ms and " << link.bandwidth_gbps() << " Gbps";
    error = os.str();
    return false;
  }
  return true;
}
} // namespace

bool dtfm::planner::parseClusterText(const std::string &text,
                                     const std::string &path,
                                     Cluster &cluster, std::string &error) {
  dtfm::proto::ClusterSpec spec;
  if (!parseText(text, path, spec, "cluster file", error))
    return false;
  auto fail = [&](const std::string &message) {
    error = path + ": " + message;
    return false;
  };

  Cluster result;
  result.name = spec.name();
  std::set<std::string> names;
  uint64_t total = 0;
  for (const dtfm::proto::DeviceSpec &d : spec.devices()) {
    if (d.name().empty())
      return fail("a device has no name");
    if (d.has_count() && d.count() == 0)
      return fail("device " + d.name() + ": count must be at least 1");
    if (d.has_efficiency() && d.efficiency() == 0)
      return fail("device " + d.name() + ": efficiency must be in (0, 1], "
                  "got 0");
    if (d.has_memory_bytes_per_second() &&
        !(d.memory_bytes_per_second() > 0 &&
          std::isfinite(d.memory_bytes_per_second())))
      return fail("device " + d.name() +
                  ": memory_bytes_per_second must be positive and finite");
    uint32_t count = d.has_count() ? d.count() : 1;
    total += count;
    if (total > kMaxClusterDevices)
      return fail("more than " + std::to_string(kMaxClusterDevices) +
                  " devices (device " + d.name() + " adds " +
                  std::to_string(count) + ")");
    for (uint32_t i = 0; i < count; ++i) {
      Device device;
      device.name = count > 1 ? d.name() + std::to_string(i) : d.name();
      // A device's name becomes file names (checkpoints, joins).
      if (!format::isFileSafeDeviceName(device.name))
        return fail("device '" + device.name + "': the name " +
                    format::kFileSafeDeviceNameRule);
      device.region = d.region();
      device.peakFlops = d.peak_flops();
      device.efficiency = d.has_efficiency() ? d.efficiency() : 1;
      device.memoryBytes = d.memory_bytes();
      device.memoryBandwidth = d.memory_bytes_per_second();
      device.node = d.node();
      if (!names.insert(device.name).second)
        return fail("duplicate device name '" + device.name + "'");
      result.devices.push_back(device);
    }
  }
  size_t n = result.devices.size();
  if (n == 0)
    return fail("no devices");

  bool matrices = !spec.delay_matrix_csv().empty() ||
                  !spec.bandwidth_matrix_csv().empty();
  if (matrices) {
    if (spec.delay_matrix_csv().empty() || spec.bandwidth_matrix_csv().empty())
      return fail("give both delay_matrix_csv and bandwidth_matrix_csv");
    if (spec.region_links_size() > 0 || spec.has_intra_region() ||
        spec.has_inter_region_default())
      return fail("give either region links or device-level matrices, not "
                  "both");
    std::string base = folderOf(path);
    if (!readCsvMatrix(resolve(base, spec.delay_matrix_csv()), result.delayMs,
                       error) ||
        !readCsvMatrix(resolve(base, spec.bandwidth_matrix_csv()),
                       result.bandwidthGbps, error))
      return false;
    if (result.delayMs.size() != n || result.bandwidthGbps.size() != n)
      return fail("matrices are " + std::to_string(result.delayMs.size()) +
                  "x" + std::to_string(result.delayMs.size()) + " and " +
                  std::to_string(result.bandwidthGbps.size()) + "x" +
                  std::to_string(result.bandwidthGbps.size()) + ", but the "
                  "cluster has " + std::to_string(n) + " devices");
    // Each entry must be valid before the two directions are averaged.
    if (!result.validate(error))
      return fail(error);
    result.delayMs.symmetrize();
    result.bandwidthGbps.symmetrize();
  } else {
    if (spec.has_intra_region() &&
        !checkLink(spec.intra_region(), "intra_region", error))
      return fail(error);
    if (spec.has_inter_region_default() &&
        !checkLink(spec.inter_region_default(), "inter_region_default", error))
      return fail(error);
    std::map<std::pair<std::string, std::string>,
             const dtfm::proto::LinkSpec *>
        links;
    std::set<std::string> regions;
    for (const Device &d : result.devices)
      regions.insert(d.region);
    for (const dtfm::proto::LinkSpec &link : spec.region_links()) {
      std::string what = "link " + link.a() + " <-> " + link.b();
      if (!checkLink(link, what, error))
        return fail(error);
      for (const std::string &end : {link.a(), link.b()})
        if (!regions.count(end))
          return fail(what + ": no device is in region '" + end + "'");
      if (link.a() == link.b())
        return fail(what + ": use intra_region for links inside a region");
      auto key = std::minmax(link.a(), link.b());
      if (!links.emplace(key, &link).second)
        return fail(what + ": given twice");
    }
    result.delayMs = SquareMatrix(n);
    result.bandwidthGbps = SquareMatrix(n);
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < n; ++j) {
        if (i == j)
          continue;
        const std::string &ra = result.devices[i].region;
        const std::string &rb = result.devices[j].region;
        const dtfm::proto::LinkSpec *link = nullptr;
        if (ra == rb) {
          if (!spec.has_intra_region())
            return fail("region '" + ra + "' has several devices but no "
                        "intra_region link is given");
          link = &spec.intra_region();
        } else {
          auto it = links.find(std::minmax(ra, rb));
          if (it != links.end())
            link = it->second;
          else if (spec.has_inter_region_default())
            link = &spec.inter_region_default();
          else
            return fail("no link between regions '" + ra + "' and '" + rb +
                        "' (add region_links or inter_region_default)");
        }
        result.delayMs(i, j) = link->delay_ms();
        result.bandwidthGbps(i, j) = link->bandwidth_gbps();
      }
  }
  if (!result.validate(error))
    return fail(error);
  bool named = false;
  for (const Device &d : result.devices)
    named = named || !d.node.empty();
  double nodeBandwidth = spec.has_node_bandwidth_gbps()
                             ? spec.node_bandwidth_gbps()
                             : kDefaultNodeBandwidthGbps;
  if (!(nodeBandwidth > 0) || !std::isfinite(nodeBandwidth))
    return fail("node_bandwidth_gbps must be finite and > 0, got " +
                std::to_string(nodeBandwidth));
  if (!named)
    inferNodes(result, nodeBandwidth);
  for (Device &d : result.devices)
    if (d.node.empty())
      d.node = d.name; // a node of its own
  cluster = std::move(result);
  return true;
}

bool dtfm::planner::loadClusterFile(const std::string &path,
                                    Cluster &cluster, std::string &error) {
  // A regular file only, bounded (a FIFO or /dev/zero never ends).
  std::string bytes;
  if (!format::readWholeFile(path, bytes, error, kMaxClusterFileBytes))
    return false;
  return parseClusterText(bytes, path, cluster, error);
}

namespace {
std::string exact(double value) {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

std::string csvOf(const SquareMatrix &matrix) {
  std::string text;
  for (size_t i = 0; i < matrix.size(); ++i) {
    for (size_t j = 0; j < matrix.size(); ++j)
      text += (j ? "," : "") + exact(matrix(i, j));
    text += "\n";
  }
  return text;
}

std::string baseName(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}
} // namespace

bool dtfm::planner::writeClusterFile(const Cluster &cluster,
                                     const std::string &path,
                                     std::string &error) {
  dtfm::proto::ClusterSpec spec;
  spec.set_name(cluster.name);
  for (const Device &d : cluster.devices) {
    dtfm::proto::DeviceSpec *device = spec.add_devices();
    device->set_name(d.name);
    device->set_region(d.region);
    device->set_peak_flops(d.peakFlops);
    device->set_efficiency(d.efficiency);
    device->set_memory_bytes(d.memoryBytes);
    device->set_node(d.node.empty() ? d.name : d.node);
    if (d.memoryBandwidth > 0)
      device->set_memory_bytes_per_second(d.memoryBandwidth);
  }
  std::string delay = path + ".delay_ms.csv";
  std::string bandwidth = path + ".bandwidth_gbps.csv";
  spec.set_delay_matrix_csv(baseName(delay));
  spec.set_bandwidth_matrix_csv(baseName(bandwidth));
  google::protobuf::TextFormat::Printer printer;
  // Doubles as the shortest text that reads back to the same value.
  std::string text;
  if (!printer.PrintToString(spec, &text)) {
    error = path + ": cannot encode the cluster";
    return false;
  }
  return format::writeFileAtomically(delay, csvOf(cluster.delayMs), error) &&
         format::writeFileAtomically(bandwidth, csvOf(cluster.bandwidthGbps),
                                     error) &&
         format::writeFileAtomically(path, text, error);
}

Cluster dtfm::planner::withoutDevices(const Cluster &cluster,
                                      const std::vector<std::string> &removed) {
  std::vector<size_t> kept;
  for (size_t i = 0; i < cluster.devices.size(); ++i)
    if (std::find(removed.begin(), removed.end(), cluster.devices[i].name) ==
        removed.end())
      kept.push_back(i);
  Cluster result;
  result.name = cluster.name;
  result.delayMs = SquareMatrix(kept.size());
  result.bandwidthGbps = SquareMatrix(kept.size());
  for (size_t a = 0; a < kept.size(); ++a) {
    result.devices.push_back(cluster.devices[kept[a]]);
    for (size_t b = 0; b < kept.size(); ++b) {
      result.delayMs(a, b) = cluster.delayMs(kept[a], kept[b]);
      result.bandwidthGbps(a, b) = cluster.bandwidthGbps(kept[a], kept[b]);
    }
  }
  return result;
}

bool dtfm::planner::parseJoinRequest(const std::string &text,
                                     const std::string &path,
                                     JoinRequest &request,
                                     std::string &error) {
  dtfm::proto::JoinRequest spec;
  if (!parseText(text, path, spec, "join request", error))
    return false;
  auto fail = [&](const std::string &message) {
    error = path + ": " + message;
    return false;
  };
  const dtfm::proto::DeviceSpec &d = spec.device();
  if (d.name().empty())
    return fail("the joining device has no name");
  if (!format::isFileSafeDeviceName(d.name()))
    return fail("the joining device's name '" + d.name() + "' " +
                format::kFileSafeDeviceNameRule);
  if (d.has_count() && d.count() != 1)
    return fail("device " + d.name() + ": a join request names one device "
                "(count 1)");
  auto positive = [](double v) { return v > 0 && std::isfinite(v); };
  if (!positive(d.peak_flops()) || !positive(d.memory_bytes()))
    return fail("device " + d.name() +
                ": peak_flops and memory_bytes must be positive and finite");
  if (d.has_efficiency() && !(d.efficiency() > 0 && d.efficiency() <= 1))
    return fail("device " + d.name() + ": efficiency must be in (0, 1]");
  if (d.has_memory_bytes_per_second() &&
      !positive(d.memory_bytes_per_second()))
    return fail("device " + d.name() +
                ": memory_bytes_per_second must be positive and finite");
  if (spec.links_like().empty())
    return fail("links_like names no device whose links the joining "
                "device takes");
  request.device = Device();
  request.device.name = d.name();
  request.device.region = d.region();
  request.device.peakFlops = d.peak_flops();
  request.device.efficiency = d.has_efficiency() ? d.efficiency() : 1;
  request.device.memoryBytes = d.memory_bytes();
  request.device.memoryBandwidth = d.memory_bytes_per_second();
  request.device.node = d.node().empty() ? d.name() : d.node();
  request.linksLike = spec.links_like();
  return true;
}

bool dtfm::planner::withJoinedDevice(const Cluster &cluster,
                                     const JoinRequest &request, Cluster &out,
                                     std::string &error) {
  size_t n = cluster.devices.size(), like = n;
  for (size_t i = 0; i < n; ++i) {
    if (cluster.devices[i].name == request.device.name) {
      error = "device '" + request.device.name + "' is in the cluster already";
      return false;
    }
    if (cluster.devices[i].name == request.linksLike)
      like = i;
  }
  if (like == n) {
    error = "links_like: no device '" + request.linksLike + "' in the cluster";
    return false;
  }
  if (n + 1 > kMaxClusterDevices) {
    error = "the cluster has " + std::to_string(kMaxClusterDevices) +
            " devices already";
    return false;
  }
  Cluster result;
  result.name = cluster.name;
  result.devices = cluster.devices;
  result.devices.push_back(request.device);
  result.delayMs = SquareMatrix(n + 1);
  result.bandwidthGbps = SquareMatrix(n + 1);
  // The fastest link of the device copied: what joins the two.
  double gbps = 0, delay = 0;
  for (size_t j = 0; j < n; ++j)
    if (j != like && cluster.bandwidthGbps(like, j) > gbps) {
      gbps = cluster.bandwidthGbps(like, j);
      delay = cluster.delayMs(like, j);
    }
  if (gbps == 0) {
    error = "links_like: '" + request.linksLike +
            "' has no link to copy (a cluster of one device)";
    return false;
  }
  for (size_t i = 0; i <= n; ++i)
    for (size_t j = 0; j <= n; ++j) {
      size_t a = i == n ? like : i, b = j == n ? like : j;
      if (i == j)
        continue;
      if (a == b) { // the new device and the one it copies
        result.delayMs(i, j) = delay;
        result.bandwidthGbps(i, j) = gbps;
      } else {
        result.delayMs(i, j) = cluster.delayMs(a, b);
        result.bandwidthGbps(i, j) = cluster.bandwidthGbps(a, b);
      }
    }
  if (!result.validate(error))
    return false;
  out = std::move(result);
  return true;
}

//===----------------------------------------------------------------------===//
// The DT-FM scenarios' CSV matrices
//===----------------------------------------------------------------------===//

bool dtfm::planner::readCsvMatrix(const std::string &path, SquareMatrix &matrix,
                                  std::string &error) {
  std::string bytes;
  if (!format::readWholeFile(path, bytes, error, kMaxClusterFileBytes))
    return false;
  std::istringstream in(bytes);
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
  std::string bytes;
  if (!format::readWholeFile(path, bytes, error, kMaxClusterFileBytes))
    return false;
  std::istringstream in(bytes);
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
  // Links by class where the classes say them exactly: the matrices grow
  // with devices squared (16 MB at 1024 devices), the classes' with
  // regions squared.
  LinkClasses links;
  if (linksByClass(cluster, links)) {
    plan.mutable_link_classes()->Add(links.classOf.begin(),
                                     links.classOf.end());
    plan.mutable_class_delay_ms()->Add(links.delayMs.begin(),
                                       links.delayMs.end());
    plan.mutable_class_bandwidth_gbps()->Add(links.bandwidthGbps.begin(),
                                             links.bandwidthGbps.end());
    return;
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
  bool byClass = plan.link_classes_size() > 0;
  if (n == 0 || n > kMaxClusterDevices) {
    error = "the plan carries no complete cluster (between 1 and " +
            std::to_string(kMaxClusterDevices) + " devices)";
    return false;
  }
  LinkClasses links;
  if (byClass) {
    // Classes numbered 0..C-1, C x C links, and no matrices beside them.
    size_t count = 0;
    for (uint32_t c : plan.link_classes())
      count = std::max<size_t>(count, size_t(c) + 1);
    if (static_cast<size_t>(plan.link_classes_size()) != n || count > n ||
        static_cast<size_t>(plan.class_delay_ms_size()) != count * count ||
        static_cast<size_t>(plan.class_bandwidth_gbps_size()) !=
            count * count ||
        plan.delay_ms_size() != 0 || plan.bandwidth_gbps_size() != 0) {
      error = "the plan's links by class are incomplete (a class per "
              "device, C x C links between classes, and no N x N matrices)";
      return false;
    }
    links.count = count;
    links.classOf.assign(plan.link_classes().begin(),
                         plan.link_classes().end());
    links.delayMs.assign(plan.class_delay_ms().begin(),
                         plan.class_delay_ms().end());
    links.bandwidthGbps.assign(plan.class_bandwidth_gbps().begin(),
                               plan.class_bandwidth_gbps().end());
  } else if (static_cast<size_t>(plan.delay_ms_size()) != n * n ||
             static_cast<size_t>(plan.bandwidth_gbps_size()) != n * n) {
    error = "the plan carries no complete cluster (devices and N x N links)";
    return false;
  }
  cluster = Cluster();
  cluster.name = plan.cluster_name();
  for (const proto::PlanDevice &d : plan.devices())
    cluster.devices.push_back({d.name(), d.region(), d.peak_flops(),
                               d.efficiency(), d.memory_bytes(), d.node(),
                               d.memory_bytes_per_second()});
  if (byClass) {
    if (!expandLinkClasses(links, cluster, error))
      return false;
  } else {
    cluster.delayMs = SquareMatrix(n);
    cluster.bandwidthGbps = SquareMatrix(n);
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < n; ++j) {
        cluster.delayMs(i, j) = plan.delay_ms(i * n + j);
        cluster.bandwidthGbps(i, j) = plan.bandwidth_gbps(i * n + j);
      }
  }
  if (clusterFingerprint(cluster) != plan.cluster_fingerprint()) {
    error = "the plan's cluster does not match its fingerprint (corrupt plan)";
    return false;
  }
  return cluster.validate(error);
}
