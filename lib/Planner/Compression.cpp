//===- Compression.cpp - AdaTopK ratios per link --------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Compression.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

using namespace dtfm::planner;

std::vector<LinkCompression>
dtfm::planner::planCompression(const std::vector<LinkTransfer> &links,
                               const CompressionOptions &options) {
  double slowest = 0;
  for (const LinkTransfer &link : links)
    slowest = std::max(slowest, link.seconds(link.denseBytes));
  std::vector<LinkCompression> plan;
  for (const LinkTransfer &link : links) {
    LinkCompression c;
    double dense = link.seconds(link.denseBytes);
    double ratio = 1;
    bool eligible = options.targetRatio > 1 && slowest > 0 &&
                    dense >= options.denseBelow * slowest;
    // Top-k pays `kept` dense elements per kept element: only ratios above
    // it make the transfer smaller.
    double kept = topkKeptElementCost(link.elementBytes);
    if (eligible)
      ratio = options.uniform
                  ? options.targetRatio
                  : std::max(1.0, kept * options.targetRatio * dense / slowest);
    c.compressed = eligible && ratio > kept;
    c.ratio = c.compressed ? ratio : 1.0;
    c.bytes = c.compressed ? kept * link.denseBytes / ratio : link.denseBytes;
    if (!c.compressed) {
      auto bytesAs = [&](format::WireCodec codec) {
        return format::wireBytesOfDense(
            codec, link.denseBytes, link.elementBytes, options.linkCodec.ratio);
      };
      c.wire = chooseCodec(options.linkCodec, dense,
                           link.seconds(bytesAs(format::WireCodec::Int8)));
      c.bytes = bytesAs(c.wire);
    }
    c.seconds = link.seconds(c.bytes);
    plan.push_back(c);
  }
  return plan;
}

static bool takes(CodecUse use, const dtfm::format::WireCodecInfo &info) {
  return use == CodecUse::Gradients || info.pipelineTransfers;
}

std::string dtfm::planner::codecChoiceName(CodecChoice choice) {
  if (choice.automatic)
    return "auto";
  std::string name = format::wireCodecName(choice.codec);
  if (!format::wireCodecInfo(choice.codec).sparse)
    return name;
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, ":%g", choice.ratio);
  return name + ratio;
}

std::optional<CodecChoice>
dtfm::planner::parseCodecChoice(std::string_view name, CodecUse use) {
  if (name == "auto")
    return CodecChoice{format::WireCodec::Dense, /*automatic=*/true, 0};
  // A sparse codec's "name:R": keep 1/R of each gradient.
  size_t colon = name.find(':');
  std::optional<format::WireCodec> codec =
      format::parseWireCodec(name.substr(0, colon));
  if (!codec || !takes(use, format::wireCodecInfo(*codec)) ||
      format::wireCodecInfo(*codec).sparse != (colon != name.npos))
    return std::nullopt;
  if (colon == name.npos)
    return CodecChoice{*codec, false, 0};
  std::string ratio(name.substr(colon + 1));
  char *end = nullptr;
  double r = ratio.empty() ? 0 : std::strtod(ratio.c_str(), &end);
  if (ratio.empty() || *end != '\0' || !(r > 1 && r <= 1e6))
    return std::nullopt;
  return CodecChoice{*codec, false, r};
}

std::string dtfm::planner::codecChoices(CodecUse use) {
  std::vector<std::string> choices;
  for (const format::WireCodecInfo &info : format::wireCodecs())
    if (takes(use, info))
      choices.push_back(std::string(info.name) +
                        (info.sparse ? ":R (R > 1)" : ""));
  std::string text;
  for (const std::string &choice : choices)
    text += (text.empty() ? "" : ", ") + choice;
  return text + " or auto";
}

dtfm::format::WireCodec dtfm::planner::chooseCodec(CodecChoice choice,
                                                   double denseSeconds,
                                                   double int8Seconds) {
  if (!choice.automatic)
    return choice.codec;
  return int8Seconds <= (1 - kInt8MinSaving) * denseSeconds
             ? format::WireCodec::Int8
             : format::WireCodec::Dense;
}
