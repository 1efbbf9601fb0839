//===- Safetensors.cpp - The safetensors weight format --------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/Safetensors.h"
#include "dtfm/Format/JsonReader.h"
#include "dtfm/Support/Json.h"

#include <algorithm>
#include <cstring>
#include <vector>

using namespace dtfm::format;

namespace {

uint32_t bitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits;
}

float floatOf(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

struct DtypeInfo {
  const char *name;
  size_t size;
};

/// The dtypes dtfm reads, by their safetensors names.
std::optional<DtypeInfo> readableDtype(const std::string &name) {
  for (DtypeInfo info : {DtypeInfo{"F32", 4}, DtypeInfo{"F16", 2},
                         DtypeInfo{"BF16", 2}, DtypeInfo{"F64", 8}})
    if (name == info.name)
      return info;
  return std::nullopt;
}

const char *storedName(WeightDtype dtype) {
  switch (dtype) {
  case WeightDtype::F32:
    return "F32";
  case WeightDtype::F16:
    return "F16";
  case WeightDtype::BF16:
    return "BF16";
  }
  return "F32";
}

size_t storedSize(WeightDtype dtype) {
  return dtype == WeightDtype::F32 ? 4 : 2;
}

/// One tensor of a header, before its data is read.
struct Entry {
  std::string name;
  DtypeInfo dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

/// `value` as a non-negative integer (exact), or false.
bool nonNegative(const JsonValue &value, uint64_t &out) {
  if (value.kind != JsonValue::Kind::Number || !value.isInteger ||
      value.integer < 0)
    return false;
  out = static_cast<uint64_t>(value.integer);
  return true;
}

/// A tensor's header entry checked against the data buffer of `dataBytes`.
bool readEntry(const std::string &name, const JsonValue &value,
               uint64_t dataBytes, Entry &entry, std::string &error) {
  entry.name = name;
  std::string where = "tensor '" + name + "': ";
  if (name.empty()) {
    error = "a tensor with an empty name";
    return false;
  }
  if (value.kind != JsonValue::Kind::Object) {
    error = where + "its entry is " + jsonKindName(value.kind) +
            ", not an object";
    return false;
  }
  for (const auto &[key, member] : value.members)
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      error = where + "unknown key \"" + key +
              "\" (an entry has dtype, shape and data_offsets)";
      return false;
    }
  const JsonValue *dtype = value.find("dtype"), *shape = value.find("shape"),
                  *offsets = value.find("data_offsets");
  if (!dtype || !shape || !offsets) {
    error = where + "no \"" +
            (!dtype ? "dtype" : !shape ? "shape" : "data_offsets") + "\"";
    return false;
  }
  if (dtype->kind != JsonValue::Kind::String) {
    error = where + "\"dtype\" is " + jsonKindName(dtype->kind) +
            ", not a string";
    return false;
  }
  std::optional<DtypeInfo> info = readableDtype(dtype->string);
  if (!info) {
    error = where + "dtype " + dtype->string +
            ": dtfm reads weights of F32, F16, BF16 and F64";
    return false;
  }
  entry.dtype = *info;
  if (shape->kind != JsonValue::Kind::Array || shape->items.size() > 16) {
    error = where + "\"shape\" is not an array of at most 16 dimensions";
    return false;
  }
  // The element count, bounded before it can overflow: the data buffer
  // holds every element.
  uint64_t elements = 1, limit = dataBytes / info->size;
  for (const JsonValue &item : shape->items) {
    uint64_t d = 0;
    if (!nonNegative(item, d)) {
      error = where + "\"shape\" holds something other than a "
                      "non-negative integer";
      return false;
    }
    entry.shape.push_back(static_cast<int64_t>(d));
    elements = d != 0 && elements > (limit + 1) / d ? limit + 1 : elements * d;
  }
  if (offsets->kind != JsonValue::Kind::Array || offsets->items.size() != 2 ||
      !nonNegative(offsets->items[0], entry.begin) ||
      !nonNegative(offsets->items[1], entry.end) || entry.begin > entry.end) {
    error = where + "\"data_offsets\" is not [begin, end] with begin <= end";
    return false;
  }
  if (entry.end > dataBytes) {
    error = where + "data_offsets [" + std::to_string(entry.begin) + ", " +
            std::to_string(entry.end) + "] run past the data (" +
            std::to_string(dataBytes) + " bytes)";
    return false;
  }
  if (elements > limit || elements * info->size != entry.end - entry.begin) {
    error = where + "shape " + shapeText(entry.shape) + " of " + info->name +
            (elements > limit
                 ? " needs more bytes than the file has"
                 : " needs " + std::to_string(elements * info->size) +
                       " bytes, its data_offsets give " +
                       std::to_string(entry.end - entry.begin));
    return false;
  }
  return true;
}

} // namespace

