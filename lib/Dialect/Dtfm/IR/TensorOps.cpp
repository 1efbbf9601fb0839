//===- TensorOps.cpp - dtfm convolution and tensor-shape ops --------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Verifiers and costs of the convolution, normalisation and pooling ops and
// of the ops that only move or reshape elements (DtfmOps.cpp says the
// conventions).
//
//===----------------------------------------------------------------------===//

#include "OpSupport.h"

using namespace mlir;
using namespace mlir::dtfm;
using namespace mlir::dtfm::op_support;

//===----------------------------------------------------------------------===//
// Conv2dOp, BatchNormOp, pooling
//===----------------------------------------------------------------------===//

LogicalResult Conv2dOp::verify() {
  std::optional<shapes::TensorType> bias;
  if (getBias())
    bias = typeOf(getBias());
  return check(*this,
               shapes::conv2d(typeOf(getInput()), typeOf(getWeight()),
                              bias ? &*bias : nullptr, getStrides().vec(),
                              getDilations().vec(), getPadding().vec(),
                              getGroups(), typeOf(getResult())));
}

int64_t Conv2dOp::getForwardFlops() {
  auto weight = tensorOf(getWeight());
  int64_t macsPerOutput = product(weight.getShape().drop_front());
  int64_t outputs = numel(getResult());
  return 2 * outputs * macsPerOutput + (getBias() ? outputs : 0);
}
int64_t Conv2dOp::getBackwardFlops() {
  auto weight = tensorOf(getWeight());
  int64_t macsPerOutput = product(weight.getShape().drop_front());
  int64_t outputs = numel(getResult());
  return 4 * outputs * macsPerOutput + (getBias() ? outputs : 0);
}
int64_t Conv2dOp::getSavedActivationBytes() {
  return activationBytes(getInput());
}

LogicalResult ConvTranspose2dOp::verify() {
  std::optional<shapes::TensorType> bias;
  if (getBias())
    bias = typeOf(getBias());
  return check(*this, shapes::convTranspose2d(
                          typeOf(getInput()), typeOf(getWeight()),
                          bias ? &*bias : nullptr, getStrides().vec(),
                          getDilations().vec(), getPadding().vec(),
                          getOutputPadding().vec(), getGroups(),
                          typeOf(getResult())));
}

// The convolution it transposes produces the input: its FLOPs.
int64_t ConvTranspose2dOp::getForwardFlops() {
  auto weight = tensorOf(getWeight());
  int64_t macsPerInput = product(weight.getShape().drop_front());
  return 2 * numel(getInput()) * macsPerInput +
         (getBias() ? numel(getResult()) : 0);
}
int64_t ConvTranspose2dOp::getBackwardFlops() {
  auto weight = tensorOf(getWeight());
  int64_t macsPerInput = product(weight.getShape().drop_front());
  return 4 * numel(getInput()) * macsPerInput +
         (getBias() ? numel(getResult()) : 0);
}
int64_t ConvTranspose2dOp::getSavedActivationBytes() {
  return activationBytes(getInput());
}

LogicalResult BatchNormOp::verify() {
  return check(*this,
               shapes::batchNorm(typeOf(getInput()), typeOf(getGamma()),
                                 typeOf(getBeta()), typeOf(getRunningMean()),
                                 typeOf(getRunningVar()),
                                 getEpsilon().convertToDouble(),
                                 getMomentum().convertToDouble(),
                                 typeOf(getResult())));
}

int64_t BatchNormOp::getForwardFlops() { return 8 * numel(getInput()); }
int64_t BatchNormOp::getSavedActivationBytes() {
  return activationBytes(getInput()) +
         2 * tensorOf(getInput()).getDimSize(1) * 4;
}

/// Shared verifier of max_pool2d and avg_pool2d.
static LogicalResult verifyPool2d(Operation *op, Value inputValue,
                                  Value result, ArrayRef<int64_t> kernel,
                                  ArrayRef<int64_t> strides,
                                  ArrayRef<int64_t> padding) {
  return check(op, shapes::pool2d(typeOf(inputValue), kernel.vec(),
                                  strides.vec(), padding.vec(),
                                  typeOf(result)));
}

