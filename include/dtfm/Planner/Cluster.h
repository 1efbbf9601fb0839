//===- Cluster.h - Devices and links of a heterogeneous cluster -*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR): shared by the planner, the passes and
// the runtime's simulator.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLANNER_CLUSTER_H
#define DTFM_PLANNER_CLUSTER_H

#include "dtfm/Planner/Roofline.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dtfm::proto {
class Plan;
} // namespace dtfm::proto

namespace dtfm::planner {

/// The one link-time formula (alpha-beta): `bytes` leave a link of
/// `bandwidthGbps` in serialisationSeconds (8 bits a byte, 10^9 bit/s a
/// Gbps) and arrive `latencySeconds` after that (linkSeconds). The cost
/// model, AdaTopK, the simulator and the runtime's link shaping all time
/// links with these.
inline double serialisationSeconds(double bytes, double bandwidthGbps) {
  return 8.0 * bytes / (bandwidthGbps * 1e9);
}
inline double linkSeconds(double latencySeconds, double bandwidthGbps,
                          double bytes) {
  return latencySeconds + serialisationSeconds(bytes, bandwidthGbps);
}
/// A link's bandwidth in bytes per second.
inline double linkBytesPerSecond(double bandwidthGbps) {
  return bandwidthGbps * 1e9 / 8;
}

/// One accelerator.
struct Device {
  std::string name;
  std::string region;
  /// Peak FLOP/s of the device in the training precision.
  double peakFlops = 0;
  /// Fraction of the peak reached in practice (lambda in FusionLLM).
  double efficiency = 1;
  double memoryBytes = 0;
  /// The machine the device is in: devices of one node share a fast
  /// interconnect, and only they form tensor-parallel groups.
  std::string node;
  /// Sustained memory bandwidth in bytes/s: ops below the ridge cost their
  /// bytes at it (Roofline.h). 0: not known (every op costs its FLOPs).
  double memoryBandwidth = 0;
  /// A tensor-parallel group planned as one device (groupCluster): one sum
  /// over the group (a ring all-reduce) of B bytes costs
  /// groupSumLatencySeconds + B * groupSumSecondsPerByte. 0 for a device.
  double groupSumLatencySeconds = 0, groupSumSecondsPerByte = 0;

  /// The time of `sums` sums over the group totalling `bytes`.
  double groupSumSeconds(double sums, double bytes) const {
    return sums * groupSumLatencySeconds + bytes * groupSumSecondsPerByte;
  }

  /// Sustained speed S(p) = lambda * peak.
  double speed() const { return efficiency * peakFlops; }
  /// FLOPs per byte where its ops turn compute-bound (0: bandwidth unknown).
  double ridge() const { return ridgeOf(speed(), memoryBandwidth); }
};

/// A dense n x n matrix of doubles, row-major.
class SquareMatrix {
public:
  SquareMatrix() = default;
  explicit SquareMatrix(size_t n, double fill = 0) : n(n), data(n * n, fill) {}

  size_t size() const { return n; }
  double &operator()(size_t i, size_t j) { return data[i * n + j]; }
  double operator()(size_t i, size_t j) const { return data[i * n + j]; }

  /// Replaces a(i,j) and a(j,i) by their mean, as DT-FM does with measured
  /// asymmetric links.
  void symmetrize();

private:
  size_t n = 0;
  std::vector<double> data;
};

/// Devices and the point-to-point links between every pair of them.
/// The most devices a cluster may have: its two N x N link matrices stay
/// within 256 MB, and the launcher starts at most this many workers.
inline constexpr size_t kMaxClusterDevices = 4096;
/// The largest cluster file or matrix CSV read (4096 x 4096 cells of 60
/// characters fit): what is larger, or never ends, is not one.
inline constexpr uint64_t kMaxClusterFileBytes = uint64_t(1) << 30;

struct Cluster {
  std::string name;
  std::vector<Device> devices;
  /// One-way latency in milliseconds; symmetric, diagonal unused.
  SquareMatrix delayMs;
  /// Bandwidth in Gbit/s (10^9 bit/s); symmetric, diagonal unused.
  SquareMatrix bandwidthGbps;

