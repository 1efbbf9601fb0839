//===- Program.h - The typed stage program of a plan -----------*- C++ -*-===//
//
// Part of dtfm. Plain C++ (no MLIR, no backend).
//
//===----------------------------------------------------------------------===//
//
// A device program of the plan, decoded once: every op becomes an OpKind
// (OpKinds.h), its operands and result types, its phase, and its
// attributes as typed fields with the dialect's defaults filled in. The
// executors, the workers and the backends' support checks read this form
// only; nothing after decoding compares op names or looks attributes up by
// string. Dataflow.h answers what the program's values do (steps,
// lifetimes, sends, gradients, updates), Sharding.h what part of each
// tensor it holds. Adding an op: a line in OpKinds.def, its attributes here
// (when it has new ones) and in decodeAttrs (Program.cpp), and a kernel
// table entry per backend (docs/Runtime.md, "Adding an op").
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_PLAN_PROGRAM_H
#define DTFM_PLAN_PROGRAM_H

#include "dtfm/Format/Stream.h"
#include "dtfm/Format/WireCodec.h"
#include "dtfm/Plan/OpKinds.h"
#include "dtfm/Support/CustomOps.h"
#include "dtfm/Support/ElementMath.h"
#include "dtfm/Support/LrSchedule.h"

#include <array>
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace dtfm::proto {
class DeviceProgram;
class Plan;
class PlanOp;
} // namespace dtfm::proto

