//===- Workload.cpp - The model as every planner sees it ------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Planner/Workload.h"
#include "dtfm/Planner/Buckets.h"
#include "dtfm/Planner/CostModel.h"
#include "dtfm/Support/NameTable.h"

#include <cerrno>
#include <cstdio>
#include <iterator>
#include <cstdlib>

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
  // Everything per micro-batch scales; the parameters and the number of
  // sums over a tensor-parallel group do not. Bytes moved scale whole: the
  // weights a matmul reads do not grow with the batch, but a matmul is far
  // above any ridge either way (and the plan's passes cost the chosen
  // micro-batch exactly).
  for (ChainBlock block : blocks) {
    block.flops *= scale;
    block.forwardWork.scale(scale);
    block.backwardWork.scale(scale);
    block.activationBytes *= scale;
    if (block.heldBytes >= 0)
      block.heldBytes *= scale;
    if (block.weightHeldBytes >= 0)
      block.weightHeldBytes *= scale;
    block.backwardFlops *= scale;
    block.weightFlops *= scale;
    if (block.inputBytes >= 0)
      block.inputBytes *= scale;
    block.scratchBytes *= scale;
    block.groupSumBytes *= scale;
    scaled.blocks.push_back(block);
  }
  scaled.boundaryBytes = boundaryBytes * scale;
  scaled.microBatchSize = size;
  return scaled;
}

bool dtfm::planner::parseMemoryOptions(const std::string &recompute,
                                       const std::string &shardState,
                                       TrainingOptions &training,
                                       std::string &error) {
  std::optional<MemoryOption> again = parseMemoryOption(recompute);
  std::optional<MemoryOption> shard = parseMemoryOption(shardState);
  if (!again || !shard) {
    error = std::string(again ? "shard-state" : "recompute") +
            " must be " + kMemoryOptionChoices + ", got '" +
            (again ? shardState : recompute) + "'";
    return false;
  }
  training.stages.recompute = *again;
  bool synchronousDense =
      training.syncEvery == 0 &&
      training.dpCompression.codec == format::WireCodec::Dense;
  training.stages.shardState = synchronousDense ? *shard : MemoryOption::Never;
  return true;
}

bool dtfm::planner::checkCodecForSyncs(format::WireCodec codec,
                                       const std::string &spelling,
                                       int64_t syncEvery, std::string &error) {
  const format::WireCodecInfo &info = format::wireCodecInfo(codec);
  if (!info.localSteps && syncEvery != 0) {
    error = "dp-compression=" + spelling +
            " with sync-every: local steps' parameter exchange takes "
            "dp-compression " +
            format::wireCodecNames(format::carriesLocalSteps);
    return false;
  }
  if (!info.gradientSyncs && syncEvery < 1) {
    error = "dp-compression=" + spelling +
            " takes local steps' exchange only (sync-every=H, H >= 1); every "
            "step's gradient exchange takes dp-compression " +
            format::wireCodecNames(format::carriesGradientSyncs);
    return false;
  }
  return true;
}

bool dtfm::planner::parseCommunication(const std::string &sync,
                                       double compressRatio,
                                       const std::string &bucketMb,
                                       const std::string &syncEveryText,
                                       const std::string &dpCompression,
                                       const std::string &ppCompression,
                                       TrainingOptions &training,
                                       std::string &error) {
  std::optional<CodecChoice> linkCodec =
      parseCodecChoice(ppCompression, CodecUse::PipelineTransfers);
  if (!linkCodec) {
    error = "unknown pp-compression '" + ppCompression + "' (expected " +
            codecChoices(CodecUse::PipelineTransfers) + ")";
    return false;
  }
  training.compression.linkCodec = *linkCodec;
  std::optional<CodecChoice> compression =
      parseCodecChoice(dpCompression, CodecUse::Gradients);
  if (!compression) {
    error = "unknown dp-compression '" + dpCompression + "' (expected " +
            codecChoices(CodecUse::Gradients) + ")";
    return false;
  }
  training.dpCompression = *compression;
  if (!parseBucketCap(bucketMb, training.bucketCapBytes, error))
    return false;
  int64_t syncEvery = 0;
  if (!parseSyncEvery(syncEveryText, syncEvery, error))
    return false;
  training.syncEvery = syncEvery;
  if (!checkCodecForSyncs(compression->codec, dpCompression, syncEvery,
                          error))
    return false;
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

double dtfm::planner::groupExchangeSeconds(const GroupLinks &group,
                                           double denseBytes,
                                           double elementBytes,
                                           int dataParallelDegree, bool ring,
                                           format::WireCodec codec,
                                           double topkRatio) {
  double bytes =
      format::wireBytesOfDense(codec, denseBytes, elementBytes, topkRatio);
  if (!format::wireCodecInfo(codec).summable)
    return group.ringAllGatherCost(bytes);
  return group.syncCost(bytes, dataParallelDegree, ring);
}

double dtfm::planner::groupExchangeSeconds(
    const Cluster &cluster, const std::vector<int> &group, double denseBytes,
    double elementBytes, int dataParallelDegree, bool ring,
    format::WireCodec codec, double topkRatio) {
  return groupExchangeSeconds(GroupLinks(cluster, group), denseBytes,
                              elementBytes, dataParallelDegree, ring, codec,
                              topkRatio);
}

double
dtfm::planner::GradientSyncPlan::exchangeSeconds(double denseBytes) const {
  return groupExchangeSeconds(*links, denseBytes, elementBytes, degree,
                              algorithm == GradientSync::Ring, codec, ratio);
}

dtfm::planner::GradientSyncPlan dtfm::planner::planGradientSync(
    const GroupLinks &links, double denseBytes, double elementBytes, int degree,
    GradientSync sync, const CodecChoice &compression) {
  GradientSyncPlan plan;
  plan.links = &links;
  plan.elementBytes = elementBytes;
  plan.degree = degree;
  plan.ratio = compression.ratio;
  plan.algorithm = sync;
  if (sync == GradientSync::Auto)
    plan.algorithm = links.syncCost(denseBytes, degree, true) <
                             links.syncCost(denseBytes, degree, false)
                         ? GradientSync::Ring
                         : GradientSync::ParameterServer;
  auto secondsAs = [&](format::WireCodec codec) {
    return groupExchangeSeconds(links, denseBytes, elementBytes, degree,
                                plan.algorithm == GradientSync::Ring, codec,
                                compression.ratio);
  };
  plan.codec = chooseCodec(compression, secondsAs(format::WireCodec::Dense),
                           secondsAs(format::WireCodec::Int8));
  return plan;
}

int64_t dtfm::planner::chooseSyncEvery(double pipelineSeconds,
                                       double exposedSeconds,
                                       double exchangeSeconds) {
  double budget = kAutoSyncShare * pipelineSeconds;
  if (exposedSeconds <= budget)
    return 0;
  for (int64_t h : kSyncEveryCandidates)
    if (exchangeSeconds / static_cast<double>(h) <= budget)
      return h;
  return std::end(kSyncEveryCandidates)[-1];
}

bool dtfm::planner::parseSyncEvery(const std::string &text,
                                   int64_t &syncEvery, std::string &error) {
  if (text == "auto") {
    syncEvery = kSyncEveryAuto;
    return true;
  }
  char *end = nullptr;
  errno = 0;
  long long value = text.empty() ? -1 : std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || value < 0 ||
      value > 1000000) {
    error = "sync-every must be auto or between 0 and 1000000, got '" + text +
            "'";
    return false;
  }
  syncEvery = value;
  return true;
}
