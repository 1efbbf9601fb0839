//===- Transport.h - Moving tensors between workers --------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The workers of a plan (one per device program, world rank = the program's
// index in the plan) bootstrap through a key-value store -- Gloo's file
// store for workers on one machine, a small TCP store served by rank 0 for
// multi-host runs, or a Redis server a cluster already runs -- agree on a
// fresh session there (Rendezvous.h), and then move tensors with Gloo's
// TCP transport:
// point-to-point messages for the pipeline, allreduce for each data-parallel
// group.
//
// Sends are queued: one link thread per destination takes them in order.
// With link shaping on, each direction behaves like the cluster's link: a
// message occupies the link for bytes / bandwidth (messages queue behind
// each other: a token bucket without burst) and is delivered one latency
// after it has left, so the paper's scenarios can be reproduced on loopback.
//
// Every failure names the peer: a peer that never shows up in the store, a
// closed connection (the peer died), a wait that outlives the timeout.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_TRANSPORT_H
#define DTFM_RUNTIME_TRANSPORT_H

#include "dtfm/Format/WireCodec.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dtfm::runtime {

/// One direction of a link; bytesPerSecond 0 means unshaped.
struct LinkShape {
  double latencySeconds = 0;
  double bytesPerSecond = 0;
};

struct TransportOptions {
  int rank = 0;
  std::vector<std::string> names; ///< device of each world rank
  /// Rendezvous: a directory shared by the local workers (Gloo file store),
  /// "host:port" of the TCP store rank 0 serves, or
  /// "redis://host:port[/prefix]" of a Redis server.
  std::string storeDir;
  std::string rendezvous;
  /// The run's id (--run-id, SLURM_JOB_ID, TORCHELASTIC_RUN_ID): every key
  /// of the run lies under it, so two jobs on one store never meet.
  /// Required with Redis.
  std::string runId;
  /// The network interface whose address the peers connect to, and what
  /// named it ("--iface", "GLOO_SOCKET_IFNAME"); empty: the interface that
  /// reaches the rendezvous host.
  std::string iface, ifaceFrom;
  /// Some peers run on other hosts (the launcher says so): a loopback
  /// address is never advertised to them.
  bool peersOnOtherHosts = false;
  /// The TCP store at `rendezvous` is served by someone else (the elastic
  /// coordinator, Agents.h), not by rank 0.
  bool storeServedElsewhere = false;
  /// The job token (JobToken.h) every connection to a TCP store proves;
  /// required with one.
  std::string jobToken;
  /// The password a Redis store asks for (DTFM_REDIS_PASSWORD; Redis's
  /// AUTH), empty for none.
  std::string redisPassword;
  /// What every rank must agree on to train together (the plan's hash,
  /// the seed, the steps): compared at the rendezvous, one line naming
  /// the rank that differs.
  std::string identity;
  /// Bound on every wait: rendezvous, receives, sends, collectives.
  std::chrono::milliseconds timeout{60000};
  /// size x size, row = sender; empty for unshaped links.
  std::vector<LinkShape> links;
  /// World ranks of each collective group this rank belongs to (every
  /// member passes the same groups, in the same order).
  std::vector<std::vector<int>> groups;
};

class Transport {
public:
  static std::unique_ptr<Transport> connect(const TransportOptions &options,
                                            std::string &error);
  ~Transport();

  int rank() const;
  int size() const;
  /// "cpu3 (rank 3)".
  std::string describe(int rank) const;
  /// Why this worker advertises the address it does, when it is not the
  /// one that reaches the rendezvous host (empty otherwise).
  const std::string &addressNotice() const;

