//===- Program.cpp - Decoding a device program of the plan ----------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Plan/Program.h"
#include "dtfm/Format/PlanFile.h"
#include "dtfm/Plan/Dataflow.h"

#include "plan.pb.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace dtfm::plan;
namespace pb = dtfm::proto;
namespace format = dtfm::format;
namespace optim = dtfm::optim;

/// Element types by their MLIR spelling (one table both ways).
static constexpr std::pair<const char *, ElementType> kElementTypes[] = {
    {"f32", ElementType::F32}, {"f16", ElementType::F16},
    {"bf16", ElementType::BF16}, {"i1", ElementType::I1},
    {"i32", ElementType::I32},   {"i64", ElementType::I64}};

const char *dtfm::plan::opPhaseName(OpPhase phase) {
  switch (phase) {
  case OpPhase::Forward:
    return "fwd";
  case OpPhase::Backward:
    return "bwd";
  case OpPhase::Weight:
    return "wgt";
  case OpPhase::Optimizer:
    return "opt";
  }
  return "?";
}

const char *dtfm::plan::elementTypeName(ElementType type) {
  for (const auto &[name, known] : kElementTypes)
    if (known == type)
      return name;
  return "?";
}

std::string ProgramOp::describe() const {
  std::string text = "op #" + std::to_string(index) + " " + opName(kind);
  if (kind == OpKind::Backward)
    text += std::string(" of ") + opName(computes);
  return text;
}

namespace {

using AttrMap = google::protobuf::Map<std::string, pb::PlanAttr>;

/// Reads the attributes of one plan op, each with a type check; a
/// dtfm.backward's forward attributes come from dtfm.forward_attrs.
class AttrReader {
public:
  /// `own`: the attributes a device's entry sets on this op of its
  /// template (plan.proto's op_attrs), which come first.
  explicit AttrReader(const pb::PlanOp &op, const AttrMap *own = nullptr)
      : op(op), own(own) {}

  bool ok() const { return failed.empty(); }
  const std::string &failure() const { return failed; }

  void read(const char *key, int64_t &out) {
    if (const pb::PlanAttr *a = find(key, pb::PlanAttr::kI))
      out = a->i();
  }
  void read(const char *key, double &out) {
    if (const pb::PlanAttr *a = find(key, pb::PlanAttr::kF))
      out = a->f();
  }
  void read(const char *key, bool &out) {
    if (const pb::PlanAttr *a = find(key, pb::PlanAttr::kUnit))
      out = a->unit();
  }
  void read(const char *key, std::string &out) {
    if (const pb::PlanAttr *a = find(key, pb::PlanAttr::kS))
      out = a->s();
  }
  void read(const char *key, std::vector<std::string> &out) {
    if (const pb::PlanAttr *a = find(key, pb::PlanAttr::kStrings))
      out.assign(a->strings().values().begin(), a->strings().values().end());
  }
  void read(const char *key, std::vector<int64_t> &out) {
    if (const pb::PlanAttr *a = find(key, pb::PlanAttr::kInts))
      out.assign(a->ints().values().begin(), a->ints().values().end());
  }
  /// An integer array attribute of exactly `N` elements.
  template <size_t N> bool readFixed(const char *key, int64_t (&out)[N]) {
    std::vector<int64_t> values;
    read(key, values);
    if (values.empty())
      return true;
    if (values.size() != N) {
      fail(std::string("attribute '") + key + "' has " +
           std::to_string(values.size()) + " elements, not " +
           std::to_string(N));
      return false;
    }
    std::copy(values.begin(), values.end(), out);
    return true;
  }
  /// Records a failure (the first one is kept).
  void fail(const std::string &message) {
    if (failed.empty())
      failed = message;
  }
  /// Whether the op has `key` at all (dtfm.once_per_iteration).
  bool has(const char *key) const { return lookup(key) != nullptr; }

