//===- Simulator.cpp - Discrete-event simulation of a plan ----------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Plan/Simulator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <tuple>
#include <unordered_map>

using namespace dtfm::plan;

namespace {

/// A stream entry with its phase as the letter the keys below use.
struct Item {
  char phase = 'F';
  int microBatch = 0;
  int peerStage = -1;
};

/// Devices by their index in the cluster: one (phase, micro-batch) of one
/// device, and one directed link, each as one number (hashing strings cost
/// more than the simulation at a thousand devices).
uint64_t itemKey(size_t device, char phase, int microBatch) {
  return static_cast<uint64_t>(device) << 40 |
         static_cast<uint64_t>(static_cast<unsigned char>(phase)) << 32 |
         static_cast<uint32_t>(microBatch);
}
uint64_t linkKey(size_t from, size_t to) {
  return static_cast<uint64_t>(from) << 32 | static_cast<uint32_t>(to);
}
/// A transfer: its link and its (phase, micro-batch).
struct TransferKey {
  uint64_t link, item;
  bool operator==(const TransferKey &other) const {
    return link == other.link && item == other.item;
  }
};
struct TransferKeyHash {
  size_t operator()(const TransferKey &key) const {
    return std::hash<uint64_t>()(key.link * 0x9E3779B97F4A7C15ull ^ key.item);
  }
};

} // namespace

