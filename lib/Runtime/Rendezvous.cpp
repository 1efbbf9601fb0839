//===- Rendezvous.cpp - Where workers find each other ---------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "Rendezvous.h"

#include "dtfm/Format/FileIo.h"

#include <gloo/common/error.h>
#include <gloo/rendezvous/redis_store.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

namespace dtfm::runtime::rendezvous {

//===--- stores -----------------------------------------------------------===//

std::vector<char> KeyValueStore::get(const std::string &key) {
  std::vector<char> value;
  Clock::time_point deadline = Clock::now() + waitLimit;
  while (!peek(key, value)) {
    if (Clock::now() >= deadline)
      throw gloo::IoException("timed out waiting for store key '" + key +
                              "'");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return value;
}

void KeyValueStore::wait(const std::vector<std::string> &keys,
                         const std::chrono::milliseconds &limit) {
  Clock::time_point deadline = Clock::now() + limit;
  for (const std::string &key : keys)
    while (!has(key)) {
      if (Clock::now() >= deadline)
        throw gloo::IoException("timed out waiting for store key '" + key +
                                "'");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

bool LocalFileStore::peek(const std::string &key, std::vector<char> &value) {
  std::ifstream in(files.pathOf(key), std::ios::binary);
  if (!in)
    return false;
  value.assign(std::istreambuf_iterator<char>(in),
               std::istreambuf_iterator<char>());
  return true;
}

void LocalFileStore::put(const std::string &key,
                         const std::vector<char> &value) {
  // Written beside, then renamed over: a reader sees all of it or none.
  std::string error;
  if (!format::writeFileAtomically(files.pathOf(key),
                                   std::string(value.begin(), value.end()),
                                   error))
    throw gloo::IoException("store key '" + key + "': " + error);
}

void LocalFileStore::erase(const std::string &key) {
  std::remove(files.pathOf(key).c_str());
}

struct RedisKeyValueStore::Connection : gloo::rendezvous::RedisStore {
  using RedisStore::RedisStore;
  redisContext *context() { return redis_; }
};

namespace {
/// One Redis command's reply, freed on every path.
struct RedisReply {
  redisReply *reply;
  explicit RedisReply(void *reply) : reply(static_cast<redisReply *>(reply)) {}
  ~RedisReply() {
    if (reply)
      freeReplyObject(reply);
  }
};
} // namespace

std::unique_ptr<RedisKeyValueStore>
RedisKeyValueStore::connect(const std::string &host, int port,
                            const std::string &password,
                            std::chrono::milliseconds timeout,
                            std::string &error) {
  // Gloo's store connects once; the server may still be starting, and a
  // host that never answers must not hold the worker past its timeout.
  int probe = connectWithin(host, port, timeout, error);
  if (probe < 0) {
    error = "Redis rendezvous store: " + error;
    return nullptr;
  }
  ::close(probe);
  std::unique_ptr<RedisKeyValueStore> store(new RedisKeyValueStore());
  store->where = "redis://" + host + ":" + std::to_string(port);
  store->waitLimit = timeout;
  try {
    store->connection = std::make_unique<Connection>(host, port);
  } catch (const std::exception &e) {
    error = "Redis rendezvous store at " + store->where + ": " + e.what();
    return nullptr;
  }
  redisContext *context = store->connection->context();
  timeval deadline{};
  deadline.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  deadline.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  if (!context || context->err || redisSetTimeout(context, deadline) != 0) {
    error = "Redis rendezvous store at " + store->where + ": " +
            (context ? context->errstr : "no connection");
    return nullptr;
  }
  // The password first (its bytes as they are: %b, never formatted).
  if (!password.empty()) {
    RedisReply auth(redisCommand(context, "AUTH %b", password.data(),
                                 password.size()));
    if (!auth.reply || auth.reply->type == REDIS_REPLY_ERROR) {
      error = "Redis rendezvous store at " + store->where +
              ": it refused DTFM_REDIS_PASSWORD (" +
              (auth.reply ? std::string(auth.reply->str, auth.reply->len)
                          : std::string(context->errstr)) +
              ")";
      return nullptr;
    }
  }
  // Something that accepts connections but is not Redis fails here, in
  // one line, rather than at the first key.
  RedisReply pong(redisCommand(context, "PING"));
  if (pong.reply && pong.reply->type == REDIS_REPLY_ERROR &&
      std::string(pong.reply->str, pong.reply->len).rfind("NOAUTH", 0) == 0) {
    error = "Redis rendezvous store at " + store->where +
            ": the server asks for a password: give it in "
            "DTFM_REDIS_PASSWORD";
    return nullptr;
  }
  if (!pong.reply || pong.reply->type == REDIS_REPLY_ERROR) {
    error = "Redis rendezvous store at " + store->where + ": " +
            (pong.reply ? std::string(pong.reply->str, pong.reply->len)
                        : std::string(context->errstr)) +
            " (is it a Redis server?)";
    return nullptr;
  }
  return store;
}

RedisKeyValueStore::~RedisKeyValueStore() = default;

bool RedisKeyValueStore::has(const std::string &key) {
  std::lock_guard<std::mutex> lock(mutex);
  try {
    return connection->check({key});
  } catch (const std::exception &e) {
    throw gloo::IoException("lost the Redis store at " + where + ": " +
                            e.what());
  }
}

bool RedisKeyValueStore::peek(const std::string &key,
                              std::vector<char> &value) {
  std::lock_guard<std::mutex> lock(mutex);
  RedisReply got(redisCommand(connection->context(), "GET %b", key.data(),
                              key.size()));
  if (!got.reply || got.reply->type == REDIS_REPLY_ERROR)
    throw gloo::IoException("lost the Redis store at " + where);
  if (got.reply->type == REDIS_REPLY_NIL)
    return false;
  if (got.reply->type != REDIS_REPLY_STRING)
    throw gloo::IoException("Redis store at " + where + ": key '" + key +
                            "' is not a string");
  value.assign(got.reply->str, got.reply->str + got.reply->len);
  return true;
}

void RedisKeyValueStore::put(const std::string &key,
                             const std::vector<char> &value) {
  std::lock_guard<std::mutex> lock(mutex);
  RedisReply done(redisCommand(connection->context(), "SET %b %b EX %ld",
                               key.data(), key.size(), value.data(),
                               value.size(), kKeySeconds));
  if (!done.reply || done.reply->type == REDIS_REPLY_ERROR)
    throw gloo::IoException("cannot set '" + key + "' in the Redis store at " +
                            where);
}

void RedisKeyValueStore::erase(const std::string &key) {
  std::lock_guard<std::mutex> lock(mutex);
  RedisReply done(
      redisCommand(connection->context(), "DEL %b", key.data(), key.size()));
  if (!done.reply || done.reply->type == REDIS_REPLY_ERROR)
    throw gloo::IoException("cannot erase '" + key +
                            "' in the Redis store at " + where);
}

//===--- sockets ----------------------------------------------------------===//

bool writeAll(int fd, const void *data, size_t size) {
  const char *p = static_cast<const char *>(data);
  while (size > 0) {
    ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n <= 0)
      return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool readAll(int fd, void *data, size_t size) {
  char *p = static_cast<char *>(data);
  while (size > 0) {
    ssize_t n = ::recv(fd, p, size, 0);
    if (n <= 0)
      return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool readString(int fd, std::string &s, size_t maxBytes) {
  uint32_t length = 0;
  if (!readAll(fd, &length, 4) || length > maxBytes)
    return false;
  // In pieces, as they come: a peer that names a length and sends nothing
  // costs no memory.
  constexpr size_t kPiece = 1 << 16;
  s.clear();
  while (s.size() < length) {
    size_t have = s.size(), take = std::min<size_t>(kPiece, length - have);
    s.resize(have + take);
    if (!readAll(fd, s.data() + have, take))
      return false;
  }
  return true;
}

void setSocketDeadline(int fd, std::chrono::milliseconds deadline) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(deadline.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((deadline.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

bool writeString(int fd, const char *data, size_t size) {
  uint32_t length = static_cast<uint32_t>(size);
  return writeAll(fd, &length, 4) && writeAll(fd, data, size);
}

int connectWithin(const std::string &host, int port,
                  std::chrono::milliseconds timeout, std::string &error) {
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints,
                    &found) != 0 ||
      !found) {
    error = "cannot resolve host '" + host + "'";
    return -1;
  }
  Clock::time_point deadline = Clock::now() + timeout;
  while (true) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
      ::freeaddrinfo(found);
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return fd;
    }
    if (fd >= 0)
      ::close(fd);
    if (Clock::now() >= deadline)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::freeaddrinfo(found);
  error = "nothing listens at " + host + ":" + std::to_string(port) +
          " within " + std::to_string(timeout.count()) + " ms";
  return -1;
}

int listenOn(int port, std::string &why) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (fd < 0 ||
      ::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0 ||
      ::listen(fd, 1024) != 0) {
    why = std::strerror(errno);
    if (fd >= 0)
      ::close(fd);
    return -1;
  }
  return fd;
}

int listeningPort(int fd) {
  sockaddr_in addr{};
  socklen_t size = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &size) != 0)
    return -1;
  return ntohs(addr.sin_port);
}

int acceptWaiting(int listener, int milliseconds) {
  pollfd p{listener, POLLIN, 0};
  if (::poll(&p, 1, milliseconds) <= 0)
    return -1;
  return ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
}

std::string localAddressToward(const std::string &host, int port) {
  if (host == "localhost" || host.rfind("127.", 0) == 0)
    return "127.0.0.1";
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  std::string result = "127.0.0.1";
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints,
                    &found) == 0 &&
      found) {
    int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in local{};
    socklen_t length = sizeof local;
    if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr *>(&local), &length) == 0) {
      char text[INET_ADDRSTRLEN];
      if (::inet_ntop(AF_INET, &local.sin_addr, text, sizeof text))
        result = text;
    }
    if (fd >= 0)
      ::close(fd);
    ::freeaddrinfo(found);
  }
  return result;
}

