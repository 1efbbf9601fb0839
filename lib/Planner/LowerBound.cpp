//===- LowerBound.cpp - How fast any plan could train on a cluster --------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/LowerBound.h"
#include "dtfm/Format/WireCodec.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

using namespace dtfm::planner;

LinkThresholds::LinkThresholds(int devices,
                               const std::function<double(int, int)> &weight) {
  int n = std::max(0, devices);
  // Components of the links no dearer than t are those of a minimum
  // spanning tree's edges no dearer than t: Prim's on the complete graph.
  std::vector<std::pair<double, std::pair<int, int>>> edges;
  if (n > 1) {
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<double> best(n, inf);
    std::vector<int> from(n, 0);
    std::vector<bool> in(n, false);
    int last = 0;
    in[0] = true;
    for (int added = 1; added < n; ++added) {
      int next = -1;
      for (int v = 0; v < n; ++v) {
        if (in[v])
          continue;
        double w = weight(last, v);
        if (w < best[v]) {
          best[v] = w;
          from[v] = last;
        }
        if (next < 0 || best[v] < best[next])
          next = v;
      }
      in[next] = true;
      edges.push_back({best[next], {from[next], next}});
      last = next;
    }
    std::sort(edges.begin(), edges.end());
  }
  // Kruskal's order over the tree: the largest component after each edge.
  std::vector<int> parent(n), members(n, 1);
  std::iota(parent.begin(), parent.end(), 0);
  auto root = [&](int v) {
    while (parent[v] != v)
      v = parent[v] = parent[parent[v]];
    return v;
  };
  for (const auto &[w, pair] : edges) {
    int a = root(pair.first), b = root(pair.second);
    if (members[a] < members[b])
      std::swap(a, b);
    parent[b] = a;
    members[a] += members[b];
    if (members[a] > size.back()) {
      if (at.back() == w)
        size.back() = members[a];
      else {
        at.push_back(w);
        size.push_back(members[a]);
      }
    }
  }
  // Every count of members at once: O(N x breakpoints).
  bottlenecks.assign(n + 1, 0.0);
  spreads.assign(n + 1, 0.0);
  chains.assign(n + 1, 0.0);
  for (int m = 2; m <= n; ++m) {
    for (size_t k = 0; k < at.size(); ++k) {
      if (size[k] >= m) {
        bottlenecks[m] = at[k];
        break;
      }
      double span = at[k + 1] - at[k];
      spreads[m] += (m - size[k]) * span;
      chains[m] += ((m + size[k] - 1) / size[k] - 1) * span;
    }
  }
}

namespace {

/// What one micro-batch size makes of the workload.
struct AtSize {
  double flops = 0;             ///< forward and backward, all blocks
  double boundaryWireBytes = 0; ///< the smallest a pipeline transfer gets
  double longestBackward = 0;   ///< any stage's backward, at most
};

} // namespace

bool LowerBoundModel::create(const ShapeProblem &problem,
                             LowerBoundModel &model, std::string &error) {
  const Cluster *cluster = problem.cluster;
  if (!cluster || cluster->size() == 0) {
    error = "lower bound: the cluster has no devices";
    return false;
  }
  if (problem.globalBatch < 1 || problem.microBatchSizes.empty() ||
      problem.workload.blocks.empty() || problem.workload.microBatchSize < 1) {
    error = "lower bound: needs a global batch >= 1, a micro-batch size and "
            "a model of at least one block";
    return false;
  }
  for (int64_t size : problem.microBatchSizes)
    if (size < 1) {
      error = "lower bound: micro-batch sizes must be positive, found " +
              std::to_string(size);
      return false;
    }
  model = LowerBoundModel();
  model.problem = problem;
  model.problem.cluster = nullptr;
  int n = static_cast<int>(cluster->size());
  model.devices = n;
  std::vector<double> speeds, memories;
  for (const Device &device : cluster->devices) {
    if (!(device.speed() > 0)) {
      error = "lower bound: device '" + device.name + "' has no speed";
      return false;
    }
    speeds.push_back(device.speed());
    memories.push_back(device.memoryBytes);
    model.largestRidge = std::max(model.largestRidge, device.ridge());
    model.largestSumLatency =
        std::max(model.largestSumLatency, device.groupSumLatencySeconds);
    model.largestSumSecondsPerByte =
        std::max(model.largestSumSecondsPerByte, device.groupSumSecondsPerByte);
  }
  model.slowestSpeed = *std::min_element(speeds.begin(), speeds.end());
  auto prefixOfLargest = [](std::vector<double> values) {
    std::sort(values.begin(), values.end(), std::greater<double>());
    std::vector<double> sums{0.0};
    for (double v : values)
      sums.push_back(sums.back() + v);
    return sums;
  };
  model.fastestSpeeds = prefixOfLargest(speeds);
  model.largestMemories = prefixOfLargest(memories);
  model.latency = LinkThresholds(n, [&](int a, int b) {
    return std::min(cluster->latencySeconds(a, b),
                    cluster->latencySeconds(b, a));
  });
  model.secondsPerByte = LinkThresholds(n, [&](int a, int b) {
    return std::min(serialisationSeconds(1, cluster->bandwidthGbps(a, b)),
                    serialisationSeconds(1, cluster->bandwidthGbps(b, a)));
  });
  return true;
}

