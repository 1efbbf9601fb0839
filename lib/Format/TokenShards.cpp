//===- TokenShards.cpp - Token shards on disk -----------------------------===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/TokenShards.h"
#include "dtfm/Format/JsonReader.h"
#include "dtfm/Format/TensorFile.h"
#include "dtfm/Support/Hash.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <set>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace dtfm::format;

/// A sidecar is a few dozen bytes; anything much larger is not one.
static constexpr size_t kMaxSidecarBytes = 64 << 10;
/// Tokens of each shard checked when it is opened.
static constexpr int64_t kTokensCheckedAtOpen = 4096;

std::optional<TokenDtype> dtfm::format::parseTokenDtype(std::string_view name) {
  if (name == "uint16")
    return TokenDtype::UInt16;
  if (name == "uint32")
    return TokenDtype::UInt32;
  if (name == "int32")
    return TokenDtype::Int32;
  return std::nullopt;
}

const char *dtfm::format::tokenDtypeName(TokenDtype dtype) {
  switch (dtype) {
  case TokenDtype::UInt16:
    return "uint16";
  case TokenDtype::UInt32:
    return "uint32";
  case TokenDtype::Int32:
    return "int32";
  }
  return "?";
}

size_t dtfm::format::tokenDtypeBytes(TokenDtype dtype) {
  return dtype == TokenDtype::UInt16 ? 2 : 4;
}

std::string dtfm::format::tokenSidecarPath(const std::string &shard) {
  return shard + ".json";
}

static bool hasGlobCharacters(const std::string &path) {
  return path.find_first_of("*?[") != std::string::npos;
}

bool dtfm::format::expandTokenShards(const std::vector<std::string> &given,
                                     std::vector<std::string> &shards,
                                     std::string &error) {
  shards.clear();
  std::set<std::string> seen;
  auto add = [&](const std::string &path, const std::string &from) {
    char *real = ::realpath(path.c_str(), nullptr);
    std::string key = real ? real : path;
    std::free(real);
    if (!seen.insert(key).second) {
      error = "--data " + from + ": the shard " + path +
              " is named twice (by this or an earlier --data)";
      return false;
    }
    shards.push_back(path);
    return true;
  };
  for (const std::string &pattern : given) {
    struct stat st {};
    if (::stat(pattern.c_str(), &st) == 0) {
      if (S_ISREG(st.st_mode)) {
        if (!add(pattern, pattern))
          return false;
        continue;
      }
      if (!S_ISDIR(st.st_mode)) {
        error = "--data " + pattern + ": not a file or a directory";
        return false;
      }
      DIR *dir = ::opendir(pattern.c_str());
      if (!dir) {
        error = "--data " + pattern + ": cannot read the directory (" +
                std::strerror(errno) + ")";
        return false;
      }
      std::vector<std::string> names;
      while (dirent *entry = ::readdir(dir)) {
        std::string name = entry->d_name;
        if (name.size() > 4 && name.compare(name.size() - 4, 4, ".bin") == 0)
          names.push_back(name);
      }
      ::closedir(dir);
      std::sort(names.begin(), names.end());
      if (names.empty()) {
        error = "--data " + pattern + ": the directory holds no *.bin shard";
        return false;
      }
      std::string prefix = pattern.back() == '/' ? pattern : pattern + "/";
      for (const std::string &name : names)
        if (!add(prefix + name, pattern))
          return false;
      continue;
    }
    if (!hasGlobCharacters(pattern)) {
      error = "--data " + pattern + ": no such file or directory";
      return false;
    }
    glob_t matches{};
    int status = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &matches);
    std::vector<std::string> found;
    for (size_t i = 0; status == 0 && i < matches.gl_pathc; ++i)
      found.push_back(matches.gl_pathv[i]);
    ::globfree(&matches);
    if (status != 0 && status != GLOB_NOMATCH) {
      error = "--data " + pattern + ": cannot expand the pattern";
      return false;
    }
    std::sort(found.begin(), found.end());
    if (found.empty()) {
      error = "--data " + pattern + ": the pattern matches no file";
      return false;
    }
    for (const std::string &path : found) {
      struct stat each {};
      if (::stat(path.c_str(), &each) != 0 || !S_ISREG(each.st_mode)) {
        error = "--data " + pattern + ": " + path + " is not a file";
        return false;
      }
      if (!add(path, pattern))
        return false;
    }
  }
  return true;
}

