//===- Compression.cpp - AdaTopK ratios per link --------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Compression.h"
#include "dtfm/Format/Int8.h"
#include "dtfm/Support/NameTable.h"

#include <algorithm>

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
    if (!c.compressed && options.int8 != LinkInt8::None) {
      double bytes = format::int8BytesOfDense(link.denseBytes,
                                              link.elementBytes);
      c.int8 = options.int8 == LinkInt8::All ||
               link.seconds(bytes) <=
                   (1 - kInt8LinkMinSaving) * link.seconds(link.denseBytes);
      if (c.int8)
        c.bytes = bytes;
    }
    c.seconds = link.seconds(c.bytes);
    plan.push_back(c);
  }
  return plan;
}

static constexpr dtfm::NameEntry<LinkInt8> kPpCompressionNames[] = {
    {LinkInt8::None, "none"}, {LinkInt8::All, "int8"}, {LinkInt8::Auto, "auto"}};

const char *dtfm::planner::ppCompressionName(LinkInt8 mode) {
  return nameOf(kPpCompressionNames, mode);
}

std::optional<LinkInt8>
dtfm::planner::parsePpCompression(std::string_view name) {
  return valueNamed(kPpCompressionNames, name);
}
