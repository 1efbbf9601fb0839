//===- Messages.h - Message slots between workers ----------------*- C++
//-*-===//
//
// Part of dtfm. Private to lib/Runtime: how workers number the messages
// they exchange over the transport, and length-prefixed control messages.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_LIB_RUNTIME_MESSAGES_H
#define DTFM_LIB_RUNTIME_MESSAGES_H

#include "dtfm/Format/Stream.h"
#include "dtfm/Runtime/Transport.h"

#include <cstdint>
#include <string>

namespace dtfm::runtime {

/// Data slots: step, phase, micro-batch and tag (12 bits). Gloo's
/// collectives use the top byte; control messages set bit 55.
inline uint64_t dataSlot(int64_t step, format::Phase phase, int microBatch,
                         int microBatches, int64_t tag) {
  uint64_t s = static_cast<uint64_t>(step) * 2 +
               (phase == format::Phase::Backward ? 1 : 0);
  s = s * static_cast<uint64_t>(microBatches) + microBatch;
  return (s << 12) | static_cast<uint64_t>(tag & 0xfff);
}

/// The `step` of validation passes' data and loss slots: past any training
/// step (dtfm-run's --steps is at most 1e9), so that they never meet a
/// training step's messages, and of the same size as the largest.
inline constexpr int64_t kValidationSlotBase = 1000000001;

enum ControlKind : uint64_t {
  kLoss = 1,
  kSpeed = 2,
  kParams = 3,
  kTrace = 4,
  kMemory = 5,
  kCommit = 6,
};

/// Control slots: by kind, step and part.
inline uint64_t controlSlot(ControlKind kind, int64_t step, int part) {
  return (uint64_t(1) << 55) | (uint64_t(kind) << 48) |
         (static_cast<uint64_t>(step) << 8) | static_cast<uint64_t>(part);
}

/// Sends `blob` to `peer` as its length (part 0), then its bytes (part 1).
inline bool sendBlob(Transport &transport, int peer, ControlKind kind,
                     int64_t step, const std::string &blob,
                     std::string &error) {
  uint64_t length = blob.size();
  const char *raw = reinterpret_cast<const char *>(&length);
  if (!transport.send(peer, controlSlot(kind, step, 0),
                      std::vector<char>(raw, raw + 8), error, nullptr, true))
    return false;
  return length == 0 ||
         transport.send(peer, controlSlot(kind, step, 1),
                        std::vector<char>(blob.begin(), blob.end()), error,
                        nullptr, true);
}

/// Receives what sendBlob sent; refuses an implausible length (over 16 GiB)
/// before allocating.
inline bool recvBlob(Transport &transport, int peer, ControlKind kind,
                     int64_t step, std::string &blob, std::string &error) {
  uint64_t length = 0;
  if (!transport.recv(peer, controlSlot(kind, step, 0), &length, 8, error))
    return false;
  if (length > (uint64_t(1) << 34)) {
    error = "implausible message from " + transport.describe(peer);
    return false;
  }
  blob.assign(length, '\0');
  return length == 0 || transport.recv(peer, controlSlot(kind, step, 1),
                                       blob.data(), length, error);
}

} // namespace dtfm::runtime

#endif // DTFM_LIB_RUNTIME_MESSAGES_H
