//===- DtfmOps.cpp - dtfm operators: verifiers and costs ------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Verifiers say what was expected and what was found. Costs follow the
// conventions in each op's description (docs/CostModel.md collects them).
// This file: the model ops (parameters and inputs, embedding, matmul,
// linear, elementwise, normalisation, attention, cross-entropy). The
// convolution and tensor-shape ops are in TensorOps.cpp, dtfm.custom in
// CustomOp.cpp, the training and communication ops in TrainingOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "OpSupport.h"
#include "dtfm/Dialect/Dtfm/IR/CustomOpBridge.h"
#include "dtfm/Support/CustomOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::dtfm;
using namespace mlir::dtfm::op_support;

#include "dtfm/Dialect/Dtfm/IR/DtfmEnums.cpp.inc"

#define GET_OP_CLASSES
#include "dtfm/Dialect/Dtfm/IR/DtfmOps.cpp.inc"

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

