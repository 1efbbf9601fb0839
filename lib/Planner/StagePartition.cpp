//===- StagePartition.cpp - Uneven pipeline stages on a chain -------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/StagePartition.h"
#include "dtfm/Support/NameTable.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <sstream>

using namespace dtfm::planner;

int dtfm::planner::inFlightMicroBatches(const StagePartitionOptions &options,
                                        int stage, int stages) {
  int all = std::max(1, options.microBatches);
  if (options.schedule == PipelineSchedule::GPipe)
    return all;
  // Zero bubble holds a micro-batch from its forward to its W, at most as
  // many as 1F1B's first stage holds (Schedule.cpp).
  if (options.schedule == PipelineSchedule::ZeroBubbleH1)
    return std::min(all, stages);
  return std::min(all, stages - stage);
}

/// The runtime's tensors are f32 whatever the model's type.
static constexpr double kRuntimeElementBytes = 4;

double
dtfm::planner::stateBytesPerParameterByte(const StagePartitionOptions &options) {
  if (options.stateBytesPerParameterByte > 0)
    return options.stateBytesPerParameterByte;
  // Weights, gradient sums, and on a data-parallel stage its sync buckets.
  double perElement = kRuntimeElementBytes * (options.dataParallel > 1 ? 3 : 2) +
                      options.optimizerBytesPerElement;
  return perElement * options.elementsPerParameterByte;
}

double dtfm::planner::optimizerBytesPerParameterByte(
    const StagePartitionOptions &options) {
  if (options.stateBytesPerParameterByte > 0)
    return options.optimizerBytesPerParameterByte;
  return options.optimizerBytesPerElement * options.elementsPerParameterByte;
}

double dtfm::planner::activationBytesScale(const StagePartitionOptions &options) {
  if (options.stateBytesPerParameterByte > 0)
    return 1;
  return kRuntimeElementBytes * options.elementsPerParameterByte;
}

namespace {
/// What a stage's memory needs of its blocks, accumulated from the first:
/// appending a block extends the segment by one, so a table of every
/// segment costs one pass per first block (partitionChain).
struct SegmentMemory {
  double parameters = 0, activations = 0, inputs = 0, largest = 0,
         forward = 0, transient = 0, backwardPeak = 0;

