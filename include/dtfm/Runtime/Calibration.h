//===- Calibration.h - The simulator fed with measured speeds ----*- C++
//-*-===//
//
// Part of dtfm. Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
//
// After the first steps each worker knows its speed on a core of its own
// (compute FLOPs over the compute thread's CPU time, as FusionLLM §3.5
// profiles); rank 0 gathers them and predicts the iteration with the
// simulator. Local workers time-share the machine's cores: in the mean,
// when the simulated iteration keeps A compute slots busy and A exceeds the
// cores C, each runs at C / A of its speed -- solved as a damped fixed
// point, since A depends on the speeds.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_RUNTIME_CALIBRATION_H
#define DTFM_RUNTIME_CALIBRATION_H

#include <string>
#include <vector>

namespace dtfm::proto {
class Plan;
} // namespace dtfm::proto

namespace dtfm::runtime {

/// The simulated iteration of `plan` with device `names[r]` at `speeds[r]`
/// FLOP/s (0: the plan's speed) and `bandwidths[r]` bytes/s of memory
/// bandwidth (0 or absent: the plan's) on `cores` shared cores (0: one host
/// each, nothing shared; the shared cores share their memory too). False
/// with `error` when the plan does not simulate.
bool calibratedIteration(const proto::Plan &plan,
                         const std::vector<std::string> &names,
                         const std::vector<double> &speeds,
                         const std::vector<double> &bandwidths, double cores,
                         double &seconds, std::string &error);

} // namespace dtfm::runtime

#endif // DTFM_RUNTIME_CALIBRATION_H
