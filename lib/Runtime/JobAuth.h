//===- JobAuth.h - Connections that prove the job token ---------*- C++ -*-===//
//
// Part of dtfm. Private to lib/Runtime.
//
//===----------------------------------------------------------------------===//
//
// Every connection of the control plane (Rendezvous.h's TCP store, the
// agents' channel to their coordinator) opens with this exchange, before
// either side parses anything else:
//
//   server -> client  "dtfm-job-token 1" channel(1) server nonce(32)
//   client -> server  client nonce(32)
//                     HMAC(token, "client" channel server-nonce client-nonce)
//   server -> client  '+' HMAC(token, "server" channel client-nonce
//                     server-nonce)          -- or '-' and the server closes
//
// Both sides prove the token with fresh nonces, so neither a recording nor
// a peer without the token passes, and a client learns that its server is
// the job's (an agent never obeys a fake coordinator). The messages have
// fixed sizes: an unauthenticated peer can make the server read at most
// 64 bytes. After the exchange the stream is plain TCP: an attacker on the
// path can still read it and inject into it (docs/Runtime.md, threat
// model).
//
// The server side is an AuthGate: one thread that accepts connections,
// runs the exchange on all of them at once without blocking, closes the
// ones that fail it, stall past a deadline or exceed a cap on connections
// still unproven (the oldest goes first), and hands each proven one over.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_LIB_RUNTIME_JOBAUTH_H
#define DTFM_LIB_RUNTIME_JOBAUTH_H

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dtfm::runtime::auth {

/// Which service a connection is for: a proof for one is no proof for the
/// other.
enum class Channel : char { Store = 'S', Agents = 'A' };

inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;
inline constexpr char kGreeting[] = "dtfm-job-token 1";
inline constexpr size_t kGreetingBytes = sizeof kGreeting - 1;
inline constexpr size_t kChallengeBytes = kGreetingBytes + 1 + kNonceBytes;
inline constexpr size_t kResponseBytes = kNonceBytes + kMacBytes;

/// How a client's proof went.
enum class Proof {
  Accepted,    ///< both sides hold the token
  Refused,     ///< the server says this token is not the job's
  NotTheJobs,  ///< the server's own proof is wrong: not the job's server
  NotDtfm,     ///< the server does not open with the exchange
  Lost,        ///< the connection closed or stalled first (try again)
};

/// The client's side on a connected socket whose deadline bounds each
/// read; `error` says why when not Accepted, naming the peer as `peer`.
Proof proveJobToken(int fd, const std::string &token, Channel channel,
                    const std::string &peer, std::string &error);

/// Connects to host:port and proves `token` within `timeout`, retrying
/// while the server is not up or its gate is crowded (it closes the oldest
/// unproven connection); the socket (its deadline set to `timeout`), or -1
/// with a one-line `error` -- at once for a refused token or an impostor.
/// `unreachable` (when given) says whether nothing could be reached at all
/// (callers name what they expected there).
int connectProven(const std::string &host, int port, const std::string &token,
                  Channel channel, std::chrono::milliseconds timeout,
                  std::string &error, bool *unreachable = nullptr);

/// `size` bytes of the kernel's randomness (getrandom); false when it has
/// none to give.
bool randomBytes(char *data, size_t size);

/// The server's side: accepts on a listening socket (made non-blocking)
/// and admits the connections that prove the token.
class AuthGate {
public:
  /// Called on the gate's thread with each proven connection (blocking
  /// again, its ownership passed): it must return quickly.
  using Admit = std::function<void(int fd)>;

  /// At most this many connections wait to prove the token; a newer one
  /// closes the oldest.
  static constexpr size_t kMaxUnproven = 64;
  /// How long a connection has to prove it.
  static constexpr std::chrono::milliseconds kProofDeadline{5000};

  struct Counts {
    uint64_t accepted = 0, admitted = 0, refused = 0, evicted = 0,
             expired = 0, dropped = 0;
  };

  /// Serves `listener` (still the caller's to close after stop()).
  /// `refused` (optional) hears of each connection that sent a wrong proof,
  /// before it is closed (the coordinator names such peers, a few a
  /// second at most).
  void start(int listener, std::string token, Channel channel, Admit admit,
             std::function<void(int fd)> refused = nullptr);
  /// Stops the thread and closes every unproven connection.
  void stop();
  ~AuthGate() { stop(); }
  Counts counts();

private:
  struct Unproven {
    int fd;
    std::chrono::steady_clock::time_point since;
    std::string nonce, response;
  };
  void loop();
  void acceptNew();
  /// Reads what `u` sent; false when it is done with (admitted or closed).
  bool readProof(Unproven &u);

  int listener = -1;
  std::string token;
  Channel channel = Channel::Store;
  Admit admit;
  std::function<void(int fd)> refused;
  std::atomic<bool> stopping{false};
  std::thread thread;
  std::vector<Unproven> unproven;
  std::mutex countsMutex;
  Counts tally;
};

} // namespace dtfm::runtime::auth

#endif // DTFM_LIB_RUNTIME_JOBAUTH_H
