//===- Rendezvous.cpp - Where workers find each other ---------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "Rendezvous.h"

#include <gloo/common/error.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>

namespace dtfm::runtime::rendezvous {

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

bool readString(int fd, std::string &s) {
  uint32_t length = 0;
  if (!readAll(fd, &length, 4) || length > (64u << 20))
    return false;
  s.resize(length);
  return readAll(fd, s.data(), length);
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
      ::listen(fd, 64) != 0) {
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

//===--- the TCP store ----------------------------------------------------===//

bool TcpStoreServer::start(int port, std::string &error) {
  std::string why;
  listener = listenOn(port, why);
  if (listener < 0) {
    error = "cannot serve the rendezvous store on port " +
            std::to_string(port) + ": " + why;
    return false;
  }
  acceptor = std::thread([this] { acceptLoop(); });
  return true;
}

TcpStoreServer::~TcpStoreServer() {
  stopping = true;
  if (acceptor.joinable())
    acceptor.join();
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

void TcpStoreServer::acceptLoop() {
  while (!stopping) {
    int fd = acceptWaiting(listener, 50);
    if (fd < 0)
      continue;
    setSocketDeadline(fd, kRequestDeadline);
    {
      std::lock_guard<std::mutex> lock(mutex);
      open.insert(fd);
    }
    clients.emplace_back([this, fd] { serve(fd); });
  }
}

void TcpStoreServer::serve(int fd) {
  while (!stopping) {
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, 50);
    if (ready == 0)
      continue;
    char op = 0;
    std::string key, value;
    if (ready < 0 || !readAll(fd, &op, 1) || !readString(fd, key))
      break;
    if (op == 'S') {
      if (!readString(fd, value))
        break;
      std::lock_guard<std::mutex> lock(mutex);
      data[key] = value;
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
    char flag = found ? 1 : 0;
    if (!writeAll(fd, &flag, 1) ||
        (found && !writeString(fd, value.data(), value.size())))
      break;
  }
  std::lock_guard<std::mutex> lock(mutex);
  open.erase(fd);
  ::close(fd);
}

TcpStoreClient::~TcpStoreClient() { ::close(fd); }

std::unique_ptr<TcpStoreClient>
TcpStoreClient::connect(const std::string &host, int port,
                        std::chrono::milliseconds timeout, std::string &error) {
  int fd = connectWithin(host, port, timeout, error);
  if (fd < 0) {
    error = "rendezvous store: " + error + " (is rank 0 running?)";
    return nullptr;
  }
  // A store that stops answering fails the request, within the run's
  // timeout, instead of hanging it.
  setSocketDeadline(fd, timeout);
  return std::make_unique<TcpStoreClient>(fd, timeout);
}

void TcpStoreClient::set(const std::string &key,
                         const std::vector<char> &value) {
  std::lock_guard<std::mutex> lock(mutex);
  char op = 'S';
  if (!writeAll(fd, &op, 1) || !writeString(fd, key.data(), key.size()) ||
      !writeString(fd, value.data(), value.size()))
    throw gloo::IoException("lost the rendezvous store");
}

bool TcpStoreClient::lookup(const std::string &key, std::vector<char> *value) {
  std::lock_guard<std::mutex> lock(mutex);
  char op = 'G', found = 0;
  if (!writeAll(fd, &op, 1) || !writeString(fd, key.data(), key.size()) ||
      !readAll(fd, &found, 1))
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

std::vector<char> TcpStoreClient::get(const std::string &key) {
  wait({key}, timeout);
  std::vector<char> value;
  lookup(key, &value);
  return value;
}

void TcpStoreClient::wait(const std::vector<std::string> &keys,
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

} // namespace dtfm::runtime::rendezvous
