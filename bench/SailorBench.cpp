//===- SailorBench.cpp - dtfm's plans on Sailor's two experiments ---------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Sailor (SOSP'25) planned OPT-350M on two clusters that ../shared/clusters
// describes to dtfm (its README: the model, the global batch of 1024, the
// micro-batch sizes 1, 2, 4, 8 Sailor profiles, and Sailor's own plans and
// simulated iterations). This plans the same model on each through the
// whole pipeline (--dtfm-plan algorithm=hetero programs=true) without
// tensor parallelism and with the degree chosen by the shape search
// (tp=0: one degree, or a degree per stage, column t 0), and at Sailor's
// degree (tp=4), and prints for each: the plan in
// Sailor's terms (per stage: its decoder layers, D_DP, the tensor-parallel
// degree and the device types), the planner's predicted iteration, the
// simulator's (dtfm-run --simulate), the shape search's own time and the
// whole planning time, next to Sailor's plan's simulated iteration.
//
// Then the same search once more with the roofline (Planner/Roofline.h):
// each device type gets its HBM bandwidth and a speed refitted so that a
// decoder layer keeps the time Sailor profiled (Sailor's speeds are a
// layer's FLOPs over its time, memory-bound parts included); the
// embedding, the head and the loss are then timed op by op. It prints the
// fit and the head's time in decoder layers per type, next to what
// Sailor's profiles say (about 1 on an A100, 2 on a V100).
//
// Then, on DT-FM's five scenarios (../shared/scenarios, DTFM_SCENARIOS_DIR;
// GPT3-1.3B on 64 V100s) and on bench-shape's mixed clusters (BenchSupport.h
// mixedClusters: 8-GPU nodes with slower GPUs or a far region, and 48 GPUs
// of four generations), the shape search without TP and with the degree
// searched, side by side: TP must never be predicted slower.
//
//   bench-sailor [--json] [--clusters DIR] [--budget S]
//
//===----------------------------------------------------------------------===//

#include "BenchSupport.h"
#include "PlanRunner.h"

#include "dtfm/Analysis/CostAnalysis.h"
#include "dtfm/Passes/Passes.h"
#include "dtfm/Planner/Roofline.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace {

using dtfm::bench::jsonNumber;

struct Experiment {
  const char *name, *file;
  double sailorSeconds; ///< Sailor's plan in Sailor's simulator (README)
  const char *sailorPlan;
};
constexpr Experiment kExperiments[] = {
    {"geo", "sailor-geo.textproto", 2.41,
     "mb 8, PP 1, 32 x TP 4 (one VM each), us-west1-b unused"},
    {"het", "sailor-het.textproto", 5.88,
     "mb 2, PP 2 (13 + 13 layers), DP 27: stage 0 24 V100 TP 4 + 3 A100, "
     "stage 1 27 A100"}};

/// OPT-350M as Sailor trains it (the clusters' README).
mlir::dtfm::GptConfig opt350m() {
  mlir::dtfm::GptConfig config;
  config.name = "opt-350m";
  config.layers = 24;
  config.hidden = 1024;
  config.heads = 16;
  config.seqLen = 2048;
  config.vocab = 50272;
  config.microBatch = 1;
  config.dtype = "f32";
  return config;
}

/// Sustained HBM bandwidth per device type (bytes/s): NVIDIA's figures for
/// the A100-40GB and the V100-16GB (SXM2), the GPUs of Sailor's clusters.
constexpr std::pair<const char *, double> kMemoryBandwidth[] = {
    {"a100", 1.555e12}, {"v100", 0.9e12}};

/// "a100" of "c1a_a100_vm3_g2": the device's type, as the files name them.
std::string deviceType(const std::string &device) {
  std::smatch match;
  static const std::regex type("(a100|v100)");
  return std::regex_search(device, match, type) ? match.str(1) : device;
}

struct Outcome {
  std::string error;
  int tp = 1, dp = 0, pp = 0;
  int64_t microBatchSize = 0;
  double predicted = 0, simulated = 0, searchSeconds = 0, planSeconds = 0;
  std::string stages; ///< Sailor's terms
};

double attrNumber(const dtfm::proto::Plan &plan, const char *attr,
                  const char *field) {
  auto it = plan.module_attrs().find(attr);
  if (it == plan.module_attrs().end())
    return 0;
  std::smatch match;
  std::regex number(std::string(field) + " = ([0-9.e+-]+)");
  const std::string &text = it->second.mlir();
  return std::regex_search(text, match, number) ? std::stod(match.str(1)) : 0;
}

