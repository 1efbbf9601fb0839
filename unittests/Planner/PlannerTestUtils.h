//===- PlannerTestUtils.h - Helpers for planner unit tests ------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_UNITTESTS_PLANNER_PLANNERTESTUTILS_H
#define DTFM_UNITTESTS_PLANNER_PLANNERTESTUTILS_H

#include "dtfm/Planner/Cluster.h"

#include <cstdlib>
#include <random>
#include <string>

namespace dtfm::planner::testutil {

/// A cluster of n identical devices with random symmetric links: delays in
/// [1, 100] ms, bandwidths in [0.1, 10] Gbps.
inline Cluster randomCluster(int n, std::mt19937_64 &rng) {
  std::uniform_real_distribution<double> delay(1, 100), bandwidth(0.1, 10);
  Cluster c;
  c.delayMs = SquareMatrix(n);
  c.bandwidthGbps = SquareMatrix(n);
  for (int i = 0; i < n; ++i) {
    c.devices.push_back({"d" + std::to_string(i), "r", 1e12, 1, 1e9});
    for (int j = i + 1; j < n; ++j) {
      c.delayMs(i, j) = c.delayMs(j, i) = delay(rng);
      c.bandwidthGbps(i, j) = c.bandwidthGbps(j, i) = bandwidth(rng);
    }
  }
  return c;
}

/// The source tree: $DTFM_SOURCE_DIR (lit sets it), else the one this test
/// binary was built from, so that it runs from any directory.
inline std::string sourceDir() {
  if (const char *src = std::getenv("DTFM_SOURCE_DIR"))
    return src;
  return DTFM_SOURCE_DIR;
}

/// Folder of the DT-FM scenario matrices (../shared/scenarios beside the
/// source tree, or $DTFM_SCENARIOS_DIR), or "" when absent.
inline std::string scenariosDir() {
  if (const char *dir = std::getenv("DTFM_SCENARIOS_DIR"))
    return dir;
  std::string dir = sourceDir() + "/../shared/scenarios";
  std::string probe = dir + "/0_dc_ondemand_delay_ms.csv";
  if (std::FILE *f = std::fopen(probe.c_str(), "r")) {
    std::fclose(f);
    return dir;
  }
  return "";
}

} // namespace dtfm::planner::testutil

#endif // DTFM_UNITTESTS_PLANNER_PLANNERTESTUTILS_H
