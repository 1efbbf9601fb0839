//===- TokenShards.h - Token shards on disk ---------------------*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
//
// Training tokens as the field keeps them: flat files of little-endian
// token ids with no header (nanoGPT's train.bin is uint16), read by memory
// map, never whole. A shard's dtype comes from --data-dtype or from its
// sidecar, SHARD.json, which dtfm-data writes beside it:
//
//   {"format": "dtfm-tokens", "dtype": "uint16", "tokens": 5242880,
//    "vocab_size": 256}
//
// ("tokens" must match the file's size; "vocab_size" is optional). Where
// the samples come from in the shards is the runtime's DataSource.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_FORMAT_TOKENSHARDS_H
#define DTFM_FORMAT_TOKENSHARDS_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dtfm::format {

enum class TokenDtype { UInt16, UInt32, Int32 };

std::optional<TokenDtype> parseTokenDtype(std::string_view name);
const char *tokenDtypeName(TokenDtype dtype);
size_t tokenDtypeBytes(TokenDtype dtype);

/// SHARD.json.
std::string tokenSidecarPath(const std::string &shard);

/// The shards `given` names, in order: a file as it is, a directory's
/// *.bin files and a glob's matches, each sorted by name. Refuses, in one
/// line, a path that does not exist, an empty directory or glob, and a
/// shard named twice.
bool expandTokenShards(const std::vector<std::string> &given,
                       std::vector<std::string> &shards, std::string &error);

/// Writes `tokens` as `path` (in `dtype`) and its sidecar, each atomically;
/// refuses a token the dtype cannot hold, or one not below `vocabulary`
/// (when not 0).
bool writeTokenShard(const std::string &path, TokenDtype dtype,
                     const std::vector<uint32_t> &tokens, int64_t vocabulary,
                     std::string &error);

/// Memory-mapped shards. Reads copy out what they need; releasePages hands
/// the pages read back to the kernel (the page cache keeps them), so that a
/// worker's memory does not grow with the data it has read.
class TokenShards {
public:
  TokenShards() = default;
  TokenShards(const TokenShards &) = delete;
  TokenShards &operator=(const TokenShards &) = delete;
  ~TokenShards();

  /// Maps `paths`, each in `dtype` or its sidecar's (they must agree when
  /// both are given; one of them must be). Tokens are checked against
  /// `vocabulary` (0: unknown) as they are read, and each shard's first
  /// tokens here, so that a file of the wrong dtype fails at once.
  bool open(const std::vector<std::string> &paths,
            std::optional<TokenDtype> dtype, int64_t vocabulary,
            std::string &error);

  size_t size() const { return shards.size(); }
  bool empty() const { return shards.empty(); }
  int64_t tokens(size_t shard) const { return shards[shard].tokens; }
  int64_t totalTokens() const;
  const std::string &path(size_t shard) const { return shards[shard].path; }

  /// Tokens [begin, begin + count) of `shard` into `out`; false with a
  /// one-line error naming the file and offset of a token not below the
  /// vocabulary.
  bool read(size_t shard, int64_t begin, int64_t count, uint32_t *out,
            std::string &error) const;

  /// Unmaps the pages reads brought in (they map again when read again).
  void releasePages() const;

  /// What identifies the data whatever its path: each shard's dtype, size
  /// and first and last tokens. A checkpoint records it.
  /// Computed once, when the shards are opened.
  uint64_t fingerprint() const { return identity; }

private:
  struct Shard {
    std::string path;
    TokenDtype dtype = TokenDtype::UInt16;
    int64_t tokens = 0;
    const unsigned char *bytes = nullptr;
    size_t mapped = 0;
    /// Read since the last releasePages.
    mutable bool touched = false;
  };
  void close();
  uint64_t computeFingerprint() const;

  std::vector<Shard> shards;
  int64_t vocabulary = 0;
  uint64_t identity = 0;
};

} // namespace dtfm::format

#endif // DTFM_FORMAT_TOKENSHARDS_H
