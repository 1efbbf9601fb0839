//===- DtfmOps.cpp - dtfm operators: verifiers and costs ------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Verifiers say what was expected and what was found. Costs follow the
// conventions in each op's description (docs/CostModel.md collects them).
//
//===----------------------------------------------------------------------===//

#include "dtfm/Dialect/Dtfm/IR/DtfmOps.h"
#include "dtfm/Dialect/Dtfm/IR/CustomOpBridge.h"
#include "dtfm/Support/CustomOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::dtfm;

#include "dtfm/Dialect/Dtfm/IR/DtfmEnums.cpp.inc"

#define GET_OP_CLASSES
#include "dtfm/Dialect/Dtfm/IR/DtfmOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

static RankedTensorType tensorOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

static int64_t numel(Value value) { return getNumElements(value.getType()); }

static int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

/// A shape as "[2, 3, 4]".
static std::string fmtShape(ArrayRef<int64_t> dims) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "[";
  llvm::interleaveComma(dims, os);
  os << "]";
  return text;
}
static std::string shapeOf(Value value) {
  return fmtShape(tensorOf(value).getShape());
}

/// Bytes of `value` kept as an activation: parameters are resident anyway and
/// are not counted.
static int64_t activationBytes(Value value) {
  if (value.getDefiningOp<ParamOp>())
    return 0;
  return getTensorBytes(value.getType());
}

/// All of `values` have the element type of the first one.
static LogicalResult verifySameElementType(Operation *op, ValueRange values,
                                           ArrayRef<StringRef> names) {
  Type expected = tensorOf(values.front()).getElementType();
  for (auto [value, name] : llvm::zip(values, names)) {
    Type found = tensorOf(value).getElementType();
    if (found != expected)
      return op->emitOpError() << "expected " << name << " element type "
                               << expected << ", found " << found;
  }
  return success();
}

/// The result has exactly `shape` and `elementType`.
static LogicalResult verifyResultType(Operation *op, Value result,
                                      ArrayRef<int64_t> shape,
                                      Type elementType) {
  auto found = tensorOf(result);
  if (found.getShape() != shape || found.getElementType() != elementType)
    return op->emitOpError()
           << "expected result type "
           << RankedTensorType::get(shape, elementType) << ", found " << found;
  return success();
}

/// A 1-D tensor of `size` elements.
static LogicalResult verifyVector(Operation *op, Value value, StringRef name,
                                  int64_t size) {
  auto type = tensorOf(value);
  if (type.getRank() != 1 || type.getDimSize(0) != size)
    return op->emitOpError() << "expected " << name << " of shape [" << size
                             << "], found " << shapeOf(value);
  return success();
}

static LogicalResult verifyPositive(Operation *op, ArrayRef<int64_t> values,
                                    size_t count, StringRef name) {
  if (values.size() != count)
    return op->emitOpError() << "expected " << count << " " << name
                             << ", found " << values.size();
  for (int64_t v : values)
    if (v <= 0)
      return op->emitOpError()
             << "expected positive " << name << ", found " << fmtShape(values);
  return success();
}

static LogicalResult verifyPadding(Operation *op, ArrayRef<int64_t> padding) {
  if (padding.size() != 4)
    return op->emitOpError()
           << "expected 4 padding values [top, left, bottom, right], found "
           << padding.size();
  for (int64_t p : padding)
    if (p < 0)
      return op->emitOpError() << "expected non-negative padding, found "
                               << fmtShape(padding);
  return success();
}

/// Output size of a window op along one spatial dimension.
static int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride,
                                int64_t padBegin, int64_t padEnd,
                                int64_t dilation) {
  int64_t span = dilation * (kernel - 1) + 1;
  int64_t padded = in + padBegin + padEnd;
  if (padded < span)
    return 0;
  return (padded - span) / stride + 1;
}

