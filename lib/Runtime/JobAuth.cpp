//===- JobAuth.cpp - Connections that prove the job token -----------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "JobAuth.h"
#include "Rendezvous.h"

#include "dtfm/Support/Sha256.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

using namespace dtfm;
using namespace dtfm::runtime::auth;
using Clock = std::chrono::steady_clock;

namespace {

std::string freshNonce() {
  std::string nonce(kNonceBytes, '\0');
  if (!randomBytes(nonce.data(), nonce.size())) {
    // No getrandom: the library's device (a nonce need only be fresh).
    std::random_device device;
    for (char &c : nonce)
      c = static_cast<char>(device());
  }
  return nonce;
}

/// HMAC(token, role channel first second), as bytes.
std::string mac(const std::string &token, const char *role, Channel channel,
                const std::string &first, const std::string &second) {
  std::string message = role;
  message += static_cast<char>(channel);
  message += first;
  message += second;
  Sha256Digest digest = hmacSha256(token, message);
  return std::string(reinterpret_cast<const char *>(digest.data()),
                     digest.size());
}

const char *channelName(Channel channel) {
  return channel == Channel::Store ? "rendezvous store" : "coordinator";
}

} // namespace

bool dtfm::runtime::auth::randomBytes(char *data, size_t size) {
  size_t have = 0;
  while (have < size) {
    ssize_t got = ::getrandom(data + have, size - have, 0);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return false;
    have += static_cast<size_t>(got);
  }
  return true;
}

Proof dtfm::runtime::auth::proveJobToken(int fd, const std::string &token,
                                         Channel channel,
                                         const std::string &peer,
                                         std::string &error) {
  using rendezvous::readAll;
  using rendezvous::writeAll;
  std::string challenge(kChallengeBytes, '\0');
  // The greeting first, alone: a server that is not dtfm's is named as
  // such (rather than waited on for the rest).
  if (!readAll(fd, challenge.data(), kGreetingBytes)) {
    error = "the " + std::string(channelName(channel)) + " at " + peer +
            " closed the connection or said nothing before its challenge";
    return Proof::Lost;
  }
  if (challenge.compare(0, kGreetingBytes, kGreeting) != 0) {
    error = "the peer at " + peer + " is not a dtfm " + channelName(channel) +
            " that asks for the job token (another program, or a dtfm "
            "without job tokens)";
    return Proof::NotDtfm;
  }
  if (!readAll(fd, challenge.data() + kGreetingBytes,
               kChallengeBytes - kGreetingBytes)) {
    error = "the " + std::string(channelName(channel)) + " at " + peer +
            " closed the connection during its challenge";
    return Proof::Lost;
  }
  if (challenge[kGreetingBytes] != static_cast<char>(channel)) {
    error = "the peer at " + peer + " serves another dtfm channel than a " +
            channelName(channel);
    return Proof::NotDtfm;
  }
  std::string serverNonce = challenge.substr(kGreetingBytes + 1);
  std::string clientNonce = freshNonce();
  std::string response =
      clientNonce + mac(token, "client", channel, serverNonce, clientNonce);
  char verdict = 0;
  if (!writeAll(fd, response.data(), response.size()) ||
      !readAll(fd, &verdict, 1)) {
    error = "the " + std::string(channelName(channel)) + " at " + peer +
            " closed the connection before its verdict on the job token";
    return Proof::Lost;
  }
  if (verdict == '-') {
    error = "the " + std::string(channelName(channel)) + " at " + peer +
            " refused this job token: it is not the job's (give every "
            "process of the job the same --job-token FILE or " +
            "DTFM_JOB_TOKEN)";
    return Proof::Refused;
  }
  std::string proof(kMacBytes, '\0');
  if (verdict != '+' || !readAll(fd, proof.data(), proof.size())) {
    error = "the " + std::string(channelName(channel)) + " at " + peer +
            " closed the connection during its verdict on the job token";
    return verdict == '+' ? Proof::Lost : Proof::NotDtfm;
  }
  if (!equalInConstantTime(
          proof, mac(token, "server", channel, clientNonce, serverNonce))) {
    error = "the " + std::string(channelName(channel)) + " at " + peer +
            " does not hold this job's token (another job's, or an "
            "impostor): nothing was sent to it";
    return Proof::NotTheJobs;
  }
  return Proof::Accepted;
}

