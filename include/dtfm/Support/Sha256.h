//===- Sha256.h - SHA-256 and HMAC-SHA256 -----------------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for the job token's
// challenge-response (Runtime/JobToken.h): written here, small and
// dependency-free, so that the runtime bundle needs no libcrypto of the
// host it lands on.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_SUPPORT_SHA256_H
#define DTFM_SUPPORT_SHA256_H

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace dtfm {

using Sha256Digest = std::array<uint8_t, 32>;

/// SHA-256 of `bytes`, fed in one or more parts.
class Sha256 {
public:
  Sha256();
  void update(std::string_view bytes);
  Sha256Digest finish();

private:
  void block(const uint8_t *data);
  uint32_t state[8];
  uint8_t pending[64];
  size_t pendingBytes = 0;
  uint64_t totalBytes = 0;
};

Sha256Digest sha256(std::string_view bytes);

/// HMAC-SHA256 of `message` under `key`.
Sha256Digest hmacSha256(std::string_view key, std::string_view message);

/// Whether `a` and `b` are equal, in a time that does not depend on where
/// they differ (a MAC compared byte by byte leaks how much of it is right).
bool equalInConstantTime(std::string_view a, std::string_view b);

/// Lower-case hex of `bytes`.
void appendHex(std::string &out, const uint8_t *bytes, size_t count);

} // namespace dtfm

#endif // DTFM_SUPPORT_SHA256_H
