//===- MemoryBench.cpp - What fits, with and without the memory options ---===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// GPT-3 models on clusters of 16 GB and 24 GB devices (64 of them, one data
// center) and on the DT-FM paper's five scenarios (64 x 16 GB), planned by
// the whole pipeline (--dtfm-plan algorithm=hetero programs=true with a
// global batch) four ways: without the memory options, with sharded
// optimizer state only, with activation recomputation only, and with both
// as the planner chooses them (auto). For each: the shape, the largest
// device peak as the runtime allocates it (Plan/MemoryModel.h) against
// the capacity, the options the plan took, and the simulated iteration.
// Then the largest model of the GPT-3 family (Brown et al. 2020, Table 2.1:
// 125M ... 175B) each cluster can train without and with the options.
//
//   bench-memory [--json] [--models 1.3b,6.7b,13b] [--global-batch N]
//                [--budget S] [--scenarios DIR] [--no-scenarios]
//
//===----------------------------------------------------------------------===//

#include "BenchSupport.h"
#include "PlanRunner.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using dtfm::bench::jsonNumber;

/// GPT-3's sizes (Brown et al. 2020, Table 2.1), in dtfm's GPT shape: the
/// presets' sequence, vocabulary and f16, one sequence per micro-batch.
struct Size {
  const char *name;
  int64_t layers, hidden, heads;
};
constexpr Size kGpt3Family[] = {
    {"125m", 12, 768, 12},   {"350m", 24, 1024, 16},
    {"760m", 24, 1536, 16},  {"1.3b", 24, 2048, 16},
    {"2.7b", 32, 2560, 32},  {"6.7b", 32, 4096, 32},
    {"13b", 40, 5120, 40},   {"175b", 96, 12288, 96}};

mlir::dtfm::GptConfig configOf(const Size &size) {
  mlir::dtfm::GptConfig config = *mlir::dtfm::getGptPreset("gpt3-1.3b");
  config.name = std::string("gpt3-") + size.name;
  config.layers = size.layers;
  config.hidden = size.hidden;
  config.heads = size.heads;
  return config;
}

const Size *sizeNamed(const std::string &name) {
  for (const Size &size : kGpt3Family)
    if (name == size.name)
      return &size;
  return nullptr;
}

/// Parameters of the model (the importer's count).
double parameterCount(const mlir::dtfm::GptConfig &c) {
  double h = static_cast<double>(c.hidden);
  return static_cast<double>(c.vocab) * h + static_cast<double>(c.seqLen) * h +
         static_cast<double>(c.layers) * (12 * h * h + 13 * h) + 2 * h;
}

struct Options {
  const char *name, *flags;
};
constexpr Options kNone{"none", "shard-state=none recompute=none"};
constexpr Options kOptionSets[] = {
    kNone,
    {"shard", "shard-state=auto recompute=none"},
    {"recompute", "shard-state=none recompute=auto"},
    {"both", "shard-state=auto recompute=auto"}};
constexpr const Options &kBoth = kOptionSets[3];

struct Outcome {
  bool fits = false;
  std::string error;
  int dp = 0, pp = 0;
  double peakBytes = 0, capacityBytes = 0, iterationSeconds = 0;
  int sharded = 0, recomputed = 0, devices = 0;
  double planSeconds = 0;
};

Outcome plan(const mlir::dtfm::GptConfig &config,
             const std::string &clusterFile, const Options &options,
             int64_t globalBatch, double budget) {
  std::string flags = "algorithm=hetero programs=true "
                      "simulate-candidates=false global-batch=" +
                      std::to_string(globalBatch) +
                      " budget=" + std::to_string(budget) + " " + options.flags;
  dtfm::bench::PlannedGpt planned;
  Outcome out;
  if (!dtfm::bench::planGpt(config, clusterFile, flags, planned, out.error)) {
    // The planner's first diagnostic says why.
    size_t end = out.error.find("; ");
    if (end != std::string::npos)
      out.error.resize(end);
    return out;
  }
  out.fits = true;
  out.planSeconds = planned.planSeconds;
  out.iterationSeconds = planned.simulated.iterationSeconds;
  out.capacityBytes = 1e300;
  for (const dtfm::plan::DeviceMemory &m : planned.memory) {
    out.peakBytes = std::max(out.peakBytes, m.predicted.total());
    out.capacityBytes = std::min(out.capacityBytes, m.capacityBytes);
    out.sharded += m.predicted.shardedState;
  }
  for (const dtfm::proto::DeviceProgram &p : planned.plan.programs()) {
    out.recomputed += p.recompute();
    out.pp = std::max<int>(out.pp, static_cast<int>(p.stage()) + 1);
  }
  out.devices = planned.plan.programs_size();
  out.dp = out.pp > 0 ? out.devices / out.pp : 0;
  return out;
}

