//===- Workload.cpp - The model as every planner sees it ------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Workload.h"
#include "dtfm/Planner/Buckets.h"
#include "dtfm/Support/NameTable.h"

using namespace dtfm::planner;

double Workload::parameterBytes() const {
  double sum = 0;
  for (const ChainBlock &block : blocks)
    sum += block.parameterBytes;
  return sum;
}

Workload Workload::withMicroBatchSize(int64_t size) const {
  double scale =
      static_cast<double>(size) / static_cast<double>(microBatchSize);
  Workload scaled = *this;
  scaled.blocks.clear();
  for (const ChainBlock &block : blocks)
    scaled.blocks.push_back({block.flops * scale, block.parameterBytes,
                             block.activationBytes * scale,
                             block.backwardFlops * scale});
  scaled.boundaryBytes = boundaryBytes * scale;
  scaled.microBatchSize = size;
  return scaled;
}

bool dtfm::planner::parseCommunication(const std::string &sync,
                                       double compressRatio,
                                       const std::string &bucketMb,
                                       int64_t syncEvery,
                                       const std::string &dpCompression,
                                       TrainingOptions &training,
                                       std::string &error) {
  std::optional<DpCompression> compression =
      parseDpCompression(dpCompression);
  if (!compression) {
    error = "unknown dp-compression '" + dpCompression + "' (expected " +
            kDpCompressionChoices + ")";
    return false;
  }
  training.dpCompression = *compression;
  if (!parseBucketCap(bucketMb, training.bucketCapBytes, error))
    return false;
  if (syncEvery < 0 || syncEvery > 1000000) {
    error = "sync-every must be between 0 and 1000000, got " +
            std::to_string(syncEvery);
    return false;
  }
  training.syncEvery = syncEvery;
  std::optional<GradientSync> parsed = parseGradientSync(sync);
  if (!parsed) {
    error =
        "unknown sync '" + sync + "' (expected " + kGradientSyncChoices + ")";
    return false;
  }
  training.sync = *parsed;
  if (!(compressRatio >= 1)) {
    error = "compress-ratio must be >= 1 (1: dense), found " +
            std::to_string(compressRatio);
    return false;
  }
  training.compression.targetRatio = compressRatio;
  return true;
}

static constexpr dtfm::NameEntry<dtfm::planner::GradientSync> kSyncNames[] = {
    {dtfm::planner::GradientSync::Auto, "auto"},
    {dtfm::planner::GradientSync::ParameterServer, "ps"},
    {dtfm::planner::GradientSync::Ring, "ring"}};

const char *dtfm::planner::gradientSyncName(GradientSync sync) {
  return nameOf(kSyncNames, sync);
}

std::optional<dtfm::planner::GradientSync>
dtfm::planner::parseGradientSync(std::string_view name) {
  return valueNamed(kSyncNames, name);
}

static constexpr dtfm::NameEntry<dtfm::planner::DpCompression>
    kCompressionNames[] = {{dtfm::planner::DpCompression::None, "none"},
                           {dtfm::planner::DpCompression::Int8, "int8"},
                           {dtfm::planner::DpCompression::Auto, "auto"}};

const char *dtfm::planner::dpCompressionName(DpCompression compression) {
  return nameOf(kCompressionNames, compression);
}

std::optional<dtfm::planner::DpCompression>
dtfm::planner::parseDpCompression(std::string_view name) {
  return valueNamed(kCompressionNames, name);
}

bool dtfm::planner::compressesGroup(DpCompression mode, double denseSeconds,
                                    double int8Seconds) {
  if (mode != DpCompression::Auto)
    return mode == DpCompression::Int8;
  return int8Seconds <= (1 - kInt8MinSaving) * denseSeconds;
}