bool dtfm::plan::simulate(const SimInput &input, SimResult &result,
                          std::string &error) {
  result = SimResult();
  const planner::Cluster &cluster = input.cluster;
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < cluster.size(); ++i)
    index.emplace(cluster.devices[i].name, i);

  struct DeviceState {
    const SimProgram *program;
    size_t self = 0; ///< its index in the cluster
    /// The neighbouring stages' devices' indices (npos: none, or a device
    /// the cluster lacks, from which nothing ever arrives).
    size_t prevIndex = std::string::npos, nextIndex = std::string::npos;
    double speed = 0;
    /// What the roofline adds to each phase's FLOPs on this device
    /// (memory-bound ops), and the backward's recomputation: time, not work.
    double forwardExtra = 0, backwardExtra = 0, weightExtra = 0;
    /// The phase that ends a micro-batch: 'W' where the backward is split.
    char lastPhase = 'B';
    std::array<std::vector<Item>, 3> items;
    std::array<size_t, 3> next{0, 0, 0};
    std::array<double, 3> free{0, 0, 0};
    std::map<std::pair<char, int>, bool> receives; // which inputs arrive
    double lastBackwardStart = -1, lastBackwardEnd = -1; // by end time
  };
  std::vector<DeviceState> devices;
  for (const SimProgram &program : input.programs) {
    auto it = index.find(program.device);
    if (it == index.end()) {
      error = "program for unknown device '" + program.device + "'";
      return false;
    }
    DeviceState state;
    state.program = &program;
    state.self = it->second;
    if (auto prev = index.find(program.prev); prev != index.end())
      state.prevIndex = prev->second;
    if (auto next = index.find(program.next); next != index.end())
      state.nextIndex = next->second;
    state.speed = cluster.devices[it->second].speed();
    double ridge = cluster.devices[it->second].ridge();
    state.forwardExtra = program.forwardWork.excessAt(ridge);
    state.weightExtra = program.weightWork.excessAt(ridge);
    state.backwardExtra = program.recomputeFlops +
                          program.backwardWork.excessAt(ridge) -
                          state.weightExtra;
    if (!(state.speed > 0)) {
      error = "device '" + program.device + "' has no compute speed";
      return false;
    }
    for (int slot = 0; slot < 3; ++slot)
      for (const format::StreamEntry &entry : program.streams[slot]) {
        Item item{format::phaseLetter(entry.phase), entry.microBatch,
                  entry.peerStage};
        state.items[slot].push_back(item);
        if (item.phase == 'W')
          state.lastPhase = 'W';
        if (slot == 0)
          state.receives[{item.phase, item.microBatch}] = true;
      }
    devices.push_back(std::move(state));
  }
  auto peerDevice = [&](const DeviceState &d,
                        int peerStage) -> const std::string & {
    return peerStage < d.program->stage ? d.program->prev : d.program->next;
  };

  std::unordered_map<uint64_t, double> computeEnd, recvEnd, linkFree;
  std::unordered_map<TransferKey, double, TransferKeyHash> arrival;
  // Summed in the order the events come, then named: the same sums as
  // string-keyed maps gave.
  std::vector<double> busy(cluster.size(), 0.0);
  std::unordered_map<uint64_t, double> bytesOnLink;
  std::vector<uint64_t> linksInOrder;
  auto addLinkBytes = [&](size_t a, size_t b, double bytes) {
    auto [it, inserted] = bytesOnLink.try_emplace(linkKey(a, b), 0.0);
    if (inserted)
      linksInOrder.push_back(it->first);
    it->second += bytes;
  };
  // A device name to its index, or an error naming the sender.
  auto deviceIndex = [&](const std::string &self, const std::string &to,
                         size_t &out) {
    auto it = index.find(to);
    if (it == index.end()) {
      error = self + " sends to unknown device '" + to + "'";
      return false;
    }
    out = it->second;
    return true;
  };
  auto name = [](const Item &item) {
    return std::string(1, item.phase) + std::to_string(item.microBatch);
  };

  // An event per stream item, and a few per device after the last.
  size_t eventCount = 0;
  for (const DeviceState &d : devices)
    for (const std::vector<Item> &items : d.items)
      eventCount += items.size() + 4;
  result.events.reserve(result.events.size() + eventCount);
  bool progress = true;
  while (progress) {
    progress = false;
    for (DeviceState &d : devices) {
      const std::string &self = d.program->device;
      for (int slot = 0; slot < 3; ++slot) {
        while (d.next[slot] < d.items[slot].size()) {
          const Item &item = d.items[slot][d.next[slot]];
          double start = d.free[slot], end;
          std::string label = name(item);
          if (slot == 0) { // receive: wait for the data
            size_t source = item.peerStage < d.program->stage ? d.prevIndex
                                                              : d.nextIndex;
            if (source == std::string::npos)
              break;
            auto it = arrival.find({linkKey(source, d.self),
                                    itemKey(0, item.phase, item.microBatch)});
            if (it == arrival.end())
              break;
            end = std::max(start, it->second);
            recvEnd[itemKey(d.self, item.phase, item.microBatch)] = end;
            label += "<" + peerDevice(d, item.peerStage);
          } else if (slot == 1) { // compute
            if (d.receives.count({item.phase, item.microBatch})) {
              auto it =
                  recvEnd.find(itemKey(d.self, item.phase, item.microBatch));
              if (it == recvEnd.end())
                break;
              start = std::max(start, it->second);
            }
            if (item.phase != 'F') { // after its forward (W: its B)
              auto it = computeEnd.find(itemKey(
                  d.self, item.phase == 'B' ? 'F' : 'B', item.microBatch));
              if (it == computeEnd.end())
                break;
              start = std::max(start, it->second);
            }
            const SimProgram &p = *d.program;
            double flops = item.phase == 'F'   ? p.forwardFlops
                           : item.phase == 'B' ? p.backwardFlops - p.weightFlops
                                               : p.weightFlops;
            double again = item.phase == 'F'   ? d.forwardExtra
                           : item.phase == 'B' ? d.backwardExtra
                                               : d.weightExtra;
            // (the tensor-parallel sums are the backward's, in B)
            double sums = item.phase == 'F'   ? p.groupSumSeconds[0]
                          : item.phase == 'B' ? p.groupSumSeconds[1]
                                              : 0;
            end = start + (flops + again) / d.speed + sums;
            computeEnd[itemKey(d.self, item.phase, item.microBatch)] = end;
            // The buckets fill over the last micro-batch's last phase.
            if (item.phase == d.lastPhase && end >= d.lastBackwardEnd) {
              d.lastBackwardStart = start;
              d.lastBackwardEnd = end;
            }
            busy[d.self] += end - start;
            result.totalFlops += flops;
          } else { // send
            auto done =
                computeEnd.find(itemKey(d.self, item.phase, item.microBatch));
            if (done == computeEnd.end())
              break;
            // Messages to several devices leave on their own links at once;
            // the slot is busy until the last has left.
            double begin = std::max(start, done->second);
            end = begin;
            auto sendTo = [&](const std::string &to) {
              size_t a = d.self, b;
              if (!deviceIndex(self, to, b))
                return false;
              auto bytes = d.program->sendBytes.find({item.phase, to});
              double size =
                  bytes == d.program->sendBytes.end() ? 0 : bytes->second;
              double &link = linkFree[linkKey(a, b)];
              double leave = std::max(begin, link);
              double transmit = planner::serialisationSeconds(
                  size, cluster.bandwidthGbps(a, b));
              link = leave + transmit;
              end = std::max(end, link);
              arrival[{linkKey(a, b), itemKey(0, item.phase, item.microBatch)}] =
                  link + cluster.latencySeconds(a, b);
              addLinkBytes(a, b, size);
              label += ">" + to;
              return true;
            };
            auto receivers = d.program->sendsTo.find(
                {item.phase, static_cast<int64_t>(item.peerStage)});
            if (receivers == d.program->sendsTo.end()) {
              if (!sendTo(peerDevice(d, item.peerStage)))
                return false;
            } else {
              for (const std::string &to : receivers->second)
                if (!sendTo(to))
                  return false;
            }
            start = begin;
          }
          d.free[slot] = end;
          result.events.push_back({self, slot, label, start, end});
          ++d.next[slot];
          progress = true;
        }
      }
    }
  }
  for (const DeviceState &d : devices)
    for (int slot = 0; slot < 3; ++slot)
      if (d.next[slot] < d.items[slot].size()) {
        auto which = static_cast<format::Slot>(slot);
        error = d.program->device + ": " + format::slotName(which) +
                " item '" +
                format::formatEntry(d.program->streams[slot][d.next[slot]],
                                    which) +
                "' can never run (its input never comes)";
        return false;
      }

  // Gradient synchronisation and the optimizer step. With clipping, no
  // update starts before every device's syncs are done and the norm is
  // reduced (clipSeconds): a first pass finds when the last sync ends.
  bool clipping = input.clipSeconds > 0;
  double stepsFrom = 0; // the clipping barrier
  double iterationBefore = result.iterationSeconds;
  std::vector<SimEvent> pending;
  for (int pass = clipping ? 0 : 1; pass < 2; ++pass) {
  std::vector<SimEvent> &events = pass == 0 ? pending : result.events;
  double syncsEnd = 0;
  for (const DeviceState &d : devices) {
    const std::string &self = d.program->device;
    double start = std::max({d.free[0], d.free[1], d.free[2]});
    double tied = 0;
    for (const auto &[peer, bytes] : d.program->iterationBytes) {
      size_t a = d.self, b;
      if (!deviceIndex(self, peer, b))
        return false;
      tied += cluster.transferSeconds(a, b, bytes);
      if (pass == 1)
        addLinkBytes(a, b, bytes);
    }
    double step = d.program->optimizerFlops / d.speed;
    if (pass == 1) {
      busy[d.self] += step;
      result.totalFlops += d.program->optimizerFlops;
    }
    if (d.program->syncEvery >= 1) {
      // Local steps: the step first, then 1/H of the parameter exchange.
      double sync = tied;
      if (sync > 0)
        events.push_back({self, 2, "tied sync", start, start + sync});
      start += sync;
      syncsEnd = std::max(syncsEnd, start);
      if (clipping)
        start = std::max(start, stepsFrom);
      if (step > 0)
        events.push_back({self, 1, "optimizer", start, start + step});
      start += step;
      // Each exchange (with fragments, each fragment's bucket) is exposed
      // for what the steps it overlaps do not cover.
      double outer = d.program->syncSeconds;
      if (d.program->syncOverlap > 0) {
        outer = 0;
        double covered = static_cast<double>(d.program->syncOverlap) * start;
        for (const planner::SyncBucket &bucket : d.program->buckets)
          outer += std::max(0.0, bucket.seconds - covered);
      }
      outer /= static_cast<double>(d.program->syncEvery);
      if (outer > 0)
        events.push_back(
            {self, 2,
             "outer sync (1/" + std::to_string(d.program->syncEvery) + ")",
             start, start + outer});
      result.iterationSeconds =
          std::max(result.iterationSeconds, start + outer);
      continue;
    }
    if (!d.program->buckets.empty()) {
      // Buckets overlap the last backward; the tied exchange follows the
      // last micro-batch and comes before any step.
      double tiedEnd = start + tied;
      if (tied > 0)
        events.push_back({self, 2, "tied sync", start, tiedEnd});
      double backwardStart = d.lastBackwardStart >= 0 ? d.lastBackwardStart
                                                      : d.free[1];
      double backwardEnd =
          d.lastBackwardEnd >= 0 ? d.lastBackwardEnd : d.free[1];
      // Clipped: the buckets' syncs as laid out, the steps all after the
      // barrier.
      planner::BucketTimeline timeline = planner::layOutBuckets(
          d.program->buckets, backwardStart, backwardEnd, d.free[1],
          clipping ? 0 : step, tied > 0 ? tiedEnd : 0);
      for (size_t k = 0; k < d.program->buckets.size(); ++k) {
        std::string bucket = " b" + std::to_string(k);
        events.push_back({self, 2, "grad sync" + bucket,
                                 timeline.syncStart[k], timeline.syncEnd[k]});
        if (timeline.stepEnd[k] > timeline.stepStart[k])
          events.push_back({self, 1, "optimizer" + bucket,
                                   timeline.stepStart[k],
                                   timeline.stepEnd[k]});
        syncsEnd = std::max(syncsEnd, timeline.syncEnd[k]);
      }
      double end = std::max({timeline.end, start, tiedEnd});
      syncsEnd = std::max(syncsEnd, end);
      if (clipping) {
        double from = std::max(end, stepsFrom);
        if (step > 0)
          events.push_back({self, 1, "optimizer", from, from + step});
        end = from + step;
      }
      result.iterationSeconds = std::max(result.iterationSeconds, end);
      continue;
    }
    double sync = d.program->syncSeconds + tied;
    if (sync > 0) {
      events.push_back({self, 2, "grad sync", start, start + sync});
      start += sync;
    }
    syncsEnd = std::max(syncsEnd, start);
    if (clipping)
      start = std::max(start, stepsFrom);
    if (step > 0)
      events.push_back({self, 1, "optimizer", start, start + step});
    result.iterationSeconds = std::max(result.iterationSeconds, start + step);
  }
  if (pass == 0) {
    stepsFrom = syncsEnd + input.clipSeconds;
    result.iterationSeconds = iterationBefore;
    result.events.push_back(
        {devices.front().program->device, 2, "clip norm", syncsEnd, stepsFrom});
  }
  }
  for (uint64_t link : linksInOrder)
    result.linkBytes[cluster.devices[link >> 32].name + "->" +
                     cluster.devices[link & 0xffffffffu].name] =
        bytesOnLink[link];
  double busyTotal = 0;
  for (const DeviceState &d : devices) {
    const std::string &self = d.program->device;
    result.busySeconds[self] = busy[d.self];
    busyTotal += busy[d.self];
    result.idleSeconds[self] = result.iterationSeconds - busy[d.self];
  }
  if (result.iterationSeconds > 0 && !devices.empty())
    result.bubbleFraction =
        1.0 - busyTotal / (result.iterationSeconds * devices.size());
  return true;
}