std::string writeCluster(const std::string &dir, const std::string &name,
                         double memoryBytes, const std::string &scenarioDir,
                         const std::string &prefix) {
  std::string path = dir + "/" + name + ".textproto";
  std::ofstream out(path);
  out << "name: \"" << name << "\"\n"
      << "devices { name: \"gpu\" count: 64 peak_flops: 125e12 "
      << "memory_bytes: " << memoryBytes << " }\n";
  if (prefix.empty())
    out << "intra_region { delay_ms: 0.1 bandwidth_gbps: 25 }\n";
  else
    out << "delay_matrix_csv: \"" << scenarioDir << "/" << prefix
        << "_delay_ms.csv\"\n"
        << "bandwidth_matrix_csv: \"" << scenarioDir << "/" << prefix
        << "_bandwidth_gbps.csv\"\n";
  return path;
}

void printOutcome(bool json, const std::string &cluster,
                  const std::string &model, const Options &options,
                  const Outcome &o) {
  if (json) {
    std::printf("{\"cluster\":\"%s\",\"model\":\"%s\",\"options\":\"%s\","
                "\"fits\":%s,\"dp\":%d,\"pp\":%d,\"peak_bytes\":%s,"
                "\"capacity_bytes\":%s,\"sharded_devices\":%d,"
                "\"recomputed_devices\":%d,\"iteration_s\":%s,"
                "\"plan_s\":%s}\n",
                cluster.c_str(), model.c_str(), options.name,
                o.fits ? "true" : "false", o.dp, o.pp,
                jsonNumber(o.fits ? o.peakBytes : 0).c_str(),
                jsonNumber(o.fits ? o.capacityBytes : 0).c_str(), o.sharded,
                o.recomputed,
                o.fits ? jsonNumber(o.iterationSeconds).c_str() : "null",
                jsonNumber(o.planSeconds).c_str());
    return;
  }
  if (!o.fits) {
    std::printf("  %-6s %-10s does not fit: %s\n", model.c_str(), options.name,
                o.error.c_str());
    return;
  }
  std::printf("  %-6s %-10s %3d x %-3d %8.2f %8.2f %8d %10d %12.3f\n",
              model.c_str(), options.name, o.dp, o.pp, o.peakBytes / 1e9,
              o.capacityBytes / 1e9, o.sharded, o.recomputed,
              o.iterationSeconds);
}

} // namespace