bool isLoopbackAddress(const std::string &address) {
  in_addr parsed{};
  return ::inet_pton(AF_INET, address.c_str(), &parsed) == 1 &&
         (ntohl(parsed.s_addr) >> 24) == 127;
}

std::vector<std::pair<std::string, std::string>> ipv4Interfaces() {
  std::vector<std::pair<std::string, std::string>> found;
  ifaddrs *list = nullptr;
  if (::getifaddrs(&list) != 0)
    return found;
  for (ifaddrs *i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
        !(i->ifa_flags & IFF_UP))
      continue;
    char text[INET_ADDRSTRLEN];
    auto *address = reinterpret_cast<sockaddr_in *>(i->ifa_addr);
    if (::inet_ntop(AF_INET, &address->sin_addr, text, sizeof text))
      found.emplace_back(i->ifa_name, text);
  }
  ::freeifaddrs(list);
  return found;
}

//===--- the TCP store ----------------------------------------------------===//

bool TcpStoreServer::start(int port, const std::string &token,
                           std::string &error) {
  std::string why;
  listener = listenOn(port, why);
  if (listener < 0) {
    error = "cannot serve the rendezvous store on port " +
            std::to_string(port) + ": " + why;
    return false;
  }
  gate.start(listener, token, auth::Channel::Store, [this](int fd) {
    setSocketDeadline(fd, kRequestDeadline);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::lock_guard<std::mutex> lock(mutex);
    open.insert(fd);
    clients.emplace_back([this, fd] { serve(fd); });
  });
  return true;
}