namespace dtfm::plan {

/// When an op runs: per micro-batch forward, backward or (a zero-bubble
/// schedule's split backward) weight-gradient half, or once per iteration
/// after the last micro-batch. The first three index StageProgram::steps.
enum class OpPhase { Forward, Backward, Weight, Optimizer };
const char *opPhaseName(OpPhase phase); // "fwd", "bwd", "wgt", "opt"
inline constexpr int kMicroBatchPhases = 3;
/// The stream entries' phase of a per-micro-batch op phase, and back.
inline format::Phase streamPhaseOf(OpPhase phase) {
  return phase == OpPhase::Forward    ? format::Phase::Forward
         : phase == OpPhase::Backward ? format::Phase::Backward
                                      : format::Phase::Weight;
}
inline OpPhase opPhaseOf(format::Phase phase) {
  return phase == format::Phase::Forward    ? OpPhase::Forward
         : phase == format::Phase::Backward ? OpPhase::Backward
                                            : OpPhase::Weight;
}

enum class ElementType { F32, F16, BF16, I1, I32, I64 };
/// "f32" for ElementType::F32: the plan's (and MLIR's) spelling.
const char *elementTypeName(ElementType type);

/// A value the program defines: its id and tensor type.
struct ProgramValue {
  int64_t id = 0;
  std::vector<int64_t> shape;
  ElementType type = ElementType::F32;
};

/// dtfm.param's initializers, as the dialect numbers them.
enum class ParamInit { Zeros, Ones, Constant, Normal, Uniform, External };

/// Attributes of every op kind, typed, with the dialect's defaults. A
/// dtfm.backward has its forward op's attributes (dtfm.forward_attrs) here
/// too, plus `wrt`.
struct OpAttrs {
  // dtfm.param / dtfm.input / dtfm.label
  std::string name;
  ParamInit init = ParamInit::Zeros;
  double scale = 0;
  // dtfm.param of a tensor-parallel model (dtfm.tp_shard): the program
  // holds slice `rank` of `tpDegree` equal slices of the whole tensor along
  // `tpDim` (-1: the whole tensor).
  int64_t tpDim = -1, tpDegree = 1;
  // dtfm.constant
  std::vector<int64_t> values;
  // shapes and axes
  int64_t axis = 0;                         // concat, gather (0); softmax (-1)
  std::vector<int64_t> axes;                // reduce_mean
  bool keepdims = false;                    // reduce_mean, _max, _min
  std::vector<int64_t> starts, ends, steps; // slice
  std::vector<int64_t> perm;                // transpose
  // arithmetic
  double exponent = 1;            // pow
  double low = 0, high = 0;       // clip's bounds
  bool transposeRhs = false;      // matmul
  double epsilon = 1e-5;          // layernorm, batchnorm; adamw (1e-8)
  double momentum = 0;            // batchnorm (0.1), sgd_update (0)
  bool inference = false;         // batchnorm on its running statistics
  bool tanhApproximation = false; // gelu
  bool logarithm = false;         // softmax: log-softmax
  int64_t numHeads = 1;           // causal_attention, rotary
  int64_t numKvHeads = 0;         // causal_attention (0: numHeads)
  double theta = 10000;           // rotary
  int64_t keyValueHeads() const { return numKvHeads ? numKvHeads : numHeads; }
  // windows
  std::array<int64_t, 2> kernel = {1, 1};
  math::Window window; // conv2d, pooling
  int64_t groups = 1; // conv2d, conv_transpose2d
  std::array<int64_t, 2> outputPadding = {0, 0}; // conv_transpose2d
  // compression
  int64_t k = 1; // topk_compress
  // dtfm.tp_all_reduce: the group's size and whether it sums the gradient
  // (in the backward) rather than the value (in the forward).
  int64_t degree = 0;
  bool inBackward = false;
  // dtfm.embedding / dtfm.cross_entropy of a vocabulary-parallel model: the
  // group's size (0: the whole vocabulary); the member's slice is its rank's.
  int64_t vocabShard = 0;
  // dtfm.cross_entropy: the classes of the whole vocabulary, the rest of its
  // logits padding (0: all are classes).
  int64_t classes = 0;
  // dtfm.custom (and its backward): kind and params; operands are filled
  // in when it runs.
  CustomOpCall custom;
  // dtfm.backward
  std::vector<int64_t> wrt;
  // optimizer updates: the learning rate by step, and the rest
  optim::LrSchedule schedule;
  double beta1 = 0.9, beta2 = 0.999, weightDecay = 0;
  /// The whole model's gradient norm is clipped to this (0: not clipped);
  /// the same on every update of a plan (the plan verifier checks).
  double clipGradNorm = 0;
  // transfers (dtfm.send / dtfm.recv) and dtfm.grad_sync
  std::string peerDevice;
  int64_t peerStage = -1;
  int64_t tag = 0;
  int64_t bytes = 0;
  bool oncePerIteration = false;
  // dtfm.send / dtfm.recv: the codec its value travels in (dtfm.wire, a
  // codec for pipeline transfers; pp-compression).
  format::WireCodec wire = format::WireCodec::Dense;
  // dtfm.grad_sync: the devices of the data-parallel group, the predicted
  // seconds of this gradient's sync and of its bucket (-1: none), the
  // bucket it travels in (dtfm.bucket: buckets are launched in index order
  // as the backward produces them; plans without it have one bucket) and
  // the fraction of the backward done when the bucket is complete (-1:
  // not given, Planner/Buckets.h)
  std::vector<std::string> group;
  double syncSeconds = 0, bucketSeconds = -1, bucketReady = -1;
  int64_t bucket = 0;
  // dtfm.grad_sync with local steps (DiLoCo): the replicas step alone and
  // exchange parameters every `syncEvery` steps with an outer Nesterov step
  // (0: no local steps, gradients synchronised every step as above).
  int64_t syncEvery = 0;
  double outerLr = 0.7, outerMomentum = 0.9;
  // Local steps in fragments (Streaming DiLoCo, dtfm.sync_fragments P,
  // dtfm.sync_fragment p): this parameter is exchanged at the steps t with
  // t mod syncEvery = outerOffset (localStepsDue).
  int64_t syncFragment = 0, syncFragments = 1;
  // Local steps with an overlap (dtfm.sync_overlap tau, dtfm.outer_mixing
  // alpha): an exchange sent after step t is applied after step t + tau,
  // the parameter becoming alpha x itself + (1 - alpha) x the new global
  // value (tau = 0: the global value).
  int64_t syncOverlap = 0;
  double outerMixing = 0;
  // dtfm.grad_sync compressed on the wire, with error feedback
  // (dtfm.compression, a codec of format/WireCodec.h); a sparse codec keeps
  // 1/R of each gradient (dtfm.topk_ratio R).
  format::WireCodec compression = format::WireCodec::Dense;
  double topkRatio = 0;
  // dtfm.topk_warmup W: top-k starts after W steps synchronised dense, and
  // AdamW's second moment stays as it was at step W from then on (1-bit
  // Adam's recipe; 0: compressed from step 1, nothing frozen).
  int64_t topkWarmup = 0;
  // dtfm.shard_state: sharded optimizer state (ZeRO-1). The group
  // reduce-scatters the gradient, each member updates only its shard of
  // the parameter (shardOf) and keeps optimizer state for it alone, then
  // the group all-gathers the updated parameter. Synchronous, uncompressed
  // syncs only.
  bool shardState = false;
};

/// Local steps: whether a dtfm.grad_sync's parameter is exchanged after
/// step `step` (from 1): every syncEvery steps, fragment p of P at the
/// steps t with t mod H = ((p + 1) H / P) mod H (so P = 1 is every H-th
/// step, and the fragments' exchanges are spread evenly over the H steps).
inline int64_t localStepsOffset(int64_t syncEvery, int64_t fragment,
                                int64_t fragments) {
  return (fragment + 1) * syncEvery / fragments % syncEvery;
}

/// The fewest steps between two exchanges of P fragments every H steps
/// (H when P = 1): an overlap must be shorter, so that one exchange is in
/// flight at a time.
inline int64_t localStepsMinGap(int64_t syncEvery, int64_t fragments) {
  int64_t gap = syncEvery;
  for (int64_t p = 0; p < fragments; ++p) {
    int64_t here = localStepsOffset(syncEvery, p, fragments);
    int64_t next = localStepsOffset(syncEvery, (p + 1) % fragments, fragments);
    int64_t between = (next - here + syncEvery) % syncEvery;
    gap = std::min(gap, between == 0 ? syncEvery : between);
  }
  return gap;
}

inline bool localStepsDue(const OpAttrs &attrs, int64_t step) {
  if (attrs.syncEvery < 1)
    return false;
  return step % attrs.syncEvery ==
         localStepsOffset(attrs.syncEvery, attrs.syncFragment,
                          attrs.syncFragments);
}

/// The constants of a unary math op (unaryMathOf): pow's exponent, clip's
/// bounds.
inline math::UnaryParams unaryParamsOf(const OpAttrs &attrs) {
  return {attrs.exponent, attrs.low, attrs.high};
}

struct ProgramOp {
  /// Position in the program (diagnostics say "op #N").
  int index = 0;
  OpKind kind = OpKind::Constant;
  /// The kind whose kernels run it: the forward op of a dtfm.backward, the
  /// op's own kind otherwise.
  OpKind computes = OpKind::Constant;
  OpPhase phase = OpPhase::Forward;
  std::vector<int64_t> operands;
  std::vector<ProgramValue> results;
  OpAttrs attrs;
  /// The model layer it belongs to (dtfm.layer; empty when none).
  std::string layer;
  /// The plan's op (for what only the transports read: raw attributes).
  const proto::PlanOp *source = nullptr;

