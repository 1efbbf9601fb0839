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
#include "dtfm/Format/Int8.h"
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
  ArrayRef<int64_t> wrt = getWrt();
  if (wrt.size() != getGrads().size())
    return emitOpError() << "expected one gradient per 'wrt' index ("
                         << wrt.size() << "), found " << getGrads().size();
  for (auto [index, grad] : llvm::zip(wrt, getGrads())) {
    if (index < 0 || index >= static_cast<int64_t>(getInputs().size()))
      return emitOpError() << "'wrt' index " << index << " is out of range ["
                           << 0 << ", " << getInputs().size() << ")";
    Type expected = getInputs()[index].getType();
    if (grad.getType() != expected)
      return emitOpError() << "expected the gradient of input #" << index
                           << " to have type " << expected << ", found "
                           << grad.getType();
  }
  if (static_cast<int64_t>(getFlops()) < 0)
    return emitOpError() << "expected non-negative flops, found "
                         << getFlops();
  return success();
}
int64_t BackwardOp::getForwardFlops() { return getFlops(); }
int64_t BackwardOp::getBackwardFlops() { return 0; }

LogicalResult AccumulateOp::verify() {
  if (getGrads().size() < 2)
    return emitOpError() << "expected at least 2 gradients, found "
                         << getGrads().size();
  for (Value grad : getGrads())
    if (grad.getType() != getResult().getType())
      return emitOpError() << "expected every gradient of type "
                           << getResult().getType() << ", found "
                           << grad.getType();
  return success();
}
int64_t AccumulateOp::getForwardFlops() {
  return (static_cast<int64_t>(getGrads().size()) - 1) * numel(getResult());
}
int64_t AccumulateOp::getBackwardFlops() { return 0; }

/// Shared checks of the optimizer updates.
static LogicalResult verifyUpdate(Operation *op, Value param, double lr) {
  for (Value v : {op->getOperand(1), Value(op->getResult(0))})
    if (v.getType() != param.getType())
      return op->emitOpError() << "expected gradient and result of type "
                               << param.getType() << ", found "
                               << v.getType();
  if (!param.getDefiningOp<ParamOp>())
    return op->emitOpError("expected the parameter operand to be a dtfm.param");
  if (!(lr > 0))
    return op->emitOpError() << "expected a positive lr, found " << lr;
  return success();
}

LogicalResult SgdUpdateOp::verify() {
  if (failed(verifyUpdate(*this, getParam(), getLr().convertToDouble())))
    return failure();
  double momentum = getMomentum().convertToDouble();
  if (!(momentum >= 0 && momentum < 1))
    return emitOpError() << "expected momentum in [0, 1), found " << momentum;
  if (!(getWeightDecay().convertToDouble() >= 0))
    return emitOpError() << "expected a non-negative weight_decay";
  return success();
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
  if (failed(verifyUpdate(*this, getParam(), getLr().convertToDouble())))
    return failure();
  for (double beta :
       {getBeta1().convertToDouble(), getBeta2().convertToDouble()})
    if (!(beta >= 0 && beta < 1))
      return emitOpError() << "expected betas in [0, 1), found " << beta;
  if (!(getEpsilon().convertToDouble() > 0))
    return emitOpError() << "expected a positive epsilon";
  if (!(getWeightDecay().convertToDouble() >= 0))
    return emitOpError() << "expected a non-negative weight_decay";
  return success();
}
int64_t AdamWUpdateOp::getForwardFlops() { return 12 * numel(getParam()); }
int64_t AdamWUpdateOp::getBackwardFlops() { return 0; }
int64_t AdamWUpdateOp::getParameterBytes() { return 8 * numel(getParam()); }

//===----------------------------------------------------------------------===//
// Communication ops
//===----------------------------------------------------------------------===//

/// Shared checks of send and recv: bytes match the type (in its wire
/// format, dtfm.wire), link is valid.
static LogicalResult verifyTransfer(Operation *op, Type type, int64_t peer,
                                    int64_t bytes, double latency,
                                    double bandwidth) {
  if (peer < 0)
    return op->emitOpError() << "expected a non-negative peer, found " << peer;
  int64_t expected = getTensorBytes(type);
  std::string format;
  if (Attribute wire = op->getAttr(kWireAttrName)) {
    auto name = dyn_cast<StringAttr>(wire);
    if (!name || name.getValue() != "int8")
      return op->emitOpError() << "expected dtfm.wire = \"int8\", found "
                               << wire;
    if (op->hasAttr(kOncePerIterationAttrName))
      return op->emitOpError()
             << "sends a weight once per iteration: dtfm.wire does not apply";
    expected = static_cast<int64_t>(::dtfm::format::int8Bytes(
        static_cast<size_t>(cast<ShapedType>(type).getNumElements())));
    format = " in int8";
  }
  if (bytes != expected)
    return op->emitOpError() << "expected bytes = " << expected
                             << " (the size of " << type << format
                             << "), found " << bytes;
  if (!(latency >= 0) || !(bandwidth > 0))
    return op->emitOpError() << "expected latency_s >= 0 and bandwidth_gbps "
                                "> 0, found "
                             << latency << " and " << bandwidth;
  return success();
}

