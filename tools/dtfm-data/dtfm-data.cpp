//===- dtfm-data.cpp - Token shards from text or token ids ----------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Writes the token shards dtfm-run --data reads (TokenShards.h): from text
// with a byte-level tokenizer (each byte one token, a vocabulary of 256),
// or from token ids a real tokenizer wrote (decimal, separated by white
// space). Like nanoGPT's prepare.py, the last --val-fraction of the tokens
// goes to a validation shard.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/TensorFile.h"
#include "dtfm/Format/TokenShards.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <sys/stat.h>
#include <vector>

using namespace dtfm;

static const char *kUsage =
    "usage: dtfm-data (--text FILE... | --ids FILE... [--vocab N]) --out "
    "SHARD\n"
    "                 [--dtype uint16|uint32] (default uint16)\n"
    "                 [--val-fraction F --val-out SHARD] (the last F of the "
    "tokens, 0 < F < 1)\n"
    "                 [--shard-tokens N] (--out and --val-out name "
    "directories of\n"
    "                 shards of N tokens: 00000.bin, 00001.bin, ...)\n"
    "  --text: each byte of the files is a token (a vocabulary of 256)\n"
    "  --ids:  decimal token ids separated by white space, from any "
    "tokenizer\n"
    "  Each shard gets its sidecar SHARD.json (dtype, tokens, vocab_size).\n";

static int fail(const std::string &message) {
  std::fprintf(stderr, "dtfm-data: error: %s\n", message.c_str());
  return 1;
}

/// An integer flag value in [low, high], whole and decimal.
static bool integerValue(const std::string &text, long long low, long long high,
                         long long &value) {
  char *end = nullptr;
  errno = 0;
  value = std::strtoll(text.c_str(), &end, 10);
  return !text.empty() && std::isdigit(static_cast<unsigned char>(text[0])) &&
         *end == '\0' && errno == 0 && value >= low && value <= high;
}

/// Token ids from `text` (file `path`): decimal integers separated by white
/// space; the first thing that is not one is refused by line and column.
static bool parseIds(const std::string &path, const std::string &text,
                     uint64_t limit, std::vector<uint32_t> &tokens,
                     std::string &error) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < text.size();) {
    char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      if (c == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
      continue;
    }
    size_t begin = i;
    uint64_t value = 0;
    bool overflow = false;
    while (i < text.size() &&
           std::isdigit(static_cast<unsigned char>(text[i]))) {
      value = value * 10 + static_cast<uint64_t>(text[i] - '0');
      overflow = overflow || value > limit;
      ++i;
    }
    bool separated =
        i == text.size() || std::isspace(static_cast<unsigned char>(text[i]));
    if (i == begin || !separated || overflow) {
      size_t end = begin;
      while (end < text.size() &&
             !std::isspace(static_cast<unsigned char>(text[end])))
        ++end;
      error = path + ":" + std::to_string(line) + ":" + std::to_string(column) +
              ": '" + text.substr(begin, std::min<size_t>(end - begin, 24)) +
              "' " +
              (overflow && separated
                   ? "is larger than the dtype holds (" +
                         std::to_string(limit) + ")"
                   : std::string("is not a token id (a decimal integer)"));
      return false;
    }
    tokens.push_back(static_cast<uint32_t>(value));
    column += i - begin;
  }
  return true;
}

/// `tokens` as one shard at `out`, or as shards of `shardTokens` in the
/// directory `out` (created).
static bool writeShards(const std::string &out, format::TokenDtype dtype,
                        const std::vector<uint32_t> &tokens, int64_t vocabulary,
                        long long shardTokens,
                        std::vector<std::string> &written, std::string &error) {
  if (shardTokens == 0) {
    written.push_back(out);
    return format::writeTokenShard(out, dtype, tokens, vocabulary, error);
  }
  if (::mkdir(out.c_str(), 0755) != 0 && errno != EEXIST) {
    error =
        out + ": cannot create the directory (" + std::strerror(errno) + ")";
    return false;
  }
  for (size_t begin = 0, index = 0; begin < tokens.size();
       begin += static_cast<size_t>(shardTokens), ++index) {
    char name[32];
    std::snprintf(name, sizeof name, "/%05zu.bin", index);
    size_t end =
        std::min(tokens.size(), begin + static_cast<size_t>(shardTokens));
    std::vector<uint32_t> part(tokens.begin() + static_cast<long>(begin),
                               tokens.begin() + static_cast<long>(end));
    written.push_back(out + name);
    if (!format::writeTokenShard(out + name, dtype, part, vocabulary, error))
      return false;
  }
  return true;
}

