//===- Plan.cpp - plan.pb export and import -------------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Target/Plan/Plan.h"
#include "dtfm/Analysis/CostAnalysis.h"
#include "dtfm/Dialect/Dtfm/IR/DevicePrograms.h"
#include "dtfm/Dialect/Dtfm/IR/DtfmOps.h"
#include "dtfm/Format/PlanFile.h"
#include "dtfm/Format/Stream.h"
#include "dtfm/Plan/Dataflow.h"
#include "dtfm/Plan/Program.h"

#include "plan.pb.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>

using namespace mlir;
using namespace mlir::dtfm;
namespace pb = ::dtfm::proto;

//===----------------------------------------------------------------------===//
// Export
//===----------------------------------------------------------------------===//

/// The module's file at line 0: whole-module errors print on one line.
static Location wholeFile(ModuleOp module) {
  if (auto file = dyn_cast<FileLineColLoc>(module.getLoc()))
    return FileLineColLoc::get(file.getFilename(), 0, 0);
  return module.getLoc();
}

static std::string printAttr(Attribute attr) {
  std::string text;
  llvm::raw_string_ostream os(text);
  attr.print(os);
  return text;
}

/// The typed value of simple attributes, and always the MLIR text.
static pb::PlanAttr convertAttr(Attribute attr) {
  pb::PlanAttr out;
  out.set_mlir(printAttr(attr));
  if (auto i = dyn_cast<IntegerAttr>(attr))
    out.set_i(i.getValue().getSExtValue());
  else if (auto f = dyn_cast<FloatAttr>(attr))
    out.set_f(f.getValueAsDouble());
  else if (auto s = dyn_cast<StringAttr>(attr))
    out.set_s(s.str());
  else if (auto ints = dyn_cast<DenseI64ArrayAttr>(attr))
    for (int64_t v : ints.asArrayRef())
      out.mutable_ints()->add_values(v);
  else if (isa<UnitAttr>(attr))
    out.set_unit(true);
  else if (auto list = dyn_cast<ArrayAttr>(attr);
           list && !list.empty() &&
           llvm::all_of(list, [](Attribute a) { return isa<StringAttr>(a); }))
    for (Attribute item : list)
      out.mutable_strings()->add_values(cast<StringAttr>(item).str());
  return out;
}

namespace {
/// convertAttr, once per attribute of an export: the programs of a plan
/// share most of their attributes (MLIR uniques them), and printing each
/// one's text again was most of the export's time.
class PlanAttrs {
public:
  const pb::PlanAttr &operator()(Attribute attr) {
    auto [it, inserted] = converted.try_emplace(attr);
    if (inserted)
      it->second = convertAttr(attr);
    return it->second;
  }

private:
  llvm::DenseMap<Attribute, pb::PlanAttr> converted;
};
} // namespace

/// A program's roofline work (plan.proto's OpWork lists).
static void setWork(const ::dtfm::planner::RooflineWork &work,
                    google::protobuf::RepeatedPtrField<pb::OpWork> &out) {
  for (const auto &[flops, bytes] : work.opTerms()) {
    pb::OpWork &term = *out.Add();
    term.set_flops(flops);
    term.set_bytes(bytes);
  }
}

static LogicalResult fillValue(Operation *op, Value value, int64_t id,
                               pb::PlanValue &out) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape())
    return op->emitOpError("has a result that is not a static tensor");
  out.set_id(id);
  for (int64_t d : type.getShape())
    out.add_shape(d);
  std::string dtype;
  llvm::raw_string_ostream os(dtype);
  type.getElementType().print(os);
  out.set_dtype(dtype);
  return success();
}

/// Every attribute of an op: inherent (properties) and discardable.
static SmallVector<NamedAttribute> allAttrs(Operation *op) {
  SmallVector<NamedAttribute> attrs;
  if (auto props =
          dyn_cast_or_null<DictionaryAttr>(op->getPropertiesAsAttribute()))
    attrs.append(props.begin(), props.end());
  for (NamedAttribute attr : op->getDiscardableAttrs())
    attrs.push_back(attr);
  return attrs;
}