LogicalResult SendOp::verify() {
  return verifyTransfer(*this, getValue().getType(), getPeer(), getBytes(),
                        getLatencyS().convertToDouble(),
                        getBandwidthGbps().convertToDouble());
}
int64_t SendOp::getForwardFlops() { return 0; }
int64_t SendOp::getBackwardFlops() { return 0; }

LogicalResult RecvOp::verify() {
  return verifyTransfer(*this, getResult().getType(), getPeer(), getBytes(),
                        getLatencyS().convertToDouble(),
                        getBandwidthGbps().convertToDouble());
}
int64_t RecvOp::getForwardFlops() { return 0; }
int64_t RecvOp::getBackwardFlops() { return 0; }

//===----------------------------------------------------------------------===//
// Top-k compression
//===----------------------------------------------------------------------===//

LogicalResult TopKCompressOp::verify() {
  int64_t k = getK();
  int64_t n = numel(getInput());
  if (k > n)
    return emitOpError() << "expected k <= " << n << " (the input's elements), "
                         << "found " << k;
  Type element = tensorOf(getInput()).getElementType();
  if (failed(verifyResultType(*this, getValues(), {k}, element)))
    return failure();
  auto indices = tensorOf(getIndices());
  if (indices.getShape() != ArrayRef<int64_t>{k} ||
      !indices.getElementType().isInteger(64))
    return emitOpError() << "expected indices of type 'tensor<" << k
                         << "xi64>', found " << indices;
  return success();
}
int64_t TopKCompressOp::getForwardFlops() { return 4 * numel(getInput()); }
int64_t TopKCompressOp::getBackwardFlops() { return 0; }

LogicalResult TopKDecompressOp::verify() {
  auto values = tensorOf(getValues());
  auto indices = tensorOf(getIndices());
  if (values.getRank() != 1 || indices.getShape() != values.getShape())
    return emitOpError() << "expected 1-D values and indices of one length, "
                            "found "
                         << shapeOf(getValues()) << " and "
                         << shapeOf(getIndices());
  if (tensorOf(getResult()).getElementType() != values.getElementType())
    return emitOpError() << "expected result element type "
                         << values.getElementType() << ", found "
                         << tensorOf(getResult()).getElementType();
  if (values.getDimSize(0) > numel(getResult()))
    return emitOpError() << "expected at most " << numel(getResult())
                         << " values, found " << values.getDimSize(0);
  return success();
}
int64_t TopKDecompressOp::getForwardFlops() { return numel(getResult()); }
int64_t TopKDecompressOp::getBackwardFlops() { return 0; }

//===----------------------------------------------------------------------===//
// GradSyncOp
//===----------------------------------------------------------------------===//

LogicalResult GradSyncOp::verify() {
  std::optional<::dtfm::planner::GradientSync> algorithm =
      ::dtfm::planner::parseGradientSync(getAlgorithm());
  if (!algorithm || *algorithm == ::dtfm::planner::GradientSync::Auto)
    return emitOpError() << "expected algorithm \"ps\" or \"ring\", found \""
                         << getAlgorithm() << "\"";
  if (getGroup().size() < 2)
    return emitOpError() << "expected a group of at least 2 devices, found "
                         << getGroup().size();
  if (getResult().getType() != getGrad().getType())
    return emitOpError() << "expected result type " << getGrad().getType()
                         << ", found " << getResult().getType();
  if (static_cast<int64_t>(getBytes()) !=
      getTensorBytes(getGrad().getType()))
    return emitOpError() << "expected bytes = "
                         << getTensorBytes(getGrad().getType()) << ", found "
                         << getBytes();
  if (!(getSeconds().convertToDouble() >= 0))
    return emitOpError("expected non-negative seconds");
  return success();
}
int64_t GradSyncOp::getForwardFlops() { return 0; }
int64_t GradSyncOp::getBackwardFlops() { return 0; }
