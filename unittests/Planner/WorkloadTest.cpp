//===- WorkloadTest.cpp - The model as every planner sees it --------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Workload.h"
#include "dtfm/Format/Int8.h"
#include "dtfm/Planner/CostModel.h"

#include <gtest/gtest.h>

using namespace dtfm;
using namespace dtfm::planner;

TEST(Workload, MicroBatchSizeScalesWorkNotParameters) {
  Workload w;
  w.blocks = {{1e12, 4e6, 2e6}, {3e12, 8e6, 6e6, 2e12, 1e6}};
  w.tied = {{0, 1, 4e6}};
  w.boundaryBytes = 1e6;
  w.gradientBytesPerParameterByte = 2;
  w.trainableParameters = 6e6;
  w.layers = 2;
  w.microBatchSize = 4;
  Workload doubled = w.withMicroBatchSize(8);
  EXPECT_EQ(doubled.microBatchSize, 8);
  ASSERT_EQ(doubled.blocks.size(), 2u);
  EXPECT_DOUBLE_EQ(doubled.blocks[1].flops, 6e12);
  EXPECT_DOUBLE_EQ(doubled.blocks[1].activationBytes, 12e6);
  EXPECT_DOUBLE_EQ(doubled.blocks[1].parameterBytes, 8e6);
  // What recomputation keeps scales too; unknown stays unknown.
  EXPECT_DOUBLE_EQ(doubled.blocks[1].inputBytes, 2e6);
  EXPECT_DOUBLE_EQ(doubled.blocks[1].backwardFlops, 4e12);
  EXPECT_LT(doubled.blocks[0].inputBytes, 0);
  EXPECT_DOUBLE_EQ(doubled.boundaryBytes, 2e6);
  EXPECT_DOUBLE_EQ(doubled.tied[0].bytes, 4e6);
  EXPECT_EQ(doubled.trainableParameters, w.trainableParameters);
  EXPECT_EQ(doubled.gradientBytesPerParameterByte, 2);
  EXPECT_DOUBLE_EQ(w.parameterBytes(), 12e6);
  EXPECT_DOUBLE_EQ(doubled.parameterBytes(), 12e6);
}

// shard-state and recompute: the three spellings; sharded state only
// where the syncs are synchronous and dense (or int8 only where it pays).
TEST(Workload, MemoryOptions) {
  TrainingOptions t;
  std::string error;
  ASSERT_TRUE(parseMemoryOptions("all", "auto", t, error)) << error;
  EXPECT_EQ(t.stages.recompute, MemoryOption::Always);
  EXPECT_EQ(t.stages.shardState, MemoryOption::WhenNeeded);
  EXPECT_FALSE(parseMemoryOptions("sometimes", "auto", t, error));
  EXPECT_EQ(error, "recompute must be auto, all or none, got 'sometimes'");
  EXPECT_FALSE(parseMemoryOptions("none", "1", t, error));
  EXPECT_EQ(error, "shard-state must be auto, all or none, got '1'");
  t.syncEvery = 10;
  ASSERT_TRUE(parseMemoryOptions("none", "all", t, error)) << error;
  EXPECT_EQ(t.stages.shardState, MemoryOption::Never);
  t.syncEvery = 0;
  t.dpCompression.codec = format::WireCodec::Int8;
  ASSERT_TRUE(parseMemoryOptions("none", "all", t, error)) << error;
  EXPECT_EQ(t.stages.shardState, MemoryOption::Never);
}

