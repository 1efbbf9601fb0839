//===- ShapeBench.cpp - shape-searching planner vs the fixed 8 x 8 plan ---===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Predicted iteration time (lib/Planner/Hetero.h's model) of GPT3-1.3B for
// one global batch (default 256 sequences = 8 pipelines x 32 micro-batches
// of 1) on 64 devices:
//
//   fixed-8x8   D_DP = D_PP = 8 on every device, micro-batch 1, equal
//               stages: the best of rank order, OP-Fence and DT-FM's
//               genetic layout (what DT-FM plans);
//   shape       the shape search (lib/Planner/ShapeSearch.h): devices used,
//               D_DP, D_PP, micro-batch size and count, uneven stages
//               (JSON: bound_ratio, its time over the lower bound);
//   bound       the lower bound on any plan's time (lib/Planner/
//               LowerBound.h) at the shape's local steps, and the shape it
//               is reached at;
//
// on the DT-FM paper's five scenarios (../shared/scenarios; skipped with a
// message when absent) and on mixed clusters built from
// examples/clusters/dc-ondemand.textproto: `two-generations` (32 of the 64
// devices four times slower, 16 GB) and `far-region` (8 devices moved to a
// region behind 10 Mbit/s and 250 ms links); and on
// examples/clusters/mixed-regions.textproto (48 GPUs of four generations in
// eight regions) against the best plan on one of its devices.
//
// `--scale` adds a synthetic cluster of 1024 devices (32 regions of 32) with
// a 16 x larger global batch, for the search time (no fixed baseline).
//
// `--compress-ratio R` plans both for AdaTopK with target ratio R on the
// pipeline's transfers (what --dtfm-plan compress-ratio=R inserts).
//
// Data-parallel communication (issue 18): the fixed plan is today's dense,
// synchronous exchange after the backward (one bucket). The shape search
// plans with `--bucket-mb auto|MiB` (gradient buckets overlapping the last
// backward; default auto, 0 for one bucket), `--sync-every H|auto` (local
// steps, DiLoCo: parameters exchanged every H steps; default 0, every step;
// auto: H where exchanging every step costs over 10% of the pipeline; the
// JSON's sync_every is the H chosen)
// and `--dp-compression none|int8|topk:R|int4|auto` (gradients as int8 or
// top-k with error feedback, in every group or int8 where it pays; int4:
// local steps' exchange only);
// `--sync-fragments P --sync-overlap T` (with --sync-every H) plans local
// steps as Streaming DiLoCo: P fragments, each overlapping T steps;
// `--pp-compression none|int8|auto` sends the pipeline's activations and
// their gradients in 8 bits (SWARM), on every link or where it pays.
// `--schedule` plans the shape's pipeline with that schedule (default
// auto, as --dtfm-plan: 1F1B or ZB-H1 per shape, the JSON's schedule is
// the one chosen; 1f1b; zb-h1: zero bubble); the fixed 8 x 8 plan stays
// 1F1B, as DT-FM's.
//
//   bench-shape [--json] [--global-batch G] [--budget S] [--scale]
//               [--compress-ratio R] [--bucket-mb auto|MiB]
//               [--sync-every H|auto] [--sync-fragments P] [--sync-overlap T]
//               [--dp-compression none|int8|topk:R|int4|auto]
//               [--pp-compression none|int8|auto]
//               [--schedule 1f1b|zb-h1|gpipe|auto]
//               [--scenarios DIR]
//
//===----------------------------------------------------------------------===//

#include "BenchSupport.h"
#include "GptWorkload.h"

#include "dtfm/Planner/Buckets.h"
#include "dtfm/Planner/LowerBound.h"
#include "dtfm/Planner/ShapeSearch.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <string>

using namespace dtfm::planner;

