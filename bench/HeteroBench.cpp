//===- HeteroBench.cpp - hetero vs equal-layer plans ----------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Predicted iteration time (FusionLLM's pipelined time + data-parallel sync,
// lib/Planner/Hetero.h) of GPT3-1.3B at D_DP = D_PP = 8 on
//   - mixed clusters built from examples/clusters/dc-ondemand.textproto:
//     `mixed-speed` (nodes 4-7 four times slower) and `mixed-memory`
//     (nodes 4-7 with 5 GB: the attention probabilities, recomputed by the
//     backward, are no longer counted as kept), and
//   - the DT-FM paper's five scenarios (../shared/scenarios, skipped with a
//     message when absent),
// for algorithm=hetero (stages re-balanced per candidate) against DT-FM's
// genetic search, OP-Fence and rank order (equal layers per stage, the
// assumption of those algorithms), all scored by the same model.
//
//   bench-hetero [--json] [--micro-batches N] [--seed S] [--scenarios DIR]
//
//===----------------------------------------------------------------------===//

#include "BenchSupport.h"
#include "GptWorkload.h"

#include "dtfm/Planner/Hetero.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace dtfm::planner;

namespace {

using dtfm::bench::gptWorkload;

struct Row {
  std::string scenario;
  std::string algorithm;
  double iterationSeconds;
  double wallSeconds;
};

void print(const Row &row, bool json) {
  if (json)
    std::printf("{\"scenario\":\"%s\",\"algorithm\":\"%s\","
                "\"iteration_s\":%s,\"wall_s\":%s}\n",
                row.scenario.c_str(), row.algorithm.c_str(),
                dtfm::bench::jsonNumber(row.iterationSeconds).c_str(),
                dtfm::bench::jsonNumber(row.wallSeconds, 4).c_str());
  else
    std::printf("  %-14s %14.3f %9.3f\n", row.algorithm.c_str(),
                row.iterationSeconds, row.wallSeconds);
  std::fflush(stdout);
}

/// Runs every algorithm on one cluster; returns hetero's speed-up over the
/// best equal-layer plan.
double runScenario(const std::string &name, const Cluster &cluster,
                   const Workload &workload, int microBatches, uint64_t seed,
                   bool json) {
  const int dp = 8, pp = 8;
  HeteroModel model(
      dtfm::bench::heteroProblem(workload, cluster, dp, pp, microBatches));
  if (!json)
    std::printf("\n%s\n  %-14s %14s %9s\n", name.c_str(), "algorithm",
                "iteration_s", "wall_s");

  SearchOptions options;
  options.dataParallel = dp;
  options.pipelineParallel = pp;
  options.seed = seed;
  double bestEqual = std::numeric_limits<double>::infinity();
  for (SearchAlgorithm algorithm :
       {SearchAlgorithm::RankOrder, SearchAlgorithm::OpFence,
        SearchAlgorithm::Genetic}) {
    auto start = std::chrono::steady_clock::now();
    double t = dtfm::bench::equalLayerSeconds(model, workload, algorithm,
                                              options, microBatches);
    double wall = std::chrono::duration<double>(
                      std::chrono::steady_clock::now() - start)
                      .count();
    bestEqual = std::min(bestEqual, t);
    print({name, searchAlgorithmName(algorithm), t, wall}, json);
  }
  auto start = std::chrono::steady_clock::now();
  Partition p = searchHetero(model, options);
  double t = model.evaluate(p).iterationSeconds();
  double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  print({name, "hetero", t, wall}, json);
  double speedup = bestEqual / t;
  if (!json)
    std::printf("  hetero vs best equal-layer plan: %.2fx\n", speedup);
  return speedup;
}

} // namespace

int main(int argc, char **argv) {
  bool json = false;
  int microBatches = 32;
  uint64_t seed = 0;
  std::string dir = dtfm::bench::defaultScenariosDir();
  dtfm::bench::Flags flags("bench-hetero", argc, argv);
  while (flags.next())
    if (flags.is("--json"))
      json = true;
    else if (flags.is("--micro-batches"))
      microBatches = flags.integer<int>(1);
    else if (flags.is("--seed"))
      seed = flags.integer<uint64_t>(0);
    else if (flags.is("--scenarios"))
      dir = flags.text();
    else
      flags.unknown();
  Workload workload = gptWorkload();

  Cluster base;
  std::string error;
  std::string preset =
      std::string(DTFM_SOURCE_DIR) + "/examples/clusters/dc-ondemand.textproto";
  if (!loadClusterFile(preset, base, error)) {
    std::fprintf(stderr, "bench-hetero: error: %s\n", error.c_str());
    return 1;
  }
  Cluster mixedSpeed = base, mixedMemory = base;
  mixedSpeed.name = "mixed-speed";
  mixedMemory.name = "mixed-memory";
  for (size_t d = 32; d < base.size(); ++d) {
    mixedSpeed.devices[d].peakFlops /= 4;
    mixedMemory.devices[d].memoryBytes = 5e9;
  }
  runScenario("mixed-speed", mixedSpeed, workload, microBatches, seed, json);
  runScenario("mixed-memory", mixedMemory, workload, microBatches, seed, json);

  for (const std::string &prefix : dtfm::bench::paperScenarios()) {
    Cluster cluster;
    if (!dtfm::bench::loadScenario("bench-hetero", dir, prefix, cluster))
      break;
    runScenario(prefix, cluster, workload, microBatches, seed, json);
  }
  return 0;
}