  /// Queues a message for `peer` (asynchronous; errors surface on a later
  /// call or on flush). `leaves` (if given) is when the message will have
  /// left this end of a shaped link (now on an unshaped one); control
  /// messages (losses, checkpoints, traces) are never shaped. The receiver
  /// must post the matching recv: Gloo hands a message over only then.
  bool send(int peer, uint64_t slot, std::vector<char> message,
            std::string &error,
            std::chrono::steady_clock::time_point *leaves = nullptr,
            bool control = false);
  /// Receives exactly `bytes` bytes from `peer` into `data`.
  bool recv(int peer, uint64_t slot, void *data, size_t bytes,
            std::string &error);
  /// Starts the link threads to `peers` now (from this thread, whose
  /// scheduling priority they inherit) rather than on the first send.
  void openLinks(const std::vector<int> &peers);
  /// Posts a receive without waiting (messages for it may then arrive in
  /// any order relative to other receives); waitPosted completes it.
  int postRecv(int peer, uint64_t slot, void *data, size_t bytes);
  bool waitPosted(int handle, std::string &error);
  /// Waits until every queued message has left.
  bool flush(std::string &error);
  /// Sums `data` over the members of group `group` (index into the
  /// options' groups), in place: Gloo's allreduce, or with shaped links a
  /// ring over the shaped point-to-point links (so data-parallel traffic
  /// pays the cluster's bandwidth and latency too).
  bool allreduceSum(int group, float *data, size_t count, std::string &error);
  /// allreduceSum with every message in `codec` (format/WireCodec.h), over
  /// the point-to-point links (shaped or not); dense is allreduceSum. A
  /// summable codec (int8) goes around a ring whose reduce-scatter sends
  /// each partial sum encoded and whose allgather forwards each final
  /// chunk as its owner encoded it, so that every member ends with the
  /// same values (one rounding per hop). Any other (sparse top-k: `kept`
  /// nonzero entries at most of this member's data[0, count)) is an
  /// allgather: each member's message goes once around the ring and every
  /// member adds all of them up in member order. A malformed message
  /// fails naming its sender.
  bool allreduceSum(int group, format::WireCodec codec, float *data,
                    size_t count, size_t kept, std::string &error);
  /// Every rank of the world has reached this point.
  bool barrier(std::string &error);
  /// A small value shared through the rendezvous store (e.g. an NCCL
  /// unique id): publish sets `key`; lookup waits for it, up to the
  /// timeout. Keys are per run.
  bool publish(const std::string &key, const std::string &value,
               std::string &error);
  bool lookup(const std::string &key, std::string &value, std::string &error);
  /// The smallest of every rank's `value`.
  bool allreduceMin(int64_t &value, std::string &error);
  /// Every rank's `values` summed element by element (the same length on
  /// every rank); every rank ends with the same sums.
  bool allreduceWorldSum(std::vector<double> &values, std::string &error);

  /// Sharded optimizer state: `data` is cut into one chunk per member of
  /// group `group`, chunk k = data[bounds[k], bounds[k + 1]) (bounds has
  /// members + 1 entries, rising from 0). reduceScatterSum leaves this
  /// member's chunk summed over the group (the other chunks hold partial
  /// sums); allGather gives every member each member's own chunk. A ring
  /// over the point-to-point links, n - 1 steps each.
  bool reduceScatterSum(int group, float *data,
                        const std::vector<size_t> &bounds, std::string &error);
  bool allGather(int group, float *data, const std::vector<size_t> &bounds,
                 std::string &error);

private:
  /// The ring's phases over `members`: with `reduce` n - 1 steps after
  /// which member i holds the sum of chunk (i + 1 - shift) mod n, with
  /// `gather` n - 1 steps that spread each member's chunk
  /// (i + 1 - shift) mod n to all.
  struct RingPhases {
    bool reduce = true, gather = true;
    format::WireCodec codec = format::WireCodec::Dense;
    int shift = 0;
    uint64_t space = uint64_t(1) << 54; // the messages' slots
  };
  bool ring(const std::vector<int> &members, uint32_t tag, float *data,
            const std::vector<size_t> &bounds, RingPhases phases,
            std::string &error);
  /// Every member's message in `codec` once around the ring, summed by
  /// each member in member order (codecs that are not summable).
  bool allgatherSum(const std::vector<int> &members, uint32_t tag,
                    format::WireCodec codec, float *data, size_t count,
                    size_t kept, std::string &error);

  struct Impl;
  explicit Transport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

/// Parses "host:port"; false with an error for anything else.
bool parseHostPort(const std::string &text, std::string &host, int &port,
                   std::string &error);

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_TRANSPORT_H