bool dtfm::format::writeTokenShard(const std::string &path, TokenDtype dtype,
                                   const std::vector<uint32_t> &tokens,
                                   int64_t vocabulary, std::string &error) {
  size_t width = tokenDtypeBytes(dtype);
  uint64_t limit = dtype == TokenDtype::UInt16  ? 0xffffu
                   : dtype == TokenDtype::Int32 ? 0x7fffffffu
                                                : 0xffffffffu;
  std::string bytes(tokens.size() * width, '\0');
  for (size_t i = 0; i < tokens.size(); ++i) {
    uint32_t t = tokens[i];
    if (t > limit ||
        (vocabulary > 0 && t >= static_cast<uint64_t>(vocabulary))) {
      error = path + ": token " + std::to_string(t) + " (the " +
              std::to_string(i) + "th) does not fit " +
              (t > limit ? std::string(tokenDtypeName(dtype))
                         : "the vocabulary of " + std::to_string(vocabulary));
      return false;
    }
    for (size_t b = 0; b < width; ++b)
      bytes[i * width + b] = static_cast<char>((t >> (8 * b)) & 0xff);
  }
  std::string sidecar = std::string("{\"format\": \"dtfm-tokens\", ") +
                        "\"dtype\": \"" + tokenDtypeName(dtype) +
                        "\", \"tokens\": " + std::to_string(tokens.size());
  if (vocabulary > 0)
    sidecar += ", \"vocab_size\": " + std::to_string(vocabulary);
  sidecar += "}\n";
  if (!writeFileAtomically(path, bytes, error))
    return false;
  if (!writeFileAtomically(tokenSidecarPath(path), sidecar, error)) {
    ::unlink(path.c_str()); // a shard without its sidecar is half-written
    return false;
  }
  return true;
}

namespace {

/// What a sidecar says.
struct Sidecar {
  TokenDtype dtype = TokenDtype::UInt16;
  int64_t tokens = 0, vocabulary = 0;
};

bool readSidecar(const std::string &path, Sidecar &sidecar,
                 std::string &error) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<size_t>(st.st_size) > kMaxSidecarBytes) {
    error = path + ": not a token shard's sidecar (a JSON file of at most " +
            std::to_string(kMaxSidecarBytes) + " bytes)";
    return false;
  }
  std::string text;
  if (!readWholeFile(path, text, error))
    return false;
  JsonValue root;
  if (!parseJson(text, root, error)) {
    error = path + ": " + error;
    return false;
  }
  auto wrong = [&](const std::string &what) {
    error = path + ": " + what;
    return false;
  };
  if (root.kind != JsonValue::Kind::Object)
    return wrong("expected a JSON object, got " +
                 std::string(jsonKindName(root.kind)));
  for (const auto &[key, value] : root.members)
    if (key != "format" && key != "dtype" && key != "tokens" &&
        key != "vocab_size")
      return wrong("unknown key \"" + key +
                   "\" (expected format, dtype, tokens, vocab_size)");
  const JsonValue *format = root.find("format");
  if (!format || format->kind != JsonValue::Kind::String ||
      format->string != "dtfm-tokens")
    return wrong("\"format\" must be \"dtfm-tokens\"");
  const JsonValue *dtype = root.find("dtype");
  std::optional<TokenDtype> parsed;
  if (dtype && dtype->kind == JsonValue::Kind::String)
    parsed = parseTokenDtype(dtype->string);
  if (!parsed)
    return wrong("\"dtype\" must be \"uint16\", \"uint32\" or \"int32\"");
  sidecar.dtype = *parsed;
  const JsonValue *tokens = root.find("tokens");
  if (!tokens || !tokens->isInteger || tokens->integer < 0)
    return wrong("\"tokens\" must be a count (a non-negative integer)");
  sidecar.tokens = tokens->integer;
  if (const JsonValue *vocab = root.find("vocab_size")) {
    if (!vocab->isInteger || vocab->integer < 1)
      return wrong("\"vocab_size\" must be a positive integer");
    sidecar.vocabulary = vocab->integer;
  }
  return true;
}

} // namespace