TcpStoreServer::~TcpStoreServer() {
  stopping = true;
  gate.stop(); // no client is added after this
  {
    // Wake every connection's reader, whatever its client does.
    std::lock_guard<std::mutex> lock(mutex);
    for (int fd : open)
      ::shutdown(fd, SHUT_RDWR);
  }
  for (std::thread &t : clients)
    t.join();
  if (listener >= 0)
    ::close(listener);
}

void TcpStoreServer::serve(int fd) {
  while (!stopping) {
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, 50);
    if (ready == 0)
      continue;
    char op = 0;
    std::string key, value;
    if (ready < 0 || !readAll(fd, &op, 1) ||
        (op != 'S' && op != 'G' && op != 'D') ||
        !readString(fd, key, kMaxKeyBytes))
      break;
    if (op == 'S') {
      if (!readString(fd, value, kMaxValueBytes))
        break;
      std::lock_guard<std::mutex> lock(mutex);
      auto it = data.find(key);
      size_t replaced = it == data.end() ? 0 : key.size() + it->second.size();
      if (bytes - replaced + key.size() + value.size() > kMaxStoreBytes)
        break; // the store is full: this peer is not a rendezvous
      bytes = bytes - replaced + key.size() + value.size();
      data[key] = std::move(value);
      continue;
    }
    if (op == 'D') {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = data.find(key);
      if (it != data.end()) {
        bytes -= key.size() + it->second.size();
        data.erase(it);
      }
      continue;
    }
    bool found;
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = data.find(key);
      found = it != data.end();
      if (found)
        value = it->second;
    }
    // One write: a reply in pieces would wait on Nagle and the client's
    // delayed acknowledgement (40 ms a lookup).
    std::string reply(1, found ? 1 : 0);
    if (found) {
      uint32_t length = static_cast<uint32_t>(value.size());
      reply.append(reinterpret_cast<const char *>(&length), 4);
      reply += value;
    }
    if (!writeAll(fd, reply.data(), reply.size()))
      break;
  }
  std::lock_guard<std::mutex> lock(mutex);
  open.erase(fd);
  ::close(fd);
}

