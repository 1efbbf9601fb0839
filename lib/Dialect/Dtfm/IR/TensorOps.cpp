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
  auto input = tensorOf(getInput());
  auto weight = tensorOf(getWeight());
  if (input.getRank() != 4)
    return emitOpError() << "expected input of rank 4 [N, C, H, W], found "
                         << shapeOf(getInput());
  if (weight.getRank() != 4)
    return emitOpError() << "expected weight of rank 4 [O, C/groups, kH, kW], "
                            "found "
                         << shapeOf(getWeight());
  SmallVector<Value> values{getInput(), getWeight()};
  SmallVector<StringRef> names{"input", "weight"};
  if (getBias()) {
    values.push_back(getBias());
    names.push_back("bias");
  }
  if (failed(verifySameElementType(*this, values, names)) ||
      failed(verifyPositive(*this, getStrides(), 2, "strides")) ||
      failed(verifyPositive(*this, getDilations(), 2, "dilations")) ||
      failed(verifyPadding(*this, getPadding())))
    return failure();
  int64_t groups = getGroups();
  if (groups <= 0)
    return emitOpError() << "expected positive groups, found " << groups;
  int64_t channels = input.getDimSize(1), outChannels = weight.getDimSize(0);
  if (channels % groups != 0 || outChannels % groups != 0)
    return emitOpError() << "expected input channels " << channels
                         << " and output channels " << outChannels
                         << " divisible by groups " << groups;
  if (weight.getDimSize(1) * groups != channels)
    return emitOpError() << "expected weight dimension 1 = " << channels
                         << "/" << groups << " = " << channels / groups
                         << ", found " << weight.getDimSize(1);
  if (getBias() && failed(verifyVector(*this, getBias(), "bias", outChannels)))
    return failure();
  ArrayRef<int64_t> pad = getPadding();
  int64_t h = windowOutputSize(input.getDimSize(2), weight.getDimSize(2),
                               getStrides()[0], pad[0], pad[2],
                               getDilations()[0]);
  int64_t w = windowOutputSize(input.getDimSize(3), weight.getDimSize(3),
                               getStrides()[1], pad[1], pad[3],
                               getDilations()[1]);
  if (h <= 0 || w <= 0)
    return emitOpError() << "kernel " << shapeOf(getWeight())
                         << " does not fit the padded input "
                         << shapeOf(getInput());
  return verifyResultType(*this, getResult(),
                          {input.getDimSize(0), outChannels, h, w},
                          input.getElementType());
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

LogicalResult BatchNormOp::verify() {
  auto input = tensorOf(getInput());
  if (input.getRank() < 2)
    return emitOpError() << "expected input of rank >= 2 [N, C, ...], found "
                         << shapeOf(getInput());
  if (failed(verifySameElementType(
          *this,
          {getInput(), getGamma(), getBeta(), getRunningMean(),
           getRunningVar()},
          {"input", "gamma", "beta", "running_mean", "running_var"})))
    return failure();
  int64_t c = input.getDimSize(1);
  if (failed(verifyVector(*this, getGamma(), "gamma", c)) ||
      failed(verifyVector(*this, getBeta(), "beta", c)) ||
      failed(verifyVector(*this, getRunningMean(), "running_mean", c)) ||
      failed(verifyVector(*this, getRunningVar(), "running_var", c)))
    return failure();
  if (!(getEpsilon().convertToDouble() > 0))
    return emitOpError() << "expected a positive epsilon, found "
                         << getEpsilon().convertToDouble();
  double momentum = getMomentum().convertToDouble();
  if (!(momentum >= 0 && momentum <= 1))
    return emitOpError() << "expected momentum in [0, 1], found " << momentum;
  return verifyResultType(*this, getResult(), input.getShape(),
                          input.getElementType());
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
  auto input = tensorOf(inputValue);
  if (input.getRank() != 4)
    return op->emitOpError() << "expected input of rank 4 [N, C, H, W], found "
                             << shapeOf(inputValue);
  if (failed(verifyPositive(op, kernel, 2, "kernel")) ||
      failed(verifyPositive(op, strides, 2, "strides")) ||
      failed(verifyPadding(op, padding)))
    return failure();
  for (int i = 0; i < 2; ++i)
    if (padding[i] >= kernel[i] || padding[i + 2] >= kernel[i])
      return op->emitOpError() << "expected padding smaller than the kernel "
                               << fmtShape(kernel) << ", found "
                               << fmtShape(padding);
  int64_t h = windowOutputSize(input.getDimSize(2), kernel[0], strides[0],
                               padding[0], padding[2], 1);
  int64_t w = windowOutputSize(input.getDimSize(3), kernel[1], strides[1],
                               padding[1], padding[3], 1);
  if (h <= 0 || w <= 0)
    return op->emitOpError() << "kernel " << fmtShape(kernel)
                             << " does not fit the padded input "
                             << shapeOf(inputValue);
  return verifyResultType(op, result,
                          {input.getDimSize(0), input.getDimSize(1), h, w},
                          input.getElementType());
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
  return verifyPool2d(*this, getInput(), getResult(), getKernel(),
                      getStrides(), getPadding());
}
int64_t AvgPool2dOp::getForwardFlops() {
  return numel(getResult()) * product(getKernel());
}
int64_t AvgPool2dOp::getBackwardFlops() { return getForwardFlops(); }

