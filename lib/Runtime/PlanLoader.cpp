//===- PlanLoader.cpp - Read plan.pb for the runtime ----------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/PlanLoader.h"

#include "dtfm/Runtime/Program.h"

#include "plan.pb.h"

#include <algorithm>

using namespace dtfm::runtime;

bool dtfm::runtime::simulationInput(const proto::Plan &plan, SimInput &input,
                                    std::string &error) {
  if (!clusterFromPlan(plan, input.cluster, error))
    return false;
  input.microBatches =
      static_cast<int>(std::max<int64_t>(1, plan.micro_batches()));
  input.programs.clear();
  int stages = format::stageCount(plan);
  for (const proto::DeviceProgram &p : plan.programs()) {
    SimProgram program;
    program.device = p.device();
    program.stage = static_cast<int>(p.stage());
    program.prev = p.prev();
    program.next = p.next();
    program.forwardFlops = p.forward_flops();
    program.backwardFlops = p.backward_flops();
    program.optimizerFlops = p.optimizer_flops();
    if (!format::streamsFromProgram(p, input.microBatches, stages,
                                    program.streams, error)) {
      error = p.device() + ": " + error;
      return false;
    }
    StageProgram typed;
    if (!decodeProgram(p, typed, error)) {
      error = p.device() + ": " + error;
      return false;
    }
    for (const ProgramOp &op : typed.ops) {
      const OpAttrs &a = op.attrs;
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
        char key = op.phase == OpPhase::Backward ? 'B' : 'F';
        program.sendBytes[{key, a.peerDevice}] += bytes;
      } else if (op.kind == OpKind::GradSync) {
        // One bucket per stage (dtfm.bucket_seconds); plans without it sync
        // tensor by tensor.
        if (a.bucketSeconds >= 0)
          program.syncSeconds = std::max(program.syncSeconds, a.bucketSeconds);
        else
          program.syncSeconds += a.syncSeconds;
      }
    }
    input.programs.push_back(std::move(program));
  }
  if (input.programs.empty()) {
    error = "the plan has no device programs";
    return false;
  }
  return true;
}
