//===- Rendezvous.h - Where workers find each other -------------*- C++ -*-===//
//
// Part of dtfm. Private to lib/Runtime: the key-value stores Gloo
// rendezvouses through -- a shared directory (local runs, --store), a small
// TCP store that rank 0 serves (--rendezvous HOST:PORT) or a Redis server
// (--rendezvous redis://HOST:PORT/PREFIX) -- the session every run agrees
// on in its store first, the socket helpers the stores and the agents'
// control channel share, and the address a host advertises to the others.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_LIB_RUNTIME_RENDEZVOUS_H
#define DTFM_LIB_RUNTIME_RENDEZVOUS_H

#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/store.h>

#include "JobAuth.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace dtfm::runtime::rendezvous {

using Clock = std::chrono::steady_clock;

//===--- stores -----------------------------------------------------------===//

/// A Gloo store that can also look without waiting, overwrite and erase
/// (the session handshake needs all three; Gloo's own stores refuse to set
/// a key twice).
class KeyValueStore : public gloo::rendezvous::Store {
public:
  virtual bool has(const std::string &key) = 0;
  /// The value of `key` into `value` when it is set; false at once when not.
  virtual bool peek(const std::string &key, std::vector<char> &value) = 0;
  /// Sets `key` whether or not it is set already.
  virtual void put(const std::string &key, const std::vector<char> &value) = 0;
  /// Removes `key` (nothing when it is not set).
  virtual void erase(const std::string &key) = 0;

  void set(const std::string &key, const std::vector<char> &value) override {
    put(key, value);
  }
  std::vector<char> get(const std::string &key) override;
  void wait(const std::vector<std::string> &keys) override {
    wait(keys, waitLimit);
  }
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &limit) override;

protected:
  /// How long get() and wait() without a limit wait.
  std::chrono::milliseconds waitLimit{60000};
};

/// Another store's keys under "PREFIX/": the run id's (two jobs on one
/// store never meet) and the session's (a dead job's keys are never read).
class ScopedStore : public KeyValueStore {
public:
  ScopedStore(const std::string &prefix, KeyValueStore &inner,
              std::chrono::milliseconds limit)
      : prefix(prefix + "/"), inner(inner) {
    waitLimit = limit;
  }
  bool has(const std::string &key) override { return inner.has(prefix + key); }
  bool peek(const std::string &key, std::vector<char> &value) override {
    return inner.peek(prefix + key, value);
  }
  void put(const std::string &key, const std::vector<char> &value) override {
    inner.put(prefix + key, value);
  }
  void erase(const std::string &key) override { inner.erase(prefix + key); }

private:
  std::string prefix;
  KeyValueStore &inner;
};

/// Gloo's file store on a directory the workers share; a key is a file
/// named by its hash, replaced by a rename.
class LocalFileStore : public KeyValueStore {
public:
  LocalFileStore(const std::string &dir, std::chrono::milliseconds limit)
      : files(dir) {
    waitLimit = limit;
  }
  bool has(const std::string &key) override { return files.has(key); }
  bool peek(const std::string &key, std::vector<char> &value) override;
  void put(const std::string &key, const std::vector<char> &value) override;
  void erase(const std::string &key) override;

private:
  struct Files : gloo::rendezvous::FileStore {
    using FileStore::FileStore;
    bool has(const std::string &key) { return check({key}); }
    std::string pathOf(const std::string &key) { return objectPath(key); }
  } files;
};

/// A Redis server (--rendezvous redis://HOST:PORT/PREFIX): Gloo's Redis
/// store connects and tests keys; writes are plain SETs (Gloo's SETNX
/// refuses a key set twice) that expire after a day, so that a server
/// shared by many jobs does not fill up with dead ones' keys.
class RedisKeyValueStore : public KeyValueStore {
public:
  /// Connects within `timeout` (the server may be starting) and
  /// authenticates with `password` (Redis AUTH; none when empty); null
  /// with a one-line `error`.
  static std::unique_ptr<RedisKeyValueStore>
  connect(const std::string &host, int port, const std::string &password,
          std::chrono::milliseconds timeout, std::string &error);
  ~RedisKeyValueStore() override;

  bool has(const std::string &key) override;
  bool peek(const std::string &key, std::vector<char> &value) override;
  void put(const std::string &key, const std::vector<char> &value) override;
  void erase(const std::string &key) override;

  static constexpr long kKeySeconds = 24 * 3600;

private:
  RedisKeyValueStore() = default;
  struct Connection;
  std::unique_ptr<Connection> connection;
  std::string where; ///< "redis://host:port", for messages
  std::mutex mutex;  ///< one command at a time on the connection
};

//===--- sockets ----------------------------------------------------------===//

/// Writes or reads all `size` bytes; false when the connection ends first.
bool writeAll(int fd, const void *data, size_t size);
bool readAll(int fd, void *data, size_t size);
/// A string as its 4-byte length and its bytes; readString refuses one
/// over `maxBytes`, and grows `s` only as the bytes arrive (a length alone
/// allocates nothing).
bool readString(int fd, std::string &s, size_t maxBytes = size_t(64) << 20);
bool writeString(int fd, const char *data, size_t size);

/// Bounds every blocking read and write on `fd` (a peer that stops
/// mid-message cannot hold a reader forever).
void setSocketDeadline(int fd, std::chrono::milliseconds deadline);

