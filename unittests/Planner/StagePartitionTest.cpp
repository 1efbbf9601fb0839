//===- StagePartitionTest.cpp - Chain partitioner vs brute force ----------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/StagePartition.h"
#include "ChainCuts.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

using namespace dtfm::planner;

namespace {

/// `n` blocks of 1-10 FLOPs and 1-5 bytes; for the runtime's memory model
/// also held values, transients and blocks whose input is not known.
std::vector<ChainBlock> randomChain(std::mt19937_64 &rng, int n,
                                    bool runtimeModel) {
  std::uniform_real_distribution<double> flops(1, 10), bytes(1, 5);
  std::vector<ChainBlock> blocks(n);
  for (ChainBlock &b : blocks) {
    b = {flops(rng), bytes(rng), bytes(rng)};
    b.backwardFlops = b.flops * 0.6;
    b.inputBytes = b.activationBytes * 0.3;
    if (!runtimeModel)
      continue;
    if (rng() % 4 == 0)
      b.inputBytes = -1;
    b.scratchBytes = bytes(rng) * (rng() % 2);
    if (rng() % 3)
      b.heldBytes = bytes(rng);
  }
  return blocks;
}

/// `stages` devices of 1-4 FLOP/s and memory in [low, high).
std::vector<StageDevice> randomDevices(std::mt19937_64 &rng, int stages,
                                       double low, double high) {
  std::uniform_real_distribution<double> speed(1, 4), memory(low, high);
  std::vector<StageDevice> devices(stages);
  for (int j = 0; j < stages; ++j)
    devices[j] = {"d" + std::to_string(j), speed(rng), memory(rng)};
  return devices;
}

/// Best bottleneck over every way to cut the chain (inf when none fits).
double bruteForce(const std::vector<ChainBlock> &blocks,
                  const std::vector<StageDevice> &devices,
                  const StagePartitionOptions &options) {
  int stages = devices.size();
  return oracle::bestCut(
      blocks.size(), stages, [&](int j, int first, int last) {
        StageMemory mem = stageMemory(blocks, first, last, j, stages, options,
                                      devices[j].memoryBytes);
        if (mem.bytes > devices[j].memoryBytes)
          return std::numeric_limits<double>::infinity();
        double flops = mem.recomputeFlops;
        for (int i = first; i < last; ++i)
          flops += blocks[i].flops;
        return flops / devices[j].speed;
      });
}

TEST(StagePartition, EqualsBruteForceOnRandomChains) {
  std::mt19937_64 rng(17);
  int feasible = 0;
  for (int trial = 0; trial < 300; ++trial) {
    int stages = 1 + trial % 4;
    int n = stages + static_cast<int>(rng() % 7);
    std::vector<ChainBlock> blocks = randomChain(rng, n, false);
    std::vector<StageDevice> devices = randomDevices(rng, stages, 8, 40);
    StagePartitionOptions options;
    options.stateBytesPerParameterByte = 2;
    options.microBatches = 1 + trial % 3;
    options.schedule =
        trial % 2 ? PipelineSchedule::GPipe : PipelineSchedule::OneFOneB;
    // The memory options too: sharding over groups of 1-3, recomputation
    // never, when needed or always.
    options.dataParallel = 1 + trial % 3;
    options.shardState =
        trial % 5 < 2 ? MemoryOption::WhenNeeded : MemoryOption::Never;
    options.recompute = static_cast<MemoryOption>(trial % 3);
    double expected = bruteForce(blocks, devices, options);
    StagePlan plan;
    std::string error;
    bool ok = partitionChain(blocks, devices, options, plan, error);
    ASSERT_EQ(ok, expected != std::numeric_limits<double>::infinity())
        << "trial " << trial << ": " << error;
    if (!ok) {
      EXPECT_NE(error.find("does not fit"), std::string::npos) << error;
      continue;
    }
    ++feasible;
    EXPECT_NEAR(plan.bottleneckSeconds, expected, 1e-9) << "trial " << trial;
    ASSERT_EQ(plan.bounds.size(), static_cast<size_t>(stages + 1));
    EXPECT_EQ(plan.bounds.front(), 0);
    EXPECT_EQ(plan.bounds.back(), n);
    for (int j = 0; j < stages; ++j) {
      EXPECT_LT(plan.bounds[j], plan.bounds[j + 1]);
      EXPECT_LE(plan.stageMemoryBytes[j], devices[j].memoryBytes);
    }
  }
  // Both outcomes must have been exercised.
  EXPECT_GT(feasible, 50);
  EXPECT_LT(feasible, 300);
}

// The runtime's memory model (held values, transients, tied copies,
// received buffers), whose segments partitionChain tabulates: the same
// brute force over stageMemory.
TEST(StagePartition, RuntimeMemoryModelEqualsBruteForce) {
  std::mt19937_64 rng(23);
  std::uniform_real_distribution<double> bytes(1, 5);
  int feasible = 0;
  for (int trial = 0; trial < 300; ++trial) {
    int stages = 1 + trial % 4;
    int n = stages + static_cast<int>(rng() % 7);
    std::vector<ChainBlock> blocks = randomChain(rng, n, true);
    std::vector<StageDevice> devices = randomDevices(rng, stages, 20, 120);
    StagePartitionOptions options; // the runtime's model
    options.microBatches = 1 + trial % 5;
    options.schedule =
        trial % 2 ? PipelineSchedule::GPipe : PipelineSchedule::OneFOneB;
    options.dataParallel = 1 + trial % 3;
    options.shardState =
        trial % 5 < 2 ? MemoryOption::WhenNeeded : MemoryOption::Never;
    options.recompute = static_cast<MemoryOption>(trial % 3);
    options.boundaryBytes = bytes(rng) / 4;
    if (n > 1 && trial % 3)
      options.tied.push_back({0, n - 1, bytes(rng)});
    double expected = bruteForce(blocks, devices, options);
    StagePlan plan;
    std::string error;
    bool ok = partitionChain(blocks, devices, options, plan, error);
    ASSERT_EQ(ok, expected != std::numeric_limits<double>::infinity())
        << "trial " << trial << ": " << error;
    if (!ok)
      continue;
    ++feasible;
    EXPECT_NEAR(plan.bottleneckSeconds, expected, 1e-9) << "trial " << trial;
    // Each stage's memory is stageMemory's of its bounds, to the bit.
    for (int j = 0; j < stages; ++j) {
      StageMemory direct =
          stageMemory(blocks, plan.bounds[j], plan.bounds[j + 1], j, stages,
                      options, devices[j].memoryBytes);
      EXPECT_EQ(plan.stageMemory[j].bytes, direct.bytes) << "trial " << trial;
      EXPECT_EQ(plan.stageMemory[j].sharded, direct.sharded);
      EXPECT_EQ(plan.stageMemory[j].recomputed, direct.recomputed);
    }
  }
  EXPECT_GT(feasible, 50);
  EXPECT_LT(feasible, 300);
}

// A chain per stage (a tensor-parallel degree per stage: stage j's blocks as
// its degree shards them, with group sums on its links): the partitioner
// equals the brute force over every cut with each stage on its own chain.
TEST(StagePartition, ChainPerStageEqualsBruteForce) {
  std::mt19937_64 rng(29);
  std::uniform_real_distribution<double> flops(1, 10), bytes(1, 5),
      speed(1, 4), memory(6, 30), sums(0, 3);
  int feasible = 0, differs = 0;
  for (int trial = 0; trial < 200; ++trial) {
    int stages = 1 + trial % 4;
    int n = stages + static_cast<int>(rng() % 7);
    // Two degrees: the whole model, and a copy halved with sums per block.
    std::vector<ChainBlock> whole(n), halved(n);
    for (int i = 0; i < n; ++i) {
      whole[i] = {flops(rng), bytes(rng), bytes(rng)};
      whole[i].backwardFlops = whole[i].flops * 0.6;
      whole[i].inputBytes = whole[i].activationBytes * 0.3;
      halved[i] = whole[i];
      halved[i].flops /= 2;
      halved[i].backwardFlops /= 2;
      halved[i].parameterBytes /= 2;
      halved[i].activationBytes /= 2;
      halved[i].groupSums = 2;
      halved[i].groupSumBytes = sums(rng);
    }
    std::vector<const std::vector<ChainBlock> *> chains;
    std::vector<StageDevice> devices(stages);
    for (int j = 0; j < stages; ++j) {
      bool sharded = rng() % 2;
      chains.push_back(sharded ? &halved : &whole);
      devices[j] = {"d" + std::to_string(j), speed(rng), memory(rng)};
      if (sharded) {
        devices[j].groupSumLatencySeconds = 0.1;
        devices[j].groupSumSecondsPerByte = 0.5;
      }
    }
    StagePartitionOptions options;
    options.stateBytesPerParameterByte = 2;
    options.microBatches = 1 + trial % 3;
    options.recompute = static_cast<MemoryOption>(trial % 3);
    double expected = oracle::bestCut(n, stages, [&](int j, int first,
                                                     int last) {
      const std::vector<ChainBlock> &chain = *chains[j];
      StageMemory mem = stageMemory(chain, first, last, j, stages, options,
                                    devices[j].memoryBytes);
      if (mem.bytes > devices[j].memoryBytes)
        return std::numeric_limits<double>::infinity();
      double flops = mem.recomputeFlops, groupSums = 0, sumBytes = 0;
      for (int i = first; i < last; ++i) {
        flops += chain[i].flops;
        groupSums += chain[i].groupSums;
        sumBytes += chain[i].groupSumBytes;
      }
      return devices[j].seconds(flops, groupSums, sumBytes);
    });
    StagePlan plan;
    std::string error;
    bool ok = partitionChain(chains, devices, options, plan, error);
    ASSERT_EQ(ok, expected != std::numeric_limits<double>::infinity())
        << "trial " << trial << ": " << error;
    if (!ok)
      continue;
    ++feasible;
    EXPECT_NEAR(plan.bottleneckSeconds, expected, 1e-9) << "trial " << trial;
    // The single chain's answer differs where a stage is sharded.
    StagePlan single;
    std::string ignored;
    if (!partitionChain(whole, devices, options, single, ignored) ||
        std::abs(single.bottleneckSeconds - plan.bottleneckSeconds) > 1e-9)
      ++differs;
  }
  EXPECT_GT(feasible, 50);
  EXPECT_GT(differs, 20);
}

TEST(StagePartition, ChainPerStageRefusesMismatchedChains) {
  std::vector<ChainBlock> three(3, ChainBlock{1, 1, 1}),
      two(2, ChainBlock{1, 1, 1});
  std::vector<StageDevice> devices{{"a", 1, 100}, {"b", 1, 100}};
  StagePartitionOptions options;
  StagePlan plan;
  std::string error;
  using Chains = std::vector<const std::vector<ChainBlock> *>;
  EXPECT_FALSE(
      partitionChain(Chains{&three, &two}, devices, options, plan, error));
  EXPECT_EQ(error, "the stages' chains differ in length (3 and 2 blocks)");
  EXPECT_FALSE(partitionChain(Chains{&three}, devices, options, plan, error));
  EXPECT_EQ(error, "a chain per stage is needed: 1 chains for 2 stages");
}

// The runtime's memory, by hand: two blocks of 1 GB of f32 parameters
// (2.5e8 elements each), 2 GB of saved activations of which 0.5 GB is the
// block's input, on a data-parallel stage of 4 with AdamW. Per element the
// runtime holds 4 bytes of weights, 4 of gradient sums, 4 of buckets and 8
// of moments: 5 bytes per parameter byte, 10 GB, plus 4 GB of activations.
// Sharded, the moments (2 bytes per parameter byte) are a quarter: -3 GB.
// Recomputing, each block keeps its input (1 GB) and one block's other
// 1.5 GB live again while it runs: 2.5 GB instead of 4, and its backward
// runs the forward again (2 x (300 - 200) FLOPs).
TEST(StagePartition, MemoryOptionsByHand) {
  ChainBlock block{300, 1e9, 2e9, 200, 0.5e9};
  std::vector<ChainBlock> blocks(2, block);
  StagePartitionOptions options;
  options.dataParallel = 4;
  options.shardState = MemoryOption::WhenNeeded;
  options.recompute = MemoryOption::WhenNeeded;
  auto at = [&](double capacity) {
    return stageMemory(blocks, 0, 2, 0, 1, options, capacity);
  };
  StageMemory plain = at(16e9);
  EXPECT_DOUBLE_EQ(plain.bytes, 14e9);
  EXPECT_FALSE(plain.sharded || plain.recomputed);
  StageMemory sharded = at(12e9);
  EXPECT_DOUBLE_EQ(sharded.bytes, 11e9);
  EXPECT_TRUE(sharded.sharded);
  EXPECT_FALSE(sharded.recomputed);
  EXPECT_EQ(sharded.recomputeFlops, 0);
  StageMemory both = at(10e9);
  EXPECT_DOUBLE_EQ(both.bytes, 9.5e9);
  EXPECT_TRUE(both.sharded && both.recomputed);
  EXPECT_DOUBLE_EQ(both.recomputeFlops, 200);
  // Nothing fits 9 GB: the smallest footprint, every option on.
  EXPECT_DOUBLE_EQ(at(9e9).bytes, 9.5e9);
  // Without sharding, recomputation alone: 10 + 2.5 GB.
  options.shardState = MemoryOption::Never;
  EXPECT_DOUBLE_EQ(at(13e9).bytes, 12.5e9);
  EXPECT_TRUE(at(13e9).recomputed);
  // One device: nothing to shard over.
  options.shardState = MemoryOption::Always;
  options.dataParallel = 1;
  options.recompute = MemoryOption::Never;
  StageMemory alone = at(1e12);
  EXPECT_FALSE(alone.sharded);
  // One device holds no buckets: (4 + 4 + 8) x 0.25 = 4 per parameter byte.
  EXPECT_DOUBLE_EQ(alone.bytes, 8e9 + 4e9);
  // Always recompute, even where it fits; a receive buffer per micro-batch
  // on a middle stage (2 directions x 3 micro-batches x 1 MB).
  options.recompute = MemoryOption::Always;
  options.boundaryBytes = 1e6;
  options.microBatches = 3;
  StageMemory middle = stageMemory(blocks, 0, 2, 1, 3, options, 1e12);
  EXPECT_TRUE(middle.recomputed);
  EXPECT_DOUBLE_EQ(middle.bytes, 8e9 + 6e6 + 2 * 1e9 + 1.5e9);
  // The largest op's scratch (attention's probabilities), once, not per
  // micro-batch in flight; not in the simple model.
  std::vector<ChainBlock> scratchy = blocks;
  scratchy[0].scratchBytes = 3e8;
  scratchy[1].scratchBytes = 5e8;
  EXPECT_DOUBLE_EQ(stageMemory(scratchy, 0, 2, 1, 3, options, 1e12).bytes,
                   middle.bytes + 5e8);
  StagePartitionOptions simple = options;
  simple.stateBytesPerParameterByte = 4;
  EXPECT_DOUBLE_EQ(stageMemory(scratchy, 0, 2, 1, 3, simple, 1e12).bytes,
                   stageMemory(blocks, 0, 2, 1, 3, simple, 1e12).bytes);
  // The partitioner charges the recomputation to the stage's time.
  StagePlan plan;
  std::string error;
  ASSERT_TRUE(partitionChain(blocks, {{"gpu", 100, 16e9}}, options, plan,
                             error))
      << error;
  EXPECT_DOUBLE_EQ(plan.stageSeconds[0], (600 + 200) / 100.0);
  EXPECT_TRUE(plan.stageMemory[0].recomputed);
}

// A tied parameter (GPT's table, 1 GB, owned by block 0 and read by block
// 2): on separate stages the runtime holds on the owner's stage the copy it
// sends and the gradient it gets back (2 GB more), on the reader's the
// weight, its gradient sums and the copy of them it sends (3 GB); on one
// stage nothing more. The simple model (an explicit state factor) leaves
// them out.
TEST(StagePartition, TiedParametersAcrossStagesByHand) {
  // A tied 1 GB parameter in the runtime's model: the reader holds the
  // weight it receives twice (its receive buffer and the value); the owner
  // holds the buffer its gradient comes back in, and its backward ends
  // holding its own gradient, the received one and their sum (3 GB) with
  // one micro-batch fewer in flight -- the peak when a micro-batch's
  // activations on the stage (2 GB) are under 3 GB; with both readers on
  // one stage its three blocks' (6 GB) are the peak.
  ChainBlock block{300, 1e9, 2e9, 200, 0.5e9};
  std::vector<ChainBlock> blocks(3, block);
  StagePartitionOptions options;
  auto bytes = [&](int first, int last, int stage, int stages) {
    return stageMemory(blocks, first, last, stage, stages, options, 1e12)
        .bytes;
  };
  double owner = bytes(0, 1, 0, 2), reader = bytes(1, 3, 1, 2),
         whole = bytes(0, 3, 0, 1);
  options.tied.push_back({0, 2, 1e9});
  EXPECT_DOUBLE_EQ(bytes(0, 1, 0, 2) - owner, 1e9 + (3e9 - 2e9));
  EXPECT_DOUBLE_EQ(bytes(1, 3, 1, 2) - reader, 2e9);
  EXPECT_DOUBLE_EQ(bytes(0, 3, 0, 1), whole);
  // Smaller ones: on one stage too, 3 GB against 3 x 0.5 GB.
  for (ChainBlock &b : blocks)
    b.activationBytes = 0.5e9;
  options.tied.clear();
  whole = bytes(0, 3, 0, 1);
  options.tied.push_back({0, 2, 1e9});
  EXPECT_DOUBLE_EQ(bytes(0, 3, 0, 1) - whole, 3e9 - 1.5e9);
  // Larger activations: the micro-batch's own are the peak, with the
  // copy the owner sends still held beside them (and its buffer).
  for (ChainBlock &b : blocks)
    b.activationBytes = 4e9;
  options.tied.clear();
  owner = bytes(0, 1, 0, 2);
  options.tied.push_back({0, 2, 1e9});
  EXPECT_DOUBLE_EQ(bytes(0, 1, 0, 2) - owner, 1e9 + 1e9);
  options.stateBytesPerParameterByte = 4;
  double simple = bytes(0, 1, 0, 2);
  options.tied.clear();
  EXPECT_DOUBLE_EQ(bytes(0, 1, 0, 2), simple);
}

TEST(StagePartition, HeldBytesStandForSavedOnesInTheRuntimeModel) {
  // What the runtime holds (heldBytes) replaces what the ops save in the
  // runtime's model, per micro-batch in flight; the simple model (a state
  // factor) keeps the saved bytes.
  ChainBlock block{300, 1e9, 2e9, 200, 0.5e9};
  std::vector<ChainBlock> blocks(2, block);
  StagePartitionOptions options;
  options.microBatches = 4;
  auto bytes = [&] {
    return stageMemory(blocks, 0, 2, 0, 2, options, 1e12).bytes;
  };
  int inFlight = inFlightMicroBatches(options, 0, 2);
  double saved = bytes();
  for (ChainBlock &b : blocks)
    b.heldBytes = 3e9;
  EXPECT_DOUBLE_EQ(bytes() - saved, inFlight * 2 * (3e9 - 2e9));
  options.stateBytesPerParameterByte = 4;
  double simple = bytes();
  for (ChainBlock &b : blocks)
    b.heldBytes = -1;
  EXPECT_DOUBLE_EQ(bytes(), simple);
}

TEST(StagePartition, FastDevicesGetProportionallyMoreLayers) {
  // 28 equal layers; two devices 4x faster than the other six.
  std::vector<ChainBlock> blocks(28, ChainBlock{1e12, 1e6, 1e6});
  std::vector<StageDevice> devices;
  for (int j = 0; j < 8; ++j)
    devices.push_back({"gpu" + std::to_string(j), j < 2 ? 4e12 : 1e12, 1e12});
  StagePlan plan;
  std::string error;
  ASSERT_TRUE(partitionChain(blocks, devices, {}, plan, error)) << error;
  // Optimum: 8 layers on each fast device, 2 on each slow one: 2 s.
  EXPECT_EQ(plan.bounds,
            (std::vector<int>{0, 8, 16, 18, 20, 22, 24, 26, 28}));
  EXPECT_DOUBLE_EQ(plan.bottleneckSeconds, 2.0);
}

TEST(StagePartition, MemoryForcesAnUnevenSplit) {
  // Equal speed, but stage 0 can hold only one layer's state.
  std::vector<ChainBlock> blocks(6, ChainBlock{1, 10, 0});
  std::vector<StageDevice> devices{{"small", 1, 45}, {"big", 1, 1000}};
  StagePlan plan;
  std::string error;
  ASSERT_TRUE(partitionChain(blocks, devices, {}, plan, error)) << error;
  EXPECT_EQ(plan.bounds, (std::vector<int>{0, 1, 6}));
}

TEST(StagePartition, InfeasibleNamesDeviceBytesAndCapacity) {
  std::vector<ChainBlock> blocks(4, ChainBlock{1, 1e9, 0});
  std::vector<StageDevice> devices{{"gpu0", 1, 8e9}, {"gpu1", 1, 6e9}};
  StagePlan plan;
  std::string error;
  ASSERT_FALSE(partitionChain(blocks, devices, {}, plan, error));
  EXPECT_EQ(error, "model does not fit: device gpu1 (stage 1) needs 8 GB but "
                   "has 6 GB, even in the most memory-balanced split");
  ASSERT_FALSE(partitionChain(std::vector<ChainBlock>(1), devices, {}, plan,
                              error));
  EXPECT_EQ(error, "cannot split 1 blocks into 2 non-empty stages");
}

TEST(StagePartition, OneFOneBKeepsFewerMicroBatchesLaterInThePipeline) {
  StagePartitionOptions options;
  options.microBatches = 8;
  EXPECT_EQ(inFlightMicroBatches(options, 0, 4), 4);
  EXPECT_EQ(inFlightMicroBatches(options, 3, 4), 1);
  options.schedule = PipelineSchedule::GPipe;
  EXPECT_EQ(inFlightMicroBatches(options, 3, 4), 8);
}

} // namespace
