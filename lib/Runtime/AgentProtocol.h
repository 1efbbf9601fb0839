//===- AgentProtocol.h - What agents and their coordinator say --*- C++ -*-===//
//
// Part of dtfm. Internal to lib/Runtime (Agents.h is the interface).
//
//===----------------------------------------------------------------------===//
//
// The elastic run's protocol between the coordinator (AgentCoordinator.cpp)
// and the agents on other hosts (Agent.cpp): a message is a count and that
// many length-prefixed strings over the rendezvous sockets (Rendezvous.h).
// hello / welcome / ready (or refused) open a connection; then start, kill,
// alive and exit go to an agent, end and alive come back.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_LIB_RUNTIME_AGENTPROTOCOL_H
#define DTFM_LIB_RUNTIME_AGENTPROTOCOL_H

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace dtfm::runtime::agents {

inline constexpr const char *kProtocol = "dtfm-agent 1";
/// No message of the protocol comes near this; a peer that says more is
/// not an agent (or coordinator).
inline constexpr size_t kMaxMessageBytes = 1 << 20;
inline constexpr size_t kMaxMessageParts = 4096;

using Message = std::vector<std::string>;

bool sendMessage(int fd, const Message &message);
/// False when the peer closed, stopped answering within the socket's
/// deadline, or sent something that is not a message of the protocol.
bool readMessage(int fd, Message &message);

/// Names joined with commas, and split again.
std::string joined(const std::vector<std::string> &names);
std::vector<std::string> split(const std::string &text);
/// A decimal in [low, high], or nullopt.
std::optional<long long> number(const std::string &text, long long low,
                                long long high);

/// Text a peer sent, fit for one line of a message: control characters
/// (newlines, NULs, escapes) as '?', at most `maxBytes` of it.
std::string printable(const std::string &text, size_t maxBytes = 200);

/// The file in the checkpoint directory that holds the coordinator's
/// nonce: an agent that cannot read it does not share the run's files.
std::string nonceFile(const std::string &checkpointDir);
/// "address:port" of a socket's peer.
std::string peerAddress(int fd);

} // namespace dtfm::runtime::agents

#endif // DTFM_LIB_RUNTIME_AGENTPROTOCOL_H
