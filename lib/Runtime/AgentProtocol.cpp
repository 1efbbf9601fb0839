//===- AgentProtocol.cpp - What agents and their coordinator say ----------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "AgentProtocol.h"
#include "Rendezvous.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>

using namespace dtfm::runtime::agents;
using namespace dtfm::runtime::rendezvous;

bool dtfm::runtime::agents::sendMessage(int fd, const Message &message) {
  uint32_t count = static_cast<uint32_t>(message.size());
  if (!writeAll(fd, &count, 4))
    return false;
  for (const std::string &part : message)
    if (!writeString(fd, part.data(), part.size()))
      return false;
  return true;
}

bool dtfm::runtime::agents::readMessage(int fd, Message &message) {
  uint32_t count = 0;
  if (!readAll(fd, &count, 4) || count == 0 || count > kMaxMessageParts)
    return false;
  message.assign(count, std::string());
  size_t total = 0;
  for (std::string &part : message) {
    uint32_t length = 0;
    if (!readAll(fd, &length, 4) || length > kMaxMessageBytes - total)
      return false;
    total += length;
    part.resize(length);
    if (!readAll(fd, part.data(), length))
      return false;
  }
  return true;
}

std::string
dtfm::runtime::agents::joined(const std::vector<std::string> &names) {
  std::string text;
  for (const std::string &n : names)
    text += (text.empty() ? "" : ",") + n;
  return text;
}

std::vector<std::string> dtfm::runtime::agents::split(const std::string &text) {
  std::vector<std::string> parts;
  for (size_t begin = 0; begin <= text.size() && !text.empty();) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos)
      end = text.size();
    parts.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return parts;
}

std::optional<long long> dtfm::runtime::agents::number(const std::string &text,
                                                       long long low,
                                                       long long high) {
  if (text.empty() || text.size() > 18)
    return std::nullopt;
  for (char c : text)
    if (c < '0' || c > '9')
      return std::nullopt;
  long long value = std::stoll(text);
  if (value < low || value > high)
    return std::nullopt;
  return value;
}

std::string dtfm::runtime::agents::printable(const std::string &text,
                                             size_t maxBytes) {
  std::string line = text.substr(0, maxBytes);
  for (char &c : line)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      c = '?';
  return text.size() > maxBytes ? line + "..." : line;
}

std::string dtfm::runtime::agents::nonceFile(const std::string &checkpointDir) {
  return checkpointDir + "/coordinator.id";
}

std::string dtfm::runtime::agents::peerAddress(int fd) {
  sockaddr_in addr{};
  socklen_t size = sizeof addr;
  char text[INET_ADDRSTRLEN] = "?";
  if (::getpeername(fd, reinterpret_cast<sockaddr *>(&addr), &size) == 0)
    ::inet_ntop(AF_INET, &addr.sin_addr, text, sizeof text);
  return std::string(text) + ":" + std::to_string(ntohs(addr.sin_port));
}