/// What the shape search alone chose (--dtfm-choose-shape after the
/// costs), and its time; seconds < 0 when it failed.
struct Searched {
  double seconds = -1, predicted = 0;
  int64_t tp = 1;
};
Searched searchShape(const mlir::dtfm::GptConfig &model,
                     const std::string &clusterFile, const std::string &shape,
                     int tp) {
  Searched out;
  mlir::DialectRegistry registry;
  mlir::dtfm::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::dtfm::buildGptModule(&context, model);
  mlir::PassManager pm(&context, mlir::ModuleOp::getOperationName());
  // A fixed degree shards the model first, as --dtfm-plan does.
  std::string pipeline =
      "dtfm-import-cluster{file=" + clusterFile + "}," +
      (tp > 1 ? "dtfm-tensor-parallel{degree=" + std::to_string(tp) + "},"
              : "") +
      "dtfm-annotate-costs";
  mlir::PassManager prepare(&context, mlir::ModuleOp::getOperationName());
  if (mlir::failed(mlir::parsePassPipeline(pipeline, prepare)) ||
      mlir::failed(prepare.run(*module)))
    return out;
  if (mlir::failed(mlir::parsePassPipeline(
          "dtfm-choose-shape{" + shape + (tp == 0 ? " tensor-parallel=0" : "") +
              "}",
          pm)))
    return out;
  auto start = std::chrono::steady_clock::now();
  if (mlir::failed(pm.run(*module)))
    return out;
  out.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (auto chosen = (*module)->getAttrOfType<mlir::dtfm::ShapeAttr>(
          mlir::dtfm::kShapeAttrName)) {
    out.predicted = chosen.getIterationS();
    out.tp = chosen.getTp();
  }
  return out;
}

/// DT-FM's five scenarios (64 V100s, GPT3-1.3B, global batch 256, nodes
/// inferred from the links) and bench-shape's mixed clusters, the shape
/// search without TP and with the degree searched side by side: TP must
/// never be predicted slower.
void compareOnScenarios(bool json, double budget) {
  std::string dir = dtfm::bench::defaultScenariosDir();
  llvm::SmallString<64> tempDir;
  if (llvm::sys::fs::createUniqueDirectory("bench-sailor", tempDir)) {
    std::fprintf(stderr, "bench-sailor: cannot create a temporary directory\n");
    return;
  }
  mlir::dtfm::GptConfig model = *mlir::dtfm::getGptPreset("gpt3-1.3b");
  std::string shape = "global-batch=256 micro-batch-sizes=1,2,4 budget=" +
                      std::to_string(budget);
  if (!json)
    std::printf("\nDT-FM's scenarios (64 V100s) and bench-shape's mixed "
                "clusters: GPT3-1.3B, global batch 256; the shape search "
                "without TP and with the degree searched\n"
                "  %-18s %12s %12s %3s %8s\n",
                "cluster", "no TP s", "searched s", "tp", "ratio");
  auto compare = [&](const std::string &name, const std::string &file) {
    Searched without = searchShape(model, file, shape, 1);
    Searched searched = searchShape(model, file, shape, 0);
    bool ok = without.seconds >= 0 && searched.seconds >= 0;
    double ratio = ok && searched.predicted > 0
                       ? without.predicted / searched.predicted
                       : 0;
    if (json)
      std::printf("{\"scenario\":\"%s\",\"ok\":%s,\"no_tp_s\":%s,"
                  "\"searched_s\":%s,\"tp\":%lld,\"ratio\":%s}\n",
                  name.c_str(), ok ? "true" : "false",
                  jsonNumber(without.predicted).c_str(),
                  jsonNumber(searched.predicted).c_str(),
                  static_cast<long long>(searched.tp),
                  jsonNumber(ratio).c_str());
    else if (!ok)
      std::printf("  %-18s failed\n", name.c_str());
    else
      std::printf("  %-18s %12.3f %12.3f %3lld %7.3fx\n", name.c_str(),
                  without.predicted, searched.predicted,
                  static_cast<long long>(searched.tp), ratio);
  };
  for (const std::string &prefix : dtfm::bench::paperScenarios()) {
    std::string clusterFile =
        std::string(tempDir) + "/" + prefix + ".textproto";
    if (!dtfm::bench::writeScenarioCluster("bench-sailor", dir, prefix,
                                           clusterFile))
      break;
    compare(prefix, clusterFile);
    llvm::sys::fs::remove(clusterFile);
  }
  std::vector<dtfm::planner::Cluster> mixed;
  std::string error;
  if (!dtfm::bench::mixedClusters(mixed, error))
    std::fprintf(stderr, "bench-sailor: skipping the mixed clusters: %s\n",
                 error.c_str());
  for (const dtfm::planner::Cluster &cluster : mixed) {
    std::string clusterFile =
        std::string(tempDir) + "/" + cluster.name + ".textproto";
    if (!dtfm::planner::writeClusterFile(cluster, clusterFile, error)) {
      std::fprintf(stderr, "bench-sailor: %s\n", error.c_str());
      continue;
    }
    compare(cluster.name, clusterFile);
    for (const char *suffix : {"", ".delay_ms.csv", ".bandwidth_gbps.csv"})
      llvm::sys::fs::remove(clusterFile + suffix);
  }
  llvm::sys::fs::remove(tempDir);
}

