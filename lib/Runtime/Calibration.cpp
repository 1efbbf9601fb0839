//===- Calibration.cpp - The simulator fed with measured speeds -----------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Calibration.h"

#include "dtfm/Plan/SimInput.h"
#include "dtfm/Plan/Simulator.h"

#include <algorithm>
#include <cmath>

using namespace dtfm::runtime;

bool dtfm::runtime::calibratedIteration(const proto::Plan &plan,
                                        const std::vector<std::string> &names,
                                        const std::vector<double> &speeds,
                                        const std::vector<double> &bandwidths,
                                        double cores, double &seconds,
                                        std::string &error) {
  plan::SimInput input;
  if (!plan::simulationInput(plan, input, error))
    return false;
  double share = 1;
  plan::SimResult result;
  for (int round = 0; round < 30; ++round) {
    for (planner::Device &d : input.cluster.devices)
      for (size_t r = 0; r < names.size(); ++r) {
        if (names[r] != d.name)
          continue;
        if (r < speeds.size() && speeds[r] > 0) {
          d.peakFlops = speeds[r] * share;
          d.efficiency = 1;
        }
        if (r < bandwidths.size() && bandwidths[r] > 0)
          d.memoryBandwidth = bandwidths[r] * share;
      }
    result = plan::SimResult();
    if (!plan::simulate(input, result, error))
      return false;
    if (cores == 0 || result.iterationSeconds <= 0)
      break;
    double busy = 0;
    for (const auto &[device, busySeconds] : result.busySeconds)
      busy += busySeconds;
    double active = busy / result.iterationSeconds;
    double next = std::min(1.0, cores / std::max(active, 1e-9));
    if (std::abs(next - share) < 1e-3)
      break;
    share = 0.5 * (share + next);
  }
  seconds = result.iterationSeconds;
  return true;
}