//===----------------------------------------------------------------------===//
// ParamOp, InputOp, LabelOp
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  if (getName().empty())
    return emitOpError("expected a non-empty parameter name");
  InitKind init = getInit();
  bool takesScale = init == InitKind::constant || init == InitKind::normal ||
                    init == InitKind::uniform;
  std::optional<double> scale;
  if (std::optional<APFloat> value = getScale())
    scale = value->convertToDouble();
  if (takesScale && !scale)
    return emitOpError() << "initializer '" << stringifyInitKind(init)
                         << "' expects a scale, found none";
  if (!takesScale && scale)
    return emitOpError() << "initializer '" << stringifyInitKind(init)
                         << "' takes no scale, found " << *scale;
  if ((init == InitKind::normal || init == InitKind::uniform) && *scale <= 0)
    return emitOpError() << "initializer '" << stringifyInitKind(init)
                         << "' expects a positive scale, found " << *scale;
  return success();
}

int64_t ParamOp::getForwardFlops() { return 0; }
int64_t ParamOp::getBackwardFlops() { return 0; }
int64_t ParamOp::getParameterBytes() { return getTensorBytes(getType()); }

int64_t InputOp::getForwardFlops() { return 0; }
int64_t InputOp::getBackwardFlops() { return 0; }
int64_t LabelOp::getForwardFlops() { return 0; }
int64_t LabelOp::getBackwardFlops() { return 0; }

//===----------------------------------------------------------------------===//
// EmbeddingOp
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::verify() {
  auto table = tensorOf(getTable());
  if (table.getRank() != 2)
    return emitOpError() << "expected a rank-2 table [vocab, hidden], found "
                         << shapeOf(getTable());
  SmallVector<int64_t> shape(tensorOf(getIndices()).getShape());
  shape.push_back(table.getDimSize(1));
  return verifyResultType(*this, getResult(), shape, table.getElementType());
}

int64_t EmbeddingOp::getForwardFlops() { return 0; }
int64_t EmbeddingOp::getBackwardFlops() { return numel(getResult()); }
int64_t EmbeddingOp::getSavedActivationBytes() {
  return activationBytes(getIndices());
}

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::verify() {
  auto lhs = tensorOf(getLhs());
  auto rhs = tensorOf(getRhs());
  if (lhs.getRank() < 2)
    return emitOpError() << "expected lhs of rank >= 2, found "
                         << shapeOf(getLhs());
  if (rhs.getRank() != 2 && rhs.getRank() != lhs.getRank())
    return emitOpError() << "expected rhs of rank 2 or " << lhs.getRank()
                         << " (the lhs rank), found " << shapeOf(getRhs());
  if (failed(verifySameElementType(*this, {getLhs(), getRhs()},
                                   {"lhs", "rhs"})))
    return failure();
  int64_t rank = rhs.getRank();
  int64_t rhsK = rhs.getDimSize(getTransposeRhs() ? rank - 1 : rank - 2);
  int64_t n = rhs.getDimSize(getTransposeRhs() ? rank - 2 : rank - 1);
  int64_t k = lhs.getShape().back();
  if (rhsK != k)
    return emitOpError() << "contracting dimensions differ: lhs "
                         << shapeOf(getLhs()) << " has " << k << ", rhs "
                         << shapeOf(getRhs()) << " has " << rhsK;
  if (rhs.getRank() > 2 &&
      lhs.getShape().drop_back(2) != rhs.getShape().drop_back(2))
    return emitOpError() << "batch dimensions differ: lhs "
                         << shapeOf(getLhs()) << ", rhs " << shapeOf(getRhs());
  SmallVector<int64_t> shape(lhs.getShape().drop_back());
  shape.push_back(n);
  return verifyResultType(*this, getResult(), shape, lhs.getElementType());
}

int64_t MatmulOp::getForwardFlops() {
  int64_t k = tensorOf(getLhs()).getShape().back();
  return 2 * numel(getResult()) * k;
}
int64_t MatmulOp::getSavedActivationBytes() {
  return activationBytes(getLhs()) + activationBytes(getRhs());
}

