//===- JsonReader.h - A strict, bounded JSON reader -------------*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
//
// The reader of the JSON that files from outside hand dtfm: token shards'
// sidecars and safetensors headers. RFC 8259 and nothing more: no comments,
// trailing commas, NaN or single quotes; a key given twice in an object is
// refused (readers disagree on which one wins); nesting at most
// kMaxJsonDepth deep. Integers without a fraction or exponent are kept
// exactly (safetensors' byte offsets), others as doubles. The writer
// helpers are dtfm/Support/Json.h's.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_FORMAT_JSONREADER_H
#define DTFM_FORMAT_JSONREADER_H

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dtfm::format {

constexpr int kMaxJsonDepth = 64;

struct JsonValue {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  /// The number is an integer written without fraction or exponent that
  /// fits an int64: `integer` holds it exactly.
  bool isInteger = false;
  int64_t integer = 0;
  std::string string;
  std::vector<JsonValue> items;
  /// An object's members in file order, keys unique.
  std::vector<std::pair<std::string, JsonValue>> members;

  /// An object's member, or null.
  const JsonValue *find(std::string_view key) const;
};

/// Kind names for messages: "an object", "a string", ...
const char *jsonKindName(JsonValue::Kind kind);

/// `text` as one JSON value with nothing but white space after it; false
/// with `error` = "at byte N: what is wrong".
bool parseJson(std::string_view text, JsonValue &value, std::string &error);

} // namespace dtfm::format

#endif // DTFM_FORMAT_JSONREADER_H
