//===- DtfmAttrs.cpp - dtfm attributes ------------------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The typed planning state's verifiers (DtfmAttrs.td). Stream entries are
// read through format/Stream.h, the one home of their spelling; the cluster
// converts to and from planner::Cluster here and is checked by
// planner::Cluster::validate, the one home of those checks.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Dialect/Dtfm/IR/DtfmAttrs.h"
#include "dtfm/Dialect/Dtfm/IR/DtfmDialect.h"
#include "dtfm/Format/Stream.h"
#include "dtfm/Planner/StagePartition.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

using namespace mlir;
using namespace mlir::dtfm;

//===----------------------------------------------------------------------===//
// Doubles
//===----------------------------------------------------------------------===//

FailureOr<double> mlir::dtfm::parseDouble(AsmParser &parser) {
  double value = 0;
  if (parser.parseFloat(value))
    return failure();
  return value;
}

void mlir::dtfm::printDouble(AsmPrinter &printer, double value) {
  // The fewest digits that read back as the same double: fixed-point
  // between 1 and 10^6 (10.0, 125.0), %g otherwise (0.1, 1.0e+12).
  bool fixed = std::fabs(value) >= 1 && std::fabs(value) < 1e6;
  char text[64];
  for (int digits = fixed ? 0 : 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof(text), fixed ? "%.*f" : "%.*g", digits, value);
    if (std::strtod(text, nullptr) == value)
      break;
  }
  std::string literal = text;
  // A float literal needs a `.`: 1e+14 -> 1.0e+14, 125 -> 125.0.
  if (std::isfinite(value) && literal.find('.') == std::string::npos) {
    size_t exponent = literal.find('e');
    literal.insert(exponent == std::string::npos ? literal.size() : exponent,
                   ".0");
  }
  printer << literal;
}

#define GET_ATTRDEF_CLASSES
FailureOr<std::optional<StoredDouble>>
mlir::dtfm::parseOptionalDouble(AsmParser &parser) {
  FailureOr<double> value = parseDouble(parser);
  if (failed(value))
    return failure();
  return std::optional<StoredDouble>(StoredDouble(*value));
}

FailureOr<bool> mlir::dtfm::parseFlag(AsmParser &parser) {
  if (succeeded(parser.parseOptionalKeyword("true")))
    return true;
  if (succeeded(parser.parseOptionalKeyword("false")))
    return false;
  return parser.emitError(parser.getCurrentLocation(),
                          "expected true or false");
}

#include "dtfm/Dialect/Dtfm/IR/DtfmAttrs.cpp.inc"

void DtfmDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dtfm/Dialect/Dtfm/IR/DtfmAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// ScheduleAttr
//===----------------------------------------------------------------------===//

