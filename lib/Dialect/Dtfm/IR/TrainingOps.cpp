//===- TrainingOps.cpp - dtfm training and communication ops --------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Verifiers and costs of the ops autodiff and the planner add: backward,
// accumulate and optimizer updates, send/recv, top-k compression and the
// data-parallel gradient sync.
//
//===----------------------------------------------------------------------===//

#include "OpSupport.h"
#include "dtfm/Format/WireCodec.h"
#include "dtfm/Planner/Workload.h"

using namespace mlir;
using namespace mlir::dtfm;
using namespace mlir::dtfm::op_support;

//===----------------------------------------------------------------------===//
// Training ops
//===----------------------------------------------------------------------===//

LogicalResult BackwardOp::verify() {
  if (!getForward().starts_with("dtfm."))
    return emitOpError() << "expected a dtfm forward op name, found '"
                         << getForward() << "'";
  std::vector<shapes::TensorType> inputs, grads;
  for (Value v : getInputs())
    inputs.push_back(typeOf(v));
  for (Value v : getGrads())
    grads.push_back(typeOf(v));
  return check(*this, shapes::backward(inputs, grads, getWrt().vec(),
                                       static_cast<int64_t>(getFlops())));
}
int64_t BackwardOp::getForwardFlops() { return getFlops(); }
int64_t BackwardOp::getBackwardFlops() { return 0; }

LogicalResult AccumulateOp::verify() {
  std::vector<shapes::TensorType> grads;
  for (Value v : getGrads())
    grads.push_back(typeOf(v));
  return check(*this, shapes::accumulate(grads, typeOf(getResult())));
}
int64_t AccumulateOp::getForwardFlops() {
  return (static_cast<int64_t>(getGrads().size()) - 1) * numel(getResult());
}
int64_t AccumulateOp::getBackwardFlops() { return 0; }

/// The optimizer updates' parameter operand is a parameter.
static LogicalResult verifyUpdatesParam(Operation *op, Value param) {
  if (!param.getDefiningOp<ParamOp>())
    return op->emitOpError("expected the parameter operand to be a dtfm.param");
  return success();
}

/// The learning-rate schedule of an optimizer update, or a diagnostic for
/// an unknown lr_schedule.
template <typename UpdateOp>
static FailureOr<::dtfm::optim::LrSchedule> scheduleOf(UpdateOp op) {
  ::dtfm::optim::LrSchedule schedule;
  std::optional<::dtfm::optim::LrScheduleKind> kind =
      ::dtfm::optim::lrScheduleOf(op.getLrSchedule().str());
  if (!kind)
    return op.emitOpError() << "unknown lr_schedule '" << op.getLrSchedule()
                            << "' (expected "
                            << ::dtfm::optim::lrScheduleNames() << ")";
  schedule.kind = *kind;
  schedule.lr = op.getLr().convertToDouble();
  schedule.minLr = op.getMinLr().convertToDouble();
  schedule.warmupSteps = static_cast<int64_t>(op.getWarmupSteps());
  schedule.totalSteps = static_cast<int64_t>(op.getTotalSteps());
  schedule.decaySteps = static_cast<int64_t>(op.getDecaySteps());
  return schedule;
}

LogicalResult SgdUpdateOp::verify() {
  FailureOr<::dtfm::optim::LrSchedule> schedule = scheduleOf(*this);
  if (failed(schedule))
    return failure();
  if (failed(check(*this,
                   shapes::sgdUpdate(typeOf(getParam()), typeOf(getGrad()),
                                     typeOf(getResult()), *schedule,
                                     getClipGradNorm().convertToDouble(),
                                     getMomentum().convertToDouble(),
                                     getWeightDecay().convertToDouble()))))
    return failure();
  return verifyUpdatesParam(*this, getParam());
}
int64_t SgdUpdateOp::getForwardFlops() {
  int64_t perElement = 2 + (getMomentum().convertToDouble() > 0 ? 2 : 0) +
                       (getWeightDecay().convertToDouble() > 0 ? 2 : 0);
  return perElement * numel(getParam());
}
int64_t SgdUpdateOp::getBackwardFlops() { return 0; }
int64_t SgdUpdateOp::getParameterBytes() {
  return getMomentum().convertToDouble() > 0 ? 4 * numel(getParam()) : 0;
}

LogicalResult AdamWUpdateOp::verify() {
  FailureOr<::dtfm::optim::LrSchedule> schedule = scheduleOf(*this);
  if (failed(schedule))
    return failure();
  if (failed(check(*this,
                   shapes::adamwUpdate(typeOf(getParam()), typeOf(getGrad()),
                                       typeOf(getResult()), *schedule,
                                       getClipGradNorm().convertToDouble(),
                                       getBeta1().convertToDouble(),
                                       getBeta2().convertToDouble(),
                                       getEpsilon().convertToDouble(),
                                       getWeightDecay().convertToDouble()))))
    return failure();
  return verifyUpdatesParam(*this, getParam());
}
int64_t AdamWUpdateOp::getForwardFlops() { return 12 * numel(getParam()); }
int64_t AdamWUpdateOp::getBackwardFlops() { return 0; }
int64_t AdamWUpdateOp::getParameterBytes() { return 8 * numel(getParam()); }