LogicalResult GlobalAvgPoolOp::verify() {
  auto input = tensorOf(getInput());
  if (input.getRank() < 3)
    return emitOpError() << "expected input of rank >= 3 [N, C, ...], found "
                         << shapeOf(getInput());
  SmallVector<int64_t> shape(input.getShape());
  std::fill(shape.begin() + 2, shape.end(), 1);
  return verifyResultType(*this, getResult(), shape, input.getElementType());
}
int64_t GlobalAvgPoolOp::getForwardFlops() { return numel(getInput()); }
int64_t GlobalAvgPoolOp::getBackwardFlops() { return numel(getInput()); }

//===----------------------------------------------------------------------===//
// FlattenOp, ReshapeOp
//===----------------------------------------------------------------------===//

LogicalResult FlattenOp::verify() {
  auto input = tensorOf(getInput());
  int64_t axis = getAxis();
  if (axis < 0 || axis > input.getRank())
    return emitOpError() << "expected axis in [0, " << input.getRank()
                         << "], found " << axis;
  ArrayRef<int64_t> dims = input.getShape();
  return verifyResultType(
      *this, getResult(),
      {product(dims.take_front(axis)), product(dims.drop_front(axis))},
      input.getElementType());
}
int64_t FlattenOp::getForwardFlops() { return 0; }
int64_t FlattenOp::getBackwardFlops() { return 0; }

LogicalResult ReshapeOp::verify() {
  auto input = tensorOf(getInput());
  auto result = tensorOf(getResult());
  if (input.getElementType() != result.getElementType())
    return emitOpError() << "expected result element type "
                         << input.getElementType() << ", found "
                         << result.getElementType();
  if (input.getNumElements() != result.getNumElements())
    return emitOpError() << "expected result with " << input.getNumElements()
                         << " elements (input " << shapeOf(getInput())
                         << "), found " << result.getNumElements() << " ("
                         << shapeOf(getResult()) << ")";
  return success();
}
int64_t ReshapeOp::getForwardFlops() { return 0; }
int64_t ReshapeOp::getBackwardFlops() { return 0; }

/// An elementwise op of one float tensor: the result has the input's type.
static LogicalResult verifySameType(Operation *op, Value input, Value result) {
  auto type = tensorOf(input);
  return verifyResultType(op, result, type.getShape(), type.getElementType());
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
DTFM_ELEMENTWISE_MATH(PowOp)
#undef DTFM_ELEMENTWISE_MATH

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("expected at least one operand");
  auto first = tensorOf(getInputs()[0]);
  int64_t rank = first.getRank(), axis = getAxis();
  if (axis < 0 || axis >= rank)
    return emitOpError() << "axis " << axis << " out of range for rank "
                         << rank;
  SmallVector<int64_t> shape(first.getShape());
  shape[axis] = 0;
  for (Value v : getInputs()) {
    auto t = tensorOf(v);
    if (t.getElementType() != first.getElementType() || t.getRank() != rank)
      return emitOpError() << "expected operands of rank " << rank
                           << " and element type " << first.getElementType()
                           << ", found " << t;
    for (int64_t i = 0; i < rank; ++i)
      if (i != axis && t.getDimSize(i) != first.getDimSize(i))
        return emitOpError() << "operand shapes " << shapeOf(getInputs()[0])
                             << " and " << shapeOf(v) << " differ outside "
                             << "axis " << axis;
    shape[axis] += t.getDimSize(axis);
  }
  return verifyResultType(*this, getResult(), shape, first.getElementType());
}
int64_t ConcatOp::getForwardFlops() { return 0; }
int64_t ConcatOp::getBackwardFlops() { return 0; }

LogicalResult ConstantOp::verify() {
  auto type = tensorOf(getResult());
  if (static_cast<int64_t>(getValues().size()) != type.getNumElements())
    return emitOpError() << "expected " << type.getNumElements()
                         << " values for " << type << ", found "
                         << getValues().size();
  if (type.getElementType().isInteger(1))
    for (int64_t v : getValues())
      if (v != 0 && v != 1)
        return emitOpError() << "expected boolean values 0 or 1, found " << v;
  return success();
}
int64_t ConstantOp::getForwardFlops() { return 0; }
int64_t ConstantOp::getBackwardFlops() { return 0; }

