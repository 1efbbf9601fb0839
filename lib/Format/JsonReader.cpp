//===- JsonReader.cpp - A strict, bounded JSON reader ---------------------===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/JsonReader.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>

using namespace dtfm::format;

const JsonValue *JsonValue::find(std::string_view key) const {
  for (const auto &[name, value] : members)
    if (name == key)
      return &value;
  return nullptr;
}

const char *dtfm::format::jsonKindName(JsonValue::Kind kind) {
  switch (kind) {
  case JsonValue::Kind::Null:
    return "null";
  case JsonValue::Kind::Bool:
    return "a boolean";
  case JsonValue::Kind::Number:
    return "a number";
  case JsonValue::Kind::String:
    return "a string";
  case JsonValue::Kind::Array:
    return "an array";
  case JsonValue::Kind::Object:
    return "an object";
  }
  return "a value";
}

namespace {

class Parser {
public:
  explicit Parser(std::string_view text) : text(text) {}

  bool document(JsonValue &value, std::string &error) {
    if (!parseValue(value, 0, error))
      return false;
    skipSpace();
    if (at < text.size())
      return fail("trailing characters after the JSON value", error);
    return true;
  }

private:
  bool fail(const std::string &what, std::string &error) const {
    error = "at byte " + std::to_string(at) + ": " + what;
    return false;
  }

  void skipSpace() {
    while (at < text.size() && (text[at] == ' ' || text[at] == '\t' ||
                                text[at] == '\n' || text[at] == '\r'))
      ++at;
  }

  bool literal(std::string_view word, std::string &error) {
    if (text.substr(at, word.size()) != word)
      return fail("not a JSON value", error);
    at += word.size();
    return true;
  }

  bool parseValue(JsonValue &value, int depth, std::string &error) {
    skipSpace();
    if (at >= text.size())
      return fail("the JSON ends where a value should be", error);
    value = JsonValue();
    char c = text[at];
    if (c == '{' || c == '[') {
      if (depth >= kMaxJsonDepth)
        return fail("nested deeper than " + std::to_string(kMaxJsonDepth),
                    error);
      return c == '{' ? parseObject(value, depth, error)
                      : parseArray(value, depth, error);
    }
    if (c == '"') {
      value.kind = JsonValue::Kind::String;
      return parseString(value.string, error);
    }
    if (c == 't' || c == 'f') {
      value.kind = JsonValue::Kind::Bool;
      value.boolean = c == 't';
      return literal(c == 't' ? "true" : "false", error);
    }
    if (c == 'n')
      return literal("null", error);
    if (c == '-' || (c >= '0' && c <= '9'))
      return parseNumber(value, error);
    return fail("not a JSON value", error);
  }

  bool parseObject(JsonValue &value, int depth, std::string &error) {
    value.kind = JsonValue::Kind::Object;
    ++at; // '{'
    std::set<std::string, std::less<>> keys;
    skipSpace();
    if (at < text.size() && text[at] == '}') {
      ++at;
      return true;
    }
    for (;;) {
      skipSpace();
      if (at >= text.size() || text[at] != '"')
        return fail("expected a string key", error);
      std::string key;
      size_t keyAt = at;
      if (!parseString(key, error))
        return false;
      if (!keys.insert(key).second) {
        at = keyAt;
        return fail("the key \"" + key + "\" is given twice", error);
      }
      skipSpace();
      if (at >= text.size() || text[at] != ':')
        return fail("expected ':' after a key", error);
      ++at;
      JsonValue member;
      if (!parseValue(member, depth + 1, error))
        return false;
      value.members.emplace_back(std::move(key), std::move(member));
      skipSpace();
      if (at < text.size() && text[at] == ',') {
        ++at;
        continue;
      }
      if (at < text.size() && text[at] == '}') {
        ++at;
        return true;
      }
      return fail("expected ',' or '}' in an object", error);
    }
  }