  /// The runtime's model counts what the runtime holds and its transients;
  /// the simple one (an explicit state factor) what the ops save, nothing
  /// more.
  void append(const ChainBlock &block, bool runtimeModel) {
    double blockTransient = runtimeModel ? block.scratchBytes : 0;
    transient = std::max(transient, blockTransient);
    parameters += block.parameterBytes;
    double saved =
        runtimeModel ? block.runtimeActivationBytes() : block.activationBytes;
    activations += saved;
    // A block's backward runs while the micro-batch still holds what this
    // block and the ones before it keep, beside its transient.
    backwardPeak = std::max(backwardPeak, activations + blockTransient);
    // A block whose input is not known keeps all it saves.
    double kept = block.inputBytes >= 0 ? std::min(block.inputBytes, saved)
                                        : saved;
    inputs += kept;
    largest = std::max(largest, saved - kept);
    forward += block.forwardFlops();
  }
};

bool usesRuntimeModel(const StagePartitionOptions &options) {
  return options.stateBytesPerParameterByte <= 0;
}

/// stageMemory of blocks [first, last), whose accumulation is `segment`.
StageMemory stageMemoryOf(const SegmentMemory &segment, int first, int last,
                          int stage, int stages,
                          const StagePartitionOptions &options,
                          double capacity) {
  bool runtimeModel = usesRuntimeModel(options);
  const double parameters = segment.parameters,
               activations = segment.activations, inputs = segment.inputs,
               largest = segment.largest, forward = segment.forward,
               transient = segment.transient,
               backwardPeak = segment.backwardPeak;
  // Parameters shared with a block of another stage (the runtime's model;
  // measured on GPT's tied table): the reader holds the weight it
  // receives, in its buffer and as a value, and its backward writes the
  // gradient (a transient); the owner holds the buffer the gradient comes
  // back in, and the copy it sends until the first micro-batch's backward
  // has read the weight. The owner's backward ends with two gradients and
  // their sum, as it does with both readers here: 3 x GPT's tied table can
  // be a stage's peak.
  double shared = 0, sentCopies = 0, tiedSum = 0;
  if (runtimeModel)
    for (const TiedParameter &tied : options.tied) {
      bool owner = tied.owner >= first && tied.owner < last;
      bool reader = tied.reader >= first && tied.reader < last;
      if (owner != reader)
        shared += (owner ? 1 : 2) * tied.bytes;
      if (owner && !reader)
        sentCopies += tied.bytes;
      if (owner)
        tiedSum = std::max(tiedSum, 3 * tied.bytes);
    }
  int inFlight = inFlightMicroBatches(options, stage, stages);
  // As the runtime holds them: activations from the stage before and
  // gradients from the stage after, one buffer per micro-batch of the
  // iteration (an explicit state factor is the simple model without them).
  double received =
      !runtimeModel
          ? 0
          : options.boundaryBytes * std::max(1, options.microBatches) *
                ((stage > 0 ? 1 : 0) + (stage + 1 < stages ? 1 : 0));
  bool canShard = options.dataParallel > 1 &&
                  options.shardState != MemoryOption::Never;
  bool canRecompute = options.recompute != MemoryOption::Never;
  double scale = activationBytesScale(options);
  auto footprint = [&](bool sharded, bool recomputed) {
    StageMemory m;
    m.sharded = sharded;
    m.recomputed = recomputed;
    double state = stateBytesPerParameterByte(options) * parameters;
    if (sharded)
      state -= optimizerBytesPerParameterByte(options) * parameters *
               (1 - 1.0 / options.dataParallel);
    // The peak, in the runtime's model: the other micro-batches in flight
    // held whole, and the backward of this one at its fullest step (with
    // recomputation: its inputs, the largest block again and the largest
    // transient), or, when its backward ends, the tied gradients' sum. The
    // simple model (an explicit state factor) has no transients.
    double perMicroBatch = recomputed ? inputs : activations;
    double current = recomputed ? inputs + largest + transient : backwardPeak;
    double values = (inFlight - 1) * perMicroBatch +
                    std::max(current + sentCopies, tiedSum);
    m.bytes = state + scale * (received + shared + values);
    m.recomputeFlops = recomputed ? forward : 0;
    return m;
  };
  bool shard = canShard && options.shardState == MemoryOption::Always;
  bool recompute = canRecompute && options.recompute == MemoryOption::Always;
  StageMemory m = footprint(shard, recompute);
  if (m.bytes <= capacity)
    return m;
  if (canShard && !shard) {
    shard = true;
    m = footprint(shard, recompute);
    if (m.bytes <= capacity)
      return m;
  }
  if (canRecompute && !recompute)
    m = footprint(shard, true);
  return m;
}
} // namespace

StageMemory dtfm::planner::stageMemory(const std::vector<ChainBlock> &blocks,
                                       int first, int last, int stage,
                                       int stages,
                                       const StagePartitionOptions &options,
                                       double capacity) {
  SegmentMemory segment;
  for (int i = first; i < last; ++i)
    segment.append(blocks[i], usesRuntimeModel(options));
  return stageMemoryOf(segment, first, last, stage, stages, options,
                       capacity);
}

double dtfm::planner::stageFlopsAt(const std::vector<ChainBlock> &blocks,
                                   int first, int last, bool recomputed,
                                   double ridge) {
  double flops = 0;
  for (int i = first; i < last; ++i)
    flops += blocks[i].flopsAt(ridge) +
             (recomputed ? blocks[i].forwardFlopsAt(ridge) : 0);
  return flops;
}

