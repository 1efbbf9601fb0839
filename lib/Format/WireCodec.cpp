//===- WireCodec.cpp - The table of wire codecs ---------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/WireCodec.h"

#include "dtfm/Format/Int4.h"
#include "dtfm/Format/Int8.h"
#include "dtfm/Format/Sparse.h"

#include <algorithm>
#include <cstring>
#include <iterator>

using namespace dtfm::format;

namespace {

// Dense: the floats themselves.
size_t denseMessageBytes(size_t count, size_t) { return count * sizeof(float); }

bool encodeDense(const float *x, size_t count, size_t, std::vector<char> &out,
                 std::string &) {
  const char *raw = reinterpret_cast<const char *>(x);
  out.assign(raw, raw + count * sizeof(float));
  return true;
}

bool decodeDense(const char *bytes, size_t size, size_t count, size_t,
                 float *out, bool add, std::string &error) {
  if (size != count * sizeof(float)) {
    error = "a dense message of " + std::to_string(size) + " bytes (expected " +
            std::to_string(count * sizeof(float)) + ")";
    return false;
  }
  for (size_t i = 0; i < count; ++i) {
    float value;
    std::memcpy(&value, bytes + i * sizeof(float), sizeof value);
    out[i] = add ? out[i] + value : value;
  }
  return true;
}

void moveDense(float *pending, size_t count, size_t, float *sent) {
  std::copy(pending, pending + count, sent);
  std::fill(pending, pending + count, 0.0f);
}

// Int8 with block scales (format/Int8.h).
size_t int8MessageBytes(size_t count, size_t) { return int8Bytes(count); }

bool encodeInt8Message(const float *x, size_t count, size_t,
                       std::vector<char> &out, std::string &) {
  encodeInt8(x, count, out);
  return true;
}

bool decodeInt8Message(const char *bytes, size_t size, size_t count, size_t,
                       float *out, bool add, std::string &error) {
  if (size != int8Bytes(count)) {
    error = "an int8 message of " + std::to_string(size) + " bytes (expected " +
            std::to_string(int8Bytes(count)) + ")";
    return false;
  }
  if (!decodeInt8(bytes, size, count, out, add)) {
    error = "an int8 message with a scale that is not finite and >= 0";
    return false;
  }
  return true;
}

void moveInt8Message(float *pending, size_t count, size_t, float *sent) {
  moveInt8(pending, count, sent);
}

// 4 bits with block scales (format/Int4.h).
size_t int4MessageBytes(size_t count, size_t) { return int4Bytes(count); }

bool encodeInt4Message(const float *x, size_t count, size_t,
                       std::vector<char> &out, std::string &) {
  encodeInt4(x, count, out);
  return true;
}

bool decodeInt4Message(const char *bytes, size_t size, size_t count, size_t,
                       float *out, bool add, std::string &error) {
  if (size != int4Bytes(count)) {
    error = "an int4 message of " + std::to_string(size) + " bytes (expected " +
            std::to_string(int4Bytes(count)) + ")";
    return false;
  }
  if (!decodeInt4(bytes, size, count, out, add)) {
    error = "an int4 message with a scale that is not finite and >= 0";
    return false;
  }
  return true;
}

void moveInt4Message(float *pending, size_t count, size_t, float *sent) {
  moveInt4(pending, count, sent);
}

// Sparse top-k (format/Sparse.h): `kept` entries per message.
size_t sparseMessageBytes(size_t, size_t kept) { return sparseBytes(kept); }

bool encodeSparseMessage(const float *x, size_t count, size_t kept,
                         std::vector<char> &out, std::string &error) {
  return encodeSparse(x, count, kept, out, error);
}

bool decodeSparseMessage(const char *bytes, size_t size, size_t count,
                         size_t kept, float *out, bool add,
                         std::string &error) {
  if (add)
    return addSparse(bytes, size, count, kept, out, error);
  std::vector<float> values(count, 0.0f);
  if (!addSparse(bytes, size, count, kept, values.data(), error))
    return false;
  std::copy(values.begin(), values.end(), out);
  return true;
}

void moveSparse(float *pending, size_t count, size_t kept, float *sent) {
  moveTopK(pending, count, kept, sent);
}

// The table: one entry per enumerator, in order.
constexpr WireCodecInfo kWireCodecs[] = {
    {WireCodec::Dense, "none", /*sparse=*/false, /*summable=*/true,
     /*pipelineTransfers=*/true, /*localSteps=*/true, /*gradientSyncs=*/true,
     denseMessageBytes, encodeDense, decodeDense, moveDense},
    {WireCodec::Int8, "int8", /*sparse=*/false, /*summable=*/true,
     /*pipelineTransfers=*/true, /*localSteps=*/true, /*gradientSyncs=*/true,
     int8MessageBytes, encodeInt8Message, decodeInt8Message, moveInt8Message},
    {WireCodec::TopK, "topk", /*sparse=*/true, /*summable=*/false,
     /*pipelineTransfers=*/false, /*localSteps=*/false, /*gradientSyncs=*/true,
     sparseMessageBytes, encodeSparseMessage, decodeSparseMessage, moveSparse},
    // Local steps' outer exchange only: every step's gradients in 4 bits
    // would need the device encoders int8 and top-k have.
    {WireCodec::Int4, "int4", /*sparse=*/false, /*summable=*/true,
     /*pipelineTransfers=*/false, /*localSteps=*/true, /*gradientSyncs=*/false,
     int4MessageBytes, encodeInt4Message, decodeInt4Message, moveInt4Message},
};

} // namespace

const std::vector<WireCodecInfo> &dtfm::format::wireCodecs() {
  // Built on first use, so that other static initializers may use it.
  static const std::vector<WireCodecInfo> all(std::begin(kWireCodecs),
                                              std::end(kWireCodecs));
  return all;
}

const WireCodecInfo &dtfm::format::wireCodecInfo(WireCodec codec) {
  return wireCodecs()[static_cast<size_t>(codec)];
}

std::optional<WireCodec> dtfm::format::parseWireCodec(std::string_view name) {
  for (const WireCodecInfo &info : wireCodecs())
    if (name == info.name)
      return info.codec;
  return std::nullopt;
}

std::string dtfm::format::wireCodecNames(bool (*accept)(const WireCodecInfo &),
                                         const char *quote) {
  std::vector<std::string> names;
  for (const WireCodecInfo &info : wireCodecs())
    if (accept(info))
      names.push_back(quote + std::string(info.name) + quote);
  std::string text;
  for (size_t i = 0; i < names.size(); ++i)
    text += std::string(i == 0                  ? ""
                        : i + 1 == names.size() ? " or "
                                                : ", ") +
            names[i];
  return text;
}

size_t dtfm::format::keptEntries(WireCodec codec, size_t count, double ratio) {
  return wireCodecInfo(codec).sparse ? topkCount(count, ratio) : count;
}

double dtfm::format::wireBytesOfDense(WireCodec codec, double denseBytes,
                                      double elementBytes, double ratio) {
  if (codec == WireCodec::Dense)
    return denseBytes;
  size_t count = static_cast<size_t>(denseBytes / elementBytes);
  return static_cast<double>(wireCodecInfo(codec).messageBytes(
      count, keptEntries(codec, count, ratio)));
}
