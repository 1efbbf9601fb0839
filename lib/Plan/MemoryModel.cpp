//===- MemoryModel.cpp - What a worker holds, predicted from its plan -----===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Plan/MemoryModel.h"
#include "dtfm/Format/PlanFile.h"
#include "dtfm/Format/Stream.h"
#include "dtfm/Plan/Dataflow.h"
#include "dtfm/Plan/Program.h"
#include "dtfm/Plan/Sharding.h"

#include "plan.pb.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

using namespace dtfm::plan;

namespace {

/// Every CPU tensor is f32 (format::Tensor), whatever the plan's dtype.
constexpr double kElementBytes = 4;

double elements(const std::vector<int64_t> &shape) {
  double n = 1;
  for (int64_t d : shape)
    n *= static_cast<double>(std::max<int64_t>(0, d));
  return n;
}

double bytesOf(const ProgramValue &value) {
  return kElementBytes * elements(value.shape);
}

/// The scratch an op's CPU kernel allocates and frees while it runs (the
/// largest buffer only: OpKinds.def's DTFM_SCRATCH of its kind).
double scratchBytes(const ProgramOp &op,
                    const std::map<int64_t, const ProgramValue *> &valueOf) {
  auto operandBytes = [&](size_t i) {
    if (i >= op.operands.size())
      return 0.0;
    auto it = valueOf.find(op.operands[i]);
    return it == valueOf.end() ? 0.0 : bytesOf(*it->second);
  };
  double resultElements = op.results.empty() ? 0 : elements(op.results[0].shape);
  bool backward = op.isBackward();
  switch (opKindInfo(op.computes).scratch) {
  case Scratch::AttentionProbabilities: {
    auto it = valueOf.find(op.operands.empty() ? -1 : op.operands[0]);
    if (it == valueOf.end() || it->second->shape.size() != 3)
      return 0;
    const std::vector<int64_t> &q = it->second->shape; // [B, S, E]
    double probs = kElementBytes * static_cast<double>(op.attrs.numHeads) *
                   static_cast<double>(q[0]) * static_cast<double>(q[1]) *
                   static_cast<double>(q[1]);
    // The backward recomputes the forward (its output and probabilities)
    // and a row of score gradients per query.
    return backward ? probs + operandBytes(0) +
                          kElementBytes * static_cast<double>(q[1]) *
                              static_cast<double>(q[1])
                    : probs;
  }
  case Scratch::LogitsSoftmax:
    return operandBytes(0);
  case Scratch::RecomputedOutput:
    return backward ? operandBytes(0) : 0;
  case Scratch::BroadcastIndexTables:
    return backward ? 0 : 16 * resultElements; // two int64 tables
  case Scratch::None:
    break;
  }
  return 0;
}

} // namespace

std::string WorkerMemory::json() const {
  std::ostringstream os;
  auto field = [&](const char *name, double bytes, bool last = false) {
    os << '"' << name << "\":" << static_cast<long long>(bytes)
       << (last ? "" : ",");
  };
  os << '{';
  field("parameters", parameters);
  field("optimizer", optimizer);
  field("residuals", residuals);
  field("local_steps", localSteps);
  field("buckets", buckets);
  field("receive_buffers", receiveBuffers);
  field("gradient_sums", gradientSums);
  field("inputs", inputs);
  field("values", values, true);
  os << '}';
  return os.str();
}