//===----------------------------------------------------------------------===//
// LinearOp
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::verify() {
  auto input = tensorOf(getInput());
  auto weight = tensorOf(getWeight());
  if (input.getRank() < 1)
    return emitOpError("expected input of rank >= 1, found a scalar");
  if (weight.getRank() != 2)
    return emitOpError() << "expected a rank-2 weight [in, out], found "
                         << shapeOf(getWeight());
  SmallVector<Value> values{getInput(), getWeight()};
  SmallVector<StringRef> names{"input", "weight"};
  if (getBias()) {
    values.push_back(getBias());
    names.push_back("bias");
  }
  if (failed(verifySameElementType(*this, values, names)))
    return failure();
  if (input.getShape().back() != weight.getDimSize(0))
    return emitOpError() << "expected weight with " << input.getShape().back()
                         << " input features (the last dimension of input "
                         << shapeOf(getInput()) << "), found weight "
                         << shapeOf(getWeight());
  int64_t out = weight.getDimSize(1);
  if (getBias() && failed(verifyVector(*this, getBias(), "bias", out)))
    return failure();
  SmallVector<int64_t> shape(input.getShape().drop_back());
  shape.push_back(out);
  return verifyResultType(*this, getResult(), shape, input.getElementType());
}

int64_t LinearOp::getForwardFlops() {
  int64_t k = tensorOf(getInput()).getShape().back();
  int64_t outputs = numel(getResult());
  return 2 * outputs * k + (getBias() ? outputs : 0);
}
int64_t LinearOp::getBackwardFlops() {
  int64_t k = tensorOf(getInput()).getShape().back();
  int64_t outputs = numel(getResult());
  return 4 * outputs * k + (getBias() ? outputs : 0);
}
int64_t LinearOp::getSavedActivationBytes() {
  return activationBytes(getInput());
}

//===----------------------------------------------------------------------===//
// AddOp
//===----------------------------------------------------------------------===//

/// Operands of one element type whose shapes broadcast (NumPy rules) to the
/// result's.
static LogicalResult verifyBroadcastBinary(Operation *op, Value lhsValue,
                                           Value rhsValue, Value result) {
  if (failed(verifySameElementType(op, {lhsValue, rhsValue}, {"lhs", "rhs"})))
    return failure();
  ArrayRef<int64_t> lhs = tensorOf(lhsValue).getShape();
  ArrayRef<int64_t> rhs = tensorOf(rhsValue).getShape();
  size_t rank = std::max(lhs.size(), rhs.size());
  SmallVector<int64_t> shape(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t a = i < rank - lhs.size() ? 1 : lhs[i - (rank - lhs.size())];
    int64_t b = i < rank - rhs.size() ? 1 : rhs[i - (rank - rhs.size())];
    if (a != b && a != 1 && b != 1)
      return op->emitOpError() << "operand shapes " << fmtShape(lhs)
                               << " and " << fmtShape(rhs)
                               << " do not broadcast";
    shape[i] = std::max(a, b);
  }
  return verifyResultType(op, result, shape,
                          tensorOf(lhsValue).getElementType());
}

LogicalResult AddOp::verify() {
  return verifyBroadcastBinary(*this, getLhs(), getRhs(), getResult());
}
int64_t AddOp::getForwardFlops() { return numel(getResult()); }
int64_t AddOp::getBackwardFlops() { return numel(getResult()); }

LogicalResult SubOp::verify() {
  return verifyBroadcastBinary(*this, getLhs(), getRhs(), getResult());
}
int64_t SubOp::getForwardFlops() { return numel(getResult()); }
int64_t SubOp::getBackwardFlops() { return numel(getResult()); }