LogicalResult mlir::dtfm::exportPlan(ModuleOp module,
                                     const ::dtfm::planner::Cluster &cluster,
                                     pb::Plan &plan) {
  if (auto assignment =
          module->getAttrOfType<AssignmentAttr>(kAssignmentAttrName))
    if (assignment.getCluster() != cluster.name)
      return emitError(wholeFile(module))
             << "the module was planned for cluster '"
             << assignment.getCluster() << "', not '" << cluster.name << "'";
  auto schedule = module->getAttrOfType<ScheduleAttr>(kScheduleAttrName);
  PlanAttrs toPlanAttr;
  plan.set_format_version(::dtfm::format::kPlanFormatVersion);
  ::dtfm::planner::clusterToPlan(cluster, plan);
  if (auto model = module->getAttrOfType<StringAttr>(kModelAttrName))
    plan.set_model(model.str());
  if (schedule) {
    plan.set_schedule(schedule.getKind().str());
    plan.set_micro_batches(schedule.getMicroBatches());
  }
  for (NamedAttribute attr : module->getAttrs()) {
    // The cluster's only copy in the plan is its own fields (above).
    if (auto imported = dyn_cast<ClusterAttr>(attr.getValue());
        imported && attr.getName() == kClusterAttrName) {
      plan.set_cluster_source(imported.getSource().str());
      continue;
    }
    (*plan.mutable_module_attrs())[attr.getName().str()] =
        toPlanAttr(attr.getValue());
  }

  llvm::StringMap<double> speedOf;
  for (const ::dtfm::planner::Device &d : cluster.devices)
    speedOf[d.name] = d.speed();
  // The costs of each body, once: a stage's replicas run one
  // (dtfm/Dialect/Dtfm/IR/DevicePrograms.h).
  llvm::DenseMap<Operation *, std::unique_ptr<CostAnalysis>> costsOf;
  // Programs are written shared (plan.proto's templates), as they come:
  // a program whose body and shared fields an earlier one had is that
  // one's template with its own fields and peers, and its ops are not
  // converted again. Per body: the template of each set of shared fields
  // (their bytes), and the index of each op with a peer_device.
  ::dtfm::format::ProgramSharing sharing(plan);
  llvm::DenseMap<Operation *, std::map<std::string, uint32_t>> templatesOf;
  llvm::DenseMap<Operation *, std::vector<uint32_t>> transfersOf;
  for (auto func : module.getOps<func::FuncOp>()) {
    auto device = func->getAttrOfType<StringAttr>(kDeviceAttrName);
    if (!device)
      return emitError(func.getLoc())
             << "function @" << func.getSymName()
             << " is not a device program (no dtfm.device); run "
                "--dtfm-emit-stage-programs first";
    auto speed = speedOf.find(device.getValue());
    if (speed == speedOf.end())
      return emitError(func.getLoc())
             << "function @" << func.getSymName() << " runs on device '"
             << device.getValue() << "', which cluster '" << cluster.name
             << "' does not have";
    func::FuncOp body = programBody(func);
    FailureOr<SmallVector<StringAttr>> peers = peerDevices(func);
    if (failed(peers))
      return failure();
    pb::DeviceProgram &program = *plan.add_programs();
    program.set_device(device.str());
    if (auto s = func->getAttrOfType<IntegerAttr>(kStageAttrName))
      program.set_stage(s.getInt());
    if (auto p = func->getAttrOfType<IntegerAttr>(kPipelineAttrName))
      program.set_pipeline(p.getInt());
    // The dialect verifier has checked the typed forms of these attributes.
    if (auto peers = func->getAttrOfType<PeersAttr>(kPeersAttrName)) {
      program.set_prev(peers.getPrev().str());
      program.set_next(peers.getNext().str());
    }
    if (auto streams = func->getAttrOfType<StageStreamsAttr>(kStreamsAttrName)) {
      ::dtfm::format::Streams entries;
      ArrayRef<StringAttr> lists[3] = {streams.getRecv(), streams.getCompute(),
                                       streams.getSend()};
      for (int s = 0; s < 3; ++s) {
        auto slot = static_cast<::dtfm::format::Slot>(s);
        for (StringAttr text : lists[s]) {
          ::dtfm::format::StreamEntry entry;
          if (!::dtfm::format::parseEntry(text.getValue(), slot, entry))
            return emitError(func.getLoc())
                   << "function @" << func.getSymName() << ": malformed "
                   << ::dtfm::format::slotName(slot) << " stream entry "
                   << text;
          entries[s].push_back(entry);
        }
      }
      ::dtfm::format::streamsToProgram(entries, program);
    }
    if (auto bytes = func->getAttrOfType<IntegerAttr>(kRecvBufferBytesAttrName))
      program.set_recv_buffer_bytes(bytes.getInt());
    if (auto count = func->getAttrOfType<IntegerAttr>(kMicroBatchesAttrName))
      program.set_micro_batches(count.getInt());
    else if (schedule)
      program.set_micro_batches(schedule.getMicroBatches());
    if (auto shards = func->getAttrOfType<ArrayAttr>(kParamShardsAttrName))
      for (auto entry : shards.getAsRange<ParamShardAttr>()) {
        pb::ParamShard &shard = *program.add_shards();
        shard.set_name(entry.getName().str());
        shard.set_begin(entry.getBegin());
        shard.set_end(entry.getEnd());
        shard.set_bytes(entry.getBytes());
      }
    // A replica's attributes, less how it names its body (the plan writes
    // whole programs and shares them itself: format::sharePrograms).
    for (NamedAttribute attr : func->getDiscardableAttrs())
      if (attr.getName() != kTemplateAttrName &&
          attr.getName() != kPeerDevicesAttrName)
        (*program.mutable_attrs())[attr.getName().str()] =
            toPlanAttr(attr.getValue());
    std::unique_ptr<CostAnalysis> &cached = costsOf[body.getOperation()];
    if (!cached)
      cached = std::make_unique<CostAnalysis>(body);
    const CostAnalysis &costs = *cached;
    if (!costs.isValid())
      return failure();
    program.set_forward_flops(costs.getTotals().forwardFlops);
    program.set_backward_flops(costs.getTotals().backwardFlops);
    program.set_optimizer_flops(costs.getTotals().optimizerFlops);
    ::dtfm::planner::RooflineWork forwardWork, backwardWork, weightWork;
    double weightFlops = 0;
    for (const OpCost &cost : costs.getOpCosts()) {
      forwardWork.add(static_cast<double>(cost.forwardFlops),
                      static_cast<double>(cost.forwardBytes));
      backwardWork.add(static_cast<double>(cost.backwardFlops),
                       static_cast<double>(cost.backwardBytes));
      auto phase = cost.op->getAttrOfType<StringAttr>(kPhaseAttrName);
      if (phase && phase.getValue() == kWeightPhase) {
        weightFlops += static_cast<double>(cost.backwardFlops);
        weightWork.add(static_cast<double>(cost.backwardFlops),
                       static_cast<double>(cost.backwardBytes));
      }
    }
    setWork(forwardWork, *program.mutable_forward_work());
    setWork(backwardWork, *program.mutable_backward_work());
    program.set_weight_flops(weightFlops);
    setWork(weightWork, *program.mutable_weight_work());
    program.set_speed_flops(speed->second);
    if (auto group = func->getAttrOfType<ArrayAttr>(kTpGroupAttrName)) {
      for (Attribute member : group)
        if (auto name = dyn_cast<StringAttr>(member))
          program.add_tp_group(name.str());
      if (auto rank = func->getAttrOfType<IntegerAttr>(kTpRankAttrName))
        program.set_tp_rank(rank.getInt());
    }
    auto recompute = func->getAttrOfType<BoolAttr>(kRecomputeAttrName);
    if (recompute && recompute.getValue())
      program.set_recompute(true);

    // The fields so far less the device's own: with the same body, the
    // same template.
    std::string sharedFields;
    {
      pb::DeviceProgram shared = program, own;
      ::dtfm::format::splitProgram(shared, own);
      sharedFields = ::dtfm::format::deterministicBytes(shared);
    }
    std::map<std::string, uint32_t> &templates =
        templatesOf[body.getOperation()];
    if (auto known = templates.find(sharedFields); known != templates.end()) {
      pb::DeviceProgram entry;
      ::dtfm::format::splitProgram(program, entry);
      const std::vector<uint32_t> &transfers =
          transfersOf[body.getOperation()];
      // peerDevices lists one device per transfer of the body.
      for (auto [index, peer] : llvm::zip(transfers, *peers)) {
        pb::OpAttrs &own = *entry.add_op_attrs();
        own.set_op(index);
        (*own.mutable_attrs())["peer_device"] = toPlanAttr(peer);
      }
      entry.set_template_index(known->second);
      program.Swap(&entry);
      continue;
    }

    llvm::DenseMap<Value, int64_t> ids;
    const StringAttr *peer = peers->begin();
    std::vector<uint32_t> &transfers = transfersOf[body.getOperation()];
    transfers.clear();
    for (Operation &op : body.getBody().front()) {
      if (isa<func::ReturnOp>(op))
        continue;
      if (op.hasAttr("peer_device"))
        transfers.push_back(static_cast<uint32_t>(program.ops_size()));
      pb::PlanOp &out = *program.add_ops();
      out.set_name(op.getName().getStringRef().str());
      for (Value operand : op.getOperands()) {
        auto it = ids.find(operand);
        if (it == ids.end())
          return op.emitOpError("uses a value defined outside its program");
        out.add_operands(it->second);
      }
      for (Value result : op.getResults()) {
        int64_t id = static_cast<int64_t>(ids.size());
        ids[result] = id;
        if (failed(fillValue(&op, result, id, *out.add_results())))
          return failure();
      }
      for (NamedAttribute attr : allAttrs(&op)) {
        // The transfer's other end is this replica's own.
        Attribute value = attr.getValue();
        if (attr.getName() == "peer_device")
          value = *peer++;
        (*out.mutable_attrs())[attr.getName().str()] = toPlanAttr(value);
        // Dictionaries at any depth, keyed by their path ("a/b/c").
        std::function<void(const std::string &, DictionaryAttr)> flatten =
            [&](const std::string &prefix, DictionaryAttr dict) {
              for (NamedAttribute entry : dict) {
                std::string key = prefix + "/" + entry.getName().str();
                (*out.mutable_nested_attrs())[key] =
                    toPlanAttr(entry.getValue());
                if (auto inner = dyn_cast<DictionaryAttr>(entry.getValue()))
                  flatten(key, inner);
              }
            };
        if (auto dict = dyn_cast<DictionaryAttr>(attr.getValue()))
          flatten(attr.getName().str(), dict);
      }
    }
    // Recomputation runs the recomputable layers' forward again in the
    // backward (the runtime's rule, Plan/Program.h): the simulator
    // times it there, as time and not as work.
    if (program.recompute()) {
      ::dtfm::plan::StageProgram typed;
      std::string error;
      if (!::dtfm::plan::decodeProgram(program, typed, error))
        return emitError(func.getLoc())
               << "function @" << func.getSymName() << ": " << error;
      std::vector<std::string> layers = ::dtfm::plan::recomputableLayers(typed);
      llvm::StringSet<> recomputed;
      for (const std::string &layer : layers)
        recomputed.insert(layer);
      int64_t again = 0;
      ::dtfm::planner::RooflineWork againWork;
      for (const OpCost &cost : costs.getOpCosts()) {
        auto layer = cost.op->getAttrOfType<StringAttr>(kLayerAttrName);
        if (layer && recomputed.contains(layer.getValue())) {
          again += cost.forwardFlops;
          againWork.add(static_cast<double>(cost.forwardFlops),
                        static_cast<double>(cost.forwardBytes));
        }
      }
      program.set_recompute_flops(static_cast<double>(again));
      setWork(againWork, *program.mutable_recompute_work());
    }
    templates.emplace(std::move(sharedFields), sharing.share(program));
  }
  if (plan.programs_size() == 0)
    return emitError(wholeFile(module))
           << "no device programs; run --dtfm-emit-stage-programs first";
  return success();
}