/// JSON string escaping for names.
static std::string quoted(const std::string &text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
      out += buffer;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string dtfm::plan::chromeTrace(const SimResult &result) {
  std::map<std::string, int> pid;
  for (const SimEvent &e : result.events)
    pid.emplace(e.device, static_cast<int>(pid.size()));
  std::ostringstream os;
  os.precision(17);
  os << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  bool first = true;
  auto comma = [&]() {
    if (!first)
      os << ",";
    first = false;
  };
  const char *slots[3] = {"recv", "compute", "send"};
  for (const auto &[device, id] : pid) {
    comma();
    os << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" << id
       << ",\"tid\":0,\"args\":{\"name\":" << quoted(device) << "}}";
    for (int slot = 0; slot < 3; ++slot) {
      comma();
      os << "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" << id
         << ",\"tid\":" << slot << ",\"args\":{\"name\":\"" << slots[slot]
         << "\"}}";
    }
  }
  for (const SimEvent &e : result.events) {
    comma();
    os << "{\"ph\":\"X\",\"name\":" << quoted(e.name)
       << ",\"cat\":\"" << slots[e.slot] << "\",\"pid\":" << pid[e.device]
       << ",\"tid\":" << e.slot << ",\"ts\":" << e.start * 1e6
       << ",\"dur\":" << (e.end - e.start) * 1e6 << "}";
  }
  os << "]}\n";
  return os.str();
}