bool dtfm::planner::planForBounds(const std::vector<ChainBlock> &blocks,
                                  const std::vector<StageDevice> &devices,
                                  const StagePartitionOptions &options,
                                  const std::vector<int> &bounds,
                                  StagePlan &plan, std::string &error) {
  int stages = static_cast<int>(devices.size());
  if (static_cast<int>(bounds.size()) != stages + 1 || bounds.front() != 0 ||
      bounds.back() != static_cast<int>(blocks.size()) ||
      !std::is_sorted(bounds.begin(), bounds.end(), std::less_equal<int>()) ||
      std::adjacent_find(bounds.begin(), bounds.end()) != bounds.end()) {
    error = "stage bounds must rise strictly from 0 to " +
            std::to_string(blocks.size()) + " over " + std::to_string(stages) +
            " stages";
    return false;
  }
  plan = StagePlan();
  plan.bounds = bounds;
  for (int s = 0; s < stages; ++s) {
    double sums = 0, sumBytes = 0;
    for (int i = bounds[s]; i < bounds[s + 1]; ++i) {
      sums += blocks[i].groupSums;
      sumBytes += blocks[i].groupSumBytes;
    }
    StageMemory memory = stageMemory(blocks, bounds[s], bounds[s + 1], s,
                                     stages, options, devices[s].memoryBytes);
    double flops = stageFlopsAt(blocks, bounds[s], bounds[s + 1],
                                memory.recomputed, devices[s].ridge);
    if (memory.bytes > devices[s].memoryBytes) {
      error = "device " + devices[s].name + " cannot hold stage " +
              std::to_string(s) + " (" + std::to_string(memory.bytes / 1e9) +
              " GB needed, " + std::to_string(devices[s].memoryBytes / 1e9) +
              " GB available)";
      return false;
    }
    plan.stageSeconds.push_back(devices[s].seconds(flops, sums, sumBytes));
    plan.stageGroupSums.push_back(sums);
    plan.stageGroupSumBytes.push_back(sumBytes);
    plan.stageMemoryBytes.push_back(memory.bytes);
    plan.stageMemory.push_back(memory);
    plan.bottleneckSeconds =
        std::max(plan.bottleneckSeconds, plan.stageSeconds.back());
  }
  return true;
}

StageDevice dtfm::planner::stageDeviceOf(const Cluster &cluster,
                                         const std::vector<int> &members) {
  StageDevice d{cluster.devices[members.at(0)].name,
                std::numeric_limits<double>::infinity(),
                std::numeric_limits<double>::infinity()};
  // At its slowest member's speed and lowest bandwidth (0 where one is not
  // known: then the group costs FLOPs only).
  double bandwidth = std::numeric_limits<double>::infinity();
  for (int member : members) {
    const Device &device = cluster.devices[member];
    d.speed = std::min(d.speed, device.speed());
    d.memoryBytes = std::min(d.memoryBytes, device.memoryBytes);
    bandwidth = std::min(bandwidth, device.memoryBandwidth);
    d.groupSumLatencySeconds =
        std::max(d.groupSumLatencySeconds, device.groupSumLatencySeconds);
    d.groupSumSecondsPerByte =
        std::max(d.groupSumSecondsPerByte, device.groupSumSecondsPerByte);
  }
  d.ridge = ridgeOf(d.speed, bandwidth);
  return d;
}

namespace {
/// min over contiguous splits of max_j cost(j, first, last), by dynamic
/// programming over (stages used, blocks covered). Returns the bounds, or an
/// empty vector when every split has an infinite stage.
template <typename StageCost>
std::vector<int> minMaxSplit(int blocks, int stages, const StageCost &cost,
                             double &bestValue) {
  const double inf = std::numeric_limits<double>::infinity();
  // best[j][i]: stages 0..j-1 cover blocks 0..i-1.
  std::vector<std::vector<double>> best(stages + 1,
                                        std::vector<double>(blocks + 1, inf));
  std::vector<std::vector<int>> cut(stages + 1,
                                    std::vector<int>(blocks + 1, -1));
  best[0][0] = 0;
  for (int j = 1; j <= stages; ++j)
    for (int i = j; i <= blocks - (stages - j); ++i)
      for (int k = j - 1; k < i; ++k) {
        if (best[j - 1][k] == inf)
          continue;
        double value = std::max(best[j - 1][k], cost(j - 1, k, i));
        if (value < best[j][i]) {
          best[j][i] = value;
          cut[j][i] = k;
        }
      }
  bestValue = best[stages][blocks];
  if (bestValue == inf)
    return {};
  std::vector<int> bounds(stages + 1);
  bounds[stages] = blocks;
  for (int j = stages, i = blocks; j > 0; --j) {
    i = cut[j][i];
    bounds[j - 1] = i;
  }
  return bounds;
}
} // namespace