LogicalResult MulOp::verify() {
  return verifyBroadcastBinary(*this, getLhs(), getRhs(), getResult());
}
int64_t MulOp::getForwardFlops() { return numel(getResult()); }
int64_t MulOp::getBackwardFlops() { return 2 * numel(getResult()); }
int64_t MulOp::getSavedActivationBytes() {
  return activationBytes(getLhs()) + activationBytes(getRhs());
}

LogicalResult DivOp::verify() {
  return verifyBroadcastBinary(*this, getLhs(), getRhs(), getResult());
}
int64_t DivOp::getForwardFlops() { return numel(getResult()); }
int64_t DivOp::getBackwardFlops() { return 4 * numel(getResult()); }
int64_t DivOp::getSavedActivationBytes() {
  return activationBytes(getLhs()) + activationBytes(getRhs());
}

//===----------------------------------------------------------------------===//
// LayerNormOp, GeluOp, ReluOp, SoftmaxOp
//===----------------------------------------------------------------------===//

LogicalResult LayerNormOp::verify() {
  auto input = tensorOf(getInput());
  if (input.getRank() < 1)
    return emitOpError("expected input of rank >= 1, found a scalar");
  if (failed(verifySameElementType(*this, {getInput(), getGamma(), getBeta()},
                                   {"input", "gamma", "beta"})))
    return failure();
  int64_t d = input.getShape().back();
  if (failed(verifyVector(*this, getGamma(), "gamma", d)) ||
      failed(verifyVector(*this, getBeta(), "beta", d)))
    return failure();
  if (!(getEpsilon().convertToDouble() > 0))
    return emitOpError() << "expected a positive epsilon, found "
                         << getEpsilon().convertToDouble();
  return verifyResultType(*this, getResult(), input.getShape(),
                          input.getElementType());
}

int64_t LayerNormOp::getForwardFlops() { return 8 * numel(getInput()); }
int64_t LayerNormOp::getSavedActivationBytes() {
  auto input = tensorOf(getInput());
  int64_t rows = numel(getInput()) / input.getShape().back();
  return activationBytes(getInput()) + 2 * rows * 4;
}

/// Elementwise unary ops: the result has the input's type.
static LogicalResult verifyUnary(Operation *op, Value input, Value result) {
  auto type = tensorOf(input);
  return verifyResultType(op, result, type.getShape(), type.getElementType());
}

LogicalResult GeluOp::verify() {
  return verifyUnary(*this, getInput(), getResult());
}
int64_t GeluOp::getForwardFlops() { return 8 * numel(getInput()); }
int64_t GeluOp::getSavedActivationBytes() {
  return activationBytes(getInput());
}

LogicalResult ReluOp::verify() {
  return verifyUnary(*this, getInput(), getResult());
}
int64_t ReluOp::getForwardFlops() { return numel(getInput()); }
int64_t ReluOp::getBackwardFlops() { return numel(getInput()); }
int64_t ReluOp::getSavedActivationBytes() {
  return getTensorBytes(getResult().getType());
}

LogicalResult SoftmaxOp::verify() {
  int64_t rank = tensorOf(getInput()).getRank();
  int64_t axis = getAxis();
  if (axis < -rank || axis >= rank || rank == 0)
    return emitOpError() << "expected axis in [" << -rank << ", " << rank - 1
                         << "], found " << axis;
  return verifyUnary(*this, getInput(), getResult());
}
int64_t SoftmaxOp::getForwardFlops() { return 5 * numel(getInput()); }
int64_t SoftmaxOp::getSavedActivationBytes() {
  return getTensorBytes(getResult().getType());
}

//===----------------------------------------------------------------------===//
// CausalAttentionOp
//===----------------------------------------------------------------------===//

