//===- Rendezvous.h - Where workers find each other -------------*- C++ -*-===//
//
// Part of dtfm. Private to lib/Runtime: the key-value stores Gloo
// rendezvouses through -- a shared directory (local runs, --store), or a
// small TCP store that rank 0 serves (--rendezvous HOST:PORT) -- the socket
// helpers they and the agents' control channel share, and the address a
// host uses toward another.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_LIB_RUNTIME_RENDEZVOUS_H
#define DTFM_LIB_RUNTIME_RENDEZVOUS_H

#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/store.h>

#include <atomic>
#include <chrono>
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

/// A Gloo store that can also say whether a key is there yet (to name the
/// peers that never showed up).
class KeyValueStore : public gloo::rendezvous::Store {
public:
  virtual bool has(const std::string &key) = 0;
};

class LocalFileStore : public KeyValueStore {
public:
  explicit LocalFileStore(const std::string &dir) : files(dir) {}
  void set(const std::string &key, const std::vector<char> &data) override {
    files.set(key, data);
  }
  std::vector<char> get(const std::string &key) override {
    return files.get(key);
  }
  void wait(const std::vector<std::string> &keys) override { files.wait(keys); }
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &timeout) override {
    files.wait(keys, timeout);
  }
  bool has(const std::string &key) override { return files.has(key); }

private:
  struct Files : gloo::rendezvous::FileStore {
    using FileStore::FileStore;
    bool has(const std::string &key) { return check({key}); }
  } files;
};

//===--- sockets ----------------------------------------------------------===//

/// Writes or reads all `size` bytes; false when the connection ends first.
bool writeAll(int fd, const void *data, size_t size);
bool readAll(int fd, void *data, size_t size);
/// A string as its 4-byte length and its bytes; readString refuses one
/// over 64 MiB.
bool readString(int fd, std::string &s);
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

/// The address this machine uses to reach `host` (no packet is sent).
std::string localAddressToward(const std::string &host, int port);

//===--- the TCP store ----------------------------------------------------===//

/// The TCP store rank 0 serves for multi-host runs. Requests: 'S' key value
/// (set), 'G' key (get: a found byte, then the value).
class TcpStoreServer {
public:
  bool start(int port, std::string &error);

  /// The port it listens on (the one the system chose for port 0).
  int port() const { return listeningPort(listener); }

  ~TcpStoreServer();

  /// How long one request may take to arrive once it has begun.
  static constexpr std::chrono::milliseconds kRequestDeadline{10000};

private:
  void acceptLoop();
  void serve(int fd);

  int listener = -1;
  std::atomic<bool> stopping{false};
  std::thread acceptor;
  std::vector<std::thread> clients;
  std::mutex mutex; ///< guards `data` and `open`
  std::map<std::string, std::string> data;
  std::set<int> open; ///< connections being served
};

class TcpStoreClient : public KeyValueStore {
public:
  TcpStoreClient(int fd, std::chrono::milliseconds timeout)
      : fd(fd), timeout(timeout) {}
  ~TcpStoreClient() override;

  static std::unique_ptr<TcpStoreClient>
  connect(const std::string &host, int port, std::chrono::milliseconds timeout,
          std::string &error);

  void set(const std::string &key, const std::vector<char> &value) override;
  /// Whether `key` is set, and its value into `value` (when not null).
  bool lookup(const std::string &key, std::vector<char> *value);
  bool has(const std::string &key) override { return lookup(key, nullptr); }
  std::vector<char> get(const std::string &key) override;
  void wait(const std::vector<std::string> &keys) override {
    wait(keys, timeout);
  }
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &limit) override;

private:
  int fd;
  std::chrono::milliseconds timeout;
  std::mutex mutex;
};

} // namespace dtfm::runtime::rendezvous

#endif // DTFM_LIB_RUNTIME_RENDEZVOUS_H