LogicalResult MaxPool2dOp::verify() {
  return verifyPool2d(*this, getInput(), getResult(), getKernel(),
                      getStrides(), getPadding());
}
int64_t MaxPool2dOp::getForwardFlops() {
  return numel(getResult()) * product(getKernel());
}
int64_t MaxPool2dOp::getBackwardFlops() { return numel(getResult()); }
int64_t MaxPool2dOp::getSavedActivationBytes() {
  return activationBytes(getInput());
}

LogicalResult AvgPool2dOp::verify() {
  if (failed(verifyPool2d(*this, getInput(), getResult(), getKernel(),
                          getStrides(), getPadding())))
    return failure();
  if (std::optional<ArrayRef<int64_t>> counted = getDivisorPadding())
    return check(*this, shapes::divisorPadding(counted->vec(),
                                               getPadding().vec()));
  return success();
}
int64_t AvgPool2dOp::getForwardFlops() {
  return numel(getResult()) * product(getKernel());
}
int64_t AvgPool2dOp::getBackwardFlops() { return getForwardFlops(); }

LogicalResult GlobalAvgPoolOp::verify() {
  return check(*this,
               shapes::globalAvgPool(typeOf(getInput()), typeOf(getResult())));
}
int64_t GlobalAvgPoolOp::getForwardFlops() { return numel(getInput()); }
int64_t GlobalAvgPoolOp::getBackwardFlops() { return numel(getInput()); }

//===----------------------------------------------------------------------===//
// FlattenOp, ReshapeOp
//===----------------------------------------------------------------------===//

LogicalResult FlattenOp::verify() {
  return check(*this, shapes::flatten(typeOf(getInput()), getAxis(),
                                      typeOf(getResult())));
}
int64_t FlattenOp::getForwardFlops() { return 0; }
int64_t FlattenOp::getBackwardFlops() { return 0; }
int64_t FlattenOp::getForwardBytes() { return 0; }
int64_t FlattenOp::getBackwardBytes() { return 0; }

LogicalResult ReshapeOp::verify() {
  return check(*this,
               shapes::reshape(typeOf(getInput()), typeOf(getResult())));
}
int64_t ReshapeOp::getForwardFlops() { return 0; }
int64_t ReshapeOp::getBackwardFlops() { return 0; }
int64_t ReshapeOp::getForwardBytes() { return 0; }
int64_t ReshapeOp::getBackwardBytes() { return 0; }

/// An elementwise op of one float tensor: the result has the input's type.
static LogicalResult verifySameType(Operation *op, Value input, Value result) {
  return check(op, shapes::sameType(typeOf(input), typeOf(result)));
}

#define DTFM_ELEMENTWISE_MATH(Op)                                              \
  LogicalResult Op::verify() {                                                 \
    return verifySameType(*this, getInput(), getResult());                    \
  }                                                                            \
  int64_t Op::getForwardFlops() { return numel(getResult()); }                 \
  int64_t Op::getBackwardFlops() { return 2 * numel(getResult()); }            \
  int64_t Op::getSavedActivationBytes() { return activationBytes(getInput()); }
DTFM_ELEMENTWISE_MATH(SqrtOp)
DTFM_ELEMENTWISE_MATH(TanhOp)
DTFM_ELEMENTWISE_MATH(ErfOp)
DTFM_ELEMENTWISE_MATH(ExpOp)
DTFM_ELEMENTWISE_MATH(SigmoidOp)
DTFM_ELEMENTWISE_MATH(SiluOp)
DTFM_ELEMENTWISE_MATH(AbsOp)
DTFM_ELEMENTWISE_MATH(LogOp)
#undef DTFM_ELEMENTWISE_MATH

LogicalResult PowOp::verify() {
  return check(*this, shapes::pow(typeOf(getInput()),
                                  getExponent().convertToDouble(),
                                  typeOf(getResult())));
}
int64_t PowOp::getForwardFlops() { return numel(getResult()); }
int64_t PowOp::getBackwardFlops() { return 2 * numel(getResult()); }
int64_t PowOp::getSavedActivationBytes() { return activationBytes(getInput()); }