/// One device type's roofline fit: its bandwidth, the file's speed and the
/// refitted one, and a decoder layer's and the head's time per micro-batch
/// of one sequence (forward and backward).
struct TypeFit {
  std::string type;
  double bandwidth = 0, fileSpeed = 0, speed = 0;
  double layerSeconds = 0, headSeconds = 0, headFlopShare = 0;
};

/// Writes `clusterFile` with the roofline to `out` (its CSV matrices named
/// by absolute paths): per device type, kMemoryBandwidth and the speed at
/// which OPT-350M's decoder layer keeps the file speed's time. False with
/// a message on stderr when a type has no bandwidth or no speed fits.
bool writeRooflineCluster(const std::string &clusterFile,
                          const std::string &out, std::vector<TypeFit> &fits) {
  mlir::DialectRegistry registry;
  mlir::dtfm::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::dtfm::buildGptModule(&context, opt350m());
  mlir::dtfm::CostAnalysis costs(module->getOperation());
  mlir::FailureOr<llvm::SmallVector<mlir::dtfm::LayerBlock>> chain =
      mlir::dtfm::buildLayerChain(costs);
  if (!costs.isValid() || mlir::failed(chain)) {
    std::fprintf(stderr, "bench-sailor: OPT-350M does not cost\n");
    return false;
  }
  const mlir::dtfm::LayerBlock *layer = nullptr, *head = nullptr;
  for (const mlir::dtfm::LayerBlock &block : *chain) {
    if (!layer && block.layer.rfind("layer.", 0) == 0)
      layer = &block;
    if (block.layer == "head")
      head = &block;
  }
  if (!layer || !head)
    return false;
  auto workOf = [](const mlir::dtfm::LayerBlock &block) {
    dtfm::planner::RooflineWork work = block.forwardWork;
    work.add(block.backwardWork);
    return work;
  };
  dtfm::planner::RooflineWork layerWork = workOf(*layer),
                              headWork = workOf(*head);
  std::ifstream in(clusterFile);
  std::string dir = clusterFile.substr(0, clusterFile.find_last_of('/') + 1);
  std::ofstream written(out);
  static const std::regex speedField("peak_flops: ([0-9.e+-]+)");
  static const std::regex csvField("(_csv: \")([^\"/][^\"]*)\"");
  std::string line;
  while (std::getline(in, line)) {
    std::smatch match;
    if (line.rfind("devices {", 0) == 0 &&
        std::regex_search(line, match, speedField)) {
      std::string type = deviceType(line);
      auto fit = std::find_if(fits.begin(), fits.end(),
                              [&](const TypeFit &f) { return f.type == type; });
      if (fit == fits.end()) {
        TypeFit f;
        f.type = type;
        for (const auto &[name, bandwidth] : kMemoryBandwidth)
          if (type == name)
            f.bandwidth = bandwidth;
        f.fileSpeed = std::stod(match.str(1));
        f.layerSeconds = layerWork.flops() / f.fileSpeed;
        f.speed = dtfm::planner::speedForSeconds(layerWork, f.layerSeconds,
                                                 f.bandwidth);
        double ridge = dtfm::planner::ridgeOf(f.speed, f.bandwidth);
        f.headSeconds = f.speed > 0 ? headWork.flopsAt(ridge) / f.speed : 0;
        f.headFlopShare = headWork.flops() / layerWork.flops();
        if (!(f.bandwidth > 0) || !(f.speed > 0)) {
          std::fprintf(stderr,
                       "bench-sailor: no roofline fit for device type %s\n",
                       type.c_str());
          return false;
        }
        fits.push_back(f);
        fit = fits.end() - 1;
      }
      char speed[64];
      std::snprintf(speed, sizeof(speed), "peak_flops: %.17g", fit->speed);
      line = std::regex_replace(line, speedField, speed);
      size_t close = line.rfind('}');
      char bandwidth[64];
      std::snprintf(bandwidth, sizeof(bandwidth),
                    "memory_bytes_per_second: %.17g ", fit->bandwidth);
      line.insert(close, bandwidth);
    }
    line = std::regex_replace(line, csvField, "$1" + dir + "$2\"");
    written << line << "\n";
  }
  return static_cast<bool>(written);
}

