//===- EmitStagePrograms.cpp - One program per device ---------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Dialect/Dtfm/IR/DtfmAttrs.h"
#include "dtfm/Format/Stream.h"
#include "dtfm/Dialect/Dtfm/IR/DevicePrograms.h"
#include "dtfm/Passes/Passes.h"
#include "dtfm/Plan/Program.h"
#include "dtfm/Plan/Sharding.h"
#include "dtfm/Planner/Cluster.h"

#include <map>
#include <set>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::dtfm {
#define GEN_PASS_DEF_EMITSTAGEPROGRAMS
#include "dtfm/Passes/Passes.h.inc"
} // namespace mlir::dtfm

using namespace mlir;
using namespace mlir::dtfm;
namespace planner = ::dtfm::planner;

namespace {
/// A symbol name from a device name ("oregon-gpu3" -> "oregon_gpu3").
std::string symbolFor(StringRef device) {
  std::string name;
  for (char c : device)
    name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0])))
    name = "d_" + name;
  return name;
}

struct EmitStagePrograms
    : public mlir::dtfm::impl::EmitStageProgramsBase<EmitStagePrograms> {
  using EmitStageProgramsBase::EmitStageProgramsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fail = [&](const Twine &message) {
      mlir::emitError(clusterLoc(module))
          << "dtfm-emit-stage-programs: " << message;
      signalPassFailure();
    };
    std::string error;
    FailureOr<planner::Cluster> loaded = moduleCluster(module, error);
    if (failed(loaded))
      return fail(error);
    planner::Cluster cluster = std::move(*loaded);
    auto schedule = module->getAttrOfType<ScheduleAttr>(kScheduleAttrName);
    if (!schedule)
      return fail("no dtfm.schedule; run --dtfm-schedule-microbatches first");
    ArrayRef<StageStreamsAttr> streams = schedule.getStages();
    int64_t numStages = streams.size();
    // Uneven replicas: pipelines with fewer micro-batches than the
    // schedule's largest run the same kind of schedule for their count.
    ArrayRef<int64_t> pipelineCounts = schedule.getPipelineMicroBatches();
    std::optional<planner::PipelineSchedule> kind =
        planner::parsePipelineSchedule(schedule.getKind());
    auto countOf = [&](int64_t pipeline) {
      return pipelineCounts.empty() ? schedule.getMicroBatches()
                                    : pipelineCounts[pipeline];
    };
    // ZB-H1's put-off Ws depend on the bytes each stage holds: taken from
    // the model before its ops move into the device programs, where
    // pipelines of fewer micro-batches need streams of their own.
    std::map<int64_t, std::vector<int>> weightDelays;
    if (kind == planner::PipelineSchedule::ZeroBubbleH1)
      for (int64_t count : pipelineCounts)
        if (!weightDelays.count(count))
          weightDelays[count] = zeroBubbleDelays(module, numStages, count);
    std::map<int64_t, SmallVector<StageStreamsAttr>> streamsFor;
    streamsFor[schedule.getMicroBatches()].assign(streams.begin(),
                                                  streams.end());
    auto streamsOf =
        [&](int64_t count,
            std::string &error) -> FailureOr<ArrayRef<StageStreamsAttr>> {
      auto it = streamsFor.find(count);
      if (it == streamsFor.end()) {
        SmallVector<StageStreamsAttr> built;
        SmallVector<int64_t> peaks;
        if (failed(buildStageStreams(module.getContext(), *kind, numStages,
                                     count, weightDelays[count], built,
                                     peaks, error)))
          return failure();
        it = streamsFor.emplace(count, std::move(built)).first;
      }
      return ArrayRef<StageStreamsAttr>(it->second);
    };

    SmallVector<func::FuncOp> models;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal())
        models.push_back(func);
    if (models.size() != 1)
      return fail("expected one model function, found " + Twine(models.size()));
    func::FuncOp model = models.front();

    // Devices of each stage, indexed by pipeline.
    std::vector<std::vector<std::string>> devices(numStages);
    if (auto assignment =
            module->getAttrOfType<AssignmentAttr>(kAssignmentAttrName)) {
      ArrayRef<ArrayAttr> groups = assignment.getStages();
      if (static_cast<int64_t>(groups.size()) != numStages)
        return fail("dtfm.assignment has " + Twine(groups.size()) +
                    " stages but the schedule " + Twine(numStages));
      for (int64_t s = 0; s < numStages; ++s)
        for (Attribute name : groups[s])
          devices[s].push_back(cast<StringAttr>(name).str());
    } else {
      if (numStages > static_cast<int64_t>(cluster.size()))
        return fail(Twine(numStages) + " stages but cluster '" + cluster.name +
                    "' has " + Twine(cluster.size()) + " devices");
      for (int64_t s = 0; s < numStages; ++s)
        devices[s].push_back(cluster.devices[s].name);
    }

    if (!pipelineCounts.empty())
      for (int64_t s = 0; s < numStages; ++s)
        if (devices[s].size() != pipelineCounts.size())
          return fail("dtfm.schedule has " + Twine(pipelineCounts.size()) +
                      " pipeline micro-batch counts but stage " + Twine(s) +
                      " runs " + Twine(devices[s].size()) + " pipelines");

    // Ops of each stage in IR order.
    std::vector<SmallVector<Operation *>> stageOps(numStages);
    for (Operation &op : model.getBody().front()) {
      if (isa<func::ReturnOp>(op))
        continue;
      auto stage = op.getAttrOfType<IntegerAttr>(kStageAttrName);
      if (!stage || stage.getInt() < 0 || stage.getInt() >= numStages) {
        op.emitOpError("has no dtfm.stage within the schedule's stages");
        return signalPassFailure();
      }
      stageOps[stage.getInt()].push_back(&op);
    }

    // Tensor parallelism: the planning passes placed each group by its
    // first member; every member gets the program, its gradient syncs going
    // to the members of its own rank. Stages may have degrees of their own
    // (groups of different sizes): member j of a receiving group takes a
    // transfer from member j mod t of the sending one (a group holds its
    // activations whole), so a sender feeds every receiver of its rank
    // modulo its degree, and none when the receiving group is smaller.
    std::vector<std::vector<int>> tpGroups;
    if (failed(tensorParallelGroupsOf(module, cluster, tpGroups, error)))
      return fail(error);
    std::map<std::string, std::vector<std::string>> membersOf;
    for (const std::vector<int> &group : tpGroups)
      for (int member : group)
        membersOf[cluster.devices[group.front()].name].push_back(
            cluster.devices[member].name);
    auto degreeOf = [&](const std::string &first) -> int64_t {
      auto it = membersOf.find(first);
      return it == membersOf.end() ? 1 : it->second.size();
    };
    auto memberOf = [&](const std::string &first, int64_t rank) {
      auto it = membersOf.find(first);
      return it == membersOf.end() ? first : it->second[rank];
    };
    std::vector<int64_t> stageDegree(numStages, 1);
    for (int64_t s = 0; s < numStages; ++s) {
      stageDegree[s] = degreeOf(devices[s].front());
      for (const std::string &first : devices[s]) {
        int64_t degree = degreeOf(first);
        if (degree != stageDegree[s])
          return fail("stage " + Twine(s) + " has tensor-parallel groups of " +
                      Twine(stageDegree[s]) + " and of " + Twine(degree) +
                      " devices (a stage's groups must be alike)");
      }
    }
    // The sharded ops of a stage must be of its degree.
    for (Operation &op : model.getBody().front()) {
      auto stage = op.getAttrOfType<IntegerAttr>(kStageAttrName);
      if (!stage || stage.getInt() < 0 || stage.getInt() >= numStages)
        continue;
      int64_t want = stageDegree[stage.getInt()], have = 0;
      if (auto sum = dyn_cast<TpAllReduceOp>(op))
        have = sum.getDegree();
      else if (auto shard = op.getAttrOfType<DenseI64ArrayAttr>(
                   kTpShardAttrName);
               shard && shard.size() == 2)
        have = shard[1];
      if (have && have != want) {
        op.emitOpError("is sharded for a tensor-parallel group of ")
            << have << " but stage " << stage.getInt() << " runs on groups of "
            << want;
        return signalPassFailure();
      }
    }
    Builder b(module.getContext());
    OpBuilder top(module.getContext());
    top.setInsertionPoint(model);
    for (int64_t s = 0; s < numStages; ++s) {
      int64_t groupSize = devices[s].size();
      int64_t degree = stageDegree[s];
      for (int64_t i = 0; i < groupSize; ++i)
        for (int64_t rank = 0; rank < degree; ++rank) {
          const std::string device = memberOf(devices[s][i], rank);
          // Pipeline i's group at `stage`, member `r`.
          auto memberAt = [&](int64_t stage, int64_t r) -> std::string {
            const std::vector<std::string> &group = devices[stage];
            return memberOf(group[std::min<int64_t>(i, group.size() - 1)], r);
          };
          // The member this one receives from at `stage`.
          auto deviceAt = [&](int64_t stage) -> std::string {
            if (stage < 0 || stage >= numStages)
              return "";
            return memberAt(stage, rank % stageDegree[stage]);
          };
          // The members this one sends to at `stage`.
          auto receiversAt = [&](int64_t stage) {
            std::vector<std::string> receivers;
            for (int64_t r = rank; r < stageDegree[stage]; r += degree)
              receivers.push_back(memberAt(stage, r));
            return receivers;
          };
          // The (phase, peer stage) pairs of the program's transfer ops,
          // receives and sends: the schedule's entries keep only those. A
          // stage whose parameters are all frozen gets no gradient back; a
          // send with no receiver (stage of another width) is not cloned.
          std::set<std::pair<StringRef, int64_t>> transfers[2];
          auto noteTransfer = [&](Operation *op, int64_t peer, int slot) {
            // Unmarked transfers are forward ones, as the scheduler marks.
            auto phase = op->getAttrOfType<StringAttr>(kPhaseAttrName);
            if (!op->hasAttr(kOncePerIterationAttrName))
              transfers[slot].insert({phase ? phase.getValue() : "fwd", peer});
          };
          auto func = top.create<func::FuncOp>(
              model.getLoc(), symbolFor(device), b.getFunctionType({}, {}));
          OpBuilder body = OpBuilder::atBlockEnd(func.addEntryBlock());
          IRMapping mapping;
          SmallVector<Attribute> shards;
          int64_t recvBytes = 0;
          for (Operation *op : stageOps[s]) {
            for (Value operand : op->getOperands())
              if (!mapping.contains(operand)) {
                op->emitOpError("uses a value of another stage; run "
                                "--dtfm-insert-send-recv first");
                return signalPassFailure();
              }
            if (auto send = dyn_cast<SendOp>(op)) {
              std::vector<std::string> receivers =
                  receiversAt(send.getPeer());
              if (!receivers.empty())
                noteTransfer(op, send.getPeer(), 1);
              for (const std::string &receiver : receivers)
                body.clone(*op, mapping)
                    ->setAttr("peer_device", b.getStringAttr(receiver));
              continue;
            }
            Operation *copy = body.clone(*op, mapping);
            if (auto recv = dyn_cast<RecvOp>(copy)) {
              noteTransfer(copy, recv.getPeer(), 0);
              copy->setAttr("peer_device",
                            b.getStringAttr(deviceAt(recv.getPeer())));
              recvBytes += recv.getBytes();
            }
            if (auto sync = dyn_cast<GradSyncOp>(copy); sync && degree > 1) {
              SmallVector<Attribute> members;
              for (Attribute first : sync.getGroup())
                members.push_back(b.getStringAttr(
                    memberOf(cast<StringAttr>(first).str(), rank)));
              sync.setGroupAttr(b.getArrayAttr(members));
            }
            if (auto param = dyn_cast<ParamOp>(copy)) {
              ::dtfm::plan::ElementRange shard = ::dtfm::plan::shardOf(
                  getNumElements(param.getType()), i, groupSize);
              shards.push_back(ParamShardAttr::get(
                  b.getContext(), param.getName(), shard.begin, shard.end,
                  getTensorBytes(param.getType())));
            }
          }
          body.create<func::ReturnOp>(model.getLoc());
          func->setAttr(kDeviceAttrName, b.getStringAttr(device));
          func->setAttr(kStageAttrName, b.getI64IntegerAttr(s));
          func->setAttr(kPipelineAttrName, b.getI64IntegerAttr(i));
          func->setAttr(
              kPeersAttrName,
              PeersAttr::get(b.getContext(), deviceAt(s - 1), deviceAt(s + 1)));
          FailureOr<ArrayRef<StageStreamsAttr>> pipelineStreams =
              streamsOf(countOf(i), error);
          if (failed(pipelineStreams))
            return fail(error);
          StageStreamsAttr stageStreams = (*pipelineStreams)[s];
          auto keep = [&](ArrayRef<StringAttr> entries,
                          ::dtfm::format::Slot slot, int index) {
            SmallVector<StringAttr> kept;
            for (StringAttr entry : entries) {
              ::dtfm::format::StreamEntry parsed;
              if (::dtfm::format::parseEntry(entry.getValue(), slot,
                                             parsed) &&
                  !transfers[index].count(
                      {::dtfm::format::phaseName(parsed.phase),
                       parsed.peerStage}))
                continue;
              kept.push_back(entry);
            }
            return kept;
          };
          stageStreams = StageStreamsAttr::get(
              b.getContext(),
              keep(stageStreams.getRecv(), ::dtfm::format::Slot::Receive, 0),
              stageStreams.getCompute(),
              keep(stageStreams.getSend(), ::dtfm::format::Slot::Send, 1));
          func->setAttr(kStreamsAttrName, stageStreams);
          func->setAttr(kMicroBatchesAttrName, b.getI64IntegerAttr(countOf(i)));
          func->setAttr(kParamShardsAttrName, b.getArrayAttr(shards));
          func->setAttr(kRecvBufferBytesAttrName,
                        b.getI64IntegerAttr(recvBytes));
          if (recompute)
            func->setAttr(kRecomputeAttrName, b.getBoolAttr(true));
          if (degree > 1) {
            SmallVector<Attribute> members;
            for (int64_t r = 0; r < degree; ++r)
              members.push_back(b.getStringAttr(memberOf(devices[s][i], r)));
            func->setAttr(kTpGroupAttrName, b.getArrayAttr(members));
            func->setAttr(kTpRankAttrName, b.getI64IntegerAttr(rank));
          }
        }
    }
    if (auto name = model->getAttr(kModelAttrName))
      module->setAttr(kModelAttrName, name);
    model.erase();
    // The replicas of a stage run its first replica's body.
    shareDevicePrograms(module);
  }
};
} // namespace