LogicalResult ScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   StringRef kind, int64_t microBatches,
                                   ArrayRef<int64_t> peakInFlight,
                                   ArrayRef<StageStreamsAttr> stages,
                                   ArrayRef<int64_t> pipelineMicroBatches) {
  if (!::dtfm::planner::parsePipelineSchedule(kind))
    return emitError() << "dtfm.schedule: unknown kind '" << kind
                       << "' (expected "
                       << ::dtfm::planner::kPipelineScheduleChoices << ")";
  if (microBatches <= 0)
    return emitError() << "dtfm.schedule: micro_batches must be positive, got "
                       << microBatches;
  if (peakInFlight.size() != stages.size())
    return emitError() << "dtfm.schedule: " << stages.size() << " stages but "
                       << peakInFlight.size()
                       << " peak_in_flight values (one per stage)";
  int64_t numStages = stages.size();
  for (auto [s, stage] : llvm::enumerate(stages)) {
    ArrayRef<StringAttr> lists[3] = {stage.getRecv(), stage.getCompute(),
                                     stage.getSend()};
    for (int slot = 0; slot < 3; ++slot)
      for (StringAttr item : lists[slot]) {
        ::dtfm::format::StreamEntry entry;
        if (!::dtfm::format::parseEntry(item.getValue(),
                                        static_cast<::dtfm::format::Slot>(slot),
                                        entry) ||
            entry.peerStage >= numStages)
          return emitError() << "dtfm.schedule: stage " << s << " "
                             << ::dtfm::format::slotName(
                                    static_cast<::dtfm::format::Slot>(slot))
                             << ": malformed item '" << item.getValue() << "'";
      }
  }
  if (!pipelineMicroBatches.empty()) {
    int64_t largest = *llvm::max_element(pipelineMicroBatches);
    if (*llvm::min_element(pipelineMicroBatches) <= 0 ||
        largest != microBatches)
      return emitError() << "dtfm.schedule: pipeline_micro_batches must be "
                            "positive with micro_batches ("
                         << microBatches << ") the largest";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// ClusterAttr
//===----------------------------------------------------------------------===//

/// The planner's cluster from the attribute's parameters: N x N matrices,
/// or with `linkClasses` C x C links between classes. False with a
/// one-line `error` where their sizes do not agree.
static bool buildCluster(StringRef name, ArrayRef<DeviceAttr> devices,
                         ArrayRef<int64_t> linkClasses,
                         ArrayRef<StoredDouble> delayMs,
                         ArrayRef<StoredDouble> bandwidthGbps,
                         ::dtfm::planner::Cluster &cluster,
                         std::string &error) {
  cluster = ::dtfm::planner::Cluster();
  cluster.name = name.str();
  for (DeviceAttr device : devices) {
    ::dtfm::planner::Device &d = cluster.devices.emplace_back();
    d.name = device.getName().str();
    d.region = device.getRegion().str();
    d.peakFlops = device.getPeakFlops();
    d.efficiency = device.getEfficiency();
    d.memoryBytes = device.getMemoryBytes();
    d.node = device.getNode().str();
    d.memoryBandwidth = device.getMemoryBytesPerSecond();
  }
  size_t n = devices.size();
  if (!linkClasses.empty()) {
    ::dtfm::planner::LinkClasses links;
    for (int64_t c : linkClasses) {
      if (c < 0 || static_cast<uint64_t>(c) >= n) {
        error = "link_classes: class " + std::to_string(c) +
                " is not between 0 and the device count";
        return false;
      }
      links.classOf.push_back(static_cast<uint32_t>(c));
      links.count = std::max<size_t>(links.count, static_cast<size_t>(c) + 1);
    }
    links.delayMs.assign(delayMs.begin(), delayMs.end());
    links.bandwidthGbps.assign(bandwidthGbps.begin(), bandwidthGbps.end());
    return ::dtfm::planner::expandLinkClasses(links, cluster, error);
  }
  if (delayMs.size() != n * n || bandwidthGbps.size() != n * n) {
    error = std::to_string(n) + " devices need " + std::to_string(n * n) +
            " delay_ms and bandwidth_gbps values, got " +
            std::to_string(delayMs.size()) + " and " +
            std::to_string(bandwidthGbps.size());
    return false;
  }
  cluster.delayMs = ::dtfm::planner::SquareMatrix(n);
  cluster.bandwidthGbps = ::dtfm::planner::SquareMatrix(n);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) {
      cluster.delayMs(i, j) = delayMs[i * n + j];
      cluster.bandwidthGbps(i, j) = bandwidthGbps[i * n + j];
    }
  return true;
}

LogicalResult ClusterAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  StringRef name, StringRef source,
                                  ArrayRef<DeviceAttr> devices,
                                  ArrayRef<int64_t> linkClasses,
                                  ArrayRef<StoredDouble> delayMs,
                                  ArrayRef<StoredDouble> bandwidthGbps) {
  std::string error;
  ::dtfm::planner::Cluster cluster;
  if (!buildCluster(name, devices, linkClasses, delayMs, bandwidthGbps,
                    cluster, error) ||
      !cluster.validate(error))
    return emitError() << "dtfm.cluster: " << error;
  return success();
}

ClusterAttr ClusterAttr::get(MLIRContext *context,
                             const ::dtfm::planner::Cluster &cluster,
                             StringRef source) {
  SmallVector<DeviceAttr> devices;
  for (const ::dtfm::planner::Device &d : cluster.devices)
    devices.push_back(DeviceAttr::get(context, d.name, d.region, d.peakFlops,
                                      d.efficiency, d.memoryBytes, d.node,
                                      d.memoryBandwidth));
  // By class where the regions (or nodes) give every link: the N x N
  // matrices made the IR of 1024 devices 12 MB of links.
  SmallVector<int64_t> linkClasses;
  SmallVector<StoredDouble> delayMs, bandwidthGbps;
  ::dtfm::planner::LinkClasses links;
  if (::dtfm::planner::linksByClass(cluster, links)) {
    linkClasses.assign(links.classOf.begin(), links.classOf.end());
    delayMs.assign(links.delayMs.begin(), links.delayMs.end());
    bandwidthGbps.assign(links.bandwidthGbps.begin(),
                         links.bandwidthGbps.end());
  } else {
    size_t n = cluster.size();
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < n; ++j) {
        delayMs.push_back(cluster.delayMs(i, j));
        bandwidthGbps.push_back(cluster.bandwidthGbps(i, j));
      }
  }
  return get(context, cluster.name, source, devices, linkClasses, delayMs,
             bandwidthGbps);
}