bool dtfm::plan::predictWorkerMemory(const proto::Plan &plan, int rank,
                                     WorkerMemory &out, std::string &error) {
  out = WorkerMemory();
  if (rank < 0 || rank >= plan.programs_size()) {
    error = "no device program of rank " + std::to_string(rank);
    return false;
  }
  const proto::DeviceProgram &source = plan.programs(rank);
  StageProgram program;
  if (!decodeProgram(plan, source, program, error))
    return false;
  // A plan written before programs carried their count has the plan's.
  int microBatches =
      static_cast<int>(format::programMicroBatches(plan, source));
  format::Streams streams;
  if (!format::streamsFromProgram(plan, source, microBatches,
                                  format::stageCount(plan), streams, error))
    return false;

  std::map<int64_t, const ProgramValue *> valueOf;
  for (const ProgramOp &op : program.ops)
    for (const ProgramValue &result : op.results)
      valueOf.emplace(result.id, &result);
  auto bytes = [&](int64_t id) {
    auto it = valueOf.find(id);
    return it == valueOf.end() ? 0.0 : bytesOf(*it->second);
  };

  // What lives for the whole run.
  std::map<std::string, double> parameterBytes;
  std::map<int64_t, bool> sent = sentValues(program);
  for (const ProgramOp &op : program.ops) {
    if (op.kind == OpKind::Param) {
      parameterBytes[op.attrs.name] = bytesOf(op.results[0]);
    } else if (op.kind == OpKind::Recv) {
      out.receiveBuffers +=
          (op.attrs.oncePerIteration ? 1 : microBatches) *
          bytesOf(op.results[0]);
    } else if (op.kind == OpKind::Input || op.kind == OpKind::Label) {
      out.inputs += microBatches * bytesOf(op.results[0]);
    }
  }
  for (const auto &[name, size] : parameterBytes)
    out.parameters += size;
  std::map<std::string, ElementRange> shards = shardedParameters(program);
  out.shardedState = !shards.empty();
  std::map<const ProgramOp *, std::string> parameterOfUpdate;
  for (const ParameterUpdate &u : parameterUpdates(program))
    parameterOfUpdate[u.update] = u.param->attrs.name;
  for (int index : program.opsOf(OpPhase::Optimizer)) {
    const ProgramOp &op = program.ops[index];
    if (op.kind == OpKind::GradSync) {
      double size = bytesOf(op.results[0]);
      out.buckets += size;
      // Error feedback's residual: of every step's gradients, or with
      // local steps of the outer exchange's pseudo-gradients.
      if (op.attrs.compression != format::WireCodec::Dense)
        out.residuals += size;
      if (op.attrs.syncEvery >= 1) // the anchor and the outer momentum,
        // and with an overlap the exchange received and not yet applied
        out.localSteps += (op.attrs.syncOverlap >= 1 ? 3 : 2) * size;
    } else if (op.operands.size() >= 2) {
      double size = bytes(op.operands[0]);
      // Sharded state: the moments of this member's shard alone.
      auto name = parameterOfUpdate.find(&op);
      if (name != parameterOfUpdate.end()) {
        auto shard = shards.find(name->second);
        if (shard != shards.end())
          size = kElementBytes * static_cast<double>(shard->second.size());
      }
      out.optimizer += (op.kind == OpKind::AdamwUpdate ? 2 : 1) * size;
    }
  }
  for (const auto &[id, sync] : gradientInputs(program))
    out.gradientSums += bytes(id);

  // The micro-batches' values, along the compute stream.
  ValueLifetimes lifetimes = valueLifetimes(program);
  std::vector<double> live(microBatches, 0.0);
  std::vector<std::set<int64_t>> held(microBatches);
  double inFlight = 0, peak = 0;
  auto add = [&](int m, int64_t id) {
    if (held[m].insert(id).second) {
      live[m] += bytes(id);
      inFlight += bytes(id);
    }
  };
  auto release = [&](int m, int64_t id) {
    if (held[m].erase(id)) {
      live[m] -= bytes(id);
      inFlight -= bytes(id);
    }
  };
  // A micro-batch ends with its last phase: W where the backward is split.
  format::Phase last = format::Phase::Backward;
  for (const format::StreamEntry &entry : streams[1])
    if (entry.phase == format::Phase::Weight)
      last = format::Phase::Weight;
  for (const format::StreamEntry &entry : streams[1]) {
    int m = entry.microBatch;
    OpPhase phase = opPhaseOf(entry.phase);
    int p = static_cast<int>(phase);
    for (size_t position = 0; position < program.steps[p].size(); ++position) {
      const ProgramOp &op = program.ops[program.steps[p][position].op];
      // A sent parameter is copied (a tied weight sent once per iteration:
      // into micro-batch 0's values only).
      auto copied = op.kind == OpKind::Param ? sent.find(op.results[0].id)
                                             : sent.end();
      if (op.kind != OpKind::Send &&
          (op.kind != OpKind::Param ||
           (copied != sent.end() && (!copied->second || m == 0)))) {
        for (const ProgramValue &result : op.results)
          add(m, result.id);
        peak = std::max(peak, inFlight + scratchBytes(op, valueOf));
      }
      for (int64_t id : lifetimes.freeAfterStep[p][position])
        release(m, id);
    }
    // The phase's sends are copied out before the values they read are
    // freed.
    double copies = 0;
    for (int index : program.opsOf(phase))
      if (program.ops[index].kind == OpKind::Send &&
          !program.ops[index].attrs.oncePerIteration)
        copies += bytes(program.ops[index].operands[0]);
    peak = std::max(peak, inFlight + copies);
    for (int64_t id : lifetimes.freeAfterSends[p])
      release(m, id);
    if (entry.phase == last) {
      inFlight -= live[m];
      live[m] = 0;
      held[m].clear();
    }
  }
  out.values = peak;
  return true;
}

bool dtfm::plan::planMemory(const proto::Plan &plan,
                            std::vector<DeviceMemory> &out,
                            std::string &error) {
  out.clear();
  std::map<std::string, double> capacity;
  for (const proto::PlanDevice &device : plan.devices())
    capacity[device.name()] = device.memory_bytes();
  // A template's prediction holds for every entry that names it, unless
  // its optimizer state is sharded (each member holds its own shard).
  std::map<uint32_t, WorkerMemory> ofTemplate;
  for (int r = 0; r < plan.programs_size(); ++r) {
    const proto::DeviceProgram &program = plan.programs(r);
    DeviceMemory &memory = out.emplace_back();
    memory.device = program.device();
    auto it = capacity.find(memory.device);
    memory.capacityBytes = it == capacity.end() ? 0 : it->second;
    auto known = program.has_template_index()
                     ? ofTemplate.find(program.template_index())
                     : ofTemplate.end();
    if (known != ofTemplate.end()) {
      memory.predicted = known->second;
      continue;
    }
    if (!predictWorkerMemory(plan, r, memory.predicted, error)) {
      error = memory.device + ": " + error;
      return false;
    }
    if (program.has_template_index() && !memory.predicted.shardedState)
      ofTemplate.emplace(program.template_index(), memory.predicted);
  }
  return true;
}
