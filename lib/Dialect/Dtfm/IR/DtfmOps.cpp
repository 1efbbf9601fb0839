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

#include "llvm/ADT/StringMap.h"
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
  std::optional<double> scale;
  if (std::optional<APFloat> value = getScale())
    scale = value->convertToDouble();
  if (failed(check(*this, shapes::param(getName().str(),
                                        static_cast<int64_t>(getInit()),
                                        scale ? &*scale : nullptr))))
    return failure();
  // One tensor per name in a program: the weights file, checkpoints and
  // the optimizer know parameters by name, so a second of one name would be
  // trained apart (or overwrite the first). Checked once per block, by the
  // block's first parameter, in one pass.
  Block *block = (*this)->getBlock();
  if (!block)
    return success();
  ParamOp first;
  for (Operation &op : *block)
    if ((first = dyn_cast<ParamOp>(op)))
      break;
  if (first != *this)
    return success();
  llvm::StringMap<ParamOp> seen;
  for (Operation &op : *block) {
    auto param = dyn_cast<ParamOp>(op);
    if (!param)
      continue;
    auto [it, inserted] = seen.try_emplace(param.getName(), param);
    if (inserted)
      continue;
    InFlightDiagnostic diag = param.emitOpError()
                              << "'" << param.getName()
                              << "' is defined twice in this block";
    if (it->second.getType() != param.getType())
      diag << " (as " << it->second.getType() << " and " << param.getType()
           << ")";
    return diag;
  }
  return success();
}

int64_t ParamOp::getForwardFlops() { return 0; }
int64_t ParamOp::getBackwardFlops() { return 0; }
int64_t ParamOp::getParameterBytes() { return getTensorBytes(getType()); }
// Sources move nothing the roofline counts: parameters are resident, a
// micro-batch's inputs arrive with it.
int64_t ParamOp::getForwardBytes() { return 0; }
int64_t ParamOp::getBackwardBytes() { return 0; }

int64_t InputOp::getForwardFlops() { return 0; }
int64_t InputOp::getBackwardFlops() { return 0; }
int64_t InputOp::getForwardBytes() { return 0; }
int64_t InputOp::getBackwardBytes() { return 0; }
int64_t LabelOp::getForwardFlops() { return 0; }
int64_t LabelOp::getBackwardFlops() { return 0; }
int64_t LabelOp::getForwardBytes() { return 0; }
int64_t LabelOp::getBackwardBytes() { return 0; }

//===----------------------------------------------------------------------===//
// EmbeddingOp
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::verify() {
  return check(*this, shapes::embedding(typeOf(getTable()),
                                        typeOf(getIndices()),
                                        typeOf(getResult())));
}