LogicalResult ClipOp::verify() {
  return check(*this,
               shapes::clip(typeOf(getInput()), getMin().convertToDouble(),
                            getMax().convertToDouble(), typeOf(getResult())));
}
int64_t ClipOp::getForwardFlops() { return numel(getResult()); }
int64_t ClipOp::getBackwardFlops() { return numel(getResult()); }
int64_t ClipOp::getSavedActivationBytes() {
  return activationBytes(getInput());
}

LogicalResult ConcatOp::verify() {
  std::vector<shapes::TensorType> inputs;
  for (Value v : getInputs())
    inputs.push_back(typeOf(v));
  return check(*this,
               shapes::concat(inputs, getAxis(), typeOf(getResult())));
}
int64_t ConcatOp::getForwardFlops() { return 0; }
int64_t ConcatOp::getBackwardFlops() { return 0; }

LogicalResult ConstantOp::verify() {
  return check(*this,
               shapes::constant(getValues().vec(), typeOf(getResult())));
}
int64_t ConstantOp::getForwardFlops() { return 0; }
int64_t ConstantOp::getBackwardFlops() { return 0; }
int64_t ConstantOp::getForwardBytes() { return 0; }
int64_t ConstantOp::getBackwardBytes() { return 0; }

LogicalResult GatherOp::verify() {
  return check(*this, shapes::gather(typeOf(getInput()), typeOf(getIndices()),
                                     getAxis(), typeOf(getResult())));
}
int64_t GatherOp::getForwardFlops() { return 0; }
int64_t GatherOp::getBackwardFlops() { return numel(getResult()); }
int64_t GatherOp::getSavedActivationBytes() {
  return activationBytes(getIndices());
}

LogicalResult WhereOp::verify() {
  return check(*this, shapes::where(typeOf(getCondition()), typeOf(getLhs()),
                                    typeOf(getRhs()), typeOf(getResult())));
}
int64_t WhereOp::getForwardFlops() { return numel(getResult()); }
int64_t WhereOp::getBackwardFlops() { return numel(getResult()); }
int64_t WhereOp::getSavedActivationBytes() {
  return activationBytes(getCondition());
}

LogicalResult SliceOp::verify() {
  return check(*this, shapes::slice(typeOf(getInput()), getStarts().vec(),
                                    getEnds().vec(), getSteps().vec(),
                                    typeOf(getResult())));
}
int64_t SliceOp::getForwardFlops() { return 0; }
int64_t SliceOp::getBackwardFlops() { return 0; }

LogicalResult ReduceMeanOp::verify() {
  return check(*this,
               shapes::reduceMean(typeOf(getInput()), getAxes().vec(),
                                  getKeepdims(), typeOf(getResult())));
}
int64_t ReduceMeanOp::getForwardFlops() { return numel(getInput()); }
int64_t ReduceMeanOp::getBackwardFlops() { return numel(getInput()); }

#define DTFM_REDUCE_EXTREMUM(Op)                                               \
  LogicalResult Op::verify() {                                                 \
    return check(*this,                                                        \
                 shapes::reduceExtremum(typeOf(getInput()), getAxes().vec(),   \
                                        getKeepdims(), typeOf(getResult())));  \
  }                                                                            \
  int64_t Op::getForwardFlops() { return numel(getInput()); }                  \
  int64_t Op::getBackwardFlops() { return 2 * numel(getInput()); }             \
  int64_t Op::getSavedActivationBytes() { return activationBytes(getInput()); }
DTFM_REDUCE_EXTREMUM(ReduceMaxOp)
DTFM_REDUCE_EXTREMUM(ReduceMinOp)
#undef DTFM_REDUCE_EXTREMUM

LogicalResult TransposeOp::verify() {
  return check(*this, shapes::transpose(typeOf(getInput()), getPerm().vec(),
                                        typeOf(getResult())));
}
int64_t TransposeOp::getForwardFlops() { return 0; }
int64_t TransposeOp::getBackwardFlops() { return 0; }

