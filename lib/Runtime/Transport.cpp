//===- Transport.cpp - Moving tensors between workers ---------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Transport.h"

#include "Rendezvous.h"

#include "dtfm/Runtime/JobToken.h"

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

using namespace dtfm::runtime;
using Clock = std::chrono::steady_clock;
using namespace dtfm::runtime::rendezvous;

bool dtfm::runtime::parseHostPort(const std::string &text, std::string &host,
                                  int &port, std::string &error) {
  size_t colon = text.rfind(':');
  char *end = nullptr;
  long value = colon == std::string::npos
                   ? 0
                   : std::strtol(text.c_str() + colon + 1, &end, 10);
  if (colon == std::string::npos || colon == 0 || !end || *end != '\0' ||
      value <= 0 || value > 65535) {
    error = "--rendezvous: expected host:port, got '" + text + "'";
    return false;
  }
  host = text.substr(0, colon);
  port = static_cast<int>(value);
  return true;
}

//===--- transport --------------------------------------------------------===//

struct Transport::Impl {
  TransportOptions options;
  std::unique_ptr<TcpStoreServer> server;
  std::unique_ptr<KeyValueStore> store;
  /// The store's keys under the run's id, and under this run's session.
  std::unique_ptr<KeyValueStore> runStore, sessionStore;
  /// Why the advertised address is not the obvious one (empty: it is).
  std::string notice;
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> world;
  std::vector<std::shared_ptr<gloo::rendezvous::Context>> groups;
  // Collective tags, per context (members of a context call in step).
  uint32_t worldTag = 0;
  std::vector<uint32_t> groupTags;
  /// Sharded state's parameter gathers run on the compute thread while the
  /// sync thread reduces later buckets: a tag sequence (and slot space) of
  /// their own keeps both in the same order on every member.
  std::vector<uint32_t> gatherTags;

  /// One direction of a link: messages leave in order, each released when
  /// the link model says it has arrived.
  struct Link {
    struct Message {
      Clock::time_point release;
      uint64_t slot;
      std::vector<char> bytes;
    };
    std::mutex mutex;
    std::condition_variable changed;
    std::deque<Message> queue;
    bool busy = false, stopping = false;
    Clock::time_point freeAt{};
    std::thread thread;
  };
  std::map<int, std::unique_ptr<Link>> links;
  struct Posted {
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
    int peer = 0;
    std::string error;
  };
  std::map<int, Posted> posted;
  int nextHandle = 0;
  std::mutex postedMutex;
  std::mutex linksMutex, errorMutex;
  std::string linkError;

  std::string describe(int rank) const {
    return options.names[rank] + " (rank " + std::to_string(rank) + ")";
  }

  void runLink(int peer, Link &link) {
    while (true) {
      Link::Message message;
      {
        std::unique_lock<std::mutex> lock(link.mutex);
        link.changed.wait(lock,
                          [&] { return link.stopping || !link.queue.empty(); });
        if (link.queue.empty())
          return;
        message = std::move(link.queue.front());
        link.queue.pop_front();
        link.busy = true;
      }
      std::this_thread::sleep_until(message.release);
      try {
        auto buffer = world->createUnboundBuffer(message.bytes.data(),
                                                 message.bytes.size());
        buffer->send(peer, message.slot);
        buffer->waitSend(options.timeout);
      } catch (const std::exception &e) {
        std::lock_guard<std::mutex> lock(errorMutex);
        if (linkError.empty())
          linkError = "sending to " + describe(peer) + ": " + e.what();
      }
      {
        std::lock_guard<std::mutex> lock(link.mutex);
        link.busy = false;
      }
      link.changed.notify_all();
    }
  }

  Link *linkTo(int peer) {
    std::lock_guard<std::mutex> lock(linksMutex);
    std::unique_ptr<Link> &entry = links[peer];
    if (!entry) {
      entry = std::make_unique<Link>();
      Link *created = entry.get();
      created->thread =
          std::thread([this, peer, created] { runLink(peer, *created); });
    }
    return entry.get();
  }

  bool takeLinkError(std::string &error) {
    std::lock_guard<std::mutex> lock(errorMutex);
    if (linkError.empty())
      return false;
    error = linkError;
    return true;
  }