namespace {

struct Row {
  std::string scenario;
  std::string algorithm;
  double iterationSeconds = 0;
  size_t devicesUsed = 0;
  double searchSeconds = 0;
  std::string shape;
  double compressRatio = 1;
  /// Data-parallel communication: the bucket cap option and local steps.
  std::string bucketMb = "0";
  int64_t syncEvery = 0;
  std::string dpCompression = "none";
  /// The shape's iteration over the lower bound (0: not a shape row).
  double boundRatio = 0;
  /// Local steps as Streaming DiLoCo: fragments and overlap.
  int64_t syncFragments = 1, syncOverlap = 0;
  /// The shape's micro-batch schedule ("" for other rows).
  std::string schedule;
};

void print(const Row &row, bool json) {
  if (json)
    std::printf(
        "{\"scenario\":\"%s\",\"algorithm\":\"%s\","
        "\"iteration_s\":%s,\"devices_used\":%zu,"
        "\"search_s\":%.4f,\"shape\":\"%s\",\"compress_ratio\":%g,"
        "\"bucket_mb\":\"%s\",\"overlap\":%s,\"sync_every\":%lld,"
        "\"dp_compression\":\"%s\",\"sync_fragments\":%lld,"
        "\"sync_overlap\":%lld%s%s}\n",
        row.scenario.c_str(), row.algorithm.c_str(),
        dtfm::bench::jsonNumber(row.iterationSeconds).c_str(), row.devicesUsed,
        row.searchSeconds, row.shape.c_str(), row.compressRatio,
        row.bucketMb.c_str(),
        row.bucketMb != "0" && row.syncEvery == 0 ? "true" : "false",
        static_cast<long long>(row.syncEvery), row.dpCompression.c_str(),
        static_cast<long long>(row.syncFragments),
        static_cast<long long>(row.syncOverlap),
        row.boundRatio > 0
            ? (",\"bound_ratio\":" + dtfm::bench::jsonNumber(row.boundRatio))
                  .c_str()
            : "",
        row.schedule.empty()
            ? ""
            : (",\"schedule\":\"" + row.schedule + "\"").c_str());
  else
    std::printf("  %-10s %12.3f %8zu %9.3f  %s\n", row.algorithm.c_str(),
                row.iterationSeconds, row.devicesUsed, row.searchSeconds,
                row.shape.c_str());
}

std::string describe(int dp, int pp, int64_t size, int microBatches) {
  return "dp " + std::to_string(dp) + " x pp " + std::to_string(pp) +
         ", micro-batch " + std::to_string(size) + " x " +
         std::to_string(microBatches);
}

/// The fixed plan: every device, 8 x 8, the model's micro-batch size, equal
/// stages; the best of rank order, OP-Fence and DT-FM's genetic layout.
double fixedPlan(const std::string &name, const Cluster &cluster,
                 const Workload &workload, int64_t globalBatch,
                 double compressRatio, bool json) {
  // The fixed shape: every device, 8 x 8, the model's micro-batch size.
  const int dp = 8, pp = 8;
  int microBatches =
      static_cast<int>(globalBatch / (dp * workload.microBatchSize));
  HeteroProblem fixed =
      dtfm::bench::heteroProblem(workload, cluster, dp, pp, microBatches);
  fixed.training.compression.targetRatio = compressRatio;
  fixed.training.bucketCapBytes = 0; // one exchange after the backward
  HeteroModel model(fixed);
  SearchOptions options;
  options.dataParallel = dp;
  options.pipelineParallel = pp;
  auto start = std::chrono::steady_clock::now();
  double baseline = std::numeric_limits<double>::infinity();
  for (SearchAlgorithm algorithm :
       {SearchAlgorithm::RankOrder, SearchAlgorithm::OpFence,
        SearchAlgorithm::Genetic})
    baseline = std::min(
        baseline, dtfm::bench::equalLayerSeconds(model, workload, algorithm,
                                                 options, microBatches));
  double baselineWall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  print({name, "fixed-8x8", baseline, cluster.size(), baselineWall,
         describe(dp, pp, workload.microBatchSize, microBatches),
         compressRatio},
        json);

  return baseline;
}

/// The shape search's data-parallel communication (bench flags).
struct Communication {
  std::string bucketMb = "auto";
  int64_t syncEvery = 0;
  /// Streaming DiLoCo: the exchange in fragments, each overlapping steps.
  int64_t syncFragments = 1, syncOverlap = 0;
  /// The pipeline's schedule; `chooseSchedule`: 1F1B or ZB-H1 per shape.
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  bool chooseSchedule = true; // --dtfm-plan's default
  CodecChoice dpCompression;
  CodecChoice ppCompression;
};

/// What a scenario's shape is compared with: DT-FM's fixed 8 x 8 plan, the
/// best plan on one device of the cluster (for clusters that are not 64
/// devices), or nothing (the scale test).
enum class Baseline { Fixed8x8, SingleDevice, None };

void runScenario(const std::string &name, const Cluster &cluster,
                 const Workload &workload, int64_t globalBatch, double budget,
                 double compressRatio, const Communication &communication,
                 bool json, Baseline against = Baseline::Fixed8x8) {
  if (!json)
    std::printf("\n%s\n  %-10s %12s %8s %9s  %s\n", name.c_str(), "plan",
                "iteration_s", "devices", "search_s", "shape");
  double baseline = std::numeric_limits<double>::infinity();
  if (against == Baseline::Fixed8x8)
    baseline =
        fixedPlan(name, cluster, workload, globalBatch, compressRatio, json);

  ShapeProblem problem;
  problem.cluster = &cluster;
  problem.workload = workload;
  problem.training.compression.targetRatio = compressRatio;
  // As the fixed shape (GptWorkload.h): DT-FM's fp16 state.
  problem.training.stages.stateBytesPerParameterByte = 4;
  std::string error;
  if (!parseBucketCap(communication.bucketMb, problem.training.bucketCapBytes,
                      error)) {
    std::fprintf(stderr, "bench-shape: %s\n", error.c_str());
    return;
  }
  problem.training.syncEvery = communication.syncEvery;
  problem.training.syncFragments = communication.syncFragments;
  problem.training.syncOverlap = communication.syncOverlap;
  problem.training.dpCompression = communication.dpCompression;
  problem.training.compression.linkCodec = communication.ppCompression;
  problem.training.stages.schedule = communication.schedule;
  problem.chooseSchedule = communication.chooseSchedule;
  problem.globalBatch = globalBatch;
  problem.microBatchSizes = {1, 2, 4, 8};
  ShapeSearchOptions shapeOptions;
  shapeOptions.budgetSeconds = budget;
  if (against == Baseline::SingleDevice) {
    // The best one device can do alone: each kind of device of the cluster
    // (a plan on one device depends on its speed and memory only) as a
    // cluster of its own.
    double fastestSearch = 0;
    std::string used;
    ShapeChoice single;
    std::set<std::pair<double, double>> seen;
    for (const Device &device : cluster.devices) {
      if (!seen.insert({device.speed(), device.memoryBytes}).second)
        continue;
      Cluster one;
      one.name = device.name;
      one.devices = {device};
      one.delayMs = one.bandwidthGbps = SquareMatrix(1);
      ShapeProblem alone = problem;
      alone.cluster = &one;
      ShapeSearchResult result;
      if (!searchShapes(alone, shapeOptions, result, error))
        continue; // does not hold the model
      fastestSearch += result.searchSeconds;
      if (single.stages.empty() ||
          result.best.iterationSeconds() < single.iterationSeconds()) {
        single = result.best;
        used = device.name;
      }
    }
    if (single.stages.empty()) {
      std::fprintf(stderr, "bench-shape: %s: no device holds the model alone\n",
                   name.c_str());
      return;
    }
    baseline = single.iterationSeconds();
    print({name, "single", baseline, 1, fastestSearch,
           used + ", " +
               describe(1, 1, single.microBatchSize, single.microBatches),
           compressRatio},
          json);
  }
  ShapeSearchResult result;
  if (!searchShapes(problem, shapeOptions, result, error)) {
    std::fprintf(stderr, "bench-shape: %s: %s\n", name.c_str(), error.c_str());
    return;
  }
  const ShapeChoice &best = result.best;
  // The lower bound on any plan at the chosen plan's local steps.
  LowerBoundModel bounds;
  LowerBound bound;
  if (!LowerBoundModel::create(problem, bounds, error)) {
    std::fprintf(stderr, "bench-shape: %s: %s\n", name.c_str(), error.c_str());
    return;
  }
  auto boundStart = std::chrono::steady_clock::now();
  bound = bounds.bound(best.cost.syncEvery, communication.syncOverlap);
  double boundWall = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - boundStart)
                         .count();
  Row shapeRow{name,
               "shape",
               best.iterationSeconds(),
               best.devices.size(),
               result.searchSeconds,
               describe(best.dataParallel, best.pipelineParallel,
                        best.microBatchSize, best.microBatches),
               compressRatio,
               communication.bucketMb,
               best.cost.syncEvery,
               codecChoiceName(communication.dpCompression)};
  shapeRow.syncFragments = communication.syncFragments;
  shapeRow.syncOverlap = communication.syncOverlap;
  shapeRow.schedule = pipelineScheduleName(best.schedule);
  if (best.schedule != PipelineSchedule::OneFOneB)
    shapeRow.shape += std::string(", ") + shapeRow.schedule;
  shapeRow.boundRatio =
      bound.feasible() ? best.iterationSeconds() / bound.seconds : 0;
  print(shapeRow, json);
  if (bound.feasible())
    print({name, "bound", bound.seconds,
           static_cast<size_t>(bound.dataParallel * bound.pipelineParallel),
           boundWall,
           describe(bound.dataParallel, bound.pipelineParallel,
                    bound.microBatchSize,
                    static_cast<int>(globalBatch / (bound.dataParallel *
                                                    bound.microBatchSize))),
           compressRatio, communication.bucketMb, best.cost.syncEvery,
           codecChoiceName(communication.dpCompression)},
          json);
  if (!json) {
    if (against == Baseline::Fixed8x8)
      std::printf("  speed-up %.2fx; ", baseline / best.iterationSeconds());
    else if (against == Baseline::SingleDevice)
      std::printf("  speed-up %.2fx over one device, %zu of %zu devices in "
                  "use; ",
                  baseline / best.iterationSeconds(), best.devices.size(),
                  cluster.size());
    else
      std::printf("  ");
    std::printf("%lld shapes scored%s\n",
                static_cast<long long>(result.shapesScored),
                result.budgetExhausted ? " (budget reached)" : "");
    if (bound.feasible())
      std::printf("  within %.2fx of the %s\n",
                  best.iterationSeconds() / bound.seconds,
                  describeLowerBound(bound).c_str());
    std::printf("  chosen: pipeline %.3f s + gradient sync %.3f s\n",
                best.cost.pipelineSeconds, best.cost.dataParallelSeconds);
    for (const ShapeChoice &other : result.runnersUp)
      std::printf("  runner-up %.3f s: %zu devices, %s\n",
                  other.iterationSeconds(), other.devices.size(),
                  describe(other.dataParallel, other.pipelineParallel,
                           other.microBatchSize, other.microBatches)
                      .c_str());
    for (const IdleDevices &idle : result.idle)
      std::printf("  idle %zu: %s\n", idle.devices.size(), idle.reason.c_str());
  }
}

} // namespace