LogicalResult CausalAttentionOp::verify() {
  auto query = tensorOf(getQuery());
  if (query.getRank() != 3)
    return emitOpError() << "expected query of rank 3 [batch, seq, hidden], "
                            "found "
                         << shapeOf(getQuery());
  if (tensorOf(getKey()) != query || tensorOf(getValue()) != query)
    return emitOpError() << "expected query, key and value of one type, found "
                         << query << ", " << getKey().getType() << ", "
                         << getValue().getType();
  int64_t hidden = query.getDimSize(2);
  if (hidden % getNumHeads() != 0)
    return emitOpError() << "expected hidden size " << hidden
                         << " divisible by num_heads " << getNumHeads();
  return verifyResultType(*this, getResult(), query.getShape(),
                          query.getElementType());
}

int64_t CausalAttentionOp::getForwardFlops() {
  auto query = tensorOf(getQuery());
  int64_t batch = query.getDimSize(0), seq = query.getDimSize(1);
  int64_t hidden = query.getDimSize(2);
  int64_t scores = batch * getNumHeads() * seq * seq;
  return 4 * batch * seq * seq * hidden + 6 * scores;
}
int64_t CausalAttentionOp::getSavedActivationBytes() {
  auto query = tensorOf(getQuery());
  int64_t batch = query.getDimSize(0), seq = query.getDimSize(1);
  int64_t probabilities = batch * getNumHeads() * seq * seq *
                          getElementBytes(query.getElementType());
  return activationBytes(getQuery()) + activationBytes(getKey()) +
         activationBytes(getValue()) + probabilities;
}

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

//===----------------------------------------------------------------------===//
// CrossEntropyOp
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyOp::verify() {
  auto logits = tensorOf(getLogits());
  if (logits.getRank() < 1)
    return emitOpError("expected logits of rank >= 1, found a scalar");
  ArrayRef<int64_t> expected = logits.getShape().drop_back();
  if (tensorOf(getLabels()).getShape() != expected)
    return emitOpError() << "expected labels of shape " << fmtShape(expected)
                         << " (logits " << shapeOf(getLogits())
                         << " without the class dimension), found "
                         << shapeOf(getLabels());
  return success();
}

int64_t CrossEntropyOp::getForwardFlops() {
  int64_t logits = numel(getLogits());
  int64_t rows = logits / tensorOf(getLogits()).getShape().back();
  return 5 * logits + 2 * rows;
}
int64_t CrossEntropyOp::getBackwardFlops() { return 2 * numel(getLogits()); }
int64_t CrossEntropyOp::getSavedActivationBytes() {
  return getTensorBytes(getLogits().getType());
}

//===----------------------------------------------------------------------===//
// CustomOp
//===----------------------------------------------------------------------===//

std::optional<::dtfm::TensorDesc> mlir::dtfm::toTensorDesc(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return std::nullopt;
  ::dtfm::TensorDesc desc;
  desc.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
  Type element = tensor.getElementType();
  if (element.isF32())
    desc.dtype = ::dtfm::DType::F32;
  else if (element.isF16())
    desc.dtype = ::dtfm::DType::F16;
  else if (element.isBF16())
    desc.dtype = ::dtfm::DType::BF16;
  else if (element.isInteger(32))
    desc.dtype = ::dtfm::DType::I32;
  else if (element.isInteger(64))
    desc.dtype = ::dtfm::DType::I64;
  else
    return std::nullopt;
  return desc;
}

Type mlir::dtfm::fromTensorDesc(MLIRContext *context,
                                const ::dtfm::TensorDesc &desc) {
  Builder builder(context);
  Type element;
  switch (desc.dtype) {
  case ::dtfm::DType::F32:
    element = builder.getF32Type();
    break;
  case ::dtfm::DType::F16:
    element = builder.getF16Type();
    break;
  case ::dtfm::DType::BF16:
    element = builder.getBF16Type();
    break;
  case ::dtfm::DType::I32:
    element = builder.getI32Type();
    break;
  case ::dtfm::DType::I64:
    element = builder.getI64Type();
    break;
  }
  return RankedTensorType::get(desc.shape, element);
}