::dtfm::planner::Cluster ClusterAttr::toCluster() const {
  // Verified when it was made: the sizes agree.
  ::dtfm::planner::Cluster cluster;
  std::string ignored;
  (void)buildCluster(getName(), getDevices(), getLinkClasses(), getDelayMs(),
                     getBandwidthGbps(), cluster, ignored);
  return cluster;
}

//===----------------------------------------------------------------------===//
// ShapeChoiceAttr and ShapeAttr
//===----------------------------------------------------------------------===//

/// The checks a shape and its runners-up share: positive degrees,
/// micro-batch size and count, and dp * pp = devices_used.
static LogicalResult
verifyShapeChoice(function_ref<InFlightDiagnostic()> emitError, StringRef what,
                  int64_t dp, int64_t pp, int64_t microBatchSize,
                  int64_t microBatches, int64_t devicesUsed) {
  if (dp <= 0 || pp <= 0 || microBatchSize <= 0 || microBatches <= 0)
    return emitError() << what
                       << ": dp, pp, micro_batch_size and micro_batches must "
                          "be positive, got "
                       << dp << ", " << pp << ", " << microBatchSize << ", "
                       << microBatches;
  if (dp * pp != devicesUsed)
    return emitError() << what << ": dp " << dp << " x pp " << pp
                       << " != devices_used " << devicesUsed;
  return success();
}

LogicalResult
ShapeChoiceAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        int64_t dp, int64_t pp, int64_t microBatchSize,
                        int64_t microBatches, int64_t devicesUsed,
                        StoredDouble iterationSeconds) {
  return verifyShapeChoice(emitError, "dtfm.shape runner-up", dp, pp,
                           microBatchSize, microBatches, devicesUsed);
}

