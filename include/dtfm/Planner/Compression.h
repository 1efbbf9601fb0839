//===- Compression.h - AdaTopK ratios per link --------------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// FusionLLM's AdaTopK (its eq. 7): given a user ratio r, the link that takes
// R_i seconds dense gets the top-k ratio
//
//   r_i = max(1, c r R_i / max_p R_p)
//
// where c is the cost of one kept element in dense elements: its value in
// the tensor's type and its i64 index (--dtfm-insert-compression's wire),
// 3 for f32, 5 for f16: the slowest link sends c/r_i = 1/r of its dense
// bytes. A link whose r_i <= c would send at least its dense bytes and
// stays dense, as does any link faster than `denseBelow` x the slowest.
// The uniform baseline compresses every link past the threshold with r.
//
// SWARM's 8-bit transfers join it (`pp-compression`): a link that top-k
// leaves dense may carry its activations and their gradients in the int8
// format of format/Int8.h (one byte per element and a scale per 256) -- on
// every such link, or (`auto`) where that saves at least 20% of the
// transfer's time, as dp-compression=auto decides for gradients.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLANNER_COMPRESSION_H
#define DTFM_PLANNER_COMPRESSION_H

#include "dtfm/Format/WireCodec.h"
#include "dtfm/Planner/Cluster.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dtfm::planner {

/// A compression option: one wire codec (format/WireCodec.h) on every
/// exchange or link it applies to, or `automatic`: int8 where it saves at
/// least kInt8MinSaving of the time (as AdaTopK compresses only the links
/// where it pays). A sparse codec is never chosen for the user: it changes
/// the training more than int8.
struct CodecChoice {
  format::WireCodec codec = format::WireCodec::Dense;
  bool automatic = false;
  /// A sparse codec's R: keep 1/R of each gradient (> 1).
  double ratio = 0;
  /// Whether anything may travel compressed.
  bool mayCompress() const {
    return automatic || codec != format::WireCodec::Dense;
  }
};
inline constexpr double kInt8MinSaving = 0.2;

/// What an option compresses: data-parallel exchanges (dp-compression, any
/// codec) or pipeline transfers (pp-compression, on the links top-k leaves
/// dense: the codecs for pipeline transfers).
enum class CodecUse { Gradients, PipelineTransfers };

/// The spellings: each codec's name ("none", "int8"), a sparse one's as
/// "name:R", and "auto". parseCodecChoice refuses a codec `use` does not
/// take and R <= 1 or above 1e6; codecChoices lists them for errors
/// ("none, int8, topk:R (R > 1) or auto").
std::string codecChoiceName(CodecChoice choice);
std::optional<CodecChoice> parseCodecChoice(std::string_view name,
                                            CodecUse use);
std::string codecChoices(CodecUse use);

/// What an exchange or link travels as under `choice`: its codec, or under
/// auto int8 when `int8Seconds` saves kInt8MinSaving of `denseSeconds`.
format::WireCodec chooseCodec(CodecChoice choice, double denseSeconds,
                              double int8Seconds);

/// Bytes of one kept element's index on the wire (i64: the type of
/// dtfm.topk_compress's indices).
inline constexpr double kTopkIndexBytes = 8;

/// One kept element's cost in dense elements of `elementBytes`: its value
/// and its index.
inline double topkKeptElementCost(double elementBytes) {
  return (elementBytes + kTopkIndexBytes) / elementBytes;
}

/// One transfer on one link.
struct LinkTransfer {
  double denseBytes = 0;
  double latencySeconds = 0;
  double bandwidthGbps = 0;
  /// Bytes per element of the dense tensor (what int8 shrinks).
  double elementBytes = 4;

  /// alpha + bytes / beta (linkSeconds).
  double seconds(double bytes) const {
    return linkSeconds(latencySeconds, bandwidthGbps, bytes);
  }
};

struct CompressionOptions {
  /// r: the ratio the slowest link achieves (1 = no compression).
  double targetRatio = 1;
  /// Uniform top-k with ratio r on every link past the threshold.
  bool uniform = false;
  /// Links with R_i < denseBelow x max_p R_p stay dense (0: none).
  double denseBelow = 0;
  /// The codec of the links top-k leaves dense (pp-compression).
  CodecChoice linkCodec;
};

struct LinkCompression {
  bool compressed = false;
  /// Top-k ratio: numel / k (1 when dense).
  double ratio = 1;
  /// The codec on the wire instead (dense with top-k).
  format::WireCodec wire = format::WireCodec::Dense;
  /// Bytes on the wire: c x dense / ratio when compressed
  /// (topkKeptElementCost).
  double bytes = 0;
  double seconds = 0;
};

/// The compression of each transfer (same order).
std::vector<LinkCompression>
planCompression(const std::vector<LinkTransfer> &links,
                const CompressionOptions &options);

} // namespace dtfm::planner

#endif // DTFM_PLANNER_COMPRESSION_H