TEST(Workload, CommunicationOptions) {
  TrainingOptions t;
  std::string error;
  ASSERT_TRUE(parseCommunication("ring", 20, "auto", "0", "none", "none", t, error)) << error;
  EXPECT_EQ(t.sync, GradientSync::Ring);
  EXPECT_EQ(t.compression.targetRatio, 20);
  EXPECT_EQ(t.bucketCapBytes, -1);
  ASSERT_TRUE(parseCommunication("ps", 1, "4", "0", "none", "none", t, error));
  EXPECT_EQ(t.sync, GradientSync::ParameterServer);
  EXPECT_EQ(t.bucketCapBytes, 4.0 * 1024 * 1024);
  ASSERT_TRUE(parseCommunication("auto", 1, "0", "0", "none", "none", t, error));
  EXPECT_EQ(t.sync, GradientSync::Auto);
  EXPECT_EQ(t.bucketCapBytes, 0);
  EXPECT_FALSE(parseCommunication("tree", 1, "auto", "0", "none", "none", t, error));
  EXPECT_EQ(error, "unknown sync 'tree' (expected auto, ps or ring)");
  EXPECT_FALSE(parseCommunication("auto", 0.5, "auto", "0", "none", "none", t, error));
  EXPECT_EQ(error, "compress-ratio must be >= 1 (1: dense), found 0.500000");
  EXPECT_FALSE(parseCommunication("auto", 1, "big", "0", "none", "none", t, error));
  EXPECT_EQ(error, "bucket-mb must be auto or a number of MiB in [0, 1e6] (0: "
                   "one bucket), got 'big'");
  ASSERT_TRUE(parseCommunication("auto", 1, "auto", "10", "none", "none", t, error));
  EXPECT_EQ(t.syncEvery, 10);
  EXPECT_FALSE(parseCommunication("auto", 1, "auto", "-1", "none", "none", t, error));
  EXPECT_EQ(error, "sync-every must be auto or between 0 and 1000000, got "
                   "'-1'");
  for (const char *bad : {"", "x", "4.5", "1000001", "10 ", "99999999999999999999"}) {
    EXPECT_FALSE(parseCommunication("auto", 1, "auto", bad, "none", "none", t, error))
        << bad;
    EXPECT_EQ(error, std::string("sync-every must be auto or between 0 and "
                                 "1000000, got '") + bad + "'");
  }
  ASSERT_TRUE(parseCommunication("auto", 1, "auto", "auto", "none", "none", t, error));
  EXPECT_EQ(t.syncEvery, kSyncEveryAuto);
  EXPECT_FALSE(
      parseCommunication("auto", 1, "auto", "auto", "topk:10", "none", t, error));
  ASSERT_TRUE(parseCommunication("auto", 1, "auto", "0", "int8", "none", t, error));
  EXPECT_EQ(t.dpCompression.codec, format::WireCodec::Int8);
  ASSERT_TRUE(parseCommunication("auto", 1, "auto", "0", "auto", "none", t, error));
  EXPECT_TRUE(t.dpCompression.automatic);
  ASSERT_TRUE(parseCommunication("auto", 1, "auto", "0", "topk:100", "none", t, error));
  EXPECT_EQ(t.dpCompression.codec, format::WireCodec::TopK);
  EXPECT_EQ(t.dpCompression.ratio, 100);
  EXPECT_EQ(codecChoiceName(t.dpCompression), "topk:100");
  EXPECT_EQ(codecChoiceName({format::WireCodec::TopK, false, 2.5}), "topk:2.5");
  EXPECT_EQ(codecChoiceName({format::WireCodec::Int8, false, 0}), "int8");
  for (const char *bad : {"fp8", "topk", "topk:", "topk:1", "topk:0.5",
                          "topk:x", "topk:10x", "topk:1e7", "topk:nan"}) {
    EXPECT_FALSE(parseCommunication("auto", 1, "auto", "0", bad, "none", t, error))
        << bad;
    EXPECT_EQ(error, std::string("unknown dp-compression '") + bad +
                         "' (expected none, int8, topk:R (R > 1), int4 or auto)");
  }
  EXPECT_FALSE(parseCommunication("auto", 1, "auto", "4", "topk:10", "none", t, error));
  EXPECT_EQ(error, "dp-compression=topk:10 with sync-every: local steps' "
                   "parameter exchange takes dp-compression none, int8 or "
                   "int4");
  // int4: local steps' outer exchange only.
  EXPECT_FALSE(parseCommunication("auto", 1, "auto", "0", "int4", "none", t,
                                  error));
  EXPECT_EQ(error, "dp-compression=int4 takes local steps' exchange only "
                   "(sync-every=H, H >= 1); every step's gradient exchange "
                   "takes dp-compression none, int8 or topk");
  EXPECT_FALSE(parseCommunication("auto", 1, "auto", "auto", "int4", "none", t,
                                  error));
  EXPECT_TRUE(parseCommunication("auto", 1, "auto", "10", "int4", "none", t,
                                 error))
      << error;
  EXPECT_EQ(t.dpCompression.codec, format::WireCodec::Int4);
  EXPECT_FALSE(parseCommunication("auto", 1, "auto", "10", "none", "int4", t,
                                  error));
  // auto: int8 when it saves at least 20% of the exchange; never top-k.
  CodecChoice automatic{format::WireCodec::Dense, true, 0};
  EXPECT_EQ(chooseCodec(automatic, 1.0, 0.8), format::WireCodec::Int8);
  EXPECT_EQ(chooseCodec(automatic, 1.0, 0.81), format::WireCodec::Dense);
  EXPECT_EQ(chooseCodec({format::WireCodec::Int8}, 1.0, 2.0),
            format::WireCodec::Int8);
  EXPECT_EQ(chooseCodec({format::WireCodec::Dense}, 1.0, 0.1),
            format::WireCodec::Dense);
  EXPECT_EQ(chooseCodec({format::WireCodec::TopK, false, 10}, 1.0, 0.1),
            format::WireCodec::TopK);
}

