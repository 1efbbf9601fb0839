//===- SchedulerBench.cpp - DT-FM scheduler on the paper's scenarios ------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Runs every search algorithm on the five network scenarios of the DT-FM
// paper (device-level matrices read from ../shared/scenarios at run time),
// GPT3-1.3B at D_DP = D_PP = 8, and prints each plan's cost and wall time
// next to the cost the paper's own scheduler reached on the same inputs.
// Also plans one 1024-device cluster (32 x 32) to show the scale.
//
//   bench-scheduler [--json] [--seeds 0,1,2] [--scenarios DIR]
//                   [--algorithms a,b] [--no-scale]
//
//===----------------------------------------------------------------------===//

#include "BenchSupport.h"

#include "dtfm/Planner/Search.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace dtfm::planner;

namespace {

struct Scenario {
  const char *prefix;
  double referenceCost; // best of the reference GA over seeds 0-2
  double referenceWallSeconds;
};

// ../shared/scenarios/README.md: the paper's scheduler on these inputs.
const Scenario kScenarios[] = {
    {"0_dc_ondemand", 3.440, 315},  {"1_dc_spot", 43.547, 392},
    {"2_multi_dc", 16.087, 307},    {"3_geo_regional", 34.802, 380},
    {"4_geo_worldwide", 49.218, 306},
};

// GPT3-1.3B workload of the reference scheduler (README of the scenarios).
constexpr double kDataParallelBytes = 6.5e8;
constexpr double kPipelineBytes = 4.71246e8;

} // namespace

int main(int argc, char **argv) {
  bool json = false, scale = true;
  std::vector<uint64_t> seeds{0, 1, 2};
  std::string dir = dtfm::bench::defaultScenariosDir();
  std::vector<SearchAlgorithm> algorithms = allSearchAlgorithms();
  dtfm::bench::Flags flags("bench-scheduler", argc, argv);
  while (flags.next())
    if (flags.is("--json"))
      json = true;
    else if (flags.is("--no-scale"))
      scale = false;
    else if (flags.is("--seeds"))
      seeds = flags.integerList<uint64_t>(0);
    else if (flags.is("--scenarios"))
      dir = flags.text();
    else if (flags.is("--algorithms")) {
      algorithms.clear();
      for (const std::string &name : flags.textList()) {
        auto a = parseSearchAlgorithm(name);
        if (!a)
          flags.fail("unknown algorithm '" + name + "'");
        algorithms.push_back(*a);
      }
    } else
      flags.unknown();

  // Missing scenarios are a skip (loadScenario says so), not a failure.
  for (const Scenario &scenario : kScenarios) {
    Cluster cluster;
    if (!dtfm::bench::loadScenario("bench-scheduler", dir, scenario.prefix,
                                   cluster))
      break;
    CostModel model(cluster, {kDataParallelBytes, kPipelineBytes}, 8);
    if (!json)
      std::printf("\n%s (reference GA: %.3f s cost in %.0f s)\n"
                  "  %-14s %5s %10s %10s %10s %9s %8s\n",
                  scenario.prefix, scenario.referenceCost,
                  scenario.referenceWallSeconds, "algorithm", "seed",
                  "cost_s", "dp_s", "2pp_s", "wall_s", "vs_ref");
    for (SearchAlgorithm algorithm : algorithms) {
      for (uint64_t seed : seeds) {
        SearchOptions options;
        options.dataParallel = 8;
        options.pipelineParallel = 8;
        options.seed = seed;
        SearchResult r = searchLayout(model, algorithm, options);
        if (json)
          std::printf("{\"scenario\":\"%s\",\"algorithm\":\"%s\","
                      "\"seed\":%llu,\"cost_s\":%.6f,\"dp_s\":%.6f,"
                      "\"pp_s\":%.6f,\"wall_s\":%.4f,\"reference_cost_s\":%."
                      "3f}\n",
                      scenario.prefix, searchAlgorithmName(algorithm),
                      (unsigned long long)seed, r.cost.total(),
                      r.cost.dataParallel, r.cost.pipeline, r.wallSeconds,
                      scenario.referenceCost);
        else
          std::printf("  %-14s %5llu %10.3f %10.3f %10.3f %9.3f %7.3fx\n",
                      searchAlgorithmName(algorithm),
                      (unsigned long long)seed, r.cost.total(),
                      r.cost.dataParallel, r.cost.pipeline, r.wallSeconds,
                      r.cost.total() / scenario.referenceCost);
        std::fflush(stdout);
        if (algorithm == SearchAlgorithm::RankOrder)
          break; // deterministic: one seed says it all
      }
    }
  }

  if (scale) {
    // 1024 devices in 32 regions of 32: 2 Gbps / 5 ms inside a region,
    // 0.1-1.2 Gbps / 10-250 ms between regions (seeded).
    const int regions = 32, perRegion = 32, n = regions * perRegion;
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> bw(0.1, 1.2), delay(10, 250);
    std::vector<double> rbw(regions * regions), rdelay(regions * regions);
    for (int a = 0; a < regions; ++a)
      for (int b = a + 1; b < regions; ++b) {
        rbw[a * regions + b] = rbw[b * regions + a] = bw(rng);
        rdelay[a * regions + b] = rdelay[b * regions + a] = delay(rng);
      }
    Cluster cluster;
    cluster.delayMs = SquareMatrix(n);
    cluster.bandwidthGbps = SquareMatrix(n);
    for (int i = 0; i < n; ++i) {
      cluster.devices.push_back({"gpu" + std::to_string(i),
                                 "r" + std::to_string(i / perRegion), 125e12,
                                 1, 16e9});
      for (int j = 0; j < n; ++j) {
        int ra = i / perRegion, rb = j / perRegion;
        cluster.delayMs(i, j) = ra == rb ? 5 : rdelay[ra * regions + rb];
        cluster.bandwidthGbps(i, j) = ra == rb ? 2 : rbw[ra * regions + rb];
      }
    }
    CostModel model(cluster, {kDataParallelBytes, kPipelineBytes}, 32);
    if (!json)
      std::printf("\nscale: 1024 devices, D_DP = D_PP = 32 (synthetic, 32 "
                  "regions)\n  %-14s %10s %9s\n",
                  "algorithm", "cost_s", "wall_s");
    for (SearchAlgorithm algorithm :
         {SearchAlgorithm::RankOrder, SearchAlgorithm::Genetic}) {
      SearchOptions options;
      options.dataParallel = 32;
      options.pipelineParallel = 32;
      options.timeBudgetSeconds = 50;
      SearchResult r = searchLayout(model, algorithm, options);
      if (json)
        std::printf("{\"scenario\":\"synthetic-1024\",\"algorithm\":\"%s\","
                    "\"seed\":0,\"cost_s\":%.6f,\"wall_s\":%.4f}\n",
                    searchAlgorithmName(algorithm), r.cost.total(),
                    r.wallSeconds);
      else
        std::printf("  %-14s %10.3f %9.3f\n", searchAlgorithmName(algorithm),
                    r.cost.total(), r.wallSeconds);
    }
  }
  return 0;
}