  /// The params of a dtfm.custom, or of its backward.
  void readCustomParams(dtfm::CustomOpCall &call) const {
    for (const auto &[key, attr] : op.nested_attrs()) {
      std::string name;
      for (const char *prefix : {"params/", "dtfm.forward_attrs/params/"})
        if (key.rfind(prefix, 0) == 0)
          name = key.substr(std::strlen(prefix));
      if (name.empty() || name.find('/') != std::string::npos)
        continue;
      switch (attr.value_case()) {
      case pb::PlanAttr::kI:
        call.params[name] = attr.i();
        break;
      case pb::PlanAttr::kF:
        call.params[name] = attr.f();
        break;
      case pb::PlanAttr::kS:
        call.params[name] = attr.s();
        break;
      case pb::PlanAttr::kInts:
        call.params[name] = std::vector<int64_t>(attr.ints().values().begin(),
                                                 attr.ints().values().end());
        break;
      default:
        break;
      }
    }
  }

private:
  const pb::PlanAttr *lookup(const char *key) const {
    if (own)
      if (auto it = own->find(key); it != own->end())
        return &it->second;
    auto it = op.attrs().find(key);
    if (it != op.attrs().end())
      return &it->second;
    it = op.nested_attrs().find(std::string("dtfm.forward_attrs/") + key);
    return it == op.nested_attrs().end() ? nullptr : &it->second;
  }
  const pb::PlanAttr *find(const char *key, pb::PlanAttr::ValueCase want) {
    const pb::PlanAttr *a = lookup(key);
    if (!a)
      return nullptr;
    if (a->value_case() != want) {
      fail(std::string("attribute '") + key + "' has the wrong type");
      return nullptr;
    }
    return a;
  }
  const pb::PlanOp &op;
  const AttrMap *own;
  std::string failed;
};

/// The codec attribute `key` names (dense when absent): one that `accept`
/// takes, or a failure listing those.
format::WireCodec readCodec(AttrReader &in, const char *key,
                            bool (*accept)(const format::WireCodecInfo &)) {
  std::string name;
  in.read(key, name);
  if (name.empty())
    return format::WireCodec::Dense;
  std::optional<format::WireCodec> codec = format::parseWireCodec(name);
  if (!codec || !accept(format::wireCodecInfo(*codec))) {
    in.fail(std::string("unknown ") + key + " '" + name + "' (expected " +
            format::wireCodecNames(accept) + ")");
    return format::WireCodec::Dense;
  }
  return *codec;
}

bool isSparseCodec(const format::WireCodecInfo &info) { return info.sparse; }
bool carriesLocalStepsCompressed(const format::WireCodecInfo &info) {
  return info.localSteps && info.codec != format::WireCodec::Dense;
}

ElementType elementTypeOf(const std::string &dtype, bool &known) {
  for (const auto &[name, type] : kElementTypes)
    if (dtype == name) {
      known = true;
      return type;
    }
  known = false;
  return ElementType::F32;
}

/// The attributes `kind` reads (for a backward: its forward's), with the
/// dialect's defaults where the plan leaves them out.
void decodeAttrs(OpKind kind, AttrReader &in, OpAttrs &a) {
  switch (kind) {
  case OpKind::Param: {
    in.read("name", a.name);
    int64_t init = -1;
    in.read("init", init);
    // Out of range: refused when parameters are initialised.
    a.init = static_cast<ParamInit>(init);
    in.read("scale", a.scale);
    int64_t shard[2] = {-1, 1};
    in.readFixed("dtfm.tp_shard", shard);
    a.tpDim = shard[0];
    a.tpDegree = shard[1];
    break;
  }
  case OpKind::Input:
  case OpKind::Label:
    in.read("name", a.name);
    break;
  case OpKind::Constant:
    in.read("values", a.values);
    break;
  case OpKind::Concat:
  case OpKind::Gather:
    in.read("axis", a.axis);
    break;
  case OpKind::Flatten:
    a.axis = 1;
    in.read("axis", a.axis);
    break;
  case OpKind::Softmax:
    a.axis = -1;
    in.read("axis", a.axis);
    in.read("log", a.logarithm);
    break;
  case OpKind::ReduceMean:
  case OpKind::ReduceMax:
  case OpKind::ReduceMin:
    in.read("axes", a.axes);
    in.read("keepdims", a.keepdims);
    break;
  case OpKind::Slice:
    in.read("starts", a.starts);
    in.read("ends", a.ends);
    in.read("steps", a.steps);
    break;
  case OpKind::Transpose:
    in.read("perm", a.perm);
    break;
  case OpKind::Pow:
    in.read("exponent", a.exponent);
    break;
  case OpKind::Clip:
    in.read("min", a.low);
    in.read("max", a.high);
    break;
  case OpKind::Matmul:
    in.read("transpose_rhs", a.transposeRhs);
    break;
  case OpKind::LayerNorm:
  case OpKind::RmsNorm:
    in.read("epsilon", a.epsilon);
    break;
  case OpKind::BatchNorm:
    in.read("epsilon", a.epsilon);
    a.momentum = 0.1;
    in.read("momentum", a.momentum);
    in.read("inference", a.inference);
    break;
  case OpKind::Gelu:
    in.read("tanh_approximation", a.tanhApproximation);
    break;
  case OpKind::CausalAttention:
    in.read("num_heads", a.numHeads);
    in.read("num_kv_heads", a.numKvHeads);
    break;
  case OpKind::Rotary:
    in.read("num_heads", a.numHeads);
    in.read("theta", a.theta);
    break;
  case OpKind::Conv2d:
  case OpKind::ConvTranspose2d:
  case OpKind::MaxPool2d:
  case OpKind::AvgPool2d: {
    int64_t kernel[2] = {1, 1}, strides[2] = {1, 1}, dilations[2] = {1, 1};
    int64_t padding[4] = {0, 0, 0, 0};
    in.readFixed("kernel", kernel);
    in.readFixed("strides", strides);
    in.readFixed("padding", padding);
    in.readFixed("dilations", dilations);
    a.kernel = {kernel[0], kernel[1]};
    a.window.strideH = strides[0];
    a.window.strideW = strides[1];
    a.window.padTop = padding[0];
    a.window.padLeft = padding[1];
    a.window.padBottom = padding[2];
    a.window.padRight = padding[3];
    a.window.dilationH = dilations[0];
    a.window.dilationW = dilations[1];
    // Average pooling: absent, all of the padding counts in the divisor.
    int64_t counted[4] = {padding[0], padding[1], padding[2], padding[3]};
    in.readFixed("divisor_padding", counted);
    a.window.countTop = counted[0];
    a.window.countLeft = counted[1];
    a.window.countBottom = counted[2];
    a.window.countRight = counted[3];
    in.read("groups", a.groups);
    int64_t outputPadding[2] = {0, 0};
    in.readFixed("output_padding", outputPadding);
    a.outputPadding = {outputPadding[0], outputPadding[1]};
    break;
  }
  case OpKind::TopkCompress:
    in.read("k", a.k);
    break;
  case OpKind::TpAllReduce:
    in.read("degree", a.degree);
    in.read("in_backward", a.inBackward);
    break;
  case OpKind::Embedding:
    in.read("vocab_shard", a.vocabShard);
    break;
  case OpKind::CrossEntropy:
    in.read("vocab_shard", a.vocabShard);
    in.read("classes", a.classes);
    break;
  case OpKind::Custom:
    in.read("kind", a.custom.kind);
    in.readCustomParams(a.custom);
    break;
  case OpKind::SgdUpdate:
  case OpKind::AdamwUpdate:
    in.read("lr", a.schedule.lr);
    {
      std::string schedule = "constant";
      in.read("lr_schedule", schedule);
      if (std::optional<optim::LrScheduleKind> kind =
              optim::lrScheduleOf(schedule))
        a.schedule.kind = *kind;
      else
        in.fail("unknown lr_schedule '" + schedule + "' (expected " +
                optim::lrScheduleNames() + ")");
    }
    in.read("min_lr", a.schedule.minLr);
    in.read("warmup_steps", a.schedule.warmupSteps);
    in.read("total_steps", a.schedule.totalSteps);
    in.read("decay_steps", a.schedule.decaySteps);
    in.read("clip_grad_norm", a.clipGradNorm);
    in.read("momentum", a.momentum);
    in.read("beta1", a.beta1);
    in.read("beta2", a.beta2);
    a.epsilon = 1e-8;
    in.read("epsilon", a.epsilon);
    a.weightDecay = kind == OpKind::AdamwUpdate ? 0.01 : 0;
    in.read("weight_decay", a.weightDecay);
    break;
  case OpKind::GradSync:
    in.read("group", a.group);
    in.read("bytes", a.bytes);
    in.read("seconds", a.syncSeconds);
    in.read("dtfm.bucket_seconds", a.bucketSeconds);
    in.read("dtfm.bucket", a.bucket);
    in.read("dtfm.bucket_ready", a.bucketReady);
    if (a.bucket < 0)
      in.fail("dtfm.bucket " + std::to_string(a.bucket) + " is negative");
    if (in.has("dtfm.bucket_ready") && !(a.bucketReady >= 0 && a.bucketReady <= 1))
      in.fail("dtfm.bucket_ready must be a fraction in [0, 1]");
    if (in.has("dtfm.bucket_seconds") && !(a.bucketSeconds >= 0 && std::isfinite(a.bucketSeconds)))
      in.fail("dtfm.bucket_seconds must be finite and >= 0");
    {
      a.compression =
          readCodec(in, "dtfm.compression", format::isCompressionAttrCodec);
      const format::WireCodecInfo &codec = format::wireCodecInfo(a.compression);
      in.read("dtfm.topk_ratio", a.topkRatio);
      if (codec.sparse && !(a.topkRatio > 1 && a.topkRatio <= 1e6))
        in.fail(std::string("dtfm.compression ") + codec.name +
                " needs dtfm.topk_ratio in (1, 1e6]");
      in.read("dtfm.topk_warmup", a.topkWarmup);
      if (in.has("dtfm.topk_warmup") &&
          (!codec.sparse || !(a.topkWarmup >= 0 && a.topkWarmup <= 1000000000)))
        in.fail("dtfm.topk_warmup needs dtfm.compression " +
                format::wireCodecNames(isSparseCodec) +
                " and a step count in [0, 1e9]");
      if (!codec.gradientSyncs && !in.has("dtfm.sync_every"))
        in.fail(std::string("dtfm.compression ") + codec.name +
                " without dtfm.sync_every (every step's gradients travel as " +
                format::wireCodecNames(format::carriesGradientSyncs) + ")");
      if (!codec.localSteps && in.has("dtfm.sync_every"))
        in.fail(std::string("dtfm.compression ") + codec.name +
                " with dtfm.sync_every (local steps exchange parameters "
                "dense or " +
                format::wireCodecNames(carriesLocalStepsCompressed) + ")");
    }
    in.read("dtfm.sync_every", a.syncEvery);
    a.shardState = in.has("dtfm.shard_state");
    if (a.shardState && (a.compression != format::WireCodec::Dense ||
                         in.has("dtfm.sync_every")))
      in.fail("dtfm.shard_state shards a synchronous, uncompressed sync "
              "only (not with dtfm.compression or dtfm.sync_every)");
    in.read("dtfm.outer_lr", a.outerLr);
    in.read("dtfm.outer_momentum", a.outerMomentum);
    if (in.has("dtfm.sync_every") &&
        (a.syncEvery < 1 || a.syncEvery > 1000000))
      in.fail("dtfm.sync_every must be between 1 and 1000000, got " +
              std::to_string(a.syncEvery));
    in.read("dtfm.sync_fragment", a.syncFragment);
    in.read("dtfm.sync_fragments", a.syncFragments);
    if ((in.has("dtfm.sync_fragment") || in.has("dtfm.sync_fragments")) &&
        !(in.has("dtfm.sync_every") && a.syncEvery >= 1 &&
          a.syncFragments >= 1 && a.syncFragments <= a.syncEvery &&
          a.syncFragment >= 0 && a.syncFragment < a.syncFragments))
      in.fail("dtfm.sync_fragment p of dtfm.sync_fragments P needs "
              "dtfm.sync_every H with 1 <= P <= H and 0 <= p < P, got p " +
              std::to_string(a.syncFragment) + ", P " +
              std::to_string(a.syncFragments) + ", H " +
              std::to_string(a.syncEvery));
    in.read("dtfm.sync_overlap", a.syncOverlap);
    in.read("dtfm.outer_mixing", a.outerMixing);
    if ((in.has("dtfm.sync_overlap") || in.has("dtfm.outer_mixing")) &&
        !(in.has("dtfm.sync_every") && a.syncEvery >= 1 &&
          a.syncFragments >= 1 && a.syncFragments <= a.syncEvery &&
          a.syncOverlap >= 0 &&
          a.syncOverlap < localStepsMinGap(a.syncEvery, a.syncFragments) &&
          a.outerMixing >= 0 && a.outerMixing <= 1))
      in.fail("dtfm.sync_overlap tau and dtfm.outer_mixing alpha need "
              "dtfm.sync_every, 0 <= tau < the steps between two exchanges "
              "and 0 <= alpha <= 1, got tau " +
              std::to_string(a.syncOverlap) + ", alpha " +
              std::to_string(a.outerMixing));
    if (!(a.outerLr > 0 && std::isfinite(a.outerLr)) ||
        !(a.outerMomentum >= 0 && a.outerMomentum < 1))
      in.fail("dtfm.outer_lr must be finite and > 0 and "
              "dtfm.outer_momentum in [0, 1)");
    break;
  case OpKind::Send:
  case OpKind::Recv:
    in.read("peer_device", a.peerDevice);
    in.read("peer", a.peerStage);
    in.read("tag", a.tag);
    in.read("bytes", a.bytes);
    a.oncePerIteration = in.has("dtfm.once_per_iteration");
    a.wire = readCodec(in, "dtfm.wire", format::isWireAttrCodec);
    if (a.wire != format::WireCodec::Dense && a.oncePerIteration)
      in.fail(std::string("dtfm.wire ") + format::wireCodecName(a.wire) +
              " on a once-per-iteration transfer (a weight)");
    break;
  default:
    break;
  }
}

} // namespace