// sync-every=auto: synchronous while the exchange left after the backward
// costs at most 10% of the pipeline; otherwise the smallest H whose 1/H of
// a parameter exchange does, and 100 at most.
TEST(WorkloadTest, AutoSyncEveryTakesTheSmallestHThatFits) {
  EXPECT_EQ(chooseSyncEvery(10, 1.0, 50), 0);    // 1 s <= 10% of 10 s
  EXPECT_EQ(chooseSyncEvery(10, 1.01, 2), 2);    // 2 / 2 = 1 s
  EXPECT_EQ(chooseSyncEvery(10, 5, 9.9), 10);    // 9.9 / 5 > 1, / 10 fits
  EXPECT_EQ(chooseSyncEvery(10, 5, 50), 50);
  EXPECT_EQ(chooseSyncEvery(10, 5, 1e6), 100);   // nothing fits: the largest
  EXPECT_EQ(chooseSyncEvery(0, 0, 0), 0);
}

// Top-k exchanges cost a ring allgather of every member's sparse message:
// n - 1 hops of 4 + 8 k bytes on the slowest link, hand-computed here.
TEST(WorkloadTest, TopKExchangeIsARingAllGatherOfSparseMessages) {
  Cluster cluster;
  cluster.name = "three";
  for (int i = 0; i < 3; ++i) {
    Device d;
    d.name = "d" + std::to_string(i);
    d.region = "r";
    d.peakFlops = 1e12;
    cluster.devices.push_back(d);
  }
  // 10 ms and 0.8 Gbit/s (1e8 bytes/s); the ring's hop 2 -> 0 at half that.
  cluster.delayMs = SquareMatrix(3, 10);
  cluster.bandwidthGbps = SquareMatrix(3, 0.8);
  cluster.bandwidthGbps(2, 0) = 0.4;
  std::vector<int> group = {0, 1, 2};
  // 4e6 bytes of f32 gradients: 1e6 values, 1e4 kept at R = 100.
  double sparse = 4 + 8 * 1e4;
  EXPECT_DOUBLE_EQ(groupExchangeSeconds(cluster, group, 4e6, 4, 3, true,
                                        format::WireCodec::TopK, 100),
                   2 * (0.01 + sparse / 5e7));
  EXPECT_DOUBLE_EQ(groupRingAllGatherCost(cluster, {0, 1}, sparse),
                   0.01 + sparse / 1e8);
  // Dense and int8 as the ring all-reduce of their bytes.
  EXPECT_DOUBLE_EQ(groupExchangeSeconds(cluster, group, 4e6, 4, 3, true,
                                        format::WireCodec::Dense, 0),
                   groupSyncCost(cluster, group, 4e6, 3, true));
  EXPECT_DOUBLE_EQ(
      groupExchangeSeconds(cluster, group, 4e6, 4, 3, true,
                           format::WireCodec::Int8, 0),
      groupSyncCost(cluster, group, format::int8Bytes(1000000), 3, true));
}
