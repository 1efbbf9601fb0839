//===- Buckets.cpp - Gradient buckets overlapped with the backward --------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Buckets.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <iterator>

using namespace dtfm::planner;

std::vector<int> dtfm::planner::assignBuckets(const std::vector<double> &bytes,
                                              double capBytes) {
  std::vector<int> bucketOf(bytes.size(), 0);
  if (!(capBytes > 0))
    return bucketOf;
  int bucket = 0;
  double filled = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (filled > 0 && filled + bytes[i] > capBytes) {
      ++bucket;
      filled = 0;
    }
    bucketOf[i] = bucket;
    filled += bytes[i];
  }
  return bucketOf;
}

BucketTimeline dtfm::planner::layOutBuckets(
    const std::vector<SyncBucket> &buckets, double backwardStart,
    double backwardEnd, double computeFree, double optimizerSeconds,
    double notBefore) {
  BucketTimeline t;
  double link = backwardStart, compute = std::max(computeFree, notBefore);
  double span = std::max(0.0, backwardEnd - backwardStart);
  for (const SyncBucket &b : buckets) {
    double fraction = std::clamp(b.readyFraction, 0.0, 1.0);
    double start = std::max(link, backwardStart + fraction * span);
    double end = start + std::max(0.0, b.seconds);
    link = end;
    double stepStart = std::max(compute, end);
    double stepEnd =
        stepStart + std::max(0.0, b.optimizerShare) * optimizerSeconds;
    compute = stepEnd;
    t.syncStart.push_back(start);
    t.syncEnd.push_back(end);
    t.stepStart.push_back(stepStart);
    t.stepEnd.push_back(stepEnd);
  }
  t.end = compute;
  return t;
}

static BucketPlan bucketsWithCap(
    const std::vector<double> &bytes, const std::vector<double> &readyFraction,
    double capBytes, const std::function<double(double)> &exchangeSeconds,
    double backwardSeconds) {
  BucketPlan plan;
  plan.capBytes = capBytes > 0 ? capBytes : 0;
  plan.bucketOf = assignBuckets(bytes, capBytes);
  std::vector<double> bucketBytes;
  double total = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    size_t b = static_cast<size_t>(plan.bucketOf[i]);
    if (b >= plan.buckets.size()) {
      plan.buckets.resize(b + 1, SyncBucket{0, 0, 0});
      bucketBytes.resize(b + 1, 0);
    }
    bucketBytes[b] += bytes[i];
    total += bytes[i];
    plan.buckets[b].readyFraction =
        std::max(plan.buckets[b].readyFraction,
                 i < readyFraction.size() ? readyFraction[i] : 1.0);
  }
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    plan.buckets[b].seconds = exchangeSeconds(bucketBytes[b]);
    plan.buckets[b].optimizerShare = total > 0 ? bucketBytes[b] / total : 0;
  }
  BucketTimeline t = layOutBuckets(plan.buckets, 0, backwardSeconds,
                                   backwardSeconds, 0, 0);
  plan.exposedSeconds =
      t.syncEnd.empty() ? 0 : std::max(0.0, t.syncEnd.back() - backwardSeconds);
  return plan;
}

/// bucketsWithCap's exposed seconds without building its plan: the buckets
/// streamed in launch order through the same arithmetic (assignBuckets,
/// then layOutBuckets from 0 to the backward's end).
static double
exposedWithCap(const std::vector<double> &bytes,
               const std::vector<double> &readyFraction, double capBytes,
               const std::function<double(double)> &exchangeSeconds,
               double backwardSeconds) {
  double link = 0, span = std::max(0.0, backwardSeconds);
  double filled = 0, ready = 0;
  auto launch = [&] {
    double start = std::max(link, std::clamp(ready, 0.0, 1.0) * span);
    link = start + std::max(0.0, exchangeSeconds(filled));
  };
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (capBytes > 0 && filled > 0 && filled + bytes[i] > capBytes) {
      launch();
      filled = 0;
      ready = 0;
    }
    filled += bytes[i];
    ready = std::max(ready, i < readyFraction.size() ? readyFraction[i] : 1.0);
  }
  if (bytes.empty())
    return 0;
  launch();
  return std::max(0.0, link - backwardSeconds);
}

/// The cap planBuckets chooses (0: one bucket), with its exposed seconds
/// and one bucket's.
static double chooseCap(const std::vector<double> &bytes,
                        const std::vector<double> &readyFraction,
                        double capBytes,
                        const std::function<double(double)> &exchangeSeconds,
                        double backwardSeconds, double &exposedSeconds,
                        double &oneBucketExposedSeconds) {
  oneBucketExposedSeconds =
      exposedWithCap(bytes, readyFraction, 0, exchangeSeconds, backwardSeconds);
  exposedSeconds = oneBucketExposedSeconds;
  if (capBytes > 0) {
    exposedSeconds = exposedWithCap(bytes, readyFraction, capBytes,
                                    exchangeSeconds, backwardSeconds);
    return capBytes;
  }
  if (capBytes == 0)
    return 0;
  // From the largest cap down, keeping a smaller one only when it is
  // strictly better: a tie goes to fewer buckets.
  double chosen = 0;
  for (auto it = std::rbegin(kBucketCapCandidatesMiB);
       it != std::rend(kBucketCapCandidatesMiB); ++it) {
    if (*it <= 0)
      continue;
    double cap = *it * 1024 * 1024;
    double exposed = exposedWithCap(bytes, readyFraction, cap,
                                    exchangeSeconds, backwardSeconds);
    if (exposed < exposedSeconds) {
      exposedSeconds = exposed;
      chosen = cap;
    }
  }
  return chosen;
}

BucketPlan dtfm::planner::planBuckets(
    const std::vector<double> &bytes, const std::vector<double> &readyFraction,
    double capBytes, const std::function<double(double)> &exchangeSeconds,
    double backwardSeconds) {
  double exposed = 0, oneBucket = 0;
  double cap = chooseCap(bytes, readyFraction, capBytes, exchangeSeconds,
                         backwardSeconds, exposed, oneBucket);
  BucketPlan plan =
      bucketsWithCap(bytes, readyFraction, cap, exchangeSeconds, backwardSeconds);
  plan.oneBucketExposedSeconds = oneBucket;
  return plan;
}

double dtfm::planner::exposedSyncSeconds(
    const std::vector<double> &bytes, const std::vector<double> &readyFraction,
    double capBytes, const std::function<double(double)> &exchangeSeconds,
    double backwardSeconds) {
  double exposed = 0, oneBucket = 0;
  chooseCap(bytes, readyFraction, capBytes, exchangeSeconds, backwardSeconds,
            exposed, oneBucket);
  return exposed;
}

bool dtfm::planner::parseBucketCap(const std::string &text, double &capBytes,
                                   std::string &error) {
  if (text == "auto") {
    capBytes = -1;
    return true;
  }
  char *end = nullptr;
  bool blank = text.empty() || std::isspace(static_cast<unsigned char>(text[0]));
  double mib = blank ? 0 : std::strtod(text.c_str(), &end);
  if (blank || end != text.c_str() + text.size() || !(mib >= 0) ||
      mib > 1e6) {
    error = "bucket-mb must be auto or a number of MiB in [0, 1e6] (0: one "
            "bucket), got '" + text + "'";
    return false;
  }
  capBytes = mib * 1024 * 1024;
  return true;
}
