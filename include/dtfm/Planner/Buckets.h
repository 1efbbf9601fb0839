//===- Buckets.h - Gradient buckets overlapped with the backward -*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Data-parallel gradients travel in buckets, as PyTorch DDP sends them: the
// gradients of a stage in the order its backward produces them (the last
// layers first), cut into buckets of at most a cap of bytes. A bucket is
// all-reduced as soon as the iteration's last micro-batch has produced its
// last gradient, while the backward of earlier layers goes on; buckets use
// the group's links one after the other, in order; the optimizer steps a
// bucket's parameters once that bucket is back.
//
// One home for the arithmetic: --dtfm-insert-grad-sync cuts the buckets,
// the simulator and --dtfm-print-plan-summary lay them on the timeline.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLANNER_BUCKETS_H
#define DTFM_PLANNER_BUCKETS_H

#include <functional>
#include <string>
#include <vector>

namespace dtfm::planner {

/// PyTorch DDP's default bucket cap: 25 MiB.
inline constexpr double kDefaultBucketBytes = 25.0 * 1024 * 1024;

/// The bucket of each gradient, given their bytes in the order the backward
/// produces them: consecutive gradients fill a bucket up to `capBytes`; a
/// gradient larger than the cap travels alone; `capBytes` <= 0 puts all in
/// bucket 0 (one exchange per stage). Buckets are numbered from 0 in
/// launch order.
std::vector<int> assignBuckets(const std::vector<double> &bytes,
                               double capBytes);

/// One bucket as the timeline needs it.
struct SyncBucket {
  /// Fraction of a micro-batch's backward done when the bucket's last
  /// gradient is produced (0: before the backward starts, 1: at its end).
  double readyFraction = 1;
  /// Predicted seconds of the bucket's all-reduce.
  double seconds = 0;
  /// Fraction of the stage's optimizer work that steps its parameters.
  double optimizerShare = 0;
};

/// Where the buckets of one device fall in time.
struct BucketTimeline {
  std::vector<double> syncStart, syncEnd;   ///< per bucket
  std::vector<double> stepStart, stepEnd;   ///< optimizer, per bucket
  double end = 0; ///< the last optimizer step's end
};

/// Lays out `buckets` (in launch order) around the last micro-batch's
/// backward [backwardStart, backwardEnd]: bucket k's all-reduce starts when
/// it is ready and the previous one is done; its optimizer step (a share of
/// `optimizerSeconds`) starts once its all-reduce is done, the compute slot
/// is free (`computeFree`, at or after backwardEnd) and the previous step
/// is done; and no step starts before `notBefore` (values that must arrive
/// first, such as a tied weight's gradient).
BucketTimeline layOutBuckets(const std::vector<SyncBucket> &buckets,
                             double backwardStart, double backwardEnd,
                             double computeFree, double optimizerSeconds,
                             double notBefore);

/// The buckets of one data-parallel stage.
struct BucketPlan {
  double capBytes = 0;      ///< the cap used (0: one bucket)
  std::vector<int> bucketOf; ///< per gradient, in the order given
  std::vector<SyncBucket> buckets;
  /// Seconds of all-reduce left after the last micro-batch's backward
  /// ends, with the buckets overlapping it; and with one bucket.
  double exposedSeconds = 0, oneBucketExposedSeconds = 0;
};

/// Cuts a stage's gradients into buckets: `bytes` and `readyFraction` (when
/// the backward completes each, Planner/Buckets.h's SyncBucket) in the
/// order the backward produces them; `exchangeSeconds(bytes)` is the
/// group's all-reduce time for one bucket; `backwardSeconds` is one
/// micro-batch's backward on the stage. `capBytes` > 0 fixes the cap, 0
/// keeps one bucket, < 0 picks the cap that leaves the least all-reduce
/// after the backward among kBucketCapCandidates (the larger on a tie: on
/// slow, far links every bucket pays the latency again, and one bucket can
/// win).
BucketPlan planBuckets(const std::vector<double> &bytes,
                       const std::vector<double> &readyFraction,
                       double capBytes,
                       const std::function<double(double)> &exchangeSeconds,
                       double backwardSeconds);

/// planBuckets(...).exposedSeconds without building the plan (the shape
/// search scores many layouts and needs no more).
double exposedSyncSeconds(const std::vector<double> &bytes,
                          const std::vector<double> &readyFraction,
                          double capBytes,
                          const std::function<double(double)> &exchangeSeconds,
                          double backwardSeconds);

/// The caps `planBuckets` tries, in MiB (0: one bucket).
inline constexpr double kBucketCapCandidatesMiB[] = {
    0, 1, 2, 4, 8, 16, 25, 32, 64, 128, 256, 512, 1024};

/// Reads a bucket cap option: "auto" (-1) or a number of MiB in [0, 1e6]
/// (0: one bucket); false with a one-line `error` otherwise.
bool parseBucketCap(const std::string &text, double &capBytes,
                    std::string &error);

} // namespace dtfm::planner

#endif // DTFM_PLANNER_BUCKETS_H