/// Decodes the program of `own` (its device's fields) whose ops are
/// `shared`'s (the same program when whole, its template when an entry).
static bool decodeParts(const pb::DeviceProgram &own,
                        const pb::DeviceProgram &shared, StageProgram &out,
                        std::string &error) {
  const pb::DeviceProgram &program = own;
  out = StageProgram();
  out.source = &own;
  out.ops.reserve(shared.ops_size());
  // The entry's own attributes of each op (checked to name ops of its
  // template: format::checkSharedPrograms).
  std::vector<const pb::OpAttrs *> ownAttrs =
      format::ownOpAttrs(own, shared.ops_size());
  for (int i = 0; i < shared.ops_size(); ++i) {
    const pb::PlanOp &in = shared.ops(i);
    auto fail = [&](const std::string &message) {
      error = "op #" + std::to_string(i) + " " + in.name() + ": " + message;
      return false;
    };
    std::optional<OpKind> kind = opKindOf(in.name());
    if (!kind)
      return fail("not an op the runtime knows");
    ProgramOp op;
    op.index = i;
    op.kind = op.computes = *kind;
    op.source = &in;
    op.operands.assign(in.operands().begin(), in.operands().end());
    for (const pb::PlanValue &r : in.results()) {
      ProgramValue value;
      value.id = r.id();
      value.shape.assign(r.shape().begin(), r.shape().end());
      bool known = false;
      value.type = elementTypeOf(r.dtype(), known);
      if (!known)
        return fail("result of unknown element type '" + r.dtype() + "'");
      op.results.push_back(std::move(value));
    }
    AttrReader attrs(in, ownAttrs.empty() || !ownAttrs[i]
                             ? nullptr
                             : &ownAttrs[i]->attrs());
    std::string phase;
    attrs.read("dtfm.phase", phase);
    if (phase == "fwd")
      op.phase = OpPhase::Forward;
    else if (phase == "bwd")
      op.phase = OpPhase::Backward;
    else if (phase == "wgt")
      op.phase = OpPhase::Weight;
    else if (phase == "opt")
      op.phase = OpPhase::Optimizer;
    else if (!phase.empty())
      return fail("unknown phase '" + phase + "'");
    else
      op.phase = *kind == OpKind::SgdUpdate || *kind == OpKind::AdamwUpdate ||
                         *kind == OpKind::GradSync
                     ? OpPhase::Optimizer
                     : OpPhase::Forward;
    if (*kind == OpKind::Backward) {
      std::string forward;
      attrs.read("forward", forward);
      std::optional<OpKind> computes = opKindOf(forward);
      if (!computes)
        return fail("the gradient of '" + forward +
                    "', which is not an op the runtime knows");
      op.computes = *computes;
      attrs.read("wrt", op.attrs.wrt);
    }
    decodeAttrs(op.computes, attrs, op.attrs);
    if (!attrs.ok())
      return fail(attrs.failure());
    attrs.read("dtfm.layer", op.layer);
    if (op.kind == OpKind::Param && op.attrs.tpDim >= 0) {
      // A shard: of the program's group, along a dimension it has.
      int64_t rank = static_cast<int64_t>(op.results.at(0).shape.size());
      if (op.attrs.tpDim >= rank ||
          op.attrs.tpDegree != std::max(1, program.tp_group_size()))
        return fail("dtfm.tp_shard [" + std::to_string(op.attrs.tpDim) + ", " +
                    std::to_string(op.attrs.tpDegree) +
                    "] is not a dimension of the parameter and the size of "
                    "the program's tensor-parallel group (" +
                    std::to_string(program.tp_group_size()) + ")");
    }
    if (op.computes == OpKind::TpAllReduce &&
        op.attrs.degree != program.tp_group_size())
      return fail("sums over a group of " + std::to_string(op.attrs.degree) +
                  " but the program's tensor-parallel group has " +
                  std::to_string(program.tp_group_size()) + " members");
    if (op.attrs.vocabShard != 0 &&
        op.attrs.vocabShard != program.tp_group_size())
      return fail("vocab_shard " + std::to_string(op.attrs.vocabShard) +
                  " is not the size of the program's tensor-parallel group (" +
                  std::to_string(program.tp_group_size()) + ")");
    out.byPhase[static_cast<int>(op.phase)].push_back(i);
    out.ops.push_back(std::move(op));
  }
  out.recompute = shared.recompute();
  buildSteps(out);
  return true;
}

bool dtfm::plan::decodeProgram(const pb::DeviceProgram &program,
                               StageProgram &out, std::string &error) {
  return decodeParts(program, program, out, error);
}

bool dtfm::plan::decodeProgram(const pb::Plan &plan,
                               const pb::DeviceProgram &program,
                               StageProgram &out, std::string &error) {
  return decodeParts(program, format::sharedPart(plan, program), out, error);
}

double dtfm::plan::planClipGradNorm(const pb::Plan &plan) {
  for (const pb::DeviceProgram &program : plan.programs())
    for (const pb::PlanOp &op : format::sharedPart(plan, program).ops()) {
      std::optional<OpKind> kind = opKindOf(op.name());
      if (kind != OpKind::SgdUpdate && kind != OpKind::AdamwUpdate)
        continue;
      auto clip = op.attrs().find("clip_grad_norm");
      return clip == op.attrs().end() ? 0 : clip->second.f();
    }
  return 0;
}