LogicalResult ShapeAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, StringRef cluster,
    int64_t globalBatch, int64_t dp, int64_t pp, int64_t microBatchSize,
    int64_t microBatches, int64_t devicesUsed, StoredDouble iterationSeconds,
    StoredDouble pipelineSeconds, StoredDouble dataParallelSeconds,
    ArrayRef<StringAttr> devices, ArrayRef<ArrayAttr> stages,
    ArrayRef<ShapeChoiceAttr> runnersUp, ArrayRef<IdleDevicesAttr> idle,
    int64_t shapesScored, bool budgetExhausted, int64_t tp,
    StoredDouble boundSeconds, StringRef schedule) {
  if (!schedule.empty() && !::dtfm::planner::parsePipelineSchedule(schedule))
    return emitError() << "dtfm.shape: unknown schedule '" << schedule
                       << "' (expected "
                       << ::dtfm::planner::kPipelineScheduleChoices << ")";
  if (failed(verifyShapeChoice(emitError, "dtfm.shape", dp, pp, microBatchSize,
                               microBatches, devicesUsed)))
    return failure();
  if (!(boundSeconds >= 0) || !std::isfinite(boundSeconds)) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", double(boundSeconds));
    return emitError() << "dtfm.shape: bound_s " << text
                       << " is not a time in seconds (>= 0)";
  }
  if (tp < 0)
    return emitError() << "dtfm.shape: tensor-parallel degree " << tp
                       << " is below 0";
  if (static_cast<int64_t>(devices.size()) != devicesUsed)
    return emitError() << "dtfm.shape: " << devices.size()
                       << " devices but devices_used " << devicesUsed;
  if (dp * microBatchSize * microBatches != globalBatch)
    return emitError() << "dtfm.shape: dp " << dp << " x micro_batch_size "
                       << microBatchSize << " x micro_batches " << microBatches
                       << " != global_batch " << globalBatch;
  llvm::StringSet<> used;
  for (StringAttr device : devices)
    if (!used.insert(device.getValue()).second)
      return emitError() << "dtfm.shape: device '" << device.getValue()
                         << "' is listed twice";
  if (static_cast<int64_t>(stages.size()) != pp)
    return emitError() << "dtfm.shape: " << stages.size() << " stages but pp "
                       << pp;
  for (auto [s, stage] : llvm::enumerate(stages)) {
    if (static_cast<int64_t>(stage.size()) != dp)
      return emitError() << "dtfm.shape: stage " << s << " has " << stage.size()
                         << " devices but dp " << dp;
    for (Attribute a : stage) {
      auto name = llvm::dyn_cast<StringAttr>(a);
      if (!name || !used.contains(name.getValue()))
        return emitError() << "dtfm.shape: stage " << s << " holds " << a
                           << ", not one of the shape's devices";
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// AssignmentAttr
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// CandidatePlanAttr and CandidatesAttr
//===----------------------------------------------------------------------===//

LogicalResult
CandidatePlanAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                          StringRef algorithm,
                          std::optional<StoredDouble> iterationSeconds,
                          StringRef error, StringRef sameAs) {
  if (algorithm.empty())
    return emitError() << "dtfm.candidate_plan: algorithm must not be empty";
  if (iterationSeconds.has_value() == !error.empty())
    return emitError() << "dtfm.candidate_plan '" << algorithm
                       << "': needs iteration_s or error, not both";
  if (iterationSeconds && !(std::isfinite(iterationSeconds->value) &&
                            iterationSeconds->value > 0))
    return emitError() << "dtfm.candidate_plan '" << algorithm
                       << "': iteration_s must be positive and finite, got "
                       << iterationSeconds->value;
  if (!sameAs.empty() && !iterationSeconds)
    return emitError() << "dtfm.candidate_plan '" << algorithm
                       << "': same_as needs the shared iteration_s";
  return success();
}

LogicalResult
CandidatesAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       StringRef chosen, ArrayRef<CandidatePlanAttr> plans,
                       std::optional<StoredDouble> searchBudgetSeconds) {
  if (searchBudgetSeconds && !(std::isfinite(searchBudgetSeconds->value) &&
                               searchBudgetSeconds->value > 0))
    return emitError() << "dtfm.candidates: search_budget_s must be positive "
                          "and finite, got "
                       << searchBudgetSeconds->value;
  llvm::StringMap<std::optional<double>> seen;
  std::optional<double> chosenSeconds;
  double fastest = std::numeric_limits<double>::infinity();
  for (CandidatePlanAttr plan : plans) {
    std::optional<double> seconds;
    if (plan.getIterationS())
      seconds = plan.getIterationS()->value;
    if (!plan.getSameAs().empty()) {
      auto earlier = seen.find(plan.getSameAs());
      if (earlier == seen.end() || !earlier->second ||
          *earlier->second != seconds)
        return emitError() << "dtfm.candidates: '" << plan.getAlgorithm()
                           << "' is the same as '" << plan.getSameAs()
                           << "', which is not an earlier candidate of the "
                              "same time";
    }
    if (!seen.try_emplace(plan.getAlgorithm(), seconds).second)
      return emitError() << "dtfm.candidates: algorithm '"
                         << plan.getAlgorithm() << "' is listed twice";
    if (!plan.getIterationS())
      continue;
    fastest = std::min(fastest, plan.getIterationS()->value);
    if (plan.getAlgorithm() == chosen)
      chosenSeconds = plan.getIterationS()->value;
  }
  if (!chosenSeconds)
    return emitError() << "dtfm.candidates: chosen '" << chosen
                       << "' is not a simulated candidate";
  if (*chosenSeconds > fastest)
    return emitError() << "dtfm.candidates: chosen '" << chosen << "' ("
                       << *chosenSeconds << " s) is slower than another ("
                       << fastest << " s)";
  return success();
}