int main(int argc, char **argv) {
  std::vector<std::string> textFiles, idFiles;
  std::string out, valOut, fraction;
  format::TokenDtype dtype = format::TokenDtype::UInt16;
  long long vocabulary = 0, shardTokens = 0;
  std::set<std::string> given;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    bool hasValue = i + 1 < argc;
    if ((arg == "--text" || arg == "--ids") && hasValue) {
      // Every file after the flag up to the next flag.
      std::vector<std::string> &files = arg == "--text" ? textFiles : idFiles;
      while (i + 1 < argc && std::strncmp(argv[i + 1], "--", 2) != 0)
        files.push_back(argv[++i]);
      if (files.empty())
        return fail(arg + " needs at least one file");
      continue;
    }
    if (arg.rfind("--", 0) != 0)
      return fail("unexpected '" + arg + "' (files follow --text or --ids)\n" +
                  kUsage);
    if (!given.insert(arg).second)
      return fail(arg + " is given twice");
    if (!hasValue)
      return fail("unknown option '" + arg + "' (or its value is missing)\n" +
                  kUsage);
    std::string value = argv[++i];
    if (arg == "--out")
      out = value;
    else if (arg == "--val-out")
      valOut = value;
    else if (arg == "--val-fraction")
      fraction = value;
    else if (arg == "--dtype") {
      std::optional<format::TokenDtype> parsed = format::parseTokenDtype(value);
      if (!parsed || *parsed == format::TokenDtype::Int32)
        return fail("--dtype expects uint16 or uint32, got '" + value + "'");
      dtype = *parsed;
    } else if (arg == "--vocab") {
      if (!integerValue(value, 1, 0xffffffffll, vocabulary))
        return fail("--vocab expects an integer in [1, 4294967295], got '" +
                    value + "'");
    } else if (arg == "--shard-tokens") {
      if (!integerValue(value, 1, 1ll << 40, shardTokens))
        return fail("--shard-tokens expects an integer in [1, 2^40], got '" +
                    value + "'");
    } else {
      return fail("unknown option '" + arg + "'\n" + kUsage);
    }
  }
  if (textFiles.empty() == idFiles.empty())
    return fail(std::string("give exactly one of --text and --ids\n") + kUsage);
  if (out.empty())
    return fail("--out SHARD is missing");
  if (!textFiles.empty() && vocabulary != 0)
    return fail("--vocab goes with --ids (--text's vocabulary is the 256 "
                "byte values)");
  if (fraction.empty() != valOut.empty())
    return fail("--val-fraction and --val-out go together");
  double valFraction = 0;
  if (!fraction.empty()) {
    char *end = nullptr;
    valFraction = std::strtod(fraction.c_str(), &end);
    if (*end != '\0' || !(valFraction > 0 && valFraction < 1))
      return fail("--val-fraction expects a number between 0 and 1 "
                  "(exclusive), got '" +
                  fraction + "'");
  }
  if (out == valOut)
    return fail("--out and --val-out name the same path");
  if (!textFiles.empty())
    vocabulary = 256;
  uint64_t limit = dtype == format::TokenDtype::UInt16 ? 0xffffu : 0xffffffffu;
  if (vocabulary > 0 && static_cast<uint64_t>(vocabulary) - 1 > limit)
    return fail("--vocab " + std::to_string(vocabulary) + " does not fit " +
                format::tokenDtypeName(dtype) + " (give --dtype uint32)");

  std::vector<uint32_t> tokens;
  std::string error;
  for (const std::string &path : textFiles.empty() ? idFiles : textFiles) {
    std::string bytes;
    if (!format::readWholeFile(path, bytes, error))
      return fail(error);
    if (!textFiles.empty()) {
      for (unsigned char c : bytes)
        tokens.push_back(c);
    } else if (!parseIds(path, bytes, limit, tokens, error)) {
      return fail(error);
    }
  }
  if (tokens.empty())
    return fail("the input holds no tokens");
  size_t valTokens = 0;
  if (valFraction > 0) {
    valTokens = static_cast<size_t>(
        std::llround(valFraction * static_cast<double>(tokens.size())));
    if (valTokens == 0 || valTokens == tokens.size())
      return fail("--val-fraction " + fraction + " of " +
                  std::to_string(tokens.size()) +
                  " tokens leaves the training or the validation shard "
                  "empty");
  }
  std::vector<uint32_t> val(tokens.end() - static_cast<long>(valTokens),
                            tokens.end());
  tokens.resize(tokens.size() - valTokens);
  std::vector<std::string> written;
  bool trainWritten =
      writeShards(out, dtype, tokens, vocabulary, shardTokens, written, error);
  size_t trainShards = written.size();
  if (!trainWritten ||
      (!val.empty() && !writeShards(valOut, dtype, val, vocabulary, shardTokens,
                                    written, error))) {
    // Nothing half-written: the shards already written go too.
    for (const std::string &path : written) {
      std::remove(path.c_str());
      std::remove(format::tokenSidecarPath(path).c_str());
    }
    return fail(error);
  }
  auto shards = [](size_t n) {
    return std::to_string(n) + (n == 1 ? " shard" : " shards");
  };
  std::printf("wrote %zu %s tokens to %s (%s)", tokens.size(),
              format::tokenDtypeName(dtype), out.c_str(),
              shards(trainShards).c_str());
  if (!val.empty())
    std::printf(" and %zu to %s (%s)", val.size(), valOut.c_str(),
                shards(written.size() - trainShards).c_str());
  std::printf(", vocabulary %s\n", vocabulary > 0
                                       ? std::to_string(vocabulary).c_str()
                                       : "not given");
  return 0;
}