std::optional<WeightDtype>
dtfm::format::parseWeightDtype(const std::string &name) {
  if (name == "f32")
    return WeightDtype::F32;
  if (name == "f16")
    return WeightDtype::F16;
  if (name == "bf16")
    return WeightDtype::BF16;
  return std::nullopt;
}

uint16_t dtfm::format::floatToHalf(float value) {
  // Round to nearest even by integer arithmetic on the float's bits; the
  // subnormal halves by an add that lets the FPU round.
  const uint32_t infinity = 255u << 23, halfLimit = (127u + 16) << 23;
  const float subnormalMagic = floatOf(((127u - 15) + (23 - 10) + 1) << 23);
  uint32_t bits = bitsOf(value);
  uint32_t sign = bits & 0x80000000u;
  bits ^= sign;
  uint16_t out;
  if (bits >= halfLimit) {
    out = bits > infinity ? 0x7e00 : 0x7c00;
  } else if (bits < (113u << 23)) {
    out = static_cast<uint16_t>(bitsOf(floatOf(bits) + subnormalMagic) -
                                bitsOf(subnormalMagic));
  } else {
    uint32_t odd = (bits >> 13) & 1;
    bits += ((15u - 127u) << 23) + 0xfff;
    bits += odd;
    out = static_cast<uint16_t>(bits >> 13);
  }
  return static_cast<uint16_t>(out | (sign >> 16));
}