LogicalResult AssignmentAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, StringRef cluster,
    StringRef algorithm, int64_t seed, int64_t dp, int64_t pp,
    StoredDouble dpBytes, StoredDouble ppBytes,
    StoredDouble dataParallelCostSeconds, StoredDouble pipelineCostSeconds,
    StoredDouble totalCostSeconds, ArrayRef<ArrayAttr> stages,
    std::optional<StoredDouble> iterationSeconds,
    ArrayRef<int64_t> stageBounds, ArrayRef<int64_t> pipelineMicroBatches) {
  if (dp <= 0 || pp <= 0)
    return emitError() << "dtfm.assignment: dp and pp must be positive, got "
                       << dp << " and " << pp;
  if (static_cast<int64_t>(stages.size()) != pp)
    return emitError() << "dtfm.assignment: " << stages.size()
                       << " stages but pp " << pp;
  for (auto [s, stage] : llvm::enumerate(stages)) {
    if (static_cast<int64_t>(stage.size()) != dp)
      return emitError() << "dtfm.assignment: stage " << s << " has "
                         << stage.size() << " devices but dp " << dp;
    for (Attribute a : stage)
      if (!llvm::isa<StringAttr>(a))
        return emitError() << "dtfm.assignment: stage " << s << " holds " << a
                           << ", not a device name";
  }
  if (!stageBounds.empty() &&
      static_cast<int64_t>(stageBounds.size()) != pp + 1)
    return emitError() << "dtfm.assignment: " << stageBounds.size()
                       << " stage bounds but pp " << pp << " needs " << pp + 1;
  if (!pipelineMicroBatches.empty() &&
      (static_cast<int64_t>(pipelineMicroBatches.size()) != dp ||
       *llvm::min_element(pipelineMicroBatches) <= 0))
    return emitError() << "dtfm.assignment: pipeline_micro_batches needs dp ("
                       << dp << ") positive counts, got "
                       << pipelineMicroBatches.size();
  return success();
}

//===----------------------------------------------------------------------===//
// CostAttr, StagesAttr, ParamShardAttr
//===----------------------------------------------------------------------===//

LogicalResult CostAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               int64_t forwardFlops, int64_t backwardFlops,
                               int64_t savedBytes, int64_t paramBytes,
                               ArrayRef<int64_t> resultBytes,
                               int64_t forwardBytes, int64_t backwardBytes) {
  std::pair<StringRef, int64_t> counts[] = {
      {"fwd_flops", forwardFlops}, {"bwd_flops", backwardFlops},
      {"saved_bytes", savedBytes}, {"param_bytes", paramBytes},
      {"fwd_bytes", forwardBytes}, {"bwd_bytes", backwardBytes}};
  for (auto [name, value] : counts)
    if (value < 0)
      return emitError() << "dtfm.cost: " << name
                         << " must be non-negative, got " << value;
  for (int64_t bytes : resultBytes)
    if (bytes < 0)
      return emitError() << "dtfm.cost: result_bytes must be non-negative, got "
                         << bytes;
  return success();
}

LogicalResult StagesAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 ArrayRef<int64_t> bounds,
                                 ArrayRef<StoredDouble> stageSeconds,
                                 ArrayRef<int64_t> memoryBytes,
                                 StoredDouble bottleneckSeconds) {
  if (bounds.size() < 2 || bounds.front() != 0)
    return emitError()
           << "dtfm.stages: bounds must start at 0 and hold at least 2 values";
  for (size_t i = 1; i < bounds.size(); ++i)
    if (bounds[i] < bounds[i - 1])
      return emitError() << "dtfm.stages: bounds must not decrease, got "
                         << bounds[i - 1] << " then " << bounds[i];
  size_t stages = bounds.size() - 1;
  if (stageSeconds.size() != stages || memoryBytes.size() != stages)
    return emitError() << "dtfm.stages: " << stages << " stages need "
                       << stages << " stage_seconds and memory_bytes values, "
                       << "got " << stageSeconds.size() << " and "
                       << memoryBytes.size();
  for (size_t s = 0; s < stages; ++s)
    if (!(stageSeconds[s] >= 0) || memoryBytes[s] < 0)
      return emitError() << "dtfm.stages: stage " << s
                         << " has a negative time or memory";
  if (!(bottleneckSeconds >= 0))
    return emitError() << "dtfm.stages: bottleneck_s must be non-negative";
  return success();
}

LogicalResult
ParamShardAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       StringRef name, int64_t begin, int64_t end,
                       int64_t bytes) {
  if (begin < 0 || end < begin || bytes < 0)
    return emitError() << "dtfm.param_shard '" << name
                       << "': expected 0 <= begin <= end and bytes >= 0, got ["
                       << begin << ", " << end << ") and " << bytes << " bytes";
  return success();
}