TokenShards::~TokenShards() { close(); }

void TokenShards::close() {
  for (Shard &s : shards)
    if (s.bytes)
      ::munmap(const_cast<unsigned char *>(s.bytes), s.mapped);
  shards.clear();
  identity = 0;
}

int64_t TokenShards::totalTokens() const {
  int64_t total = 0;
  for (const Shard &s : shards)
    total += s.tokens;
  return total;
}

bool TokenShards::open(const std::vector<std::string> &paths,
                       std::optional<TokenDtype> dtype, int64_t vocab,
                       std::string &error) {
  close();
  vocabulary = vocab;
  for (const std::string &path : paths) {
    Shard shard;
    shard.path = path;
    std::string sidecarPath = tokenSidecarPath(path);
    Sidecar sidecar;
    bool hasSidecar = ::access(sidecarPath.c_str(), F_OK) == 0;
    if (hasSidecar && !readSidecar(sidecarPath, sidecar, error))
      return false;
    if (hasSidecar && dtype && *dtype != sidecar.dtype) {
      error = path + ": --data-dtype " + tokenDtypeName(*dtype) +
              " but its sidecar " + sidecarPath + " says " +
              tokenDtypeName(sidecar.dtype);
      return false;
    }
    if (!hasSidecar && !dtype) {
      error = path +
              ": no dtype for these tokens: give --data-dtype "
              "uint16|uint32|int32 (nanoGPT's train.bin is uint16), "
              "or write the shard with dtfm-data, which adds the "
              "sidecar " +
              sidecarPath;
      return false;
    }
    shard.dtype = hasSidecar ? sidecar.dtype : *dtype;
    if (hasSidecar && vocab > 0 && sidecar.vocabulary > vocab) {
      error = sidecarPath + ": the data's vocabulary of " +
              std::to_string(sidecar.vocabulary) +
              " is larger than the model's " + std::to_string(vocab);
      return false;
    }
    // A regular file only: a FIFO would block the worker forever.
    int fd = openRegularFile(path, error);
    struct stat st {};
    if (fd < 0 || ::fstat(fd, &st) != 0) {
      if (fd >= 0) {
        ::close(fd);
        error = path + ": cannot read the token shard (" +
                std::strerror(errno) + ")";
      }
      return false;
    }
    size_t width = tokenDtypeBytes(shard.dtype);
    uint64_t bytes = static_cast<uint64_t>(st.st_size);
    if (bytes == 0 || bytes % width != 0) {
      ::close(fd);
      error = path + ": " +
              (bytes == 0 ? std::string("the token shard is empty")
                          : "its " + std::to_string(bytes) +
                                " bytes are not a whole number of " +
                                tokenDtypeName(shard.dtype) + " tokens" +
                                (width == 4 && bytes % 2 == 0
                                     ? " (uint16 tokens? give --data-dtype "
                                       "uint16)"
                                     : ""));
      return false;
    }
    shard.tokens = static_cast<int64_t>(bytes / width);
    if (hasSidecar && sidecar.tokens != shard.tokens) {
      ::close(fd);
      error = sidecarPath + ": says " + std::to_string(sidecar.tokens) +
              " tokens, but " + path + " holds " +
              std::to_string(shard.tokens) + " " + tokenDtypeName(shard.dtype) +
              " tokens";
      return false;
    }
    void *mapped = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (mapped == MAP_FAILED) {
      error =
          path + ": cannot map the token shard (" + std::strerror(errno) + ")";
      return false;
    }
    // Windows are drawn in a shuffled order: read-ahead would fetch pages
    // no one reads.
    ::madvise(mapped, bytes, MADV_RANDOM);
    shard.bytes = static_cast<const unsigned char *>(mapped);
    shard.mapped = bytes;
    shards.push_back(shard);
    std::vector<uint32_t> first(
        static_cast<size_t>(std::min(shard.tokens, kTokensCheckedAtOpen)));
    if (!read(shards.size() - 1, 0, static_cast<int64_t>(first.size()),
              first.data(), error))
      return false;
  }
  identity = computeFingerprint();
  releasePages();
  return true;
}