TcpStoreClient::~TcpStoreClient() { ::close(fd); }

std::unique_ptr<TcpStoreClient>
TcpStoreClient::connect(const std::string &host, int port,
                        const std::string &token,
                        std::chrono::milliseconds timeout, std::string &error) {
  bool unreachable = false;
  int fd = auth::connectProven(host, port, token, auth::Channel::Store,
                               timeout, error, &unreachable);
  if (fd < 0) {
    // The exchange's errors name the store already.
    if (unreachable)
      error = "rendezvous store: " + error + " (is rank 0 running?)";
    return nullptr;
  }
  return std::make_unique<TcpStoreClient>(fd, timeout);
}

void TcpStoreClient::request(char op, const std::string &key,
                             const std::vector<char> *value) {
  std::string request(1, op);
  auto append = [&](const char *data, size_t size) {
    uint32_t length = static_cast<uint32_t>(size);
    request.append(reinterpret_cast<const char *>(&length), 4);
    request.append(data, size);
  };
  append(key.data(), key.size());
  if (value)
    append(value->data(), value->size());
  std::lock_guard<std::mutex> lock(mutex);
  if (!writeAll(fd, request.data(), request.size()))
    throw gloo::IoException("lost the rendezvous store");
}

void TcpStoreClient::put(const std::string &key,
                         const std::vector<char> &value) {
  request('S', key, &value);
}

void TcpStoreClient::erase(const std::string &key) {
  request('D', key, nullptr);
}

bool TcpStoreClient::lookup(const std::string &key, std::vector<char> *value) {
  std::string request(1, 'G');
  uint32_t length = static_cast<uint32_t>(key.size());
  request.append(reinterpret_cast<const char *>(&length), 4);
  request += key;
  std::lock_guard<std::mutex> lock(mutex);
  char found = 0;
  if (!writeAll(fd, request.data(), request.size()) || !readAll(fd, &found, 1))
    throw gloo::IoException("lost the rendezvous store");
  if (!found)
    return false;
  std::string text;
  if (!readString(fd, text))
    throw gloo::IoException("lost the rendezvous store");
  if (value)
    value->assign(text.begin(), text.end());
  return true;
}

//===--- the session ------------------------------------------------------===//