  ~Impl() {
    for (auto &[peer, link] : links) {
      {
        std::lock_guard<std::mutex> lock(link->mutex);
        link->stopping = true;
      }
      link->changed.notify_all();
      link->thread.join();
    }
  }
};

Transport::Transport(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
Transport::~Transport() = default;

int Transport::rank() const { return impl->options.rank; }
int Transport::size() const {
  return static_cast<int>(impl->options.names.size());
}
std::string Transport::describe(int rank) const { return impl->describe(rank); }

namespace {

/// "redis://HOST:PORT[/PREFIX]" split; false with `error` when malformed.
bool parseRedisUrl(const std::string &url, std::string &host, int &port,
                   std::string &prefix, std::string &error) {
  std::string rest = url.substr(std::strlen("redis://"));
  size_t slash = rest.find('/');
  prefix = slash == std::string::npos ? "" : rest.substr(slash + 1);
  std::string hostPort = rest.substr(0, slash);
  if (!parseHostPort(hostPort, host, port, error)) {
    error = "--rendezvous: expected redis://host:port[/prefix], got '" + url +
            "'";
    return false;
  }
  while (!prefix.empty() && prefix.back() == '/')
    prefix.pop_back();
  for (char c : prefix)
    if (!std::isalnum(static_cast<unsigned char>(c)) &&
        !std::strchr("._-/", c)) {
      error = "--rendezvous " + url + ": the key prefix may hold letters, "
              "digits, '.', '_', '-' and '/' only";
      return false;
    }
  return true;
}

/// The address the peers connect to: the interface named by `iface`, else
/// the one that reaches the rendezvous host -- but never a loopback address
/// when peers run on other hosts (a host name that /etc/hosts maps to
/// 127.0.1.1 is the classic trap). `notice` says when it chose for the user.
bool advertisedAddress(const TransportOptions &o, const std::string &host,
                       int port, std::string &address, std::string &notice,
                       std::string &error) {
  std::vector<std::pair<std::string, std::string>> interfaces =
      ipv4Interfaces();
  if (!o.iface.empty()) {
    for (const auto &[name, ip] : interfaces)
      if (name == o.iface) {
        address = ip;
        return true;
      }
    std::string have;
    for (const auto &[name, ip] : interfaces)
      have += (have.empty() ? "" : ", ") + name;
    error = o.ifaceFrom + " " + o.iface + ": this host has no such interface "
            "up with an IPv4 address (it has: " + have + ")";
    return false;
  }
  address = host.empty() ? "127.0.0.1" : localAddressToward(host, port);
  if (!o.peersOnOtherHosts || !isLoopbackAddress(address))
    return true;
  for (const auto &[name, ip] : interfaces)
    if (!isLoopbackAddress(ip)) {
      notice = "the rendezvous host " + host + " is this host's loopback "
               "address " + address + ", which the job's other hosts cannot "
               "reach: advertising " + ip + " (" + name +
               ") instead (--iface or GLOO_SOCKET_IFNAME chooses)";
      address = ip;
      return true;
    }
  error = "the rendezvous host " + host + " is this host's loopback address " +
          address + ", and this host has no other IPv4 interface the job's "
          "other hosts could reach (give MASTER_ADDR or --rendezvous an "
          "address they reach, or --iface)";
  return false;
}

} // namespace

std::unique_ptr<Transport> Transport::connect(const TransportOptions &options,
                                              std::string &error) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  int size = static_cast<int>(options.names.size());
  int rank = options.rank;
  std::string host, keyPrefix = options.runId;
  int port = 0;
  const std::string &where = options.rendezvous;
  bool redis = where.rfind("redis://", 0) == 0;
  if (redis) {
    std::string prefix;
    if (!parseRedisUrl(where, host, port, prefix, error))
      return nullptr;
    if (options.runId.empty()) {
      error = "--rendezvous " + where + ": a shared Redis needs the run's id "
              "(--run-id ID, or SLURM_JOB_ID / TORCHELASTIC_RUN_ID from the "
              "launcher), so that two jobs on it cannot meet";
      return nullptr;
    }
    keyPrefix = prefix.empty() ? options.runId : prefix + "/" + options.runId;
  } else if (!where.empty() && !parseHostPort(where, host, port, error)) {
    return nullptr;
  }
  // Before any wait: a wrong interface is this host's mistake alone.
  std::string address;
  if (!advertisedAddress(options, host, port, address, impl->notice, error))
    return nullptr;
  if (redis) {
    impl->store =
        RedisKeyValueStore::connect(host, port, options.redisPassword,
                                    options.timeout, error);
    if (!impl->store)
      return nullptr;
  } else if (!where.empty()) {
    if (options.jobToken.empty()) {
      error = "--rendezvous " + where + ": the rendezvous store admits only "
              "processes that prove the job's token: give every process of "
              "the job the same --job-token FILE or " +
              std::string(kJobTokenVariable) +
              " (`dtfm-run --new-job-token` makes one)";
      return nullptr;
    }
    if (rank == 0 && !options.storeServedElsewhere) {
      impl->server = std::make_unique<TcpStoreServer>();
      if (!impl->server->start(port, options.jobToken, error))
        return nullptr;
    }
    impl->store = TcpStoreClient::connect(host, port, options.jobToken,
                                          options.timeout, error);
    if (!impl->store)
      return nullptr;
  } else {
    try {
      impl->store =
          std::make_unique<LocalFileStore>(options.storeDir, options.timeout);
    } catch (const std::exception &e) {
      error = "--store " + options.storeDir + ": " + e.what();
      return nullptr;
    }
  }
  KeyValueStore *store = impl->store.get();
  if (!keyPrefix.empty()) {
    impl->runStore =
        std::make_unique<ScopedStore>(keyPrefix, *store, options.timeout);
    store = impl->runStore.get();
  }

  // A fresh session first: keys a dead job left under the same run id are
  // never read, and every failure to gather is one line on every rank.
  SessionOptions session;
  session.rank = rank;
  session.size = size;
  session.timeout = options.timeout;
  session.describe = [&](int r) { return impl->describe(r); };
  session.identity = options.identity;
  std::string name;
  if (!joinSession(*store, session, name, error))
    return nullptr;
  impl->sessionStore =
      std::make_unique<ScopedStore>(name, *store, options.timeout);

  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = address;
    impl->device = gloo::transport::tcp::CreateDevice(attr);
    impl->world = std::make_shared<gloo::rendezvous::Context>(rank, size);
    impl->world->setTimeout(options.timeout);
    gloo::rendezvous::PrefixStore worldStore("world", *impl->sessionStore);
    impl->world->connectFullMesh(worldStore, impl->device);
    for (const std::vector<int> &group : options.groups) {
      std::string prefix = "group";
      int groupRank = -1;
      for (size_t i = 0; i < group.size(); ++i) {
        prefix += "." + std::to_string(group[i]);
        if (group[i] == rank)
          groupRank = static_cast<int>(i);
      }
      if (groupRank < 0) {
        error = "rank " + std::to_string(rank) + " is not in its group";
        return nullptr;
      }
      auto context = std::make_shared<gloo::rendezvous::Context>(
          groupRank, static_cast<int>(group.size()));
      context->setTimeout(options.timeout);
      gloo::rendezvous::PrefixStore groupStore(prefix, *impl->sessionStore);
      context->connectFullMesh(groupStore, impl->device);
      impl->groups.push_back(context);
      impl->groupTags.push_back(0);
      impl->gatherTags.push_back(0);
    }
  } catch (const std::exception &e) {
    error = "rendezvous failed: " + std::string(e.what());
    return nullptr;
  }
  return std::unique_ptr<Transport>(new Transport(std::move(impl)));
}