//===----------------------------------------------------------------------===//
// Communication ops
//===----------------------------------------------------------------------===//

/// Shared checks of send and recv: bytes match the type (in its wire
/// format, dtfm.wire), link is valid.
static LogicalResult verifyTransfer(Operation *op, Value value, int64_t peer,
                                    int64_t bytes, double latency,
                                    double bandwidth) {
  namespace format = ::dtfm::format;
  format::WireCodec codec = format::WireCodec::Dense;
  if (Attribute wire = op->getAttr(kWireAttrName)) {
    auto name = dyn_cast<StringAttr>(wire);
    std::optional<format::WireCodec> parsed =
        name ? format::parseWireCodec(name.getValue().str()) : std::nullopt;
    if (!parsed || !format::isWireAttrCodec(format::wireCodecInfo(*parsed)))
      return op->emitOpError()
             << "expected dtfm.wire = "
             << format::wireCodecNames(format::isWireAttrCodec, "\"")
             << ", found " << wire;
    codec = *parsed;
  }
  return check(op, shapes::transfer(typeOf(value), peer, bytes, codec,
                                    op->hasAttr(kOncePerIterationAttrName),
                                    latency, bandwidth));
}

LogicalResult SendOp::verify() {
  return verifyTransfer(*this, getValue(), getPeer(), getBytes(),
                        getLatencyS().convertToDouble(),
                        getBandwidthGbps().convertToDouble());
}
int64_t SendOp::getForwardFlops() { return 0; }
int64_t SendOp::getBackwardFlops() { return 0; }
// Transfers and collectives are the links' time, not memory traffic.
int64_t SendOp::getForwardBytes() { return 0; }
int64_t SendOp::getBackwardBytes() { return 0; }

LogicalResult RecvOp::verify() {
  return verifyTransfer(*this, getResult(), getPeer(), getBytes(),
                        getLatencyS().convertToDouble(),
                        getBandwidthGbps().convertToDouble());
}
int64_t RecvOp::getForwardFlops() { return 0; }
int64_t RecvOp::getBackwardFlops() { return 0; }
int64_t RecvOp::getForwardBytes() { return 0; }
int64_t RecvOp::getBackwardBytes() { return 0; }

//===----------------------------------------------------------------------===//
// Top-k compression
//===----------------------------------------------------------------------===//

LogicalResult TopKCompressOp::verify() {
  return check(*this,
               shapes::topkCompress(typeOf(getInput()), getK(),
                                    typeOf(getValues()), typeOf(getIndices())));
}
int64_t TopKCompressOp::getForwardFlops() { return 4 * numel(getInput()); }
int64_t TopKCompressOp::getBackwardFlops() { return 0; }

LogicalResult TopKDecompressOp::verify() {
  return check(*this, shapes::topkDecompress(typeOf(getValues()),
                                             typeOf(getIndices()),
                                             typeOf(getResult())));
}
int64_t TopKDecompressOp::getForwardFlops() { return numel(getResult()); }
int64_t TopKDecompressOp::getBackwardFlops() { return 0; }

//===----------------------------------------------------------------------===//
// TpAllReduceOp
//===----------------------------------------------------------------------===//

LogicalResult TpAllReduceOp::verify() {
  return check(*this, shapes::tpAllReduce(typeOf(getInput()), getDegree(),
                                          typeOf(getResult())));
}
/// (t - 1) / t additions per element in the direction that sums.
static int64_t groupSumFlops(Value value, int64_t degree) {
  return numel(value) * (degree - 1) / degree;
}
int64_t TpAllReduceOp::getForwardFlops() {
  return getInBackward() ? 0 : groupSumFlops(getInput(), getDegree());
}
int64_t TpAllReduceOp::getBackwardFlops() {
  return getInBackward() ? groupSumFlops(getInput(), getDegree()) : 0;
}
int64_t TpAllReduceOp::getForwardBytes() { return 0; }
int64_t TpAllReduceOp::getBackwardBytes() { return 0; }

//===----------------------------------------------------------------------===//
// GradSyncOp
//===----------------------------------------------------------------------===//

LogicalResult GradSyncOp::verify() {
  std::optional<::dtfm::planner::GradientSync> algorithm =
      ::dtfm::planner::parseGradientSync(getAlgorithm());
  if (!algorithm || *algorithm == ::dtfm::planner::GradientSync::Auto)
    return emitOpError() << "expected algorithm \"ps\" or \"ring\", found \""
                         << getAlgorithm() << "\"";
  return check(*this, shapes::gradSync(typeOf(getGrad()), typeOf(getResult()),
                                       static_cast<int64_t>(getBytes()),
                                       getGroup().size(),
                                       getSeconds().convertToDouble()));
}
int64_t GradSyncOp::getForwardFlops() { return 0; }
int64_t GradSyncOp::getBackwardFlops() { return 0; }
int64_t GradSyncOp::getForwardBytes() { return 0; }
int64_t GradSyncOp::getBackwardBytes() { return 0; }