namespace {

/// How often a rank repeats its hello (and rank 0 its claim), and how long
/// rank 0 watches the hellos after the last welcome: long enough to see a
/// second claimant of a rank overwrite the first.
constexpr std::chrono::milliseconds kHelloPeriod{25};
constexpr std::chrono::milliseconds kSettle{100};
constexpr std::chrono::milliseconds kPoll{10};

std::vector<char> bytesOf(const std::string &text) {
  return std::vector<char>(text.begin(), text.end());
}
std::string textOf(const std::vector<char> &bytes) {
  return std::string(bytes.begin(), bytes.end());
}

/// "4f2a…91 host7 pid 1234": unique to this process, and names it in the
/// messages about two processes claiming one rank.
std::string freshNonce() {
  std::random_device entropy;
  std::mt19937_64 random((static_cast<uint64_t>(entropy()) << 32) ^
                         entropy() ^ static_cast<uint64_t>(::getpid()));
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = 0;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(random()));
  return std::string(hex) + " " + host + " pid " + std::to_string(::getpid());
}

/// The "host7 pid 1234" of a nonce (or of a hello: nonce, newline,
/// identity).
std::string whoseNonce(const std::string &nonce) {
  std::string own = nonce.substr(0, nonce.find('\n'));
  size_t space = own.find(' ');
  return space == std::string::npos ? own : own.substr(space + 1);
}

/// The identity a hello carries.
std::string identityOf(const std::string &hello) {
  size_t split = hello.find('\n');
  return split == std::string::npos ? "" : hello.substr(split + 1);
}

std::string hello(int rank) { return "hello/" + std::to_string(rank); }
std::string welcome(int rank) { return "welcome/" + std::to_string(rank); }

/// Rank 0: gathers every other rank into a new session.
bool leadSession(KeyValueStore &store, const SessionOptions &o,
                 std::string &session, std::string &error) {
  std::string nonce = freshNonce();
  session = nonce.substr(0, nonce.find(' '));
  for (int r = 1; r < o.size; ++r) {
    store.erase(hello(r));
    store.erase(welcome(r));
  }
  ScopedStore own(session, store, o.timeout);
  std::vector<std::string> welcomed(o.size);
  std::vector<char> value;
  // Every rank hears why: the ones saying hello now, or within a moment,
  // are welcomed into this session to read its abort.
  auto abort = [&](const std::string &message) {
    error = message;
    own.put("abort", bytesOf(message));
    Clock::time_point until = Clock::now() + 3 * kSettle;
    while (Clock::now() < until) {
      for (int r = 1; r < o.size; ++r)
        if (store.peek(hello(r), value) && textOf(value) != welcomed[r]) {
          welcomed[r] = textOf(value);
          store.put(welcome(r), bytesOf(welcomed[r] + "\n" + session));
        }
      std::this_thread::sleep_for(kPoll);
    }
    return false;
  };
  Clock::time_point start = Clock::now(), deadline = start + o.timeout;
  Clock::time_point claimed{}, settledSince = Clock::time_point::max();
  while (true) {
    Clock::time_point now = Clock::now();
    if (now - claimed >= kHelloPeriod) {
      store.put("leader", bytesOf(nonce));
      claimed = now;
    } else if (store.peek("leader", value) && textOf(value) != nonce) {
      // The other claimant's session (its nonce's head) hears it too.
      std::string other = textOf(value);
      std::string message = "two processes claim " + o.describe(0) + ": " +
                            whoseNonce(nonce) + " and " + whoseNonce(other);
      ScopedStore(other.substr(0, other.find(' ')), store, o.timeout)
          .put("abort", bytesOf(message));
      return abort(message);
    }
    if (own.peek("abort", value))
      return abort(textOf(value));
    bool all = true;
    for (int r = 1; r < o.size; ++r) {
      if (!store.peek(hello(r), value)) {
        all &= !welcomed[r].empty();
        continue;
      }
      std::string said = textOf(value);
      if (identityOf(said) != o.identity)
        return abort(o.describe(r) + " on " + whoseNonce(said) +
                     " runs another job than " + o.describe(0) + ": " +
                     (identityOf(said).empty() ? "(none)" : identityOf(said)) +
                     " against " + o.identity +
                     " (every rank needs the same plan file and training "
                     "flags)");
      if (welcomed[r].empty()) {
        welcomed[r] = said;
        store.put(welcome(r), bytesOf(said + "\n" + session));
      } else if (said != welcomed[r]) {
        return abort("two processes claim " + o.describe(r) + ": " +
                     whoseNonce(welcomed[r]) + " and " + whoseNonce(said));
      }
    }
    if (all && settledSince == Clock::time_point::max())
      settledSince = now;
    if (all && now - settledSince >= kSettle)
      break;
    if (now >= deadline) {
      std::string missing;
      for (int r = 1; r < o.size; ++r)
        if (welcomed[r].empty())
          missing += (missing.empty() ? "" : ", ") + o.describe(r);
      return abort("no sign of " + missing + " within " +
                   std::to_string(o.timeout.count()) +
                   " ms of rendezvous (--timeout)");
    }
    std::this_thread::sleep_for(kPoll);
  }
  own.put("go", bytesOf("1"));
  return true;
}

