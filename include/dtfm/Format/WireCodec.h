//===- WireCodec.h - How a tensor travels on the wire -----------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The one table of wire codecs: dense floats, int8 with block scales
// (format/Int8.h), sparse top-k (format/Sparse.h) and 4 bits with block
// scales (format/Int4.h). Each entry holds the
// codec's spelling, where it may be used, its message size, and its encode,
// decode and error-feedback functions. Everything that names, counts or
// moves compressed bytes looks a codec up here:
//   - the dialect's and the plan's verifiers (dtfm.wire, dtfm.compression),
//   - the planner's byte counts (wireBytesOfDense), its options
//     (dp-compression, pp-compression) and the memory model,
//   - the runtime's collectives (Transport::allreduceSum with a codec), the
//     worker's pipeline messages and error feedback, and the CUDA links.
// Adding a codec: an enumerator, its entry in WireCodec.cpp with its
// functions, and tests (docs/Runtime.md, "Adding a wire codec").
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_FORMAT_WIRECODEC_H
#define DTFM_FORMAT_WIRECODEC_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dtfm::format {

/// How a tensor's values travel. Dense is the default and is never written
/// as an attribute.
enum class WireCodec : uint8_t { Dense, Int8, TopK, Int4 };

struct WireCodecInfo {
  WireCodec codec;
  /// The spelling in options (dp-compression, pp-compression) and in
  /// dtfm.compression / dtfm.wire; dense is "none".
  const char *name;
  /// Keeps a fraction 1/R of the entries (R: dtfm.topk_ratio, spelled
  /// "name:R" in options); a message holds `kept` entries (keptEntries).
  bool sparse;
  /// Messages of partial sums can be added up hop by hop (a ring
  /// reduce-scatter, a parameter server); otherwise every member's message
  /// travels whole and each member adds them all up.
  bool summable;
  /// May carry a pipeline transfer's value (dtfm.wire, pp-compression).
  bool pipelineTransfers;
  /// May carry local steps' parameter exchange (dtfm.sync_every).
  bool localSteps;
  /// May carry every step's gradient exchange (a dtfm.grad_sync without
  /// dtfm.sync_every); int4 only takes local steps' outer exchange.
  bool gradientSyncs;
  /// Bytes of one message of `count` values, `kept` of them kept.
  size_t (*messageBytes)(size_t count, size_t kept);
  /// Encodes x[0, count) into `out` (resized to messageBytes); false with
  /// `error` when the values do not fit the message.
  bool (*encode)(const float *x, size_t count, size_t kept,
                 std::vector<char> &out, std::string &error);
  /// Decodes a message of `size` bytes into out[0, count), adding to it
  /// when `add`; false with `error`, having written nothing, when the
  /// message is malformed (a hostile peer).
  bool (*decode)(const char *bytes, size_t size, size_t count, size_t kept,
                 float *out, bool add, std::string &error);
  /// Error feedback: `sent` gets pending[0, count) as the codec carries it
  /// (what a peer decodes); `pending` keeps the rest, the residual.
  void (*moveWithFeedback)(float *pending, size_t count, size_t kept,
                           float *sent);
};

/// The table's entry of `codec`.
const WireCodecInfo &wireCodecInfo(WireCodec codec);
/// Every codec, in enumerator order.
const std::vector<WireCodecInfo> &wireCodecs();
/// The codec spelled `name` (the table's one string compare).
std::optional<WireCodec> parseWireCodec(std::string_view name);
inline const char *wireCodecName(WireCodec codec) {
  return wireCodecInfo(codec).name;
}
/// The spellings of the codecs `accept` takes, for errors: "a, b or c",
/// each between `quote`s.
std::string wireCodecNames(bool (*accept)(const WireCodecInfo &),
                           const char *quote = "");
/// The codecs an attribute may name: dtfm.compression (a dtfm.grad_sync)
/// any but dense, dtfm.wire (a dtfm.send / dtfm.recv) those that carry
/// pipeline transfers.
inline bool isCompressionAttrCodec(const WireCodecInfo &info) {
  return info.codec != WireCodec::Dense;
}
/// The codecs local steps' parameter exchange takes, and those every
/// step's gradient exchange takes (for errors: wireCodecNames).
inline bool carriesLocalSteps(const WireCodecInfo &info) {
  return info.localSteps;
}
inline bool carriesGradientSyncs(const WireCodecInfo &info) {
  return info.gradientSyncs;
}
inline bool isWireAttrCodec(const WireCodecInfo &info) {
  return info.codec != WireCodec::Dense && info.pipelineTransfers;
}

/// Entries a message of `count` values keeps: topkCount for sparse codecs
/// (ratio R), every value otherwise.
size_t keptEntries(WireCodec codec, size_t count, double ratio);
/// What a gradient sync planned with `planned` sends at step `step` (from
/// 1): a sparse codec (top-k) is dense, without error feedback, for its
/// first `topkWarmup` steps. The exchange and a device that encodes before
/// it both ask this.
inline WireCodec wireCodecAtStep(WireCodec planned, int64_t topkWarmup,
                                 int64_t step) {
  return wireCodecInfo(planned).sparse && step <= topkWarmup ? WireCodec::Dense
                                                             : planned;
}
/// Bytes on the wire of `denseBytes` of values `elementBytes` wide: the
/// dense bytes themselves, or one message of their values.
double wireBytesOfDense(WireCodec codec, double denseBytes, double elementBytes,
                        double ratio);

} // namespace dtfm::format

#endif // DTFM_FORMAT_WIRECODEC_H