LogicalResult GatherOp::verify() {
  auto input = tensorOf(getInput());
  int64_t rank = input.getRank(), axis = getAxis();
  if (axis < 0 || axis >= rank)
    return emitOpError() << "axis " << axis << " out of range for rank "
                         << rank;
  SmallVector<int64_t> shape(input.getShape().take_front(axis));
  llvm::append_range(shape, tensorOf(getIndices()).getShape());
  llvm::append_range(shape, input.getShape().drop_front(axis + 1));
  return verifyResultType(*this, getResult(), shape, input.getElementType());
}
int64_t GatherOp::getForwardFlops() { return 0; }
int64_t GatherOp::getBackwardFlops() { return numel(getResult()); }
int64_t GatherOp::getSavedActivationBytes() {
  return activationBytes(getIndices());
}

LogicalResult WhereOp::verify() {
  if (failed(verifySameElementType(*this, {getLhs(), getRhs()},
                                   {"lhs", "rhs"})))
    return failure();
  SmallVector<int64_t> shape;
  for (Value v : {getCondition(), getLhs(), getRhs()}) {
    ArrayRef<int64_t> dims = tensorOf(v).getShape();
    if (dims.size() > shape.size())
      shape.insert(shape.begin(), dims.size() - shape.size(), 1);
    size_t offset = shape.size() - dims.size();
    for (size_t i = 0; i < dims.size(); ++i) {
      int64_t &d = shape[offset + i];
      if (d != dims[i] && d != 1 && dims[i] != 1)
        return emitOpError() << "operand shapes " << shapeOf(getCondition())
                             << ", " << shapeOf(getLhs()) << " and "
                             << shapeOf(getRhs()) << " do not broadcast";
      d = std::max(d, dims[i]);
    }
  }
  return verifyResultType(*this, getResult(), shape,
                          tensorOf(getLhs()).getElementType());
}
int64_t WhereOp::getForwardFlops() { return numel(getResult()); }
int64_t WhereOp::getBackwardFlops() { return numel(getResult()); }
int64_t WhereOp::getSavedActivationBytes() {
  return activationBytes(getCondition());
}

LogicalResult SliceOp::verify() {
  auto input = tensorOf(getInput());
  int64_t rank = input.getRank();
  ArrayRef<int64_t> starts = getStarts(), ends = getEnds(),
                    steps = getSteps();
  if (static_cast<int64_t>(starts.size()) != rank ||
      static_cast<int64_t>(ends.size()) != rank ||
      static_cast<int64_t>(steps.size()) != rank)
    return emitOpError() << "expected starts, ends and steps of " << rank
                         << " entries each";
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < rank; ++i) {
    if (steps[i] < 1 || starts[i] < 0 || starts[i] >= ends[i] ||
        ends[i] > input.getDimSize(i))
      return emitOpError() << "dimension " << i << ": expected 0 <= start < "
                           << "end <= " << input.getDimSize(i)
                           << " and step >= 1, found " << starts[i] << ", "
                           << ends[i] << ", " << steps[i];
    shape.push_back((ends[i] - starts[i] + steps[i] - 1) / steps[i]);
  }
  return verifyResultType(*this, getResult(), shape, input.getElementType());
}
int64_t SliceOp::getForwardFlops() { return 0; }
int64_t SliceOp::getBackwardFlops() { return 0; }

LogicalResult ReduceMeanOp::verify() {
  auto input = tensorOf(getInput());
  int64_t rank = input.getRank();
  SmallVector<bool> reduced(rank, false);
  for (int64_t a : getAxes()) {
    if (a < -rank || a >= rank)
      return emitOpError() << "axis " << a << " out of range for rank "
                           << rank;
    int64_t axis = a < 0 ? a + rank : a;
    if (reduced[axis])
      return emitOpError() << "axis " << a << " given twice";
    reduced[axis] = true;
  }
  if (getAxes().empty())
    return emitOpError("expected at least one axis");
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduced[i])
      shape.push_back(input.getDimSize(i));
    else if (getKeepdims())
      shape.push_back(1);
  }
  return verifyResultType(*this, getResult(), shape, input.getElementType());
}
int64_t ReduceMeanOp::getForwardFlops() { return numel(getInput()); }
int64_t ReduceMeanOp::getBackwardFlops() { return numel(getInput()); }

LogicalResult TransposeOp::verify() {
  auto input = tensorOf(getInput());
  ArrayRef<int64_t> perm = getPerm();
  if (static_cast<int64_t>(perm.size()) != input.getRank())
    return emitOpError() << "expected a permutation of " << input.getRank()
                         << " dimensions, found " << perm.size();
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= input.getRank() || seen[p])
      return emitOpError() << "expected perm to be a permutation of [0, "
                           << input.getRank() << "), found "
                           << fmtShape(perm);
    seen[p] = true;
    shape.push_back(input.getDimSize(p));
  }
  return verifyResultType(*this, getResult(), shape, input.getElementType());
}
int64_t TransposeOp::getForwardFlops() { return 0; }
int64_t TransposeOp::getBackwardFlops() { return 0; }

