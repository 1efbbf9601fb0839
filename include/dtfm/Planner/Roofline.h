//===- Roofline.h - Time of work that may be memory-bound -------*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR): shared by the planner, the passes and
// the runtime's simulator.
//
//===----------------------------------------------------------------------===//
//
// One op on a device of sustained speed S (FLOP/s) and memory bandwidth M
// (bytes/s) takes max(f / S, b / M) for its f FLOPs and b bytes moved: the
// roofline. Written as max(f, b * r) / S with the device's ridge r = S / M
// (FLOPs per byte), work of many ops takes flopsAt(r) / S: the FLOPs it
// would take as long at the device's compute speed. Embeddings, norms,
// softmax and elementwise ops sit below the ridge and cost their bytes;
// matmuls sit far above it and cost their FLOPs. A device without a
// bandwidth has ridge 0: every op costs its FLOPs.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLANNER_ROOFLINE_H
#define DTFM_PLANNER_ROOFLINE_H

#include <utility>
#include <vector>

namespace dtfm::planner {

class RooflineWork {
public:
  /// Adds one op's FLOPs and bytes (both finite and >= 0; others are
  /// ignored: the caller's checks name them).
  void add(double flops, double bytes);
  void add(const RooflineWork &other);
  /// Every op's FLOPs and bytes times `factor` (> 0).
  void scale(double factor);

  double flops() const { return totalFlops; }
  double bytes() const { return totalBytes; }
  bool empty() const { return terms.empty(); }

  /// Sum of max(f, b * ridge) over the ops; flopsAt(0) = flops().
  double flopsAt(double ridge) const { return totalFlops + excessAt(ridge); }
  /// What the roofline adds to the FLOPs: sum of max(0, b * ridge - f).
  double excessAt(double ridge) const;

  /// The ops as (FLOPs, bytes), those of one arithmetic intensity merged
  /// (which changes no flopsAt), by rising intensity.
  const std::vector<std::pair<double, double>> &opTerms() const {
    return terms;
  }

private:
  std::vector<std::pair<double, double>> terms;
  double totalFlops = 0, totalBytes = 0;
};

/// The sustained speed (FLOP/s) at which `work` takes `seconds` on a device
/// of memory bandwidth `memoryBandwidth` (bytes/s; 0: FLOPs alone): how a
/// measured time calibrates the speed once the bandwidth is known, so that
/// the memory-bound ops' share is not charged twice. 0 when no speed does
/// (its bytes alone take `seconds` or longer, or it has no FLOPs).
double speedForSeconds(const RooflineWork &work, double seconds,
                       double memoryBandwidth);

/// A device's ridge (FLOPs per byte) at `speed` FLOP/s and
/// `memoryBandwidth` bytes/s: 0 when the bandwidth is not known (<= 0).
inline double ridgeOf(double speed, double memoryBandwidth) {
  return memoryBandwidth > 0 ? speed / memoryBandwidth : 0;
}

} // namespace dtfm::planner

#endif // DTFM_PLANNER_ROOFLINE_H