LowerBound LowerBoundModel::bound(int64_t syncEvery,
                                  int64_t syncOverlap) const {
  const Workload &base = problem.workload;
  const TrainingOptions &training = problem.training;
  const int64_t globalBatch = problem.globalBatch;
  const double elementBytes = 1 / base.gradientElementsPerByte;
  const double gradientBytes =
      base.parameterBytes() * base.gradientBytesPerParameterByte;
  const double parameterBytes = base.parameterBytes();
  const int layers = static_cast<int>(base.blocks.size());
  const bool oneFOneB = training.stages.schedule != PipelineSchedule::GPipe;
  // (a problem that chooses its schedule may choose zero bubble: its bound)
  const bool zeroBubble =
      training.stages.schedule == PipelineSchedule::ZeroBubbleH1 ||
      problem.chooseSchedule;

  // The cheapest exchange of `bytes` of gradients over a group of `degree`,
  // in any algorithm and codec the options allow; with `crossing` > 0, of
  // a group split between components of links cheaper than `crossing`
  // seconds per byte (so its ring has a hop, and each member of its
  // smaller part ceil(D/2) links, of at least that).
  auto exchange = [&](double bytes, int degree, double crossing) {
    std::vector<format::WireCodec> codecs{training.dpCompression.codec};
    if (training.dpCompression.automatic)
      codecs = {format::WireCodec::Dense, format::WireCodec::Int8};
    double d = degree, best = std::numeric_limits<double>::infinity();
    auto slowestHop = [&](double hopBytes) {
      return std::max(
          {latency.bottleneck(degree),
           hopBytes * secondsPerByte.bottleneck(degree),
           latency.cheapest() +
               hopBytes * std::max(crossing, secondsPerByte.cheapest())});
    };
    double half = std::ceil(d / 2);
    for (format::WireCodec codec : codecs) {
      double wire = format::wireBytesOfDense(codec, bytes, elementBytes,
                                             training.dpCompression.ratio);
      if (!format::wireCodecInfo(codec).summable) {
        best = std::min(best, (d - 1) * slowestHop(wire));
        continue;
      }
      if (training.sync != GradientSync::ParameterServer)
        best =
            std::min(best, ringAllReduceSeconds(degree, slowestHop(wire / d)));
      if (training.sync != GradientSync::Ring)
        best = std::min(
            best,
            2 * std::max(latency.spread(degree) +
                             wire / d * secondsPerByte.spread(degree),
                         (d - 1) * latency.cheapest() +
                             wire / d *
                                 (half * crossing +
                                  (d - 1 - half) * secondsPerByte.cheapest())));
    }
    return best;
  };

  std::vector<int64_t> sizes = problem.microBatchSizes;
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  bool recomputes = training.stages.recompute != MemoryOption::Never;
  LowerBound best;
  for (int64_t size : sizes) {
    Workload workload = base.withMicroBatchSize(size);
    AtSize at;
    double sums = 0, sumBytes = 0, weightFlops = 0;
    for (const ChainBlock &block : workload.blocks) {
      at.flops += block.flops;
      weightFlops += block.weightFlops;
      sums += block.groupSums;
      sumBytes += block.groupSumBytes;
    }
    // A zero-bubble schedule's Ws need not follow a micro-batch's way
    // through the pipeline: its fill leaves them out.
    double fillFlops = at.flops - (zeroBubble ? weightFlops : 0);
    double dense = workload.boundaryBytes;
    at.boundaryWireBytes = dense;
    if (training.compression.targetRatio > 1)
      at.boundaryWireBytes = std::min(at.boundaryWireBytes,
                                      dense / training.compression.targetRatio);
    if (training.compression.linkCodec.mayCompress()) {
      format::WireCodec codec = training.compression.linkCodec.automatic
                                    ? format::WireCodec::Int8
                                    : training.compression.linkCodec.codec;
      at.boundaryWireBytes =
          std::min(at.boundaryWireBytes,
                   format::wireBytesOfDense(codec, dense, elementBytes, 0));
    }
    // A stage's backward is its time x its blocks' backward share of their
    // FLOPs (the known shares: the hetero model counts no other), which is
    // at most the largest block's.
    double backwardShare = 0;
    for (const ChainBlock &block : workload.blocks)
      if (block.flops > 0)
        backwardShare =
            std::max(backwardShare, block.backwardFlops / block.flops);
    at.longestBackward =
        backwardShare *
        (stageFlopsAt(workload.blocks, 0, layers, recomputes, largestRidge) /
             slowestSpeed +
         sums * largestSumLatency + sumBytes * largestSumSecondsPerByte);

    int maxStages = std::min(devices, layers);
    for (int pp = 1; pp <= maxStages; ++pp) {
      if (problem.fixedPipelineParallel > 0 &&
          pp != problem.fixedPipelineParallel)
        continue;
      double transfers = 2 * (latency.chain(pp) +
                              at.boundaryWireBytes * secondsPerByte.chain(pp));
      double fill = fillFlops / fastestSpeeds[1] + transfers;
      // A pipeline that no component of cheaper links holds has a hop of
      // at least secondsPerByte.bottleneck(pp): its send stream carries
      // every micro-batch over it.
      double occupancy =
          pp < 2 ? 0
                 : std::max((pp < 3 ? 1 : 2) * secondsPerByte.cheapest(),
                            secondsPerByte.bottleneck(pp)) *
                       at.boundaryWireBytes;
      for (int dp = 1; dp * pp <= devices; ++dp) {
        if (problem.fixedDataParallel > 0 && dp != problem.fixedDataParallel)
          continue;
        if (globalBatch % (dp * size) != 0)
          continue;
        // Each pipeline holds every parameter's state.
        StagePartitionOptions options = training.stages;
        options.dataParallel = dp;
        options.elementsPerParameterByte = workload.gradientElementsPerByte;
        double state = stateBytesPerParameterByte(options);
        if (dp > 1 && options.shardState != MemoryOption::Never)
          state -= optimizerBytesPerParameterByte(options) * (1 - 1.0 / dp);
        if (largestMemories[dp * pp] <
            dp * state * parameterBytes * (1 - 1e-12))
          continue;
        int64_t microBatches = globalBatch / (dp * size);
        double steadyCompute = static_cast<double>(globalBatch / size - dp) *
                               at.flops / fastestSpeeds[dp * pp];
        double window =
            fill / static_cast<double>(oneFOneB ? pp : microBatches);
        double steadyLinks =
            static_cast<double>(microBatches - 1) * std::max(occupancy, window);
        // Or every micro-batch at the devices' total speed, after the
        // first one's transfers: bounds a pipeline whose slowest stage
        // holds up all its micro-batches (few per pipeline, uneven
        // devices) better than the fill on the fastest device.
        double throughput = static_cast<double>(globalBatch / size) * at.flops /
                            fastestSpeeds[dp * pp];
        double steady = std::max(
            {steadyCompute, steadyLinks, throughput + transfers - fill});
        auto exposed = [&](double seconds) {
          if (syncEvery >= 1 && syncOverlap >= 1)
            return 0.0; // the steps it overlaps may hide all of it
          return syncEvery >= 1 ? seconds / static_cast<double>(syncEvery)
                                : std::max(0.0, seconds - at.longestBackward);
        };
        double pipeline = fill + steady;
        double sync = dp > 1 ? exposed(exchange(gradientBytes / pp, dp, 0)) : 0;
        double total = pipeline + sync;
        // Pipelines and gradient exchanges cannot both keep to the fastest
        // links when no component of links cheaper than `crossing` holds
        // all D_DP x D_PP devices: either every pipeline stays inside one
        // (and then they are in two or more, so every stage's group
        // crosses: case A), or some pipeline crosses and carries every one
        // of its n micro-batches over a link of at least `crossing` while
        // the others share the rest (case B; n >= 1 with uneven replicas,
        // bounded over real n).
        double crossing = secondsPerByte.bottleneck(dp * pp);
        if (dp > 1 && crossing > secondsPerByte.cheapest()) {
          double caseA =
              pipeline + exposed(exchange(gradientBytes / pp, dp, crossing));
          double all = static_cast<double>(globalBatch / size);
          double perMicroBatch = at.boundaryWireBytes * crossing;
          double first = at.flops / fastestSpeeds[1] + perMicroBatch;
          double rest = at.flops / fastestSpeeds[(dp - 1) * pp];
          double n = std::clamp((rest * all - first) / (perMicroBatch + rest),
                                1.0, all - (dp - 1));
          double crossingPipeline =
              std::max(perMicroBatch * n + first, rest * (all - n));
          double caseB = std::max(pipeline, crossingPipeline) + sync;
          double joint = std::min(caseA, caseB);
          if (joint > total) {
            total = joint;
            sync = total - pipeline;
          }
        }
        if (total < best.seconds) {
          best.seconds = total;
          best.dataParallel = dp;
          best.pipelineParallel = pp;
          best.microBatchSize = size;
          best.fillSeconds = fill;
          best.steadySeconds = steady;
          best.syncSeconds = sync;
        }
      }
    }
  }
  return best;
}

std::string dtfm::planner::describeLowerBound(const LowerBound &bound) {
  if (!bound.feasible())
    return "no lower bound (no shape holds the model's state)";
  char text[256];
  std::snprintf(text, sizeof(text),
                "lower bound %.4g s (dp %d x pp %d, micro-batch %lld: fill "
                "%.3g s, steady %.3g s, sync %.3g s)",
                bound.seconds, bound.dataParallel, bound.pipelineParallel,
                static_cast<long long>(bound.microBatchSize), bound.fillSeconds,
                bound.steadySeconds, bound.syncSeconds);
  return text;
}