int dtfm::runtime::auth::connectProven(const std::string &host, int port,
                                      const std::string &token,
                                      Channel channel,
                                      std::chrono::milliseconds timeout,
                                      std::string &error, bool *unreachable) {
  if (unreachable)
    *unreachable = false;
  std::string peer = host + ":" + std::to_string(port);
  Clock::time_point deadline = Clock::now() + timeout;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    int fd = rendezvous::connectWithin(
        host, port, std::max(left, std::chrono::milliseconds(1)), error);
    if (fd < 0) {
      if (unreachable)
        *unreachable = true;
      if (error.rfind("nothing listens", 0) == 0) // the whole wait, said so
        error = "nothing listens at " + peer + " within " +
                std::to_string(timeout.count()) + " ms";
      return -1;
    }
    rendezvous::setSocketDeadline(fd,
                                  std::min(timeout, AuthGate::kProofDeadline));
    Proof proof = proveJobToken(fd, token, channel, peer, error);
    if (proof == Proof::Accepted) {
      rendezvous::setSocketDeadline(fd, timeout);
      return fd;
    }
    ::close(fd);
    if (proof != Proof::Lost || Clock::now() >= deadline)
      return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

//===--- the server side --------------------------------------------------===//

void AuthGate::start(int listenerFd, std::string jobToken, Channel which,
                     Admit admitted, std::function<void(int fd)> onRefused) {
  refused = std::move(onRefused);
  listener = listenerFd;
  token = std::move(jobToken);
  channel = which;
  admit = std::move(admitted);
  ::fcntl(listener, F_SETFL, ::fcntl(listener, F_GETFL) | O_NONBLOCK);
  thread = std::thread([this] { loop(); });
}

void AuthGate::stop() {
  stopping = true;
  if (thread.joinable())
    thread.join();
  for (Unproven &u : unproven)
    ::close(u.fd);
  unproven.clear();
}

AuthGate::Counts AuthGate::counts() {
  std::lock_guard<std::mutex> lock(countsMutex);
  return tally;
}

void AuthGate::acceptNew() {
  // A bounded batch per round: proofs already sent are read in between.
  for (int i = 0; i < 32; ++i) {
    int fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
      return;
    std::lock_guard<std::mutex> lock(countsMutex);
    ++tally.accepted;
    if (unproven.size() >= kMaxUnproven) {
      // The oldest has had the longest to prove itself.
      auto oldest = std::min_element(
          unproven.begin(), unproven.end(),
          [](const Unproven &a, const Unproven &b) { return a.since < b.since; });
      ::close(oldest->fd);
      unproven.erase(oldest);
      ++tally.evicted;
    }
    Unproven u{fd, Clock::now(), freshNonce(), {}};
    std::string challenge = std::string(kGreeting, kGreetingBytes) +
                            static_cast<char>(channel) + u.nonce;
    // A fresh socket's send buffer holds 49 bytes.
    if (::send(fd, challenge.data(), challenge.size(),
               MSG_NOSIGNAL | MSG_DONTWAIT) !=
        static_cast<ssize_t>(challenge.size())) {
      ::close(fd);
      ++tally.dropped;
      continue;
    }
    unproven.push_back(std::move(u));
  }
}

bool AuthGate::readProof(Unproven &u) {
  char buffer[kResponseBytes];
  ssize_t got = ::recv(u.fd, buffer, kResponseBytes - u.response.size(),
                       MSG_DONTWAIT);
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return true;
  auto count = [&](uint64_t Counts::*which) {
    std::lock_guard<std::mutex> lock(countsMutex);
    ++(tally.*which);
  };
  if (got <= 0) {
    ::close(u.fd);
    count(&Counts::dropped);
    return false;
  }
  u.response.append(buffer, static_cast<size_t>(got));
  if (u.response.size() < kResponseBytes)
    return true;
  std::string clientNonce = u.response.substr(0, kNonceBytes);
  if (!equalInConstantTime(u.response.substr(kNonceBytes),
                           mac(token, "client", channel, u.nonce,
                               clientNonce))) {
    ::send(u.fd, "-", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (refused)
      refused(u.fd);
    ::close(u.fd);
    count(&Counts::refused);
    return false;
  }
  std::string verdict =
      "+" + mac(token, "server", channel, clientNonce, u.nonce);
  if (::send(u.fd, verdict.data(), verdict.size(),
             MSG_NOSIGNAL | MSG_DONTWAIT) !=
      static_cast<ssize_t>(verdict.size())) {
    ::close(u.fd);
    count(&Counts::dropped);
    return false;
  }
  ::fcntl(u.fd, F_SETFL, ::fcntl(u.fd, F_GETFL) & ~O_NONBLOCK);
  count(&Counts::admitted);
  admit(u.fd);
  return false;
}

void AuthGate::loop() {
  std::vector<pollfd> polled;
  while (!stopping) {
    polled.assign(1, pollfd{listener, POLLIN, 0});
    for (const Unproven &u : unproven)
      polled.push_back({u.fd, POLLIN, 0});
    if (::poll(polled.data(), polled.size(), 50) < 0 && errno != EINTR)
      break;
    // Proofs first (the unproven list is rebuilt in order), then the
    // connections that came since.
    std::vector<Unproven> still;
    Clock::time_point now = Clock::now();
    for (size_t i = 0; i < unproven.size(); ++i) {
      Unproven &u = unproven[i];
      if (polled[i + 1].revents != 0 && !readProof(u))
        continue;
      if (now - u.since > kProofDeadline) {
        ::close(u.fd);
        std::lock_guard<std::mutex> lock(countsMutex);
        ++tally.expired;
        continue;
      }
      still.push_back(std::move(u));
    }
    unproven.swap(still);
    if (polled[0].revents != 0)
      acceptNew();
  }
}