bool TokenShards::read(size_t index, int64_t begin, int64_t count,
                       uint32_t *out, std::string &error) const {
  const Shard &s = shards[index];
  if (begin < 0 || count < 0 || begin > s.tokens - count) {
    error = s.path + ": tokens [" + std::to_string(begin) + ", " +
            std::to_string(begin + count) + ") are outside its " +
            std::to_string(s.tokens);
    return false;
  }
  size_t width = tokenDtypeBytes(s.dtype);
  const unsigned char *at = s.bytes + static_cast<size_t>(begin) * width;
  for (int64_t i = 0; i < count; ++i, at += width) {
    uint32_t t = width == 2 ? static_cast<uint32_t>(at[0] | at[1] << 8)
                            : static_cast<uint32_t>(at[0]) |
                                  static_cast<uint32_t>(at[1]) << 8 |
                                  static_cast<uint32_t>(at[2]) << 16 |
                                  static_cast<uint32_t>(at[3]) << 24;
    bool negative = s.dtype == TokenDtype::Int32 && t > 0x7fffffffu;
    if (negative ||
        (vocabulary > 0 && t >= static_cast<uint64_t>(vocabulary))) {
      int64_t offset = begin + i;
      error = s.path + ": token " +
              (negative ? std::to_string(static_cast<int32_t>(t))
                        : std::to_string(t)) +
              " at token offset " + std::to_string(offset) + " (byte " +
              std::to_string(offset * static_cast<int64_t>(width)) + ") " +
              (negative ? std::string("is negative")
                        : "is outside the model's vocabulary of " +
                              std::to_string(vocabulary));
      if (width == 4 && t > 0xffffu)
        error += " (uint16 tokens read as " +
                 std::string(tokenDtypeName(s.dtype)) +
                 " look like this: give --data-dtype uint16)";
      return false;
    }
    out[i] = t;
  }
  s.touched = true;
  return true;
}

void TokenShards::releasePages() const {
  // The whole mapping: a fault maps the pages around the one read too
  // (the kernel's fault-around), and those would stay.
  for (const Shard &s : shards)
    if (s.touched) {
      ::madvise(const_cast<unsigned char *>(s.bytes), s.mapped, MADV_DONTNEED);
      s.touched = false;
    }
}

uint64_t TokenShards::computeFingerprint() const {
  uint64_t hash = kFnv1aOffset;
  for (size_t i = 0; i < shards.size(); ++i) {
    const Shard &s = shards[i];
    std::string head = std::string(tokenDtypeName(s.dtype)) + ":" +
                       std::to_string(s.tokens) + ":";
    hash = fnv1a(head, hash);
    size_t width = tokenDtypeBytes(s.dtype);
    size_t ends = std::min<size_t>(s.mapped, 64 * width);
    hash = fnv1a(
        std::string_view(reinterpret_cast<const char *>(s.bytes), ends), hash);
    hash = fnv1a(std::string_view(reinterpret_cast<const char *>(s.bytes) +
                                      s.mapped - ends,
                                  ends),
                 hash);
  }
  return hash;
}