float dtfm::format::halfToFloat(uint16_t half) {
  uint32_t sign = static_cast<uint32_t>(half & 0x8000) << 16;
  uint32_t exponent = (half >> 10) & 0x1f, mantissa = half & 0x3ff;
  if (exponent == 0) { // zero or subnormal: mantissa x 2^-24, exact
    float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31)
    return floatOf(sign | 0x7f800000u | (mantissa << 13));
  return floatOf(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t dtfm::format::floatToBfloat16(float value) {
  uint32_t bits = bitsOf(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: kept quiet, sign kept
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

float dtfm::format::bfloat16ToFloat(uint16_t bits) {
  return floatOf(static_cast<uint32_t>(bits) << 16);
}

bool dtfm::format::looksLikeSafetensors(const std::string &bytes) {
  if (bytes.size() < 9)
    return false;
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  return length >= 2 && length <= bytes.size() - 8 && bytes[8] == '{';
}

std::string dtfm::format::encodeSafetensors(const TensorMap &tensors,
                                            WeightDtype dtype,
                                            const WeightMetadata &metadata) {
  WeightMetadata withFormat = metadata;
  withFormat.emplace("format", "pt");
  std::string header = "{\"__metadata__\":{";
  bool first = true;
  for (const auto &[key, value] : withFormat) {
    header += std::string(first ? "" : ",") + "\"" + jsonEscape(key) +
              "\":\"" + jsonEscape(value) + "\"";
    first = false;
  }
  header += "}";
  size_t size = storedSize(dtype);
  uint64_t offset = 0;
  for (const auto &[name, t] : tensors) {
    uint64_t bytes = static_cast<uint64_t>(t.data.size()) * size;
    header += ",\"" + jsonEscape(name) + "\":{\"dtype\":\"" +
              storedName(dtype) + "\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i)
      header += (i ? "," : "") + std::to_string(t.shape[i]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  header += "}";
  // Spaces after the JSON keep the data 8-byte aligned, as the published
  // writer does.
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t length = header.size();
  std::memcpy(out.data(), &length, 8);
  out += header;
  out.reserve(out.size() + offset);
  for (const auto &[name, t] : tensors) {
    if (dtype == WeightDtype::F32) {
      out.append(reinterpret_cast<const char *>(t.data.data()),
                 t.data.size() * 4);
      continue;
    }
    std::vector<uint16_t> narrow(t.data.size());
    for (size_t i = 0; i < t.data.size(); ++i)
      narrow[i] = dtype == WeightDtype::F16 ? floatToHalf(t.data[i])
                                            : floatToBfloat16(t.data[i]);
    out.append(reinterpret_cast<const char *>(narrow.data()),
               narrow.size() * 2);
  }
  return out;
}

bool dtfm::format::writeSafetensorsFile(const std::string &path,
                                        const TensorMap &tensors,
                                        WeightDtype dtype,
                                        const WeightMetadata &metadata,
                                        std::string &error) {
  return writeFileAtomically(path, encodeSafetensors(tensors, dtype, metadata),
                             error);
}

bool dtfm::format::decodeSafetensors(const std::string &bytes,
                                     const std::string &source,
                                     TensorMap &tensors,
                                     WeightMetadata &metadata,
                                     std::string &error) {
  tensors.clear();
  metadata.clear();
  auto fail = [&](const std::string &what) {
    error = source + ": " + what;
    tensors.clear();
    return false;
  };
  if (bytes.size() < 8)
    return fail("not a safetensors file (" + std::to_string(bytes.size()) +
                " bytes, shorter than its header length)");
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  if (length > kMaxSafetensorsHeader)
    return fail("a header of " + std::to_string(length) +
                " bytes, over the 100 MB that safetensors allows");
  if (length > bytes.size() - 8)
    return fail("a header of " + std::to_string(length) +
                " bytes runs past the end of the file (" +
                std::to_string(bytes.size()) + " bytes)");
  JsonValue header;
  std::string problem;
  if (!parseJson(std::string_view(bytes).substr(8, length), header, problem))
    return fail("the header: " + problem);
  if (header.kind != JsonValue::Kind::Object)
    return fail(std::string("the header is ") + jsonKindName(header.kind) +
                ", not an object");
  uint64_t dataBytes = bytes.size() - 8 - length;
  const char *data = bytes.data() + 8 + length;
  std::vector<Entry> entries;
  for (const auto &[key, value] : header.members) {
    if (key == "__metadata__") {
      if (value.kind != JsonValue::Kind::Object)
        return fail("\"__metadata__\" is not an object");
      for (const auto &[name, text] : value.members) {
        if (text.kind != JsonValue::Kind::String)
          return fail("\"__metadata__\": \"" + name + "\" is " +
                      jsonKindName(text.kind) + ", not a string");
        metadata[name] = text.string;
      }
      continue;
    }
    Entry entry;
    if (!readEntry(key, value, dataBytes, entry, problem))
      return fail(problem);
    entries.push_back(std::move(entry));
  }
  // The tensors tile the buffer: in offset order each begins where the
  // one before ended, and the last ends with the file.
  std::vector<const Entry *> byOffset;
  for (const Entry &e : entries)
    byOffset.push_back(&e);
  std::stable_sort(byOffset.begin(), byOffset.end(),
                   [](const Entry *a, const Entry *b) {
                     return a->begin != b->begin ? a->begin < b->begin
                                                 : a->end < b->end;
                   });
  uint64_t covered = 0;
  const Entry *previous = nullptr;
  for (const Entry *e : byOffset) {
    if (e->begin < covered)
      return fail("tensors '" + previous->name + "' and '" + e->name +
                  "' overlap in the data");
    if (e->begin > covered)
      return fail("bytes [" + std::to_string(covered) + ", " +
                  std::to_string(e->begin) +
                  ") of the data belong to no tensor");
    covered = e->end;
    previous = e;
  }
  if (covered != dataBytes)
    return fail("bytes [" + std::to_string(covered) + ", " +
                std::to_string(dataBytes) +
                ") of the data belong to no tensor");
  for (const Entry &e : entries) {
    Tensor t(e.shape);
    const char *at = data + e.begin;
    size_t count = t.data.size();
    if (std::string(e.dtype.name) == "F32") {
      std::memcpy(t.data.data(), at, count * 4);
    } else if (std::string(e.dtype.name) == "F64") {
      for (size_t i = 0; i < count; ++i) {
        double value;
        std::memcpy(&value, at + 8 * i, 8);
        t.data[i] = static_cast<float>(value);
      }
    } else {
      bool half = std::string(e.dtype.name) == "F16";
      for (size_t i = 0; i < count; ++i) {
        uint16_t value;
        std::memcpy(&value, at + 2 * i, 2);
        t.data[i] = half ? halfToFloat(value) : bfloat16ToFloat(value);
      }
    }
    tensors[e.name] = std::move(t);
  }
  return true;
}
