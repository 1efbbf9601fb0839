//===- Verifier.cpp - Everything checked before a plan runs ---------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Plan/Verifier.h"

#include "dtfm/Format/PlanFile.h"
#include "dtfm/Format/Stream.h"
#include "dtfm/Plan/Program.h"
#include "dtfm/Planner/Schedule.h"
#include "dtfm/Planner/StagePartition.h"
#include "dtfm/Planner/Transfers.h"
#include "dtfm/Support/CustomOps.h"
#include "dtfm/Support/OpShapes.h"

#include "plan.pb.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <tuple>

using namespace dtfm;
using namespace dtfm::plan;
namespace shapes = dtfm::shapes;
using shapes::TensorType;

namespace {


TensorType typeOf(const ProgramValue &value) {
  return {value.shape, elementTypeName(value.type)};
}

/// A floating-point attribute of the plan op, or `fallback`.
double rawDouble(const ProgramOp &op, const char *key, double fallback) {
  auto it = op.source->attrs().find(key);
  if (it == op.source->attrs().end() ||
      it->second.value_case() != proto::PlanAttr::kF)
    return fallback;
  return it->second.f();
}

/// "0.5", "1e-06": a number as %g prints it.
std::string shortest(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

bool hasRaw(const ProgramOp &op, const char *key) {
  return op.source->attrs().count(key) ||
         op.source->nested_attrs().count(std::string("dtfm.forward_attrs/") +
                                         key);
}

/// "" when an op of `info`'s kind may have `in` operands and `out` results
/// (OpKinds.def's counts).
std::string arity(const OpKindInfo &info, size_t in, size_t out) {
  if (info.results == kNoBound) // the kind's rule checks them
    return "";
  auto minIn = static_cast<size_t>(info.minOperands);
  size_t maxIn = info.maxOperands == kNoBound
                     ? SIZE_MAX
                     : static_cast<size_t>(info.maxOperands);
  if (in < minIn || in > maxIn) {
    std::string want = minIn == maxIn ? std::to_string(minIn)
                       : maxIn == SIZE_MAX
                           ? "at least " + std::to_string(minIn)
                           : std::to_string(minIn) + " or " +
                                 std::to_string(maxIn);
    return "expected " + want + " operands, found " + std::to_string(in);
  }
  if (out != static_cast<size_t>(info.results))
    return "expected " + std::to_string(info.results) + " results, found " +
           std::to_string(out);
  return "";
}

/// A registered custom kind's results for these operands.
std::string customRule(const ProgramOp &op, const std::vector<TensorType> &in,
                       const std::vector<TensorType> &out) {
  CustomOpCall call = op.attrs.custom;
  for (const TensorType &t : in) {
    if (t.element != "f32")
      return "custom ops take f32 operands, found " + shapes::typeText(t);
    call.operands.push_back({t.shape, DType::F32});
  }
  return shapes::custom(call, out);
}

/// The shared rule of `kind` (OpShapes.h) for these operand and result
/// types and `op`'s attributes.
std::string forwardRule(OpKind kind, const ProgramOp &op,
                        const std::vector<TensorType> &in,
                        const std::vector<TensorType> &out) {
  const OpAttrs &a = op.attrs;
  size_t n = in.size();
  std::string e;
  // The counts first: the rules below index `in` and `out`.
  if (!(e = arity(opKindInfo(kind), in.size(), out.size())).empty())
    return e;
  switch (kind) {
  case OpKind::Param: {
    double scale = a.scale;
    return shapes::param(a.name, static_cast<int64_t>(a.init),
                         hasRaw(op, "scale") ? &scale : nullptr);
  }
  case OpKind::Input:
  case OpKind::Label:
    return a.name.empty() ? "expected a non-empty name" : "";
  case OpKind::Recv:
  case OpKind::Send: {
    bool send = kind == OpKind::Send;
    if (a.peerDevice.empty())
      return "expected a peer_device (the device at the other end)";
    if (a.tag < 0)
      return "expected a non-negative tag, found " + std::to_string(a.tag);
    return shapes::transfer(send ? in[0] : out[0], a.peerStage, a.bytes, a.wire,
                            a.oncePerIteration, rawDouble(op, "latency_s", 0),
                            rawDouble(op, "bandwidth_gbps", 1));
  }
  case OpKind::GradSync:
    return shapes::gradSync(in[0], out[0], a.bytes, a.group.size(),
                            a.syncSeconds);
  case OpKind::SgdUpdate:
    return shapes::sgdUpdate(in[0], in[1], out[0], a.schedule,
                             a.clipGradNorm, a.momentum, a.weightDecay);
  case OpKind::AdamwUpdate:
    return shapes::adamwUpdate(in[0], in[1], out[0], a.schedule,
                               a.clipGradNorm, a.beta1, a.beta2,
                               a.epsilon, a.weightDecay);
  case OpKind::Constant:
    return shapes::constant(a.values, out[0]);
  case OpKind::Accumulate:
    return shapes::accumulate(in, out[0]);
  case OpKind::Embedding:
    return shapes::embedding(in[1], in[0], out[0]); // indices, table
  case OpKind::Matmul:
    return shapes::matmul(in[0], in[1], a.transposeRhs, out[0]);
  case OpKind::Linear:
    return shapes::linear(in[0], in[1], n == 3 ? &in[2] : nullptr, out[0]);
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
  case OpKind::Maximum:
  case OpKind::Minimum:
  case OpKind::Prelu:
    return shapes::broadcastBinary(in[0], in[1], out[0]);
  case OpKind::Sqrt:
  case OpKind::Tanh:
  case OpKind::Sigmoid:
  case OpKind::Silu:
  case OpKind::Erf:
  case OpKind::Exp:
  case OpKind::Abs:
  case OpKind::Log:
  case OpKind::Gelu:
  case OpKind::Relu:
    return shapes::sameType(in[0], out[0]);
  case OpKind::Pow:
    return shapes::pow(in[0], a.exponent, out[0]);
  case OpKind::Clip:
    return shapes::clip(in[0], a.low, a.high, out[0]);
  case OpKind::ReduceMean:
    return shapes::reduceMean(in[0], a.axes, a.keepdims, out[0]);
  case OpKind::ReduceMax:
  case OpKind::ReduceMin:
    return shapes::reduceExtremum(in[0], a.axes, a.keepdims, out[0]);
  case OpKind::Concat:
    return shapes::concat(in, a.axis, out[0]);
  case OpKind::Slice:
    return shapes::slice(in[0], a.starts, a.ends, a.steps, out[0]);
  case OpKind::Gather:
    return shapes::gather(in[0], in[1], a.axis, out[0]);
  case OpKind::Where:
    return shapes::where(in[0], in[1], in[2], out[0]);
  case OpKind::LayerNorm:
    return shapes::layerNorm(in[0], in[1], in[2], a.epsilon, out[0]);
  case OpKind::RmsNorm:
    return shapes::rmsNorm(in[0], in[1], a.epsilon, out[0]);
  case OpKind::Softmax:
    return shapes::softmax(in[0], a.axis, out[0]);
  case OpKind::CausalAttention:
    return shapes::causalAttention(in[0], in[1], in[2], a.numHeads,
                                   a.keyValueHeads(), out[0]);
  case OpKind::Rotary:
    return shapes::rotary(in[0], a.numHeads, a.theta, out[0]);
  case OpKind::Conv2d: {
    const math::Window &w = a.window;
    return shapes::conv2d(in[0], in[1], n == 3 ? &in[2] : nullptr,
                          {w.strideH, w.strideW}, {w.dilationH, w.dilationW},
                          {w.padTop, w.padLeft, w.padBottom, w.padRight},
                          a.groups, out[0]);
  }
  case OpKind::ConvTranspose2d: {
    const math::Window &w = a.window;
    return shapes::convTranspose2d(
        in[0], in[1], n == 3 ? &in[2] : nullptr, {w.strideH, w.strideW},
        {w.dilationH, w.dilationW},
        {w.padTop, w.padLeft, w.padBottom, w.padRight},
        {a.outputPadding[0], a.outputPadding[1]}, a.groups, out[0]);
  }
  case OpKind::BatchNorm:
    return shapes::batchNorm(in[0], in[1], in[2], in[3], in[4], a.epsilon,
                             a.momentum, out[0]);
  case OpKind::MaxPool2d:
  case OpKind::AvgPool2d: {
    const math::Window &w = a.window;
    std::vector<int64_t> padding{w.padTop, w.padLeft, w.padBottom,
                                 w.padRight};
    if (!(e = shapes::pool2d(in[0], {a.kernel[0], a.kernel[1]},
                             {w.strideH, w.strideW}, padding, out[0]))
             .empty())
      return e;
    return shapes::divisorPadding(
        {w.countTop, w.countLeft, w.countBottom, w.countRight}, padding);
  }
  case OpKind::GlobalAvgPool:
    return shapes::globalAvgPool(in[0], out[0]);
  case OpKind::Flatten:
    return shapes::flatten(in[0], a.axis, out[0]);
  case OpKind::Reshape:
    return shapes::reshape(in[0], out[0]);
  case OpKind::Transpose:
    return shapes::transpose(in[0], a.perm, out[0]);
  case OpKind::CrossEntropy:
    if (out[0] != TensorType{{}, "f32"})
      return "expected a loss of type 'tensor<f32>', found " +
             shapes::typeText(out[0]);
    if (!(e = shapes::crossEntropy(in[0], in[1])).empty())
      return e;
    return shapes::crossEntropyClasses(a.classes, in[0], a.vocabShard);
  case OpKind::TopkCompress:
    return shapes::topkCompress(in[0], a.k, out[0], out[1]);
  case OpKind::TopkDecompress:
    return shapes::topkDecompress(in[0], in[1], out[0]);
  case OpKind::TpAllReduce:
    return shapes::tpAllReduce(in[0], a.degree, out[0]);
  case OpKind::Custom:
    return customRule(op, in, out);
  case OpKind::Backward:
    break; // verifyProgramOps checks a backward against its forward
  }
  return "";
}

/// A dtfm.backward: `wrt` and the gradients' types (the dialect's rule),
/// and its operands -- the forward op's operands, then the gradient of the
/// forward's result (none for the loss) -- by the forward's rule.
std::string backwardRule(const ProgramOp &op, const std::vector<TensorType> &in,
                         const std::vector<TensorType> &out) {
  if (op.computes == OpKind::Backward || isStructural(op.computes) ||
      op.computes == OpKind::Constant)
    return std::string("the gradient of ") + opName(op.computes) +
           ", which has none";
  int64_t flops = 0;
  if (auto it = op.source->attrs().find("flops");
      it != op.source->attrs().end() &&
      it->second.value_case() == proto::PlanAttr::kI)
    flops = it->second.i();
  if (op.computes == OpKind::Custom)
    return shapes::backward(in, out, op.attrs.wrt, flops);
  bool loss = op.computes == OpKind::CrossEntropy;
  if (!loss && in.empty())
    return "expected the forward's operands and its result's gradient, "
           "found no operands";
  std::vector<TensorType> forwardIn(in.begin(), in.end() - (loss ? 0 : 1));
  std::vector<TensorType> forwardOut{loss ? TensorType{{}, "f32"} : in.back()};
  if (op.computes == OpKind::TopkCompress)
    return "the gradient of dtfm.topk_compress, which has none";
  if (std::string e = shapes::backward(forwardIn, out, op.attrs.wrt, flops);
      !e.empty())
    return e;
  if (std::string e = forwardRule(op.computes, op, forwardIn, forwardOut);
      !e.empty())
    return std::string("its forward ") + opName(op.computes) + ": " + e;
  return "";
}

} // namespace

std::string dtfm::plan::verifyProgramOps(const StageProgram &program) {
  std::map<int64_t, std::pair<TensorType, const ProgramOp *>> values;
  std::set<std::string> params, feeds;
  for (const ProgramOp &op : program.ops) {
    auto problem = [&](const std::string &what) {
      return op.describe() + ": " + what;
    };
    std::vector<TensorType> in, out;
    for (size_t i = 0; i < op.operands.size(); ++i) {
      auto it = values.find(op.operands[i]);
      if (it == values.end())
        return problem("operand #" + std::to_string(i) + " is value " +
                       std::to_string(op.operands[i]) +
                       ", which no earlier op of the program makes");
      in.push_back(it->second.first);
    }
    for (size_t i = 0; i < op.results.size(); ++i) {
      TensorType type = typeOf(op.results[i]);
      if (std::string e = shapes::inRange(type, "result #" + std::to_string(i));
          !e.empty())
        return problem(e);
      if (!values.emplace(op.results[i].id, std::make_pair(type, &op)).second)
        return problem("result #" + std::to_string(i) + " is value " +
                       std::to_string(op.results[i].id) +
                       ", which an earlier op already makes");
      out.push_back(std::move(type));
    }
    std::string e = op.kind == OpKind::Backward
                        ? backwardRule(op, in, out)
                        : forwardRule(op.kind, op, in, out);
    if (!e.empty())
      return problem(e);
    if (op.kind == OpKind::SgdUpdate || op.kind == OpKind::AdamwUpdate) {
      const ProgramOp *maker = values.at(op.operands[0]).second;
      if (maker->kind != OpKind::Param)
        return problem("expected the parameter operand to be a dtfm.param");
    }
    if (op.kind == OpKind::Param && !params.insert(op.attrs.name).second)
      return problem("parameter '" + op.attrs.name +
                     "' is defined twice in this program");
    if ((op.kind == OpKind::Input || op.kind == OpKind::Label) &&
        !feeds.insert(op.attrs.name).second)
      return problem(std::string(op.kind == OpKind::Input ? "input" : "label") +
                     " '" + op.attrs.name + "' is read twice in this program");
  }
  return "";
}

bool dtfm::plan::verifyPlan(const proto::Plan &plan, const std::string &source,
                            std::string &error) {
  auto fail = [&](const std::string &what) {
    error = source + ": " + what;
    return false;
  };
  if (!planner::parsePipelineSchedule(plan.schedule()))
    return fail("unknown pipeline schedule '" + plan.schedule() +
                "' (expected " + planner::kPipelineScheduleChoices + ")");
  std::map<std::string, const proto::DeviceProgram *> byDevice;
  for (const proto::DeviceProgram &p : plan.programs())
    byDevice[p.device()] = &p;
  int stages = format::stageCount(plan);
  std::vector<planner::TransferEnd> ends;
  std::vector<std::pair<const proto::DeviceProgram *, int>> endOps;
  // Per pipeline (and tensor-parallel rank), per stage: the streams as the
  // schedule spells them. With a degree per stage, the ranks every stage
  // has (below the pipeline's smallest degree) run the stages' whole
  // streams; a larger rank's differ only by sends left out to a smaller
  // group, which wait for nobody.
  std::map<std::pair<int64_t, int64_t>,
           std::vector<std::array<std::vector<std::string>, 3>>>
      pipelines;
  std::map<int64_t, int> smallestDegree;
  std::map<std::pair<int64_t, int64_t>, format::Streams>
      rankZero; // per (pipeline, stage)
  std::vector<std::pair<const proto::DeviceProgram *, format::Streams>>
      largerRanks;
  for (const proto::DeviceProgram &p : plan.programs()) {
    int degree = std::max(1, p.tp_group_size());
    auto [it, fresh] = smallestDegree.emplace(p.pipeline(), degree);
    if (!fresh)
      it->second = std::min(it->second, degree);
  }
  std::optional<std::pair<double, std::string>> clipOfPlan;
  // (stage, tensor-parallel rank, parameter): the replicas' shard ranges,
  // and the parameter's elements.
  using ParamKey = std::tuple<int64_t, int64_t, std::string>;
  struct ShardRange {
    int64_t begin, end;
    std::string device;
  };
  std::map<ParamKey, std::vector<ShardRange>> shardsOf;
  std::map<ParamKey, int64_t> elementsOf;
  std::set<uint32_t> opsChecked; // templates
  // Per pipeline (and rank) whose programs all name templates: those
  // templates, stage by stage. Pipelines of the same templates run the
  // same streams, whose schedule is then checked once.
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> templatesOf;
  for (const proto::DeviceProgram &p : plan.programs()) {
    std::string device = "device '" + p.device() + "': ";
    const proto::DeviceProgram &shared = format::sharedPart(plan, p);
    // What the simulator and the reports divide and add.
    for (auto [name, flops] :
         {std::pair<const char *, double>{"forward_flops",
                                          shared.forward_flops()},
          {"backward_flops", shared.backward_flops()},
          {"optimizer_flops", shared.optimizer_flops()},
          {"recompute_flops", shared.recompute_flops()},
          {"weight_flops", shared.weight_flops()}})
      if (!(flops >= 0 && flops <= 1e30))
        return fail(device + name + " must be in [0, 1e30], found " +
                    std::to_string(flops));
    for (auto [name, work] :
         {std::pair<const char *,
                    const google::protobuf::RepeatedPtrField<proto::OpWork> *>{
              "forward_work", &shared.forward_work()},
          {"backward_work", &shared.backward_work()},
          {"recompute_work", &shared.recompute_work()},
          {"weight_work", &shared.weight_work()}})
      for (int i = 0; i < work->size(); ++i) {
        const proto::OpWork &term = work->Get(i);
        if (!(term.flops() >= 0 && term.flops() <= 1e30 && term.bytes() >= 0 &&
              term.bytes() <= 1e30))
          return fail(device + name + " entry " + std::to_string(i) +
                      ": FLOPs and bytes must be in [0, 1e30], found " +
                      std::to_string(term.flops()) + " and " +
                      std::to_string(term.bytes()));
      }
    if (shared.weight_flops() > shared.backward_flops())
      return fail(device + "weight_flops " + shortest(shared.weight_flops()) +
                  " exceed backward_flops " +
                  shortest(shared.backward_flops()) +
                  " (the weight-gradient half is part of the backward)");
    // prev and next: the devices of the neighbouring stages of this
    // pipeline, at this rank (of a narrower stage, the rank it maps to),
    // or "" at the ends -- the simulator's transfers go to them.
    for (auto [which, name, stage] :
         {std::tuple<const char *, const std::string &, int64_t>{
              "prev", p.prev(), p.stage() - 1},
          {"next", p.next(), p.stage() + 1}}) {
      if (stage < 0 || stage >= stages) {
        if (!name.empty())
          return fail(device + which + " '" + name + "', but stage " +
                      std::to_string(p.stage()) + " has no " +
                      (stage < 0 ? "earlier" : "later") + " stage");
        continue;
      }
      auto it = byDevice.find(name);
      const proto::DeviceProgram *neighbour =
          it == byDevice.end() ? nullptr : it->second;
      if (!neighbour || neighbour->stage() != stage ||
          neighbour->pipeline() != p.pipeline() ||
          neighbour->tp_rank() !=
              p.tp_rank() % std::max(1, neighbour->tp_group_size()))
        return fail(device + which + " '" + name +
                    "' is not the device of stage " + std::to_string(stage) +
                    " of pipeline " + std::to_string(p.pipeline()) +
                    " at its tensor-parallel rank");
    }
    StageProgram program;
    std::string reason;
    if (!decodeProgram(plan, p, program, reason))
      return fail(device + reason);
    // A template's ops are checked once: its entries differ only in their
    // transfers' peers, which are checked below.
    if (!p.has_template_index() ||
        opsChecked.insert(p.template_index()).second)
      if (std::string e = verifyProgramOps(program); !e.empty())
        return fail(device + e);
    // Each parameter's shards, over the replicas of a stage (at a rank).
    for (const proto::ParamShard &shard : p.shards()) {
      if (shard.begin() < 0 || shard.end() < shard.begin())
        return fail(device + "shard of '" + shard.name() + "': range [" +
                    std::to_string(shard.begin()) + ", " +
                    std::to_string(shard.end()) + ") is not a range");
      shardsOf[{p.stage(), p.tp_rank(), shard.name()}].push_back(
          {shard.begin(), shard.end(), p.device()});
    }
    for (const ProgramOp &op : program.ops)
      if (op.kind == OpKind::Param && !op.results.empty()) {
        int64_t elements = 1;
        for (int64_t d : op.results[0].shape)
          elements *= std::max<int64_t>(0, d);
        elementsOf[{p.stage(), p.tp_rank(), op.attrs.name}] = elements;
      }
    // Transfers and gradient syncs name devices of the plan, at the stage
    // they say; every update clips at the same norm.
    std::set<std::pair<format::Phase, int64_t>> opTransfers[3];
    for (const ProgramOp &op : program.ops) {
      const OpAttrs &a = op.attrs;
      if (op.kind == OpKind::SgdUpdate || op.kind == OpKind::AdamwUpdate) {
        if (!clipOfPlan)
          clipOfPlan = {a.clipGradNorm, device + op.describe()};
        else if (clipOfPlan->first != a.clipGradNorm)
          return fail(device + op.describe() + ": clip_grad_norm " +
                      shortest(a.clipGradNorm) + ", but " +
                      clipOfPlan->second + " has " +
                      shortest(clipOfPlan->first) +
                      " (the whole model's norm is clipped at one value)");
      }
      if (op.kind == OpKind::GradSync) {
        bool self = false;
        for (const std::string &member : a.group) {
          if (!byDevice.count(member))
            return fail(device + op.describe() + ": group device '" + member +
                        "' has no program in the plan");
          self |= member == p.device();
        }
        if (!self)
          return fail(device + op.describe() +
                      ": the group does not include this device");
        continue;
      }
      if (op.kind != OpKind::Send && op.kind != OpKind::Recv)
        continue;
      if (op.phase == OpPhase::Weight)
        return fail(device + op.describe() +
                    ": a transfer in the weight-gradient phase (wgt), which "
                    "moves nothing");
      bool send = op.kind == OpKind::Send;
      auto peer = byDevice.find(a.peerDevice);
      if (peer == byDevice.end())
        return fail(device + op.describe() + ": peer_device '" +
                    a.peerDevice + "' has no program in the plan");
      if (a.peerDevice == p.device())
        return fail(device + op.describe() + ": sends to itself");
      if (peer->second->stage() != a.peerStage)
        return fail(device + op.describe() + ": peer " +
                    std::to_string(a.peerStage) + " but device '" +
                    a.peerDevice + "' runs stage " +
                    std::to_string(peer->second->stage()));
      ends.push_back({send, a.tag, send ? p.device() : a.peerDevice,
                      send ? a.peerDevice : p.device(), a.bytes});
      endOps.push_back({&p, op.index});
      if (!a.oncePerIteration && op.phase != OpPhase::Optimizer)
        opTransfers[send ? 2 : 0].insert(
            {streamPhaseOf(op.phase),
             a.peerStage});
    }
    format::Streams streams;
    if (!format::streamsFromProgram(
            plan, p, static_cast<int>(format::programMicroBatches(plan, p)),
            stages, streams, reason))
      return fail(device + reason);
    // The streams' transfers are the program's, and the other way round.
    for (int slot : {0, 2}) {
      std::set<std::pair<format::Phase, int64_t>> streamTransfers;
      for (const format::StreamEntry &entry : streams[slot])
        streamTransfers.insert({entry.phase, entry.peerStage});
      for (const auto &[phase, peer] : streamTransfers)
        if (!opTransfers[slot].count({phase, peer}))
          return fail(device + format::slotName(static_cast<format::Slot>(slot)) +
                      " stream: " + format::phaseName(phase) +
                      " transfers with stage " + std::to_string(peer) +
                      ", but no op of the program does");
      for (const auto &[phase, peer] : opTransfers[slot])
        if (!streamTransfers.count({phase, peer}))
          return fail(device + "a " + format::phaseName(phase) +
                      (slot == 0 ? " dtfm.recv from" : " dtfm.send to") +
                      " stage " + std::to_string(peer) + " that the " +
                      format::slotName(static_cast<format::Slot>(slot)) +
                      " stream never runs");
    }
    // The members of a tensor-parallel group each run the pipeline with the
    // members of their rank.
    if (p.tp_rank() >= smallestDegree[p.pipeline()]) {
      // Checked against its stage's rank 0 below.
      largerRanks.push_back({&p, streams});
      continue;
    }
    rankZero[{p.pipeline(), p.stage()}] = streams;
    auto &cells = pipelines[{p.pipeline(), p.tp_rank()}];
    cells.resize(static_cast<size_t>(stages));
    auto &templates = templatesOf[{p.pipeline(), p.tp_rank()}];
    templates.resize(static_cast<size_t>(stages), -1);
    templates[static_cast<size_t>(p.stage())] =
        p.has_template_index() ? p.template_index() : -1;
    for (int slot = 0; slot < 3; ++slot)
      for (const format::StreamEntry &entry : streams[slot])
        cells[static_cast<size_t>(p.stage())][slot].push_back(
            format::formatEntry(entry, static_cast<format::Slot>(slot)));
  }
  // The replicas' shards of a parameter cover its elements once each, in
  // order.
  for (auto &[key, ranges] : shardsOf) {
    const auto &[stage, rank, name] = key;
    std::string what = "the shards of '" + name + "' on stage " +
                       std::to_string(stage) +
                       (rank ? " (tensor-parallel rank " +
                                   std::to_string(rank) + ")"
                             : std::string());
    auto elements = elementsOf.find(key);
    if (elements == elementsOf.end())
      return fail("device '" + ranges.front().device + "': shard of '" +
                  name + "', a parameter its program does not have");
    std::stable_sort(ranges.begin(), ranges.end(),
                     [](const ShardRange &a, const ShardRange &b) {
                       return a.begin < b.begin;
                     });
    int64_t covered = 0;
    for (const ShardRange &r : ranges) {
      if (r.begin != covered)
        return fail(what + (r.begin < covered ? " overlap" : " leave a gap") +
                    " at element " + std::to_string(std::min(r.begin, covered)) +
                    " (device '" + r.device + "')");
      covered = r.end;
    }
    if (covered != elements->second)
      return fail(what + " cover " + std::to_string(covered) + " of its " +
                  std::to_string(elements->second) + " elements");
  }
  // A rank only larger stages have runs its stage's streams, less the
  // sends to a smaller group (it has no receiver there).
  for (const auto &[program, streams] : largerRanks) {
    auto reference = rankZero.find({program->pipeline(), program->stage()});
    bool same = reference != rankZero.end() &&
                streams[0] == reference->second[0] &&
                streams[1] == reference->second[1];
    if (same) {
      std::set<int> peers; // the stages it does send to
      for (const format::StreamEntry &entry : streams[2])
        peers.insert(entry.peerStage);
      std::vector<format::StreamEntry> expected;
      for (const format::StreamEntry &entry : reference->second[2])
        if (peers.count(entry.peerStage))
          expected.push_back(entry);
      same = expected == streams[2];
    }
    if (!same)
      return fail("device '" + program->device() +
                  "': tensor-parallel rank " +
                  std::to_string(program->tp_rank()) +
                  " runs other streams than its stage's rank 0");
  }
  for (const planner::TransferProblem &problem :
       planner::checkTransfers(ends)) {
    const auto &[program, index] = endOps[problem.end];
    return fail("device '" + program->device() + "': op #" +
                std::to_string(index) + " " +
                format::sharedPart(plan, *program).ops(index).name() +
                " " + problem.message);
  }
  std::set<std::vector<int64_t>> schedulesChecked;
  for (const auto &[place, cells] : pipelines) {
    const std::vector<int64_t> &templates = templatesOf[place];
    if (std::find(templates.begin(), templates.end(), -1) == templates.end() &&
        !schedulesChecked.insert(templates).second)
      continue;
    std::vector<planner::StageSchedule> schedule;
    std::string reason;
    if (!planner::parseSchedule(cells, schedule, reason) ||
        !planner::checkSchedule(schedule, reason))
      return fail("pipeline " + std::to_string(place.first) +
                  (place.second ? " (tensor-parallel rank " +
                                      std::to_string(place.second) + ")"
                                : std::string()) +
                  ": the streams do not form a schedule that runs: " + reason);
  }
  return true;
}