  bool isBackward() const { return kind == OpKind::Backward; }
  /// "op #3 dtfm.linear" (a backward: "op #9 dtfm.backward of dtfm.linear").
  std::string describe() const;
};

/// One step of a micro-batch's forward or backward: the op at `op`, or,
/// with activation recomputation, a forward op run again during the
/// backward (`recompute`).
struct PhaseStep {
  int op = 0;
  bool recompute = false;
};

/// One device's program, decoded.
struct StageProgram {
  const proto::DeviceProgram *source = nullptr;
  std::vector<ProgramOp> ops;
  /// Indices into `ops` of each phase's ops, in program order.
  std::array<std::vector<int>, 4> byPhase;
  /// Activation recomputation (the program's `recompute`): between its
  /// forward and its backward a micro-batch keeps only the inputs of the
  /// recomputed layers, whose forward ops run again, a layer at a time,
  /// just before the layer's backward.
  bool recompute = false;
  /// What a micro-batch runs in its forward (0), backward (1) and weight-
  /// gradient half (2, empty unless the backward is split), in order: the
  /// phase's ops, and with `recompute` each recomputed layer's forward
  /// compute ops before the first backward op of that layer.
  std::array<std::vector<PhaseStep>, kMicroBatchPhases> steps;

  const std::vector<int> &opsOf(OpPhase phase) const {
    return byPhase[static_cast<int>(phase)];
  }
};

/// Decodes `program`. On an op no kind has, a dtfm.backward of an op
/// without kernels, or an attribute of the wrong type, returns false with
/// a one-line `error` naming the op ("op #N dtfm.x: ...").
bool decodeProgram(const proto::DeviceProgram &program, StageProgram &out,
                   std::string &error);
/// The same for one device's program of the plan: its template's ops
/// (format::sharedPart) with its own transfers' peer devices.
bool decodeProgram(const proto::Plan &plan,
                   const proto::DeviceProgram &program, StageProgram &out,
                   std::string &error);

/// The clip_grad_norm of the plan's optimizer updates (0: none clip), which
/// the plan verifier checks is the same on every update: every worker
/// then joins the norm's reduction each step, whether its own program
/// updates anything or not.
double planClipGradNorm(const proto::Plan &plan);

} // namespace dtfm::plan

#endif // DTFM_PLAN_PROGRAM_H
