//===- SimInput.cpp - The simulator's input, read from a plan ------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Plan/SimInput.h"

#include "dtfm/Format/PlanFile.h"
#include "dtfm/Plan/Program.h"
#include "dtfm/Planner/CostModel.h"
#include "dtfm/Support/OpShapes.h"

#include "plan.pb.h"

#include <algorithm>
#include <unordered_map>

using namespace dtfm::plan;

namespace dtfm::plan {

static planner::RooflineWork
workOf(const google::protobuf::RepeatedPtrField<proto::OpWork> &terms) {
  planner::RooflineWork work;
  for (const proto::OpWork &term : terms)
    work.add(term.flops(), term.bytes());
  return work;
}

planner::RooflineWork forwardWorkOf(const proto::Plan &plan,
                                    const proto::DeviceProgram &program) {
  return workOf(format::sharedPart(plan, program).forward_work());
}

planner::RooflineWork backwardWorkOf(const proto::Plan &plan,
                                     const proto::DeviceProgram &program) {
  const proto::DeviceProgram &shared = format::sharedPart(plan, program);
  planner::RooflineWork work = workOf(shared.backward_work());
  work.add(workOf(shared.recompute_work()));
  return work;
}

} // namespace dtfm::plan

bool dtfm::plan::simulationInput(const proto::Plan &plan, SimInput &input,
                                 std::string &error) {
  if (!planner::clusterFromPlan(plan, input.cluster, error))
    return false;
  // The plan's shape was checked when it was read (format::checkPlanShape).
  input.microBatches = static_cast<int>(plan.micro_batches());
  input.pipelineMicroBatches.clear();
  format::MicroBatchLayout layout = format::microBatchLayout(plan);
  if (std::adjacent_find(layout.counts.begin(), layout.counts.end(),
                         std::not_equal_to<int64_t>()) != layout.counts.end())
    input.pipelineMicroBatches = layout.counts;
  input.programs.clear();
  int stages = format::stageCount(plan);
  std::unordered_map<std::string, size_t> clusterIndex;
  for (size_t i = 0; i < input.cluster.size(); ++i)
    clusterIndex.emplace(input.cluster.devices[i].name, i);
  for (const proto::DeviceProgram &p : plan.programs()) {
    const proto::DeviceProgram &shared = format::sharedPart(plan, p);
    SimProgram program;
    program.device = p.device();
    program.stage = static_cast<int>(p.stage());
    program.prev = p.prev();
    program.next = p.next();
    program.forwardFlops = shared.forward_flops();
    program.backwardFlops = shared.backward_flops();
    program.recomputeFlops = shared.recompute_flops();
    program.optimizerFlops = shared.optimizer_flops();
    program.forwardWork = forwardWorkOf(plan, p);
    program.backwardWork = backwardWorkOf(plan, p);
    program.weightFlops = shared.weight_flops();
    program.weightWork = workOf(shared.weight_work());
    if (!format::streamsFromProgram(
            plan, p, static_cast<int>(format::programMicroBatches(plan, p)),
            stages, program.streams, error)) {
      error = p.device() + ": " + error;
      return false;
    }
    StageProgram typed;
    if (!decodeProgram(plan, p, typed, error)) {
      error = p.device() + ": " + error;
      return false;
    }
    std::map<int64_t, double> bucketSeconds, bucketBytes, bucketReady;
    double syncBytes = 0;
    std::vector<int> group; // the tensor-parallel group, as cluster indices
    for (const std::string &member : p.tp_group())
      if (auto it = clusterIndex.find(member); it != clusterIndex.end())
        group.push_back(static_cast<int>(it->second));
    std::map<int64_t, const std::vector<int64_t> *> shapeOf;
    for (const ProgramOp &op : typed.ops)
      for (const ProgramValue &r : op.results)
        shapeOf[r.id] = &r.shape;
    for (const ProgramOp &op : typed.ops) {
      const OpAttrs &a = op.attrs;
      // The group's sums: dtfm.tp_all_reduce's value (or gradient), and a
      // vocabulary-parallel loss's row sums in both directions. The runtime
      // sums in f32, as it holds every value.
      double sumFloats = 0;
      if (op.computes == OpKind::TpAllReduce &&
          op.isBackward() == a.inBackward) {
        sumFloats = 1;
        for (int64_t d : op.results.at(0).shape)
          sumFloats *= static_cast<double>(d);
      } else if (op.computes == OpKind::CrossEntropy && a.vocabShard &&
                 op.operands.size() >= 2 && shapeOf.count(op.operands[1])) {
        sumFloats = static_cast<double>(
            shapes::vocabParallelLossSumWidth(a.vocabShard));
        for (int64_t d : *shapeOf[op.operands[1]]) // the labels
          sumFloats *= static_cast<double>(d);
      }
      if (sumFloats > 0) {
        if (group.size() != static_cast<size_t>(p.tp_group_size())) {
          error = p.device() + ": its tensor-parallel group names a device "
                               "the plan's cluster lacks";
          return false;
        }
        program.groupSumSeconds[op.isBackward() ? 1 : 0] +=
            planner::groupRingAllReduceCost(input.cluster, group, 4 * sumFloats,
                                            static_cast<int>(group.size()));
        continue;
      }
      if (op.kind == OpKind::Send) {
        if (a.peerDevice.empty()) {
          error = p.device() + ": a dtfm.send without bytes or peer_device";
          return false;
        }
        double bytes = static_cast<double>(a.bytes);
        if (a.oncePerIteration) {
          program.iterationBytes[a.peerDevice] += bytes;
          continue;
        }
        char key = format::phaseLetter(streamPhaseOf(op.phase));
        program.sendBytes[{key, a.peerDevice}] += bytes;
        std::vector<std::string> &to = program.sendsTo[{key, a.peerStage}];
        if (std::find(to.begin(), to.end(), a.peerDevice) == to.end())
          to.push_back(a.peerDevice);
      } else if (op.kind == OpKind::GradSync) {
        program.syncEvery = std::max(program.syncEvery, a.syncEvery);
        program.syncOverlap = std::max(program.syncOverlap, a.syncOverlap);
        // Plans without dtfm.bucket_seconds sync tensor by tensor.
        if (a.bucketSeconds < 0)
          program.syncSeconds += a.syncSeconds;
        else if (!bucketSeconds.count(a.bucket))
          program.syncSeconds += a.bucketSeconds;
        if (a.bucketSeconds >= 0) {
          bucketSeconds[a.bucket] = a.bucketSeconds;
          bucketBytes[a.bucket] += static_cast<double>(a.bytes);
          syncBytes += static_cast<double>(a.bytes);
          double &ready = bucketReady[a.bucket];
          ready = a.bucketReady < 0 || ready < 0 ? -1
                                                 : std::max(ready, a.bucketReady);
        }
      }
    }
    // Buckets that say when they are complete overlap the backward.
    bool timed = !bucketReady.empty() &&
                 std::all_of(bucketReady.begin(), bucketReady.end(),
                             [](const auto &b) { return b.second >= 0; });
    if (timed)
      for (const auto &[bucket, seconds] : bucketSeconds)
        program.buckets.push_back(
            {bucketReady[bucket], seconds,
             syncBytes > 0 ? bucketBytes[bucket] / syncBytes : 0});
    input.programs.push_back(std::move(program));
  }
  if (input.programs.empty()) {
    error = "the plan has no device programs";
    return false;
  }
  input.clipSeconds = 0;
  if (planClipGradNorm(plan) > 0) {
    // Rank 0 first: the reduction's root. One double per pipeline and one
    // for the data-parallel sums (the worker's message).
    std::vector<size_t> members;
    for (const proto::DeviceProgram &p : plan.programs())
      if (auto it = clusterIndex.find(p.device()); it != clusterIndex.end())
        members.push_back(it->second);
    input.clipSeconds = input.cluster.scalarReductionSeconds(
        members, 8.0 * static_cast<double>(layout.counts.size() + 1));
  }
  return true;
}