int main(int argc, char **argv) {
  bool json = false, scenarios = true;
  std::vector<std::string> models = {"1.3b", "6.7b", "13b"};
  int64_t globalBatch = 64;
  double budget = 3;
  std::string scenarioDir = dtfm::bench::defaultScenariosDir();
  mlir::dtfm::registerAllPasses();
  dtfm::bench::Flags flags("bench-memory", argc, argv);
  while (flags.next())
    if (flags.is("--json"))
      json = true;
    else if (flags.is("--models"))
      models = flags.textList();
    else if (flags.is("--global-batch"))
      globalBatch = flags.integer<int64_t>(1, 1 << 20);
    else if (flags.is("--budget"))
      budget = flags.number(0.1);
    else if (flags.is("--scenarios"))
      scenarioDir = flags.text();
    else if (flags.is("--no-scenarios"))
      scenarios = false;
    else
      flags.unknown();
  for (const std::string &model : models)
    if (!sizeNamed(model)) {
      std::fprintf(stderr,
                   "bench-memory: error: --models: unknown GPT-3 size '%s' "
                   "(expected 125m, 350m, 760m, 1.3b, 2.7b, 6.7b, 13b or "
                   "175b)\n",
                   model.c_str());
      return 2;
    }

  char dirTemplate[] = "/tmp/bench-memory-XXXXXX";
  const char *dir = ::mkdtemp(dirTemplate);
  if (!dir) {
    std::fprintf(stderr, "bench-memory: error: cannot make a temporary "
                         "directory\n");
    return 1;
  }
  struct ClusterCase {
    std::string name, file;
  };
  std::vector<ClusterCase> clusters = {
      {"64x16GB", writeCluster(dir, "64x16GB", 16e9, "", "")},
      {"64x24GB", writeCluster(dir, "64x24GB", 24e9, "", "")}};
  if (scenarios)
    for (const std::string &prefix : dtfm::bench::paperScenarios()) {
      if (!std::ifstream(scenarioDir + "/" + prefix + "_delay_ms.csv")) {
        std::fprintf(stderr,
                     "bench-memory: skipping the DT-FM scenarios: %s/%s "
                     "not found (set DTFM_SCENARIOS_DIR or --scenarios)\n",
                     scenarioDir.c_str(), prefix.c_str());
        break;
      }
      clusters.push_back({prefix, writeCluster(dir, prefix, 16e9, scenarioDir,
                                               prefix)});
    }

  for (const ClusterCase &cluster : clusters) {
    if (!json)
      std::printf("\n%s (64 devices, global batch %lld)\n  %-6s %-10s %9s "
                  "%8s %8s %8s %10s %12s\n",
                  cluster.name.c_str(), static_cast<long long>(globalBatch),
                  "model", "options", "dp x pp", "peak GB", "cap GB",
                  "sharded", "recomputed", "iteration_s");
    for (const std::string &model : models)
      for (const Options &options : kOptionSets) {
        Outcome o = plan(configOf(*sizeNamed(model)), cluster.file, options,
                         globalBatch, budget);
        printOutcome(json, cluster.name, model, options, o);
      }
  }

  // The largest of the family each cluster trains, without and with the
  // options (the data-center clusters: the scenarios differ in links only).
  if (!json)
    std::printf("\nlargest trainable GPT-3 (global batch %lld)\n  %-10s "
                "%-18s %-18s %s\n",
                static_cast<long long>(globalBatch), "cluster",
                "without options", "with options", "ratio");
  for (size_t c = 0; c < 2; ++c) {
    const ClusterCase &cluster = clusters[c];
    const Size *largest[2] = {nullptr, nullptr};
    for (int with = 0; with < 2; ++with)
      for (const Size &size : kGpt3Family) {
        Outcome o = plan(configOf(size), cluster.file, with ? kBoth : kNone,
                         globalBatch, budget);
        if (!o.fits)
          break; // the next ones are larger
        largest[with] = &size;
      }
    auto params = [](const Size *s) {
      return s ? parameterCount(configOf(*s)) : 0.0;
    };
    double ratio = params(largest[0]) > 0
                       ? params(largest[1]) / params(largest[0])
                       : 0;
    if (json)
      std::printf("{\"cluster\":\"%s\",\"largest_without\":\"%s\","
                  "\"largest_with\":\"%s\",\"parameters_without\":%s,"
                  "\"parameters_with\":%s,\"ratio\":%s}\n",
                  cluster.name.c_str(),
                  largest[0] ? largest[0]->name : "",
                  largest[1] ? largest[1]->name : "",
                  jsonNumber(params(largest[0])).c_str(),
                  jsonNumber(params(largest[1])).c_str(),
                  ratio > 0 ? jsonNumber(ratio).c_str() : "null");
    else
      std::printf("  %-10s %-18s %-18s %.2fx\n", cluster.name.c_str(),
                  largest[0] ? largest[0]->name : "(none)",
                  largest[1] ? largest[1]->name : "(none)", ratio);
  }
  for (const ClusterCase &cluster : clusters)
    std::remove(cluster.file.c_str());
  ::rmdir(dir);
  return 0;
}