/// Rank r > 0: says hello until rank 0 welcomes this process, then waits
/// for its go.
bool followSession(KeyValueStore &store, const SessionOptions &o,
                   std::string &session, std::string &error) {
  std::string nonce = freshNonce() + "\n" + o.identity;
  Clock::time_point deadline = Clock::now() + o.timeout;
  Clock::time_point said{};
  std::vector<char> value;
  // The welcome seen first may be a dead job's; one written since is the
  // live rank 0's.
  std::string firstSeen;
  bool looked = false;
  while (true) {
    Clock::time_point now = Clock::now();
    if (now - said >= kHelloPeriod) {
      store.put(hello(o.rank), bytesOf(nonce));
      said = now;
    }
    std::string text;
    if (store.peek(welcome(o.rank), value))
      text = textOf(value);
    size_t split = text.rfind('\n');
    if (split != std::string::npos && text.substr(0, split) == nonce) {
      session = text.substr(split + 1);
      break;
    }
    if (!looked) {
      firstSeen = text;
      looked = true;
    } else if (split != std::string::npos && text != firstSeen) {
      // The live rank 0 welcomed another process to this rank. While
      // rank 0 gathers, it sees the two hellos and tells everyone; once
      // the run has started, this process is the late one.
      ScopedStore theirs(text.substr(split + 1), store, o.timeout);
      if (theirs.has("go")) {
        error = "two processes claim " + o.describe(o.rank) + ": " +
                whoseNonce(text.substr(0, split)) + " runs it already, " +
                whoseNonce(nonce) + " came late and stops";
        return false;
      }
    }
    if (now >= deadline) {
      error = "no sign of " + o.describe(0) + " within " +
              std::to_string(o.timeout.count()) +
              " ms of rendezvous (--timeout); rank 0 gathers the others";
      return false;
    }
    std::this_thread::sleep_for(kPoll);
  }
  // Rank 0 answers within its own timeout; a little more here lets its
  // reason arrive rather than a guess.
  ScopedStore own(session, store, o.timeout);
  deadline += std::chrono::seconds(2);
  while (true) {
    if (own.peek("abort", value)) {
      error = textOf(value);
      return false;
    }
    if (own.has("go"))
      return true;
    if (Clock::now() >= deadline) {
      error = o.describe(0) + " welcomed this worker but did not start the "
              "run within " + std::to_string(o.timeout.count()) +
              " ms (--timeout)";
      return false;
    }
    std::this_thread::sleep_for(kPoll);
  }
}

} // namespace

bool joinSession(KeyValueStore &store, const SessionOptions &options,
                 std::string &session, std::string &error) {
  try {
    return options.rank == 0 ? leadSession(store, options, session, error)
                             : followSession(store, options, session, error);
  } catch (const std::exception &e) {
    error = "rendezvous store: " + std::string(e.what());
    return false;
  }
}

} // namespace dtfm::runtime::rendezvous