  size_t size() const { return devices.size(); }

  /// alpha of a link, in seconds.
  double latencySeconds(size_t a, size_t b) const {
    return delayMs(a, b) / 1000.0;
  }
  /// alpha + bytes / beta, in seconds (linkSeconds).
  double transferSeconds(size_t a, size_t b, double bytes) const {
    return linkSeconds(latencySeconds(a, b), bandwidthGbps(a, b), bytes);
  }
  /// A few `bytes` summed over `devices` and handed back to each: a
  /// reduction to the first and a broadcast from it, each as slow as the
  /// slowest link from the first (clip-grad-norm's norm, once a step).
  double scalarReductionSeconds(const std::vector<size_t> &members,
                                double bytes) const {
    double slowest = 0;
    for (size_t member : members)
      if (member != members.front())
        slowest = std::max(slowest,
                           transferSeconds(members.front(), member, bytes));
    return 2 * slowest;
  }

  /// Checks shapes and values: matrices n x n, finite, delays >= 0,
  /// bandwidths > 0 off the diagonal, devices with positive speed and memory
  /// where given. On failure returns false with a one-line `error` naming the
  /// offending device or link.
  bool validate(std::string &error) const;
};

/// Links of at least this bandwidth join devices into one node when a
/// cluster names no nodes (cluster.proto's node_bandwidth_gbps).
inline constexpr double kDefaultNodeBandwidthGbps = 100;

/// Names the nodes of a cluster whose devices name none: devices joined by
/// links of at least `minBandwidthGbps`, directly or through each other,
/// form node "node<k>", numbered in the order of their first device.
void inferNodes(Cluster &cluster, double minBandwidthGbps);

/// The devices of each node (indices into `cluster`, in cluster order), the
/// nodes in the order of their first device; a device without a node (a
/// cluster built in code) is a node of its own.
std::vector<std::vector<int>> nodeMembers(const Cluster &cluster);

/// Tensor-parallel groups of `degree` devices: each node's devices in
/// cluster order, cut into consecutive groups of `degree` (a node's last
/// devices that do not fill a group are left out). Returns them as indices
/// into `cluster`; fails with a one-line `error` when no node holds
/// `degree` devices.
bool tensorParallelGroups(const Cluster &cluster, int degree,
                          std::vector<std::vector<int>> &groups,
                          std::string &error);

/// The cluster a tensor-parallel plan is planned on: one device per group
/// (named and placed as its first member, with the slowest member's speed
/// and the smallest memory, and the cost of a sum over the group: a ring
/// all-reduce, 2 (t - 1) steps of B / t bytes, each at the ring's largest
/// latency and lowest bandwidth), and between two groups the slowest link
/// between members of equal rank (they move their copies in parallel).
Cluster groupCluster(const Cluster &cluster,
                     const std::vector<std::vector<int>> &groups);

/// The devices `keep` (indices into `cluster`, in that order) with the links
/// among them; the name is kept.
Cluster subCluster(const Cluster &cluster, const std::vector<int> &keep);

/// A cluster's links by class: each device's class (numbered 0..C-1 in order
/// of first appearance) and the C x C links between classes, row-major (a
/// class's own entry is the link between two of its devices; 0 where no
/// two devices use it). A device's link to itself is 0. Where regions (or
/// nodes) give every link, these grow with classes squared, not devices.
struct LinkClasses {
  std::vector<uint32_t> classOf;
  size_t count = 0;
  std::vector<double> delayMs, bandwidthGbps;
};

/// The links by region, else by node, where those classes give every link
/// exactly (bit for bit, each device's link to itself 0) and are fewer
/// than the devices; false where neither does (the N x N matrices are
/// needed). One home for the plan file and the `#dtfm.cluster` attribute.
bool linksByClass(const Cluster &cluster, LinkClasses &links);

/// Sets the N x N link matrices of `cluster`, whose devices are set, from
/// `links`. False with a one-line `error` where the classes are not one per
/// device, each below `links.count`, with count x count links.
bool expandLinkClasses(const LinkClasses &links, Cluster &cluster,
                       std::string &error);

/// Reads a comma-separated numeric matrix. Rejects (false, one-line `error`
/// with file, line and column) empty files, ragged or non-square tables,
/// unparsable or non-finite cells.
bool readCsvMatrix(const std::string &path, SquareMatrix &matrix,
                   std::string &error);

/// Reads one name per line (the scenarios' `<prefix>_regions.csv`).
bool readLines(const std::string &path, std::vector<std::string> &lines,
               std::string &error);

/// Loads a device-level scenario: `<dir>/<prefix>_delay_ms.csv`,
/// `<prefix>_bandwidth_gbps.csv` and `<prefix>_regions.csv`, with every
/// device a V100 (125 TFLOP/s fp16 peak, 16 GB) as in the DT-FM paper.
/// Asymmetric matrices are symmetrised.
bool loadScenarioMatrices(const std::string &dir, const std::string &prefix,
                          Cluster &cluster, std::string &error);

/// A 64-bit fingerprint (FNV-1a) of the devices (names, regions, speeds,
/// memory) and both link matrices, so that a plan can tell whether it is
/// used on the cluster it was made for.
uint64_t clusterFingerprint(const Cluster &cluster);

/// Loads a cluster file (proto/cluster.proto in text format). Device-level
/// CSV matrices it names are read relative to the file's folder. Every error
/// is one line naming the file (and line:column for syntax errors, the
/// device, region or link otherwise).
bool loadClusterFile(const std::string &path, Cluster &cluster,
                     std::string &error);

/// Same, from text already in memory; `path` is used in messages and to
/// resolve CSV paths.
bool parseClusterText(const std::string &text, const std::string &path,
                      Cluster &cluster, std::string &error);

/// Writes `cluster` as a cluster file at `path` that loadClusterFile reads
/// back to the same cluster (the same fingerprint): every device on its own
/// with its node, and the links as device-level matrices in
/// `<path>.delay_ms.csv` and `<path>.bandwidth_gbps.csv` (named relative to
/// it), every number exact. Each file goes through a temporary one and a
/// rename. False with a one-line `error` when a file cannot be written.
bool writeClusterFile(const Cluster &cluster, const std::string &path,
                      std::string &error);

/// `cluster` without the devices named in `removed` (their rows and columns
/// of the link matrices go with them); the rest keep their order.
Cluster withoutDevices(const Cluster &cluster,
                       const std::vector<std::string> &removed);

/// A device asking to join a running job (cluster.proto's JoinRequest).
struct JoinRequest {
  Device device;
  std::string linksLike;
};

/// Reads a JoinRequest in text format; `path` names it in errors. False
/// with a one-line `error`: a syntax error, a device without a name, with
/// a count other than 1, a speed, efficiency, memory or bandwidth out of
/// range, no links_like.
bool parseJoinRequest(const std::string &text, const std::string &path,
                      JoinRequest &request, std::string &error);

/// `cluster` with `request`'s device appended, its links those of
/// `request.linksLike`, and between the two the fastest link that device
/// has to any other; in its own node. False with a one-line `error` when
/// the name is taken or the device to copy is not there.
bool withJoinedDevice(const Cluster &cluster, const JoinRequest &request,
                      Cluster &out, std::string &error);

/// Writes `cluster` into a plan file's cluster fields (name, fingerprint,
/// devices, and links: by class -- regions, else nodes -- where every link
/// depends only on its ends' classes, else N x N delay and bandwidth
/// matrices).
void clusterToPlan(const Cluster &cluster, proto::Plan &plan);

/// The cluster a plan carries, checked against the plan's fingerprint and
/// validated; false with a one-line `error` otherwise.
bool clusterFromPlan(const proto::Plan &plan, Cluster &cluster,
                     std::string &error);

} // namespace dtfm::planner

#endif // DTFM_PLANNER_CLUSTER_H