Outcome plan(const std::string &clusterFile, int tp, double budget) {
  std::string shape = "global-batch=1024 micro-batch-sizes=1,2,4,8 budget=" +
                      std::to_string(budget);
  Outcome out;
  // Searched first, as a fresh dtfm-opt does: after planning, this process's
  // heap made the same search up to 1.6x slower.
  out.searchSeconds = searchShape(opt350m(), clusterFile, shape, tp).seconds;
  dtfm::bench::PlannedGpt planned;
  if (!dtfm::bench::planGpt(opt350m(), clusterFile,
                            "algorithm=hetero programs=true tp=" +
                                std::to_string(tp) + " " + shape,
                            planned, out.error)) {
    size_t end = out.error.find("; ");
    if (end != std::string::npos)
      out.error.resize(end);
    return out;
  }
  out.planSeconds = planned.planSeconds;
  out.simulated = planned.simulated.iterationSeconds;
  out.predicted = attrNumber(planned.plan, "dtfm.shape", "iteration_s");
  out.microBatchSize = static_cast<int64_t>(
      attrNumber(planned.plan, "dtfm.shape", "micro_batch_size"));
  // Per stage: layers (of pipeline 0, rank 0), the pipelines (D_DP), the
  // degree and the device types of every member.
  std::map<int64_t, std::set<std::string>> layers;
  std::map<int64_t, std::set<int64_t>> pipelines;
  std::map<int64_t, std::map<std::string, int>> types;
  std::map<int64_t, int> degreeOf;
  for (const dtfm::proto::DeviceProgram &p : planned.plan.programs()) {
    degreeOf[p.stage()] = std::max(degreeOf[p.stage()],
                                   std::max(1, p.tp_group_size()));
    pipelines[p.stage()].insert(p.pipeline());
    ++types[p.stage()][deviceType(p.device())];
    if (p.pipeline() != 0 || p.tp_rank() != 0)
      continue;
    for (const dtfm::proto::PlanOp &op : p.ops()) {
      auto layer = op.attrs().find("dtfm.layer");
      if (layer != op.attrs().end() &&
          layer->second.s().rfind("layer.", 0) == 0)
        layers[p.stage()].insert(layer->second.s());
    }
  }
  // One degree, or 0: a degree per stage.
  std::set<int> degrees;
  for (const auto &entry : degreeOf)
    degrees.insert(entry.second);
  out.tp = degrees.size() == 1 ? *degrees.begin() : 0;
  out.pp = static_cast<int>(pipelines.size());
  out.dp = pipelines.empty() ? 0 : static_cast<int>(pipelines[0].size());
  for (const auto &[stage, names] : layers) {
    out.stages += (out.stages.empty() ? "" : "; ") + std::string("stage ") +
                  std::to_string(stage) + ": " + std::to_string(names.size()) +
                  " layers, DP " + std::to_string(pipelines[stage].size()) +
                  ", TP " + std::to_string(degreeOf[stage]) + ",";
    for (const auto &[type, count] : types[stage])
      out.stages += " " + std::to_string(count) + " " + type;
  }
  return out;
}

} // namespace

