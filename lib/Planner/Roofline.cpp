//===- Roofline.cpp - Time of work that may be memory-bound ---------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Roofline.h"

#include <algorithm>
#include <cmath>

using namespace dtfm::planner;

/// Whether term a (FLOPs, bytes) has a lower intensity (FLOPs per byte)
/// than b, compared without dividing (a term without bytes is the most
/// intense).
static bool lessIntense(const std::pair<double, double> &a,
                        const std::pair<double, double> &b) {
  return a.first * b.second < b.first * a.second;
}

void RooflineWork::add(double flops, double bytes) {
  if (!(flops >= 0) || !(bytes >= 0) || !std::isfinite(flops) ||
      !std::isfinite(bytes) || (flops == 0 && bytes == 0))
    return;
  totalFlops += flops;
  totalBytes += bytes;
  std::pair<double, double> term{flops, bytes};
  auto it = std::lower_bound(terms.begin(), terms.end(), term, lessIntense);
  if (it != terms.end() && !lessIntense(term, *it)) {
    it->first += flops;
    it->second += bytes;
    return;
  }
  terms.insert(it, term);
}

void RooflineWork::add(const RooflineWork &other) {
  for (const auto &[flops, bytes] : other.terms)
    add(flops, bytes);
}

void RooflineWork::scale(double factor) {
  for (auto &[flops, bytes] : terms) {
    flops *= factor;
    bytes *= factor;
  }
  totalFlops *= factor;
  totalBytes *= factor;
}

double dtfm::planner::speedForSeconds(const RooflineWork &work, double seconds,
                                      double memoryBandwidth) {
  if (!(seconds > 0) || !(work.flops() > 0))
    return 0;
  if (!(memoryBandwidth > 0))
    return work.flops() / seconds;
  // With the first k terms (by rising intensity) memory-bound, the time is
  // memory_k + compute_k / S; the speed that solves it is the answer when
  // its ridge S / M puts exactly those k terms below it.
  // (All memory-bound, the time would not depend on the speed.) The
  // bounds allow for rounding: at a boundary both neighbours solve it.
  const auto &terms = work.opTerms();
  double memory = 0, compute = 0;
  for (const auto &term : terms)
    compute += term.first;
  const double slack = 1e-9;
  for (size_t k = 0; k < terms.size(); ++k) {
    if (k > 0) {
      memory += terms[k - 1].second / memoryBandwidth;
      compute -= terms[k - 1].first;
    }
    if (!(seconds > memory) || !(compute > 0))
      return 0;
    double speed = compute / (seconds - memory);
    double ridge = speed / memoryBandwidth;
    bool previousBelow =
        k == 0 ||
        terms[k - 1].first <= ridge * terms[k - 1].second * (1 + slack);
    bool thisAbove = terms[k].first >= ridge * terms[k].second * (1 - slack);
    if (previousBelow && thisAbove)
      return speed;
  }
  return 0;
}

double RooflineWork::excessAt(double ridge) const {
  if (!(ridge > 0))
    return 0;
  double excess = 0;
  // By rising intensity: the memory-bound terms come first.
  for (const auto &[flops, bytes] : terms) {
    double memory = bytes * ridge;
    if (memory <= flops)
      break;
    excess += memory - flops;
  }
  return excess;
}
