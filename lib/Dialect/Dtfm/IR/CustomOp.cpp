//===- CustomOp.cpp - dtfm.custom -----------------------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The verifier and costs of dtfm.custom, which come from the custom-op
// registry (Support/CustomOps.h).
//
//===----------------------------------------------------------------------===//

#include "OpSupport.h"
#include "dtfm/Dialect/Dtfm/IR/CustomOpBridge.h"
#include "dtfm/Support/CustomOps.h"

using namespace mlir;
using namespace mlir::dtfm;
using namespace mlir::dtfm::op_support;

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
  std::string error;
  FailureOr<::dtfm::CustomOpCall> call = buildCustomOpCall(*this, error);
  if (failed(call))
    return emitOpError() << error;
  std::vector<::dtfm::shapes::TensorType> results;
  for (Value result : getOutputs())
    results.push_back(op_support::typeOf(result));
  return op_support::check(*this, ::dtfm::shapes::custom(*call, results));
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