//===----------------------------------------------------------------------===//
// Check and import
//===----------------------------------------------------------------------===//

bool mlir::dtfm::checkPlan(const pb::Plan &plan,
                           const ::dtfm::planner::Cluster *cluster,
                           std::string &error) {
  if (cluster && plan.cluster_fingerprint() !=
                     ::dtfm::planner::clusterFingerprint(*cluster)) {
    error = "plan was made for cluster '" + plan.cluster_name() +
            "', not for cluster '" + cluster->name +
            "' (devices or links differ)";
    return false;
  }
  return true;
}

OwningOpRef<ModuleOp> mlir::dtfm::importPlan(MLIRContext *context,
                                             const pb::Plan &plan) {
  context->loadDialect<DtfmDialect, func::FuncDialect>();
  Location loc = NameLoc::get(StringAttr::get(context, "plan"));
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  // Each distinct attribute text parsed once: a stage's replicas repeat
  // their template's attributes.
  llvm::StringMap<Attribute> parsed;
  auto parse = [&](const pb::PlanAttr &attr) -> Attribute {
    auto [it, fresh] = parsed.try_emplace(attr.mlir());
    if (fresh)
      it->second = parseAttribute(attr.mlir(), context);
    return it->second;
  };
  using AttrMap = google::protobuf::Map<std::string, pb::PlanAttr>;
  // Sorted, so the output does not depend on the map's order; `own`'s
  // (an entry's) before `map`'s (its template's).
  auto sortedAttrs = [&](const AttrMap &map, SmallVector<NamedAttribute> &out,
                         const AttrMap *own = nullptr) -> LogicalResult {
    std::map<std::string, const pb::PlanAttr *> sorted;
    if (own)
      for (const auto &[key, value] : *own)
        sorted.emplace(key, &value);
    for (const auto &[key, value] : map)
      sorted.emplace(key, &value);
    for (const auto &[key, value] : sorted) {
      Attribute attribute = parse(*value);
      if (!attribute)
        return emitError(loc) << "plan: cannot parse attribute '" << key
                              << "' = " << value->mlir();
      out.push_back(NamedAttribute(StringAttr::get(context, key), attribute));
    }
    return success();
  };
  SmallVector<NamedAttribute> moduleAttrs;
  if (failed(sortedAttrs(plan.module_attrs(), moduleAttrs)))
    return nullptr;
  for (NamedAttribute attr : moduleAttrs)
    (*module)->setAttr(attr.getName(), attr.getValue());
  if (plan.has_cluster_source()) {
    ::dtfm::planner::Cluster cluster;
    std::string error;
    if (!::dtfm::planner::clusterFromPlan(plan, cluster, error)) {
      emitError(loc) << "plan: " << error;
      return nullptr;
    }
    (*module)->setAttr(
        kClusterAttrName,
        ClusterAttr::get(context, cluster, plan.cluster_source()));
  }

  OpBuilder b = OpBuilder::atBlockEnd(module->getBody());
  for (const pb::DeviceProgram &program : plan.programs()) {
    const pb::DeviceProgram &shared = ::dtfm::format::sharedPart(plan, program);
    std::string symbol;
    for (char c : program.device())
      symbol += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    auto func = b.create<func::FuncOp>(loc, symbol, b.getFunctionType({}, {}));
    SmallVector<NamedAttribute> funcAttrs;
    if (failed(sortedAttrs(shared.attrs(), funcAttrs,
                           &shared == &program ? nullptr : &program.attrs())))
      return nullptr;
    for (NamedAttribute attr : funcAttrs)
      func->setAttr(attr.getName(), attr.getValue());
    // The entry's own attributes of its template's ops (peer devices).
    std::vector<const pb::OpAttrs *> ownAttrs =
        ::dtfm::format::ownOpAttrs(program, shared.ops_size());
    OpBuilder body = OpBuilder::atBlockEnd(func.addEntryBlock());
    llvm::DenseMap<int64_t, Value> values;
    for (auto [index, op] : llvm::enumerate(shared.ops())) {
      OperationState state(loc, op.name());
      for (int64_t id : op.operands()) {
        auto it = values.find(id);
        if (it == values.end()) {
          emitError(loc) << "plan: " << program.device() << ": op " << op.name()
                         << " uses unknown value " << id;
          return nullptr;
        }
        state.operands.push_back(it->second);
      }
      for (const pb::PlanValue &result : op.results()) {
        Type element = parseType(result.dtype(), context);
        if (!element) {
          emitError(loc) << "plan: unknown element type '" << result.dtype()
                         << "'";
          return nullptr;
        }
        state.types.push_back(RankedTensorType::get(
            SmallVector<int64_t>(result.shape().begin(), result.shape().end()),
            element));
      }
      SmallVector<NamedAttribute> attrs;
      if (failed(sortedAttrs(op.attrs(), attrs,
                             ownAttrs.empty() || !ownAttrs[index]
                                 ? nullptr
                                 : &ownAttrs[index]->attrs())))
        return nullptr;
      Operation *created = body.create(state);
      created->setAttrs(DictionaryAttr::get(context, attrs));
      for (auto [result, planValue] :
           llvm::zip(created->getResults(), op.results()))
        values[planValue.id()] = result;
    }
    body.create<func::ReturnOp>(loc);
  }
  // The module as planned: a stage's replicas name its first's body.
  shareDevicePrograms(*module);
  return module;
}