int main(int argc, char **argv) {
  bool json = false, scale = false;
  int64_t globalBatch = 256;
  double budget = 5, compressRatio = 1;
  Communication communication;
  std::string dir = dtfm::bench::defaultScenariosDir();
  dtfm::bench::Flags flags("bench-shape", argc, argv);
  while (flags.next())
    if (flags.is("--json"))
      json = true;
    else if (flags.is("--global-batch")) {
      // The fixed baseline splits the batch over 8 pipelines.
      globalBatch = flags.integer<int64_t>(1);
      if (globalBatch % 8 != 0)
        flags.fail("must be a multiple of 8");
    } else if (flags.is("--budget"))
      budget = flags.number(0);
    else if (flags.is("--scenarios"))
      dir = flags.text();
    else if (flags.is("--compress-ratio"))
      compressRatio = flags.number(1); // 1: no compression
    else if (flags.is("--bucket-mb")) {
      communication.bucketMb = flags.text();
      double cap = 0;
      std::string error;
      if (!parseBucketCap(communication.bucketMb, cap, error))
        flags.fail("must be auto or a number of MiB in [0, 1e6]");
    } else if (flags.is("--dp-compression")) {
      std::optional<CodecChoice> value =
          parseCodecChoice(flags.text(), CodecUse::Gradients);
      if (!value)
        flags.fail("must be " + codecChoices(CodecUse::Gradients));
      communication.dpCompression = *value;
    } else if (flags.is("--pp-compression")) {
      std::optional<CodecChoice> value =
          parseCodecChoice(flags.text(), CodecUse::PipelineTransfers);
      if (!value)
        flags.fail("must be " + codecChoices(CodecUse::PipelineTransfers));
      communication.ppCompression = *value;
    } else if (flags.is("--sync-every")) {
      std::string error;
      if (!parseSyncEvery(flags.text(), communication.syncEvery, error))
        flags.fail("must be auto or a number of steps in [0, 1000000]");
    } else if (flags.is("--sync-fragments"))
      communication.syncFragments = flags.integer<int64_t>(1);
    else if (flags.is("--sync-overlap"))
      communication.syncOverlap = flags.integer<int64_t>(0);
    else if (flags.is("--schedule")) {
      std::string name = flags.text();
      communication.chooseSchedule = name == "auto";
      std::optional<PipelineSchedule> kind =
          communication.chooseSchedule ? PipelineSchedule::OneFOneB
                                       : parsePipelineSchedule(name);
      if (!kind)
        flags.fail(std::string("must be ") + kPipelineScheduleChoices +
                   " or auto");
      communication.schedule = *kind;
    } else if (flags.is("--scale"))
      scale = true;
    else
      flags.unknown();
  if ((communication.syncFragments > 1 || communication.syncOverlap > 0) &&
      communication.syncEvery < 1) {
    std::fprintf(stderr, "bench-shape: error: --sync-fragments and "
                         "--sync-overlap need --sync-every H (H >= 1)\n");
    return 2;
  }
  {
    std::string error;
    if (!checkCodecForSyncs(communication.dpCompression.codec,
                            codecChoiceName(communication.dpCompression),
                            communication.syncEvery, error)) {
      std::fprintf(stderr, "bench-shape: error: %s\n", error.c_str());
      return 2;
    }
  }
  Workload workload = dtfm::bench::gptWorkload();

  std::vector<Cluster> mixedClusters;
  std::string error;
  if (!dtfm::bench::mixedClusters(mixedClusters, error)) {
    std::fprintf(stderr, "bench-shape: error: %s\n", error.c_str());
    return 1;
  }
  const Cluster &generations = mixedClusters[0], &far = mixedClusters[1],
                &mixed = mixedClusters[2];
  runScenario("two-generations", generations, workload, globalBatch, budget,
              compressRatio, communication, json);
  runScenario("far-region", far, workload, globalBatch, budget, compressRatio,
              communication, json);
  // 48 GPUs of four generations in eight regions (our own cluster file).
  runScenario("mixed-regions", mixed, workload, globalBatch, budget,
              compressRatio, communication, json, Baseline::SingleDevice);

  if (scale) {
    // 32 regions of 32 V100s: 10 Gbps / 1 ms inside, 0.1-2 Gbps and
    // 20-150 ms between regions (seeded).
    Cluster big;
    big.name = "synthetic-1024";
    const int regions = 32, per = 32, n = regions * per;
    big.delayMs = SquareMatrix(n);
    big.bandwidthGbps = SquareMatrix(n);
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> gbps(0.1, 2), ms(20, 150);
    SquareMatrix regionGbps(regions), regionMs(regions);
    for (int a = 0; a < regions; ++a)
      for (int b = a + 1; b < regions; ++b) {
        regionGbps(a, b) = regionGbps(b, a) = gbps(rng);
        regionMs(a, b) = regionMs(b, a) = ms(rng);
      }
    for (int i = 0; i < n; ++i) {
      big.devices.push_back({"gpu" + std::to_string(i),
                             "region" + std::to_string(i / per), 125e12, 1,
                             16e9});
      for (int j = 0; j < n; ++j) {
        int a = i / per, b = j / per;
        big.bandwidthGbps(i, j) = a == b ? 10 : regionGbps(a, b);
        big.delayMs(i, j) = a == b ? 1 : regionMs(a, b);
      }
    }
    runScenario("synthetic-1024", big, workload, globalBatch * 16, budget,
                compressRatio, communication, json, Baseline::None);
  }

  for (const std::string &prefix : dtfm::bench::paperScenarios()) {
    Cluster cluster;
    if (!dtfm::bench::loadScenario("bench-shape", dir, prefix, cluster))
      break;
    runScenario(prefix, cluster, workload, globalBatch, budget, compressRatio,
                communication, json);
  }
  return 0;
}