bool dtfm::planner::partitionChain(const std::vector<ChainBlock> &blocks,
                                   const std::vector<StageDevice> &devices,
                                   const StagePartitionOptions &options,
                                   StagePlan &plan, std::string &error) {
  return partitionChain(
      std::vector<const std::vector<ChainBlock> *>(devices.size(), &blocks),
      devices, options, plan, error);
}

bool dtfm::planner::partitionChain(
    const std::vector<const std::vector<ChainBlock> *> &stageBlocks,
    const std::vector<StageDevice> &devices,
    const StagePartitionOptions &options, StagePlan &plan,
    std::string &error) {
  int stages = static_cast<int>(devices.size());
  if (static_cast<int>(stageBlocks.size()) != stages) {
    error = "a chain per stage is needed: " +
            std::to_string(stageBlocks.size()) + " chains for " +
            std::to_string(stages) + " stages";
    return false;
  }
  int n = stages == 0 ? 0 : static_cast<int>(stageBlocks.front()->size());
  for (const std::vector<ChainBlock> *chain : stageBlocks)
    if (static_cast<int>(chain->size()) != n) {
      error = "the stages' chains differ in length (" + std::to_string(n) +
              " and " + std::to_string(chain->size()) + " blocks)";
      return false;
    }
  if (stages == 0 || n < stages) {
    error = "cannot split " + std::to_string(n) + " blocks into " +
            std::to_string(stages) + " non-empty stages";
    return false;
  }
  for (const StageDevice &d : devices)
    if (!(d.speed > 0)) {
      error = "device " + d.name + " has no compute speed";
      return false;
    }
  // Prefix sums make every segment O(1): per distinct chain and ridge, the
  // sums', and the FLOPs' (with the forward's again, for recomputation).
  struct PrefixSums {
    const std::vector<ChainBlock> *chain;
    double ridge;
    std::vector<double> flops, forward, sums, sumBytes;
  };
  std::vector<PrefixSums> prefixes;
  std::vector<size_t> prefixOfStage(stages);
  for (int j = 0; j < stages; ++j) {
    const std::vector<ChainBlock> *chain = stageBlocks[j];
    auto it = std::find_if(prefixes.begin(), prefixes.end(), [&](const auto &p) {
      return p.chain == chain && p.ridge == devices[j].ridge;
    });
    if (it == prefixes.end()) {
      PrefixSums p{chain, devices[j].ridge, std::vector<double>(n + 1, 0),
                   std::vector<double>(n + 1, 0), std::vector<double>(n + 1, 0),
                   std::vector<double>(n + 1, 0)};
      for (int i = 0; i < n; ++i) {
        const ChainBlock &block = (*chain)[i];
        p.flops[i + 1] = p.flops[i] + block.flopsAt(p.ridge);
        p.forward[i + 1] = p.forward[i] + block.forwardFlopsAt(p.ridge);
        p.sums[i + 1] = p.sums[i] + block.groupSums;
        p.sumBytes[i + 1] = p.sumBytes[i] + block.groupSumBytes;
      }
      prefixes.push_back(std::move(p));
      it = prefixes.end() - 1;
    }
    prefixOfStage[j] = static_cast<size_t>(it - prefixes.begin());
  }
  // Every segment's memory inputs, per distinct chain: the split below
  // asks for each (stage, first, last) and would otherwise walk the
  // segment's blocks every time. segments[c][first * (n + 1) + last].
  std::vector<const std::vector<ChainBlock> *> chains;
  std::vector<std::vector<SegmentMemory>> segments;
  std::vector<size_t> chainOfStage(stages);
  for (int j = 0; j < stages; ++j) {
    auto it = std::find(chains.begin(), chains.end(), stageBlocks[j]);
    if (it == chains.end()) {
      const std::vector<ChainBlock> &chain = *stageBlocks[j];
      std::vector<SegmentMemory> table(static_cast<size_t>(n + 1) * (n + 1));
      for (int first = 0; first < n; ++first) {
        SegmentMemory segment;
        for (int last = first + 1; last <= n; ++last) {
          segment.append(chain[last - 1], usesRuntimeModel(options));
          table[static_cast<size_t>(first) * (n + 1) + last] = segment;
        }
      }
      chains.push_back(stageBlocks[j]);
      segments.push_back(std::move(table));
      it = chains.end() - 1;
    }
    chainOfStage[j] = static_cast<size_t>(it - chains.begin());
  }
  auto memoryOf = [&](int j, int first, int last) {
    return stageMemoryOf(
        segments[chainOfStage[j]][static_cast<size_t>(first) * (n + 1) + last],
        first, last, j, stages, options, devices[j].memoryBytes);
  };
  auto memory = [&](int j, int first, int last) {
    return memoryOf(j, first, last).bytes;
  };
  auto time = [&](int j, int first, int last) {
    StageMemory m = memoryOf(j, first, last);
    if (m.bytes > devices[j].memoryBytes)
      return std::numeric_limits<double>::infinity();
    const PrefixSums &p = prefixes[prefixOfStage[j]];
    double flops = p.flops[last] - p.flops[first] +
                   (m.recomputed ? p.forward[last] - p.forward[first] : 0);
    return devices[j].seconds(flops, p.sums[last] - p.sums[first],
                              p.sumBytes[last] - p.sumBytes[first]);
  };

  double bottleneck = 0;
  std::vector<int> bounds = minMaxSplit(n, stages, time, bottleneck);
  if (bounds.empty()) {
    // Explain with the most memory-balanced split: its fullest device.
    double ratio = 0;
    std::vector<int> balanced = minMaxSplit(
        n, stages,
        [&](int j, int first, int last) {
          return memory(j, first, last) /
                 std::max(devices[j].memoryBytes, 1.0);
        },
        ratio);
    int worst = 0;
    double worstRatio = -1, needed = 0;
    for (int j = 0; j < stages; ++j) {
      double bytes = memory(j, balanced[j], balanced[j + 1]);
      double r = bytes / std::max(devices[j].memoryBytes, 1.0);
      if (r > worstRatio) {
        worstRatio = r;
        worst = j;
        needed = bytes;
      }
    }
    std::ostringstream os;
    os.precision(4);
    os << "model does not fit: device " << devices[worst].name << " (stage "
       << worst << ") needs " << needed / 1e9 << " GB but has "
       << devices[worst].memoryBytes / 1e9 << " GB, even in the most "
       << "memory-balanced split";
    error = os.str();
    return false;
  }
  plan.bounds = bounds;
  plan.stageSeconds.clear();
  plan.stageGroupSums.clear();
  plan.stageGroupSumBytes.clear();
  plan.stageMemoryBytes.clear();
  plan.stageMemory.clear();
  for (int j = 0; j < stages; ++j) {
    const PrefixSums &p = prefixes[prefixOfStage[j]];
    plan.stageSeconds.push_back(time(j, bounds[j], bounds[j + 1]));
    plan.stageGroupSums.push_back(p.sums[bounds[j + 1]] - p.sums[bounds[j]]);
    plan.stageGroupSumBytes.push_back(p.sumBytes[bounds[j + 1]] -
                                      p.sumBytes[bounds[j]]);
    plan.stageMemory.push_back(memoryOf(j, bounds[j], bounds[j + 1]));
    plan.stageMemoryBytes.push_back(plan.stageMemory.back().bytes);
  }
  plan.bottleneckSeconds = bottleneck;
  return true;
}

static constexpr dtfm::NameEntry<MemoryOption> kMemoryOptionNames[] = {
    {MemoryOption::WhenNeeded, "auto"},
    {MemoryOption::Always, "all"},
    {MemoryOption::Never, "none"}};

const char *dtfm::planner::memoryOptionName(MemoryOption option) {
  return nameOf(kMemoryOptionNames, option);
}

std::optional<MemoryOption>
dtfm::planner::parseMemoryOption(std::string_view name) {
  return valueNamed(kMemoryOptionNames, name);
}

static constexpr dtfm::NameEntry<PipelineSchedule> kScheduleNames[] = {
    {PipelineSchedule::OneFOneB, "1f1b"},
    {PipelineSchedule::ZeroBubbleH1, "zb-h1"},
    {PipelineSchedule::GPipe, "gpipe"}};

const char *dtfm::planner::pipelineScheduleName(PipelineSchedule schedule) {
  return nameOf(kScheduleNames, schedule);
}

std::optional<PipelineSchedule>
dtfm::planner::parsePipelineSchedule(std::string_view name) {
  return valueNamed(kScheduleNames, name);
}