FailureOr<::dtfm::CustomOpCall>
mlir::dtfm::buildCustomOpCall(CustomOp op, std::string &error) {
  ::dtfm::CustomOpCall call;
  call.kind = op.getKind().str();
  for (Value input : op.getInputs())
    call.operands.push_back(*toTensorDesc(input.getType()));
  if (DictionaryAttr params = op.getParamsAttr()) {
    for (NamedAttribute entry : params) {
      std::string name = entry.getName().str();
      Attribute value = entry.getValue();
      if (auto integer = dyn_cast<IntegerAttr>(value))
        call.params[name] = integer.getInt();
      else if (auto real = dyn_cast<FloatAttr>(value))
        call.params[name] = real.getValueAsDouble();
      else if (auto str = dyn_cast<StringAttr>(value))
        call.params[name] = str.str();
      else if (auto array = dyn_cast<DenseI64ArrayAttr>(value))
        call.params[name] = std::vector<int64_t>(array.asArrayRef().begin(),
                                                 array.asArrayRef().end());
      else {
        error = "param '" + name +
                "' must be an integer, float, string or array<i64>";
        return failure();
      }
    }
  }
  return call;
}

LogicalResult CustomOp::verify() {
  const ::dtfm::CustomOpDef *def =
      ::dtfm::CustomOpRegistry::global().lookup(getKind().str());
  if (!def)
    return emitOpError() << "custom kind '" << getKind()
                         << "' is not registered (load the plugin that "
                            "defines it with --load-dtfm-plugin)";
  std::string error;
  FailureOr<::dtfm::CustomOpCall> call = buildCustomOpCall(*this, error);
  if (failed(call))
    return emitOpError() << error;
  std::vector<::dtfm::TensorDesc> inferred;
  if (!def->inferResults(*call, inferred, error))
    return emitOpError() << "'" << getKind() << "': " << error;
  if (inferred.size() != getOutputs().size())
    return emitOpError() << "'" << getKind() << "' expected "
                         << inferred.size() << " results, found "
                         << getOutputs().size();
  for (auto [index, result] : llvm::enumerate(getOutputs())) {
    Type expected = fromTensorDesc(getContext(), inferred[index]);
    if (expected != result.getType())
      return emitOpError() << "'" << getKind() << "' expected result #"
                           << index << " of type " << expected << ", found "
                           << result.getType();
  }
  return success();
}

/// The registered cost of a custom op (zero when its kind is unknown, which
/// the verifier has already rejected).
static ::dtfm::CustomOpCost customCost(CustomOp op) {
  const ::dtfm::CustomOpDef *def =
      ::dtfm::CustomOpRegistry::global().lookup(op.getKind().str());
  std::string error;
  FailureOr<::dtfm::CustomOpCall> call = buildCustomOpCall(op, error);
  if (!def || failed(call))
    return {};
  std::vector<::dtfm::TensorDesc> results;
  for (Value result : op.getOutputs())
    results.push_back(*toTensorDesc(result.getType()));
  return def->cost(*call, results);
}

int64_t CustomOp::getForwardFlops() { return customCost(*this).forwardFlops; }
int64_t CustomOp::getBackwardFlops() {
  return customCost(*this).backwardFlops;
}
int64_t CustomOp::getSavedActivationBytes() {
  return customCost(*this).savedActivationBytes;
}

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

/// Shared checks of send and recv: bytes match the type, link is valid.
static LogicalResult verifyTransfer(Operation *op, Type type, int64_t peer,
                                    int64_t bytes, double latency,
                                    double bandwidth) {
  if (peer < 0)
    return op->emitOpError() << "expected a non-negative peer, found " << peer;
  if (bytes != getTensorBytes(type))
    return op->emitOpError() << "expected bytes = " << getTensorBytes(type)
                             << " (the size of " << type << "), found "
                             << bytes;
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
  if (getAlgorithm() != "ps" && getAlgorithm() != "ring")
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