/// A TCP connection to host:port, retried until `timeout` (the other end
/// may not listen yet); -1 with a one-line `error`.
int connectWithin(const std::string &host, int port,
                  std::chrono::milliseconds timeout, std::string &error);

/// A socket listening on `port` of every address (0: a port the system
/// chooses), close-on-exec; -1 with the system's reason in `why`.
int listenOn(int port, std::string &why);

/// The port a listening socket has (-1 when unknown).
int listeningPort(int fd);

/// A connection `listener` has waiting within `milliseconds`, accepted
/// close-on-exec (children do not inherit it); -1 when none.
int acceptWaiting(int listener, int milliseconds);

/// The address this machine uses to reach `host` (no packet is sent):
/// 127.0.0.1 for a loopback or unresolvable host.
std::string localAddressToward(const std::string &host, int port);

/// Whether `address` (dotted IPv4) is a loopback address.
bool isLoopbackAddress(const std::string &address);

/// This host's up interfaces with an IPv4 address: name -> address, in the
/// system's order.
std::vector<std::pair<std::string, std::string>> ipv4Interfaces();

//===--- the TCP store ----------------------------------------------------===//

/// The TCP store rank 0 serves for multi-host runs (and the elastic
/// coordinator for each launch). A connection first proves the job token
/// (JobAuth.h: until then its peer is held to 64 bytes, a deadline and a
/// cap on such connections); then requests: 'S' key value (set), 'G' key
/// (get: a found byte, then the value), 'D' key (erase). Keys, values and
/// the store as a whole are bounded; a request that breaks a bound, or
/// stalls once begun, closes its connection.
class TcpStoreServer {
public:
  /// Serves on `port` (0: one the system chooses) to peers that prove
  /// `token`; false with a one-line `error`.
  bool start(int port, const std::string &token, std::string &error);

  /// The port it listens on (the one the system chose for port 0).
  int port() const { return listeningPort(listener); }

  ~TcpStoreServer();

  /// How long one request may take to arrive once it has begun.
  static constexpr std::chrono::milliseconds kRequestDeadline{10000};
  static constexpr size_t kMaxKeyBytes = 4096;
  static constexpr size_t kMaxValueBytes = size_t(64) << 20;
  /// Keys and values together: far above what any rendezvous stores
  /// (addresses and hellos: kilobytes per rank).
  static constexpr size_t kMaxStoreBytes = size_t(256) << 20;

  /// What its gate saw (for tests and bench/launch_bench.py).
  auth::AuthGate::Counts gateCounts() { return gate.counts(); }

private:
  void serve(int fd);

  int listener = -1;
  std::atomic<bool> stopping{false};
  auth::AuthGate gate;
  std::vector<std::thread> clients;
  std::mutex mutex; ///< guards `data`, `bytes`, `open` and `clients`
  std::map<std::string, std::string> data;
  size_t bytes = 0; ///< of the keys and values in `data`
  std::set<int> open; ///< connections being served
};

class TcpStoreClient : public KeyValueStore {
public:
  TcpStoreClient(int fd, std::chrono::milliseconds timeout) : fd(fd) {
    waitLimit = timeout;
  }
  ~TcpStoreClient() override;

  /// Connects and proves `token` within `timeout` (retrying while the
  /// store is not up, or its gate is crowded); null with a one-line
  /// `error` (a refused token fails at once).
  static std::unique_ptr<TcpStoreClient>
  connect(const std::string &host, int port, const std::string &token,
          std::chrono::milliseconds timeout, std::string &error);

  /// Whether `key` is set, and its value into `value` (when not null).
  bool lookup(const std::string &key, std::vector<char> *value);
  bool has(const std::string &key) override { return lookup(key, nullptr); }
  bool peek(const std::string &key, std::vector<char> &value) override {
    return lookup(key, &value);
  }
  void put(const std::string &key, const std::vector<char> &value) override;
  void erase(const std::string &key) override;

private:
  void request(char op, const std::string &key, const std::vector<char> *value);
  int fd;
  std::mutex mutex;
};

//===--- the session ------------------------------------------------------===//

/// Every run agrees on a fresh session in its store before anything else,
/// and keeps all its other keys under it. Each rank r > 0 writes
/// "hello/r" (a nonce naming its host and process) until rank 0 answers in
/// "welcome/r" with that nonce and the session; rank 0 first erases every
/// hello and welcome left by a job that died on the same store and run id,
/// and says "go" once every rank has been welcomed and nobody else claims
/// a rank (a hello that changes after its welcome, a second rank 0), or
/// "abort" with the one-line reason every rank then prints. A hello also
/// carries the rank's identity (SessionOptions): ranks of different plans
/// never train together.
struct SessionOptions {
  int rank = 0, size = 1;
  std::chrono::milliseconds timeout{60000};
  /// "cpu3 (rank 3)", for messages.
  std::function<std::string(int)> describe;
  /// What every rank must hold the same of (one line: the plan's hash and
  /// the flags that shape training); rank 0 aborts on a hello that
  /// differs.
  std::string identity;
};
/// The session's name into `session`; false with a one-line `error`.
bool joinSession(KeyValueStore &store, const SessionOptions &options,
                 std::string &session, std::string &error);

} // namespace dtfm::runtime::rendezvous

#endif // DTFM_LIB_RUNTIME_RENDEZVOUS_H
