//===- BenchSupport.h - What the benches share ------------------*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The DT-FM paper's five network scenarios, read at run time from
// ../shared/scenarios (or DTFM_SCENARIOS_DIR, or --scenarios DIR); they are
// never copied into the tree. And small command-line helpers.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_BENCH_BENCHSUPPORT_H
#define DTFM_BENCH_BENCHSUPPORT_H

#include "dtfm/Planner/Cluster.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace dtfm::bench {

/// The scenarios' file prefixes, in the paper's order (§4.1: data center
/// on demand, spot, two data centers, regional, world-wide).
inline const std::vector<std::string> &paperScenarios() {
  static const std::vector<std::string> prefixes = {
      "0_dc_ondemand", "1_dc_spot", "2_multi_dc", "3_geo_regional",
      "4_geo_worldwide"};
  return prefixes;
}

/// DTFM_SCENARIOS_DIR when set, else ../shared/scenarios beside the source
/// tree.
inline std::string defaultScenariosDir() {
  if (const char *env = std::getenv("DTFM_SCENARIOS_DIR"))
    return env;
  return std::string(DTFM_SOURCE_DIR) + "/../shared/scenarios";
}

/// Loads scenario `prefix` from `dir`; when it cannot, says on stderr that
/// `tool` skips the scenarios, and why, and returns false.
inline bool loadScenario(const char *tool, const std::string &dir,
                         const std::string &prefix, planner::Cluster &cluster) {
  std::string error;
  if (planner::loadScenarioMatrices(dir, prefix, cluster, error))
    return true;
  std::fprintf(stderr,
               "%s: skipping the DT-FM scenarios: %s (set DTFM_SCENARIOS_DIR "
               "or --scenarios)\n",
               tool, error.c_str());
  return false;
}

/// The non-empty items of a comma-separated list.
inline std::vector<std::string> splitList(const std::string &text) {
  std::vector<std::string> parts;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ','))
    if (!part.empty())
      parts.push_back(part);
  return parts;
}

} // namespace dtfm::bench

#endif // DTFM_BENCH_BENCHSUPPORT_H
