//===- WorkloadTest.cpp - The model as every planner sees it --------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Workload.h"

#include <gtest/gtest.h>

using namespace dtfm::planner;

TEST(Workload, MicroBatchSizeScalesWorkNotParameters) {
  Workload w;
  w.blocks = {{1e12, 4e6, 2e6}, {3e12, 8e6, 6e6}};
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
  EXPECT_DOUBLE_EQ(doubled.boundaryBytes, 2e6);
  EXPECT_DOUBLE_EQ(doubled.tied[0].bytes, 4e6);
  EXPECT_EQ(doubled.trainableParameters, w.trainableParameters);
  EXPECT_EQ(doubled.gradientBytesPerParameterByte, 2);
  EXPECT_DOUBLE_EQ(w.parameterBytes(), 12e6);
  EXPECT_DOUBLE_EQ(doubled.parameterBytes(), 12e6);
}

TEST(Workload, CommunicationOptions) {
  TrainingOptions t;
  std::string error;
  ASSERT_TRUE(parseCommunication("ring", 20, "auto", 0, "none", t, error)) << error;
  EXPECT_EQ(t.sync, GradientSync::Ring);
  EXPECT_EQ(t.compression.targetRatio, 20);
  EXPECT_EQ(t.bucketCapBytes, -1);
  ASSERT_TRUE(parseCommunication("ps", 1, "4", 0, "none", t, error));
  EXPECT_EQ(t.sync, GradientSync::ParameterServer);
  EXPECT_EQ(t.bucketCapBytes, 4.0 * 1024 * 1024);
  ASSERT_TRUE(parseCommunication("auto", 1, "0", 0, "none", t, error));
  EXPECT_EQ(t.sync, GradientSync::Auto);
  EXPECT_EQ(t.bucketCapBytes, 0);
  EXPECT_FALSE(parseCommunication("tree", 1, "auto", 0, "none", t, error));
  EXPECT_EQ(error, "unknown sync 'tree' (expected auto, ps or ring)");
  EXPECT_FALSE(parseCommunication("auto", 0.5, "auto", 0, "none", t, error));
  EXPECT_EQ(error, "compress-ratio must be >= 1 (1: dense), found 0.500000");
  EXPECT_FALSE(parseCommunication("auto", 1, "big", 0, "none", t, error));
  EXPECT_EQ(error, "bucket-mb must be auto or a number of MiB in [0, 1e6] (0: "
                   "one bucket), got 'big'");
  ASSERT_TRUE(parseCommunication("auto", 1, "auto", 10, "none", t, error));
  EXPECT_EQ(t.syncEvery, 10);
  EXPECT_FALSE(parseCommunication("auto", 1, "auto", -1, "none", t, error));
  EXPECT_EQ(error, "sync-every must be between 0 and 1000000, got -1");
  ASSERT_TRUE(parseCommunication("auto", 1, "auto", 0, "int8", t, error));
  EXPECT_EQ(t.dpCompression, DpCompression::Int8);
  ASSERT_TRUE(parseCommunication("auto", 1, "auto", 0, "auto", t, error));
  EXPECT_EQ(t.dpCompression, DpCompression::Auto);
  EXPECT_FALSE(parseCommunication("auto", 1, "auto", 0, "fp8", t, error));
  EXPECT_EQ(error,
            "unknown dp-compression 'fp8' (expected none, int8 or auto)");
  // auto: int8 when it saves at least 20% of the exchange.
  EXPECT_TRUE(compressesGroup(DpCompression::Auto, 1.0, 0.8));
  EXPECT_FALSE(compressesGroup(DpCompression::Auto, 1.0, 0.81));
  EXPECT_TRUE(compressesGroup(DpCompression::Int8, 1.0, 2.0));
  EXPECT_FALSE(compressesGroup(DpCompression::None, 1.0, 0.1));
}