int64_t EmbeddingOp::getForwardFlops() { return 0; }
int64_t EmbeddingOp::getBackwardFlops() { return numel(getResult()); }
/// Reads the indices and only the rows they name, writes the result.
int64_t EmbeddingOp::getForwardBytes() {
  return getTensorBytes(getIndices().getType()) +
         2 * getTensorBytes(getResult().getType());
}
int64_t EmbeddingOp::getSavedActivationBytes() {
  return activationBytes(getIndices());
}

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::verify() {
  return check(*this, shapes::matmul(typeOf(getLhs()), typeOf(getRhs()),
                                     getTransposeRhs(), typeOf(getResult())));
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
  std::optional<shapes::TensorType> bias;
  if (getBias())
    bias = typeOf(getBias());
  return check(*this, shapes::linear(typeOf(getInput()), typeOf(getWeight()),
                                     bias ? &*bias : nullptr,
                                     typeOf(getResult())));
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
  return check(op, shapes::broadcastBinary(typeOf(lhsValue), typeOf(rhsValue),
                                           typeOf(result)));
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

// Maximum, minimum and prelu: each gradient is dy times a choice made from
// both operands.
#define DTFM_SELECTING_BINARY(Op)                                              \
  LogicalResult Op::verify() {                                                 \
    return verifyBroadcastBinary(*this, getLhs(), getRhs(), getResult());     \
  }                                                                            \
  int64_t Op::getForwardFlops() { return numel(getResult()); }                 \
  int64_t Op::getBackwardFlops() { return 2 * numel(getResult()); }            \
  int64_t Op::getSavedActivationBytes() {                                      \
    return activationBytes(getLhs()) + activationBytes(getRhs());              \
  }
DTFM_SELECTING_BINARY(MaximumOp)
DTFM_SELECTING_BINARY(MinimumOp)
DTFM_SELECTING_BINARY(PreluOp)
#undef DTFM_SELECTING_BINARY

//===----------------------------------------------------------------------===//
// LayerNormOp, RmsNormOp, GeluOp, ReluOp, SoftmaxOp
//===----------------------------------------------------------------------===//

LogicalResult LayerNormOp::verify() {
  return check(*this,
               shapes::layerNorm(typeOf(getInput()), typeOf(getGamma()),
                                 typeOf(getBeta()),
                                 getEpsilon().convertToDouble(),
                                 typeOf(getResult())));
}

int64_t LayerNormOp::getForwardFlops() { return 8 * numel(getInput()); }
int64_t LayerNormOp::getSavedActivationBytes() {
  auto input = tensorOf(getInput());
  int64_t rows = numel(getInput()) / input.getShape().back();
  return activationBytes(getInput()) + 2 * rows * 4;
}

LogicalResult RmsNormOp::verify() {
  return check(*this, shapes::rmsNorm(typeOf(getInput()), typeOf(getGamma()),
                                      getEpsilon().convertToDouble(),
                                      typeOf(getResult())));
}

int64_t RmsNormOp::getForwardFlops() { return 4 * numel(getInput()); }
int64_t RmsNormOp::getSavedActivationBytes() {
  auto input = tensorOf(getInput());
  int64_t rows = numel(getInput()) / input.getShape().back();
  return activationBytes(getInput()) + rows * 4;
}

/// Elementwise unary ops: the result has the input's type.
static LogicalResult verifyUnary(Operation *op, Value input, Value result) {
  return check(op, shapes::sameType(typeOf(input), typeOf(result)));
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
  return check(*this, shapes::softmax(typeOf(getInput()), getAxis(),
                                      typeOf(getResult())));
}
int64_t SoftmaxOp::getForwardFlops() { return 5 * numel(getInput()); }
int64_t SoftmaxOp::getSavedActivationBytes() {
  return getTensorBytes(getResult().getType());
}

//===----------------------------------------------------------------------===//
// RotaryOp, CausalAttentionOp
//===----------------------------------------------------------------------===//

LogicalResult RotaryOp::verify() {
  return check(*this, shapes::rotary(typeOf(getInput()), getNumHeads(),
                                     getTheta().convertToDouble(),
                                     typeOf(getResult())));
}
int64_t RotaryOp::getForwardFlops() { return 3 * numel(getInput()); }
int64_t RotaryOp::getBackwardFlops() { return 3 * numel(getInput()); }
int64_t RotaryOp::getSavedActivationBytes() { return 0; }

LogicalResult CausalAttentionOp::verify() {
  return check(
      *this, shapes::causalAttention(typeOf(getQuery()), typeOf(getKey()),
                                     typeOf(getValue()), getNumHeads(),
                                     getKeyValueHeads(), typeOf(getResult())));
}

int64_t CausalAttentionOp::getForwardFlops() {
  auto query = tensorOf(getQuery());
  int64_t batch = query.getDimSize(0), seq = query.getDimSize(1);
  int64_t hidden = query.getDimSize(2);
  int64_t scores = batch * getNumHeads() * seq * seq;
  return 4 * batch * seq * seq * hidden + 6 * scores;
}
int64_t CausalAttentionOp::getSavedActivationBytes() {
  // The probabilities are recomputed by the backward (both runtimes' kernels
  // do), never held between a micro-batch's forward and backward.
  return activationBytes(getQuery()) + activationBytes(getKey()) +
         activationBytes(getValue());
}

//===----------------------------------------------------------------------===//
// CrossEntropyOp
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyOp::verify() {
  if (failed(check(*this, shapes::crossEntropy(typeOf(getLogits()),
                                               typeOf(getLabels())))))
    return failure();
  return check(*this, shapes::crossEntropyClasses(
                          static_cast<int64_t>(getClasses().value_or(0)),
                          typeOf(getLogits()),
                          static_cast<int64_t>(getVocabShard().value_or(0))));
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