  bool parseArray(JsonValue &value, int depth, std::string &error) {
    value.kind = JsonValue::Kind::Array;
    ++at; // '['
    skipSpace();
    if (at < text.size() && text[at] == ']') {
      ++at;
      return true;
    }
    for (;;) {
      JsonValue item;
      if (!parseValue(item, depth + 1, error))
        return false;
      value.items.push_back(std::move(item));
      skipSpace();
      if (at < text.size() && text[at] == ',') {
        ++at;
        continue;
      }
      if (at < text.size() && text[at] == ']') {
        ++at;
        return true;
      }
      return fail("expected ',' or ']' in an array", error);
    }
  }

  bool hex4(uint32_t &code, std::string &error) {
    if (at + 4 > text.size())
      return fail("a \\u escape needs four hex digits", error);
    code = 0;
    for (int i = 0; i < 4; ++i) {
      char h = text[at++];
      uint32_t digit = h >= '0' && h <= '9'   ? h - '0'
                       : h >= 'a' && h <= 'f' ? h - 'a' + 10
                       : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                              : 16;
      if (digit == 16) {
        --at;
        return fail("a \\u escape needs four hex digits", error);
      }
      code = code * 16 + digit;
    }
    return true;
  }

  static void appendUtf8(uint32_t code, std::string &out) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xc0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3f));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xe0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (code & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (code & 0x3f));
    }
  }

  bool parseString(std::string &out, std::string &error) {
    ++at; // '"'
    for (;;) {
      if (at >= text.size())
        return fail("a string is not closed", error);
      unsigned char c = static_cast<unsigned char>(text[at]);
      if (c == '"') {
        ++at;
        return true;
      }
      if (c < 0x20)
        return fail("a control character inside a string", error);
      if (c != '\\') {
        out += static_cast<char>(c);
        ++at;
        continue;
      }
      if (++at >= text.size())
        return fail("a string is not closed", error);
      char e = text[at++];
      switch (e) {
      case '"':
      case '\\':
      case '/':
        out += e;
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        uint32_t code;
        if (!hex4(code, error))
          return false;
        if (code >= 0xdc00 && code <= 0xdfff)
          return fail("a lone low surrogate in a \\u escape", error);
        if (code >= 0xd800 && code <= 0xdbff) {
          uint32_t low;
          if (text.substr(at, 2) != "\\u")
            return fail("a high surrogate without its low half", error);
          at += 2;
          if (!hex4(low, error))
            return false;
          if (low < 0xdc00 || low > 0xdfff)
            return fail("a high surrogate without its low half", error);
          code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
        }
        appendUtf8(code, out);
        break;
      }
      default:
        --at;
        return fail("an unknown escape in a string", error);
      }
    }
  }

  bool parseNumber(JsonValue &value, std::string &error) {
    size_t start = at;
    bool integral = true;
    if (text[at] == '-')
      ++at;
    auto digits = [&] {
      size_t from = at;
      while (at < text.size() && text[at] >= '0' && text[at] <= '9')
        ++at;
      return at - from;
    };
    size_t whole = at;
    if (digits() == 0)
      return fail("a number needs digits", error);
    if (text[whole] == '0' && at - whole > 1) {
      at = whole;
      return fail("a number with a leading zero", error);
    }
    if (at < text.size() && text[at] == '.') {
      integral = false;
      ++at;
      if (digits() == 0)
        return fail("a number needs digits after '.'", error);
    }
    if (at < text.size() && (text[at] == 'e' || text[at] == 'E')) {
      integral = false;
      ++at;
      if (at < text.size() && (text[at] == '+' || text[at] == '-'))
        ++at;
      if (digits() == 0)
        return fail("a number needs digits in its exponent", error);
    }
    std::string spelled(text.substr(start, at - start));
    value.kind = JsonValue::Kind::Number;
    value.number = std::strtod(spelled.c_str(), nullptr);
    if (!std::isfinite(value.number)) {
      at = start;
      return fail("a number out of range", error);
    }
    if (integral) {
      errno = 0;
      long long exact = std::strtoll(spelled.c_str(), nullptr, 10);
      if (errno == 0) {
        value.isInteger = true;
        value.integer = exact;
      }
    }
    return true;
  }

  std::string_view text;
  size_t at = 0;
};

} // namespace

bool dtfm::format::parseJson(std::string_view text, JsonValue &value,
                             std::string &error) {
  return Parser(text).document(value, error);
}