const std::string &Transport::addressNotice() const { return impl->notice; }

bool Transport::publish(const std::string &key, const std::string &value,
                        std::string &error) {
  try {
    impl->sessionStore->put("shared/" + key,
                            std::vector<char>(value.begin(), value.end()));
  } catch (const std::exception &e) {
    error = "publishing '" + key + "' in the rendezvous store: " + e.what();
    return false;
  }
  return true;
}

bool Transport::lookup(const std::string &key, std::string &value,
                       std::string &error) {
  Clock::time_point deadline = Clock::now() + impl->options.timeout;
  try {
    std::vector<char> bytes;
    while (!impl->sessionStore->peek("shared/" + key, bytes)) {
      if (Clock::now() >= deadline) {
        error = "'" + key + "' did not appear in the rendezvous store within " +
                std::to_string(impl->options.timeout.count()) +
                " ms (--timeout)";
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    value.assign(bytes.begin(), bytes.end());
  } catch (const std::exception &e) {
    error = "looking up '" + key + "' in the rendezvous store: " + e.what();
    return false;
  }
  return true;
}

bool Transport::send(int peer, uint64_t slot, std::vector<char> message,
                     std::string &error, Clock::time_point *leaves,
                     bool control) {
  if (impl->takeLinkError(error))
    return false;
  Impl::Link *link = impl->linkTo(peer);
  Clock::time_point now = Clock::now(), release = now;
  const std::vector<LinkShape> &shapes = impl->options.links;
  size_t index = static_cast<size_t>(rank()) * size() + peer;
  {
    std::lock_guard<std::mutex> lock(link->mutex);
    Clock::time_point left = now;
    if (!control && index < shapes.size() && shapes[index].bytesPerSecond > 0) {
      const LinkShape &shape = shapes[index];
      Clock::time_point start = std::max(now, link->freeAt);
      auto serialise = std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(static_cast<double>(message.size()) /
                                        shape.bytesPerSecond));
      link->freeAt = start + serialise;
      left = link->freeAt;
      release = link->freeAt +
                std::chrono::duration_cast<Clock::duration>(
                    std::chrono::duration<double>(shape.latencySeconds));
    }
    link->queue.push_back({release, slot, std::move(message)});
    if (leaves)
      *leaves = left;
  }
  link->changed.notify_all();
  return true;
}

bool Transport::recv(int peer, uint64_t slot, void *data, size_t bytes,
                     std::string &error) {
  try {
    auto buffer = impl->world->createUnboundBuffer(data, bytes);
    buffer->recv(peer, slot);
    buffer->waitRecv(impl->options.timeout);
  } catch (const std::exception &e) {
    error = "receiving from " + describe(peer) + ": " + e.what();
    return false;
  }
  return true;
}

void Transport::openLinks(const std::vector<int> &peers) {
  for (int peer : peers)
    if (peer != rank() && peer >= 0 && peer < size())
      impl->linkTo(peer);
}

int Transport::postRecv(int peer, uint64_t slot, void *data, size_t bytes) {
  Impl::Posted p;
  p.peer = peer;
  try {
    p.buffer = impl->world->createUnboundBuffer(data, bytes);
    p.buffer->recv(peer, slot);
  } catch (const std::exception &e) {
    p.error = e.what();
  }
  std::lock_guard<std::mutex> lock(impl->postedMutex);
  int handle = impl->nextHandle++;
  impl->posted[handle] = std::move(p);
  return handle;
}

bool Transport::waitPosted(int handle, std::string &error) {
  Impl::Posted p;
  {
    std::lock_guard<std::mutex> lock(impl->postedMutex);
    auto it = impl->posted.find(handle);
    if (it == impl->posted.end()) {
      error = "no posted receive " + std::to_string(handle);
      return false;
    }
    p = std::move(it->second);
    impl->posted.erase(it);
  }
  try {
    if (p.error.empty())
      p.buffer->waitRecv(impl->options.timeout);
  } catch (const std::exception &e) {
    p.error = e.what();
  }
  if (!p.error.empty()) {
    error = "receiving from " + describe(p.peer) + ": " + p.error;
    return false;
  }
  return true;
}

bool Transport::flush(std::string &error) {
  std::vector<Impl::Link *> all;
  {
    std::lock_guard<std::mutex> lock(impl->linksMutex);
    for (auto &[peer, link] : impl->links)
      all.push_back(link.get());
  }
  for (Impl::Link *link : all) {
    std::unique_lock<std::mutex> lock(link->mutex);
    link->changed.wait(lock,
                       [&] { return link->queue.empty() && !link->busy; });
  }
  return !impl->takeLinkError(error);
}

/// Bounds of `n` chunks of nearly equal size over `count` elements.
static std::vector<size_t> evenChunks(size_t count, int n) {
  std::vector<size_t> bounds(n + 1);
  for (int k = 0; k <= n; ++k)
    bounds[k] = count * static_cast<size_t>(k) / static_cast<size_t>(n);
  return bounds;
}

bool Transport::allreduceSum(int group, float *data, size_t count,
                             std::string &error) {
  const std::vector<int> &members = impl->options.groups.at(group);
  uint32_t tag = impl->groupTags.at(group)++;
  if (!impl->options.links.empty())
    return ring(members, tag, data,
                evenChunks(count, static_cast<int>(members.size())), {},
                error);
  try {
    gloo::AllreduceOptions options(impl->groups.at(group));
    options.setOutput(data, count);
    options.setReduceFunction(
        static_cast<void (*)(void *, const void *, const void *, size_t)>(
            &gloo::sum<float>));
    options.setTag(tag);
    gloo::allreduce(options);
  } catch (const std::exception &e) {
    std::string names;
    for (int r : members)
      names += (names.empty() ? "" : ", ") + describe(r);
    error = "gradient allreduce with " + names + ": " + e.what();
    return false;
  }
  return true;
}

bool Transport::allreduceSum(int group, format::WireCodec codec, float *data,
                             size_t count, size_t kept, std::string &error) {
  if (codec == format::WireCodec::Dense)
    return allreduceSum(group, data, count, error);
  const std::vector<int> &members = impl->options.groups.at(group);
  uint32_t tag = impl->groupTags.at(group)++;
  if (!format::wireCodecInfo(codec).summable)
    return allgatherSum(members, tag, codec, data, count, kept, error);
  RingPhases phases;
  phases.codec = codec;
  return ring(members, tag, data,
              evenChunks(count, static_cast<int>(members.size())), phases,
              error);
}

bool Transport::reduceScatterSum(int group, float *data,
                                 const std::vector<size_t> &bounds,
                                 std::string &error) {
  const std::vector<int> &members = impl->options.groups.at(group);
  uint32_t tag = impl->groupTags.at(group)++;
  RingPhases phases;
  phases.gather = false;
  phases.shift = 1; // member i ends with the sum of chunk i
  return ring(members, tag, data, bounds, phases, error);
}

bool Transport::allGather(int group, float *data,
                          const std::vector<size_t> &bounds,
                          std::string &error) {
  const std::vector<int> &members = impl->options.groups.at(group);
  uint32_t tag = impl->gatherTags.at(group)++;
  RingPhases phases;
  phases.reduce = false;
  phases.space = uint64_t(1) << 57;
  phases.shift = 1; // member i starts with chunk i
  return ring(members, tag, data, bounds, phases, error);
}

bool Transport::ring(const std::vector<int> &members, uint32_t tag,
                     float *data, const std::vector<size_t> &bounds,
                     RingPhases phases, std::string &error) {
  // Reduce-scatter then allgather around the ring, over the point-to-point
  // links: (n - 1) steps of a chunk each per phase.
  int n = static_cast<int>(members.size());
  if (bounds.size() != members.size() + 1) {
    error = "gradient allreduce: " + std::to_string(bounds.size()) +
            " chunk bounds for a group of " + std::to_string(n);
    return false;
  }
  int me = static_cast<int>(std::find(members.begin(), members.end(), rank()) -
                            members.begin());
  int next = members[(me + 1) % n], prev = members[(me + n - 1) % n];
  auto chunkAt = [&](int k) { return ((k % n) + n) % n; };
  auto length = [&](int chunk) { return bounds[chunk + 1] - bounds[chunk]; };
  const format::WireCodecInfo &codec = format::wireCodecInfo(phases.codec);
  auto bytesOf = [&](int chunk) {
    return codec.messageBytes(length(chunk), length(chunk));
  };
  size_t longest = 0;
  for (int k = 0; k < n; ++k)
    longest = std::max(longest, length(k));
  std::vector<char> incoming(codec.messageBytes(longest, longest));
  std::vector<char> forward; // the final chunk passed on as received
  for (int step = 0; step < 2 * (n - 1); ++step) {
    bool reducing = step < n - 1;
    if ((reducing && !phases.reduce) || (!reducing && !phases.gather))
      continue;
    int s = reducing ? step : step - (n - 1);
    int sendChunk = chunkAt(reducing ? me - s - phases.shift
                                     : me + 1 - phases.shift - s);
    int recvChunk = chunkAt(reducing ? me - s - 1 - phases.shift
                                     : me - phases.shift - s);
    uint64_t slot =
        phases.space | (uint64_t(tag) << 16) | static_cast<uint64_t>(step);
    std::vector<char> message;
    float *sending = data + bounds[sendChunk];
    size_t sendLength = length(sendChunk);
    if (reducing || s == 0) {
      if (!codec.encode(sending, sendLength, sendLength, message, error)) {
        error = "gradient allreduce: " + error;
        return false;
      }
      // The owner of a final chunk keeps what the others will decode.
      std::string ignored;
      if (!reducing)
        codec.decode(message.data(), message.size(), sendLength, sendLength,
                     sending, /*add=*/false, ignored);
    } else {
      message = forward;
    }
    int handle = postRecv(prev, slot, incoming.data(), bytesOf(recvChunk));
    if (!send(next, slot, std::move(message), error) ||
        !waitPosted(handle, error)) {
      error = "gradient allreduce: " + error;
      return false;
    }
    size_t recvLength = length(recvChunk);
    std::string malformed;
    if (!codec.decode(incoming.data(), bytesOf(recvChunk), recvLength,
                      recvLength, data + bounds[recvChunk], reducing,
                      malformed)) {
      error = "gradient allreduce: " + describe(prev) + " sent " + malformed;
      return false;
    }
    if (!reducing)
      forward.assign(incoming.begin(), incoming.begin() + bytesOf(recvChunk));
  }
  return true;
}

bool Transport::allgatherSum(const std::vector<int> &members, uint32_t tag,
                             format::WireCodec codecName, float *data,
                             size_t count, size_t kept, std::string &error) {
  const format::WireCodecInfo &codec = format::wireCodecInfo(codecName);
  int n = static_cast<int>(members.size());
  int me = static_cast<int>(std::find(members.begin(), members.end(), rank()) -
                            members.begin());
  int next = members[(me + 1) % n], prev = members[(me + n - 1) % n];
  std::vector<std::vector<char>> messages(n);
  if (!codec.encode(data, count, kept, messages[me], error)) {
    error = "gradient allreduce: " + error;
    return false;
  }
  size_t bytes = codec.messageBytes(count, kept);
  // Step s passes on the message of member me - s, received the step before.
  for (int step = 0; step < n - 1; ++step) {
    int sending = (me - step + n) % n, receiving = (me - step - 1 + n) % n;
    uint64_t slot = (uint64_t(1) << 56) | (uint64_t(tag) << 16) |
                    static_cast<uint64_t>(step);
    messages[receiving].resize(bytes);
    int handle = postRecv(prev, slot, messages[receiving].data(), bytes);
    if (!send(next, slot, messages[sending], error) ||
        !waitPosted(handle, error)) {
      error = "gradient allreduce: " + error;
      return false;
    }
  }
  std::fill(data, data + count, 0.0f);
  for (int m = 0; m < n; ++m) {
    std::string malformed;
    if (!codec.decode(messages[m].data(), messages[m].size(), count, kept, data,
                      /*add=*/true, malformed)) {
      error = "gradient allreduce: " + describe(members[m]) + " sent " +
              malformed;
      return false;
    }
  }
  return true;
}

bool Transport::barrier(std::string &error) {
  int64_t ignored = 0;
  return allreduceMin(ignored, error);
}

/// A Gloo allreduce of `count` values at `data` over the world, combined by
/// `reduce` (gloo::min, gloo::sum, ...).
using ReduceFunction = void (*)(void *, const void *, const void *, size_t);
template <typename T>
static bool worldAllreduce(const std::shared_ptr<gloo::Context> &world,
                           uint32_t tag, T *data, size_t count,
                           ReduceFunction reduce, std::string &error) {
  try {
    gloo::AllreduceOptions options(world);
    options.setOutput(data, count);
    options.setReduceFunction(reduce);
    options.setTag(tag);
    gloo::allreduce(options);
  } catch (const std::exception &e) {
    error = "world collective: " + std::string(e.what());
    return false;
  }
  return true;
}

bool Transport::allreduceMin(int64_t &value, std::string &error) {
  return worldAllreduce(impl->world, impl->worldTag++, &value, 1,
                        static_cast<ReduceFunction>(&gloo::min<int64_t>),
                        error);
}

bool Transport::allreduceWorldSum(std::vector<double> &values,
                                  std::string &error) {
  return worldAllreduce(impl->world, impl->worldTag++, values.data(),
                        values.size(),
                        static_cast<ReduceFunction>(&gloo::sum<double>), error);
}