int main(int argc, char **argv) {
  bool json = false;
  double budget = 10;
  std::string clustersDir = dtfm::bench::defaultScenariosDir() + "/../clusters";
  if (const char *env = std::getenv("DTFM_CLUSTERS_DIR"))
    clustersDir = env;
  mlir::dtfm::registerAllPasses();
  dtfm::bench::Flags flags("bench-sailor", argc, argv);
  while (flags.next())
    if (flags.is("--json"))
      json = true;
    else if (flags.is("--clusters"))
      clustersDir = flags.text();
    else if (flags.is("--budget"))
      budget = flags.number(0.1);
    else
      flags.unknown();
  if (!std::ifstream(clustersDir + "/" + kExperiments[0].file)) {
    std::fprintf(stderr,
                 "bench-sailor: error: %s/%s not found (set "
                 "DTFM_CLUSTERS_DIR or --clusters to ../shared/clusters)\n",
                 clustersDir.c_str(), kExperiments[0].file);
    return 1;
  }
  if (!json)
    std::printf("OPT-350M, global batch 1024, micro-batch sizes 1, 2, 4, 8; "
                "Sailor's clusters (%s)\n",
                clustersDir.c_str());
  llvm::SmallString<64> tempDir;
  if (llvm::sys::fs::createUniqueDirectory("bench-sailor", tempDir)) {
    std::fprintf(stderr, "bench-sailor: cannot create a temporary directory\n");
    return 1;
  }
  for (const Experiment &e : kExperiments) {
    std::string file = clustersDir + "/" + e.file;
    std::string rooflineFile = std::string(tempDir) + "/" + e.file;
    std::vector<TypeFit> fits;
    if (!writeRooflineCluster(file, rooflineFile, fits))
      return 1;
    if (!json)
      std::printf("\n%s: Sailor's plan %.2f s (%s)\n  %-8s %-3s %-3s %8s "
                  "%10s %10s %9s %7s  %s\n",
                  e.name, e.sailorSeconds, e.sailorPlan, "tp", "t", "mb",
                  "dp x pp", "predicted", "simulated", "search s", "plan s",
                  "stages");
    // Without, searched, at Sailor's degree (4, a VM per group), and
    // searched with the roofline.
    struct Mode {
      const char *name;
      int tp;
      const std::string *file;
    };
    for (Mode m :
         {Mode{"none", 1, &file}, Mode{"search", 0, &file},
          Mode{"fixed 4", 4, &file}, Mode{"roofline", 0, &rooflineFile}}) {
      int tp = m.tp;
      const char *mode = m.name;
      Outcome o = plan(*m.file, tp, budget);
      if (json) {
        std::printf("{\"experiment\":\"%s\",\"tp_mode\":\"%s\",\"ok\":%s,"
                    "\"error\":\"%s\",\"tp\":%d,\"dp\":%d,\"pp\":%d,"
                    "\"micro_batch_size\":%lld,\"predicted_s\":%s,"
                    "\"simulated_s\":%s,\"search_s\":%s,\"plan_s\":%s,"
                    "\"sailor_s\":%s,\"stages\":\"%s\"}\n",
                    e.name, mode, o.error.empty() ? "true" : "false",
                    dtfm::jsonEscape(o.error).c_str(), o.tp, o.dp, o.pp,
                    static_cast<long long>(o.microBatchSize),
                    jsonNumber(o.predicted).c_str(),
                    jsonNumber(o.simulated).c_str(),
                    jsonNumber(o.searchSeconds).c_str(),
                    jsonNumber(o.planSeconds).c_str(),
                    jsonNumber(e.sailorSeconds).c_str(),
                    dtfm::jsonEscape(o.stages).c_str());
        continue;
      }
      if (!o.error.empty()) {
        std::printf("  %-7s failed: %s\n", mode, o.error.c_str());
        continue;
      }
      std::printf("  %-8s %-3d %-3lld %3d x %-3d %10.3f %10.3f %9.2f %7.1f  "
                  "%s\n",
                  mode, o.tp, static_cast<long long>(o.microBatchSize), o.dp,
                  o.pp, o.predicted, o.simulated, o.searchSeconds,
                  o.planSeconds, o.stages.c_str());
    }
    for (const TypeFit &f : fits) {
      if (json) {
        std::printf("{\"experiment\":\"%s\",\"roofline_fit\":\"%s\","
                    "\"memory_bytes_per_second\":%s,\"file_speed\":%s,"
                    "\"fitted_speed\":%s,\"layer_s\":%s,\"head_s\":%s,"
                    "\"head_layers\":%s,\"head_flop_layers\":%s}\n",
                    e.name, f.type.c_str(), jsonNumber(f.bandwidth).c_str(),
                    jsonNumber(f.fileSpeed).c_str(),
                    jsonNumber(f.speed).c_str(),
                    jsonNumber(f.layerSeconds).c_str(),
                    jsonNumber(f.headSeconds).c_str(),
                    jsonNumber(f.headSeconds / f.layerSeconds).c_str(),
                    jsonNumber(f.headFlopShare).c_str());
        continue;
      }
      std::printf("  roofline %s: %.0f GB/s, speed %.2f -> %.2f TFLOP/s "
                  "(a layer keeps %.1f ms); head %.1f ms = %.2f layers "
                  "(%.2f by FLOPs)\n",
                  f.type.c_str(), f.bandwidth / 1e9, f.fileSpeed / 1e12,
                  f.speed / 1e12, f.layerSeconds * 1e3, f.headSeconds * 1e3,
                  f.headSeconds / f.layerSeconds, f.headFlopShare);
    }
    llvm::sys::fs::remove(rooflineFile);
  }
  llvm::sys::fs::remove(tempDir);
  compareOnScenarios(json, budget);
  return 0;
}
