//===- ConvertOps.cpp - ONNX nodes into dtfm ops --------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// One converter per family of ONNX op types, and converters(): the table
// that maps op types to them, which is also the list of what the importer
// accepts (the unsupported ones are refused up front, counted, in one
// diagnostic). One file, a little over 700 lines: the converters and the
// table are the importer's one vocabulary, read together when an op type is
// added.
//
//===----------------------------------------------------------------------===//

#include "Importer.h"

#include "FoldConstants.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

using namespace mlir;
using namespace mlir::dtfm;
using namespace mlir::dtfm::onnximport;

namespace mlir::dtfm::onnximport {

std::map<std::string, const onnx::AttributeProto *>
attributesOf(const onnx::NodeProto &node) {
  std::map<std::string, const onnx::AttributeProto *> out;
  for (const onnx::AttributeProto &a : node.attribute())
    out[a.name()] = &a;
  return out;
}

/// Explicit [top, left, bottom, right] pads for auto_pad SAME_UPPER or
/// SAME_LOWER (VALID and NOTSET: the given pads).
bool explicitPads(const std::string &autoPad, ArrayRef<int64_t> inputShape,
                  ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                  ArrayRef<int64_t> dilations, std::vector<int64_t> &pads) {
  if (autoPad.empty() || autoPad == "NOTSET")
    return true;
  if (autoPad == "VALID") {
    pads = {0, 0, 0, 0};
    return true;
  }
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    return false;
  pads.assign(4, 0);
  for (int i = 0; i < 2; ++i) {
    int64_t in = inputShape[2 + i];
    int64_t out = (in + strides[i] - 1) / strides[i];
    int64_t span = (kernel[i] - 1) * dilations[i] + 1;
    int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + span - in);
    int64_t small = total / 2, large = total - small;
    pads[i] = autoPad == "SAME_UPPER" ? small : large;
    pads[i + 2] = autoPad == "SAME_UPPER" ? large : small;
  }
  return true;
}

} // namespace mlir::dtfm::onnximport

Value NodeCall::input(int i, bool frozen) const {
  return i < node.input_size() && !node.input(i).empty()
             ? importer.valueOf(node.input(i), frozen)
             : Value();
}

const std::map<std::string, OnnxImporter::Converter> &
OnnxImporter::converters() {
  static const std::map<std::string, Converter> table = {
      {"Constant", &OnnxImporter::convertConstant},
      {"Identity", &OnnxImporter::convertIdentity},
      {"Dropout", &OnnxImporter::convertIdentity},
      {"Conv", &OnnxImporter::convertConv},
      {"BatchNormalization", &OnnxImporter::convertBatchNormalization},
      {"Relu", &OnnxImporter::convertRelu},
      {"MaxPool", &OnnxImporter::convertPool},
      {"AveragePool", &OnnxImporter::convertPool},
      {"GlobalAveragePool", &OnnxImporter::convertGlobalAveragePool},
      {"Add", &OnnxImporter::convertBinary},
      {"Sub", &OnnxImporter::convertBinary},
      {"Mul", &OnnxImporter::convertBinary},
      {"Div", &OnnxImporter::convertBinary},
      {"Flatten", &OnnxImporter::convertFlatten},
      {"Reshape", &OnnxImporter::convertReshape},
      {"Squeeze", &OnnxImporter::convertSqueeze},
      {"Unsqueeze", &OnnxImporter::convertSqueeze},
      {"Sqrt", &OnnxImporter::convertMath},
      {"Tanh", &OnnxImporter::convertMath},
      {"Sigmoid", &OnnxImporter::convertMath},
      {"Erf", &OnnxImporter::convertMath},
      {"Exp", &OnnxImporter::convertMath},
      {"Neg", &OnnxImporter::convertNeg},
      {"Pow", &OnnxImporter::convertPow},
      {"Clip", &OnnxImporter::convertClip},
      {"Expand", &OnnxImporter::convertExpand},
      {"Pad", &OnnxImporter::convertPad},
      {"HardSigmoid", &OnnxImporter::convertHardSigmoid},
      {"HardSwish", &OnnxImporter::convertHardSigmoid},
      {"ReduceMean", &OnnxImporter::convertReduceMean},
      {"ReduceSum", &OnnxImporter::convertReduceMean},
      {"ReduceL2", &OnnxImporter::convertReduceMean},
      {"Gather", &OnnxImporter::convertGather},
      {"ScatterND", &OnnxImporter::convertScatterND},
      {"Where", &OnnxImporter::convertWhere},
      {"Concat", &OnnxImporter::convertConcat},
      {"Slice", &OnnxImporter::convertSlice},
      {"Split", &OnnxImporter::convertSlice},
      {"Transpose", &OnnxImporter::convertTranspose},
      {"Cast", &OnnxImporter::convertCast},
      {"Softmax", &OnnxImporter::convertSoftmax},
      {"MatMul", &OnnxImporter::convertMatMul},
      {"Gemm", &OnnxImporter::convertGemm},
      {"dtfm.LayerNorm", &OnnxImporter::convertFusedLayerNorm},
      {"dtfm.Gelu", &OnnxImporter::convertFusedGelu},
      {"dtfm.Linear", &OnnxImporter::convertFusedLinear},
      {"dtfm.Embedding", &OnnxImporter::convertFusedEmbedding},
      {"dtfm.CausalAttention", &OnnxImporter::convertFusedAttention},
      {"dtfm.RmsNorm", &OnnxImporter::convertFusedRmsNorm},
      {"dtfm.Silu", &OnnxImporter::convertFusedSilu},
  };
  return table;
}

bool OnnxImporter::convertConstant(const onnx::NodeProto &node, NodeCall &c) {
  auto it = c.attrs.find("value");
  if (it == c.attrs.end())
    return failAt(node, "only 'value' constants are supported");
  constants[node.output(0)] = &it->second->t();
  c.done = true;
  return true;
}

bool OnnxImporter::convertIdentity(const onnx::NodeProto &node, NodeCall &c) {
  renamed[node.output(0)] = node.input(0);
  c.done = true;
  return true;
}

bool OnnxImporter::convertConv(const onnx::NodeProto &node, NodeCall &c) {
  Value x = c.input(0), w = c.input(1), bias = c.input(2);
  if (!x || !w || (node.input_size() > 2 && !bias))
    return false;
  auto wType = cast<RankedTensorType>(w.getType());
  auto xType = cast<RankedTensorType>(x.getType());
  std::vector<int64_t> kernel = c.ints(
      "kernel_shape", std::vector<int64_t>(wType.getShape().drop_front(2)));
  if (kernel.size() != 2 || xType.getRank() != 4)
    return failAt(node, "only 2-D convolutions are supported");
  std::vector<int64_t> strides = c.ints("strides", {1, 1}),
                       dilations = c.ints("dilations", {1, 1}),
                       pads = c.ints("pads", {0, 0, 0, 0});
  if (c.attrs.count("auto_pad") &&
      !explicitPads(c.attrs["auto_pad"]->s(), xType.getShape(), kernel, strides,
                    dilations, pads))
    return failAt(node, "unknown auto_pad '" + c.attrs["auto_pad"]->s() + "'");
  c.out = tag(b.create<Conv2dOp>(c.loc, c.result, x, w, bias,
                                 b.getDenseI64ArrayAttr(strides),
                                 b.getDenseI64ArrayAttr(pads),
                                 b.getDenseI64ArrayAttr(dilations),
                                 b.getI64IntegerAttr(c.integer("group", 1))),
              node);
  return true;
}

bool OnnxImporter::convertBatchNormalization(const onnx::NodeProto &node,
                                             NodeCall &c) {
  // A training-mode export lists the updated running statistics (and the
  // batch's) as outputs; dtfm.batchnorm updates its running statistics
  // itself, so they are fine as long as nothing reads them.
  for (int i = 1; i < node.output_size(); ++i)
    if (!node.output(i).empty() && consumed.count(node.output(i)))
      return failAt(node, "output '" + node.output(i) +
                              "' (a running statistic) is read by the "
                              "graph; dtfm.batchnorm keeps them internal");
  Value x = c.input(0), gamma = c.input(1), beta = c.input(2),
        mean = c.input(3, true), var = c.input(4, true);
  if (!x || !gamma || !beta || !mean || !var)
    return false;
  // Training or inference: opset 14's training_mode, else (opsets 9-13)
  // whether the export lists the updated statistics as outputs.
  bool training = c.attrs.count("training_mode")
                      ? c.integer("training_mode", 0) != 0
                      : node.output_size() > 1;
  // ONNX's momentum weighs the running statistic; dtfm's (PyTorch's)
  // weighs the batch statistic.
  c.out = tag(
      b.create<BatchNormOp>(c.loc, c.result, x, gamma, beta, mean, var,
                            b.getF64FloatAttr(c.real("epsilon", 1e-5)),
                            b.getF64FloatAttr(1.0 - c.real("momentum", 0.9)),
                            training ? UnitAttr() : b.getUnitAttr()),
      node);
  return true;
}

bool OnnxImporter::convertRelu(const onnx::NodeProto &node, NodeCall &c) {
  Value x = c.input(0);
  if (!x)
    return false;
  c.out = tag(b.create<ReluOp>(c.loc, c.result, x), node);
  return true;
}

bool OnnxImporter::convertPool(const onnx::NodeProto &node, NodeCall &c) {
  bool ceilMode = c.integer("ceil_mode", 0) != 0;
  if (c.ints("dilations", {1, 1}) != std::vector<int64_t>{1, 1})
    return failAt(node, "dilated pooling is not supported");
  Value x = c.input(0);
  if (!x)
    return false;
  auto xType = cast<RankedTensorType>(x.getType());
  if (xType.getRank() != 4)
    return failAt(node, "only 2-D pooling is supported");
  std::vector<int64_t> pads = c.ints("pads", {0, 0, 0, 0}),
                       kernelShape = c.ints("kernel_shape", {}),
                       strides = c.ints("strides", {1, 1});
  if (c.attrs.count("auto_pad") &&
      !explicitPads(c.attrs["auto_pad"]->s(), xType.getShape(), kernelShape,
                    strides, {1, 1}, pads))
    return failAt(node, "unknown auto_pad '" + c.attrs["auto_pad"]->s() + "'");
  if (kernelShape.size() != 2 || strides.size() != 2 || pads.size() != 4)
    return failAt(node, "expected 2-D kernel_shape, strides and pads");
  // The padding an average's divisor counts: the declared pads with
  // count_include_pad=1, none without.
  std::vector<int64_t> counted = c.integer("count_include_pad", 0) == 1
                                     ? pads
                                     : std::vector<int64_t>{0, 0, 0, 0};
  // Ceil mode: the windows that start inside the input (or its leading
  // padding) but run past its end are kept. That is floor mode with that
  // much more end padding, which never wins a max and never counts in an
  // average's divisor.
  for (int d = 0; ceilMode && d < 2; ++d) {
    int64_t in = xType.getDimSize(2 + d), k = kernelShape[d], s = strides[d];
    int64_t span = in + pads[d] + pads[d + 2] - k;
    if (s < 1 || span < 0)
      return failAt(node, "pooling window larger than the padded input");
    int64_t out = (span + s - 1) / s + 1;
    if ((out - 1) * s >= in + pads[d])
      --out;
    pads[d + 2] +=
        std::max<int64_t>(0, (out - 1) * s + k - (in + pads[d] + pads[d + 2]));
  }
  auto kernel = b.getDenseI64ArrayAttr(kernelShape);
  auto strideAttr = b.getDenseI64ArrayAttr(strides);
  auto padding = b.getDenseI64ArrayAttr(pads);
  if (c.type == "MaxPool") {
    c.out = tag(
        b.create<MaxPool2dOp>(c.loc, c.result, x, kernel, strideAttr, padding),
        node);
    return true;
  }
  // All of the padding counting is the op's default: no attribute.
  DenseI64ArrayAttr divisorPadding =
      counted == pads ? DenseI64ArrayAttr() : b.getDenseI64ArrayAttr(counted);
  c.out = tag(b.create<AvgPool2dOp>(c.loc, c.result, x, kernel, strideAttr,
                                    padding, divisorPadding),
              node);
  return true;
}

bool OnnxImporter::convertGlobalAveragePool(const onnx::NodeProto &node,
                                            NodeCall &c) {
  Value x = c.input(0);
  if (!x)
    return false;
  c.out = tag(b.create<GlobalAvgPoolOp>(c.loc, c.result, x), node);
  return true;
}

bool OnnxImporter::convertBinary(const onnx::NodeProto &node, NodeCall &c) {
  Value lhs = c.input(0), rhs = c.input(1);
  if (!lhs || !rhs)
    return false;
  Operation *op =
      c.type == "Add"
          ? b.create<AddOp>(c.loc, c.result, lhs, rhs).getOperation()
      : c.type == "Sub"
          ? b.create<SubOp>(c.loc, c.result, lhs, rhs).getOperation()
      : c.type == "Mul"
          ? b.create<MulOp>(c.loc, c.result, lhs, rhs).getOperation()
          : b.create<DivOp>(c.loc, c.result, lhs, rhs).getOperation();
  c.out = tag(op, node);
  return true;
}

bool OnnxImporter::convertFlatten(const onnx::NodeProto &node, NodeCall &c) {
  Value x = c.input(0);
  if (!x)
    return false;
  int64_t axis = c.integer("axis", 1);
  if (axis < 0)
    axis += cast<RankedTensorType>(x.getType()).getRank();
  c.out = tag(
      b.create<FlattenOp>(c.loc, c.result, x, b.getI64IntegerAttr(axis)), node);
  return true;
}

bool OnnxImporter::convertReshape(const onnx::NodeProto &node, NodeCall &c) {
  std::vector<int64_t> shape;
  if (!constantInts(node.input(1), shape))
    return false;
  Value x = c.input(0);
  if (!x)
    return false;
  // The result from the constant shape: 0 copies the input's dimension
  // (unless allowzero), -1 takes what is left.
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t known = 1, unknown = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && c.integer("allowzero", 0) == 0) {
      if (i >= static_cast<size_t>(xType.getRank()))
        return failAt(node, "shape copies a dimension the input lacks");
      shape[i] = xType.getDimSize(i);
    }
    if (shape[i] == -1) {
      if (unknown >= 0)
        return failAt(node, "shape has two -1 dimensions");
      unknown = static_cast<int64_t>(i);
    } else if (shape[i] <= 0) {
      return failAt(node, "shape has a dimension " + std::to_string(shape[i]));
    } else {
      known *= shape[i];
    }
  }
  if (unknown >= 0) {
    if (xType.getNumElements() % known != 0)
      return failAt(node, "shape does not divide the input's elements");
    shape[unknown] = xType.getNumElements() / known;
  }
  c.result = RankedTensorType::get(shape, xType.getElementType());
  c.out = tag(b.create<ReshapeOp>(c.loc, c.result, x), node);
  return true;
}

bool OnnxImporter::convertSqueeze(const onnx::NodeProto &node, NodeCall &c) {
  // Only the shape changes: a reshape. The axes: an attribute (opset
  // < 13) or a constant second input.
  Value x = c.input(0);
  if (!x)
    return false;
  std::vector<int64_t> axes = c.ints("axes", {});
  if (node.input_size() > 1 && !node.input(1).empty()) {
    if (!initializer(node.input(1)) && !constants.count(node.input(1)))
      return failAt(node, "the axes must be a constant");
    if (!constantInts(node.input(1), axes))
      return false;
  }
  auto xType = cast<RankedTensorType>(x.getType());
  std::vector<int64_t> shape(xType.getShape().begin(), xType.getShape().end());
  int64_t rank = c.type == "Squeeze"
                     ? xType.getRank()
                     : xType.getRank() + static_cast<int64_t>(axes.size());
  std::set<int64_t> chosen;
  for (int64_t a : axes) {
    if (a < -rank || a >= rank)
      return failAt(node, "axis " + std::to_string(a) + " out of range");
    chosen.insert(a < 0 ? a + rank : a);
  }
  std::vector<int64_t> dims;
  if (c.type == "Squeeze") {
    for (int64_t i = 0; i < xType.getRank(); ++i) {
      bool drop = axes.empty() ? shape[i] == 1 : chosen.count(i) > 0;
      if (drop && shape[i] != 1)
        return failAt(node, "squeezes dimension " + std::to_string(i) +
                                " of size " + std::to_string(shape[i]));
      if (!drop)
        dims.push_back(shape[i]);
    }
  } else {
    size_t next = 0;
    for (int64_t i = 0; i < rank; ++i)
      dims.push_back(chosen.count(i) ? 1 : shape[next++]);
  }
  c.result = RankedTensorType::get(dims, xType.getElementType());
  c.out = tag(b.create<ReshapeOp>(c.loc, c.result, x), node);
  return true;
}

bool OnnxImporter::convertMath(const onnx::NodeProto &node, NodeCall &c) {
  Value x = c.input(0);
  if (!x)
    return false;
  Operation *op =
      c.type == "Sqrt"   ? b.create<SqrtOp>(c.loc, c.result, x).getOperation()
      : c.type == "Tanh" ? b.create<TanhOp>(c.loc, c.result, x).getOperation()
      : c.type == "Erf"  ? b.create<ErfOp>(c.loc, c.result, x).getOperation()
      : c.type == "Sigmoid"
          ? b.create<SigmoidOp>(c.loc, c.result, x).getOperation()
          : b.create<ExpOp>(c.loc, c.result, x).getOperation();
  c.out = tag(op, node);
  return true;
}

bool OnnxImporter::convertNeg(const onnx::NodeProto &node, NodeCall &c) {
  // x * -1, the constant a frozen parameter of its own.
  Value x = c.input(0);
  if (!x)
    return false;
  Value minusOne = scalarConstant(node.output(0) + ".minus_one", -1);
  c.out = tag(b.create<MulOp>(c.loc, c.result, x, minusOne), node);
  return true;
}

bool OnnxImporter::scalarInput(const onnx::NodeProto &node, int i,
                               const char *what, double fallback,
                               double &value) {
  if (i >= node.input_size() || node.input(i).empty()) {
    value = fallback;
    return true;
  }
  const onnx::TensorProto *t = initializer(node.input(i));
  if (!t) {
    auto it = constants.find(node.input(i));
    t = it == constants.end() ? nullptr : it->second;
  }
  std::vector<float> values;
  if (!t || !floats(*t, values) || values.size() != 1)
    return failAt(node,
                  std::string("the ") + what + " must be one float constant");
  value = values[0];
  return true;
}

bool OnnxImporter::convertPow(const onnx::NodeProto &node, NodeCall &c) {
  double exponent = 0;
  if (!scalarInput(node, 1, "exponent", std::nan(""), exponent))
    return false;
  if (std::isnan(exponent)) // absent
    return failAt(node, "the exponent must be one float constant");
  Value x = c.input(0);
  if (!x)
    return false;
  c.out = tag(b.create<PowOp>(c.loc, c.result, x, b.getF64FloatAttr(exponent)),
              node);
  return true;
}

bool OnnxImporter::convertClip(const onnx::NodeProto &node, NodeCall &c) {
  // Opset 11 on: the bounds are optional inputs; before, attributes.
  double inf = std::numeric_limits<double>::infinity(), low = 0, high = 0;
  if (!scalarInput(node, 1, "minimum", c.real("min", -inf), low) ||
      !scalarInput(node, 2, "maximum", c.real("max", inf), high))
    return false;
  if (std::isnan(low) || std::isnan(high) || !(low <= high))
    return failAt(node, "expected bounds min <= max, found " +
                            std::to_string(low) + " and " +
                            std::to_string(high));
  Value x = c.input(0);
  if (!x)
    return false;
  c.out = tag(b.create<ClipOp>(c.loc, c.result, x, b.getF64FloatAttr(low),
                               b.getF64FloatAttr(high)),
              node);
  return true;
}

bool OnnxImporter::convertExpand(const onnx::NodeProto &node, NodeCall &c) {
  // The shape is a constant (or was folded into one at import); the
  // result's type, inferred, is the broadcast of the two shapes.
  std::vector<int64_t> shape;
  if (!constantInts(node.input(1), shape))
    return false;
  Value x = c.input(0);
  if (!x)
    return false;
  auto xType = cast<RankedTensorType>(x.getType());
  if (xType == c.result) // nothing to broadcast
    return convertIdentity(node, c);
  if (!xType.getElementType().isF32())
    return failAt(node, "expands a tensor that is not float32");
  // A broadcast copy is an add of zeros of the result's shape (frozen):
  // exact, and its gradient sums back over the broadcast dimensions.
  Value zeros = filledConstant(node.output(0) + ".zeros",
                               std::vector<int64_t>(c.result.getShape()), 0);
  c.out = tag(b.create<AddOp>(c.loc, c.result, x, zeros), node);
  return true;
}

bool OnnxImporter::convertPad(const onnx::NodeProto &node, NodeCall &c) {
  // Constant padding (Swin-V2's windows where the map is no multiple of
  // them) is a concat with frozen blocks of the value along each padded
  // axis: exact, the same copy a pad kernel makes, and its gradient is the
  // concat's slices. Pads of zeros (the sizes divide) are the value itself.
  std::vector<int64_t> pads = c.ints("pads", {});
  if (node.input_size() > 1 && !node.input(1).empty() &&
      !constantInts(node.input(1), pads))
    return false;
  std::string mode = c.attrs.count("mode") ? c.attrs["mode"]->s() : "constant";
  double value = c.real("value", 0); // opset <= 10
  if (node.input_size() > 2 && !node.input(2).empty()) {
    const onnx::TensorProto *t = constantTensor(node.input(2));
    std::vector<float> v;
    std::string error;
    if (!t || !mlir::dtfm::readTensorFloats(*t, v, error) || v.size() != 1)
      return failAt(node, "the pad value must be a constant float scalar");
    value = v[0];
  }
  if (node.input_size() > 3 && !node.input(3).empty())
    return failAt(node, "pads on chosen axes are not supported");
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; }))
    return convertIdentity(node, c);
  if (mode != "constant")
    return failAt(node, "'" + mode +
                            "' padding is not supported (only "
                            "constant padding maps)");
  Value x = c.input(0);
  if (!x)
    return false;
  auto type = cast<RankedTensorType>(x.getType());
  int64_t rank = type.getRank();
  if (static_cast<int64_t>(pads.size()) != 2 * rank)
    return failAt(node, "expected " + std::to_string(2 * rank) + " pads, got " +
                            std::to_string(pads.size()));
  if (std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p < 0; }))
    return failAt(node, "negative pads (cropping) are not supported");
  std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
  for (int64_t axis = 0; axis < rank; ++axis) {
    int64_t before = pads[axis], after = pads[axis + rank];
    if (before == 0 && after == 0)
      continue;
    SmallVector<Value> parts;
    auto block = [&](int64_t size, const char *side) {
      std::vector<int64_t> blockShape = shape;
      blockShape[axis] = size;
      parts.push_back(
          filledConstant(node.output(0) + ".pad" + std::to_string(axis) + side,
                         blockShape, value));
    };
    if (before)
      block(before, "before");
    parts.push_back(x);
    if (after)
      block(after, "after");
    shape[axis] += before + after;
    x = tag(b.create<ConcatOp>(
                c.loc, RankedTensorType::get(shape, type.getElementType()),
                parts, b.getI64IntegerAttr(axis)),
            node);
  }
  c.out = x;
  return true;
}

Value OnnxImporter::hardSigmoid(const onnx::NodeProto &node, NodeCall &c,
                                Value x, const std::string &name, double alpha,
                                double beta) {
  Value scaled = tag(b.create<MulOp>(c.loc, c.result, x,
                                     scalarConstant(name + ".alpha", alpha)),
                     node);
  Value shifted = tag(b.create<AddOp>(c.loc, c.result, scaled,
                                      scalarConstant(name + ".beta", beta)),
                      node);
  return tag(b.create<ClipOp>(c.loc, c.result, shifted, b.getF64FloatAttr(0),
                              b.getF64FloatAttr(1)),
             node);
}

bool OnnxImporter::convertHardSigmoid(const onnx::NodeProto &node,
                                      NodeCall &c) {
  // Compositions of exact ops (a fused op would save their memory
  // traffic): HardSigmoid = clip(alpha x + beta, 0, 1); HardSwish =
  // x HardSigmoid(x) with alpha 1/6, beta 1/2 (x relu6(x + 3) / 6).
  Value x = c.input(0);
  if (!x)
    return false;
  if (!cast<RankedTensorType>(x.getType()).getElementType().isF32())
    return failAt(node, "expected a float32 input");
  bool swish = c.type == "HardSwish";
  double alpha = swish ? 1.0 / 6 : c.real("alpha", 0.2);
  double beta = swish ? 0.5 : c.real("beta", 0.5);
  if (!std::isfinite(alpha) || !std::isfinite(beta))
    return failAt(node, "alpha and beta must be finite");
  Value gate = hardSigmoid(node, c, x, node.output(0), alpha, beta);
  c.out = swish ? tag(b.create<MulOp>(c.loc, c.result, x, gate), node) : gate;
  return true;
}

bool OnnxImporter::convertReduceMean(const onnx::NodeProto &node, NodeCall &c) {
  std::vector<int64_t> axes = c.ints("axes", {});
  if (node.input_size() > 1 && !node.input(1).empty() &&
      !constantInts(node.input(1), axes))
    return false;
  Value x = c.input(0);
  if (!x)
    return false;
  auto xType = cast<RankedTensorType>(x.getType());
  if (axes.empty() && c.integer("noop_with_empty_axes", 0) &&
      c.type != "ReduceL2")
    return convertIdentity(node, c);
  // An L2 norm (F.normalize: Swin-V2's cosine attention) is the square root
  // of the sum of squares.
  bool norm = c.type == "ReduceL2";
  if (norm)
    x = tag(b.create<MulOp>(c.loc, xType, x, x), node);
  if (axes.empty()) // all of them
    for (int64_t i = 0; i < xType.getRank(); ++i)
      axes.push_back(i);
  c.out = tag(b.create<ReduceMeanOp>(
                  c.loc, c.result, x, b.getDenseI64ArrayAttr(axes),
                  c.integer("keepdims", 1) ? b.getUnitAttr() : UnitAttr()),
              node);
  if ((c.type == "ReduceSum" || norm) && c.out) {
    // A sum is the mean times the count (exact up to rounding); the
    // verifier has checked the axes.
    double count = 1;
    for (int64_t axis : axes)
      count *= static_cast<double>(
          xType.getDimSize(axis < 0 ? axis + xType.getRank() : axis));
    c.out =
        tag(b.create<MulOp>(c.loc, c.result, c.out,
                            scalarConstant(node.output(0) + ".count", count)),
            node);
  }
  if (norm && c.out)
    c.out = tag(b.create<SqrtOp>(c.loc, c.result, c.out), node);
  return true;
}

bool OnnxImporter::convertGather(const onnx::NodeProto &node, NodeCall &c) {
  Value x = c.input(0);
  Value indices = x ? integerValueOf(node.input(1)) : Value();
  if (!indices)
    return false;
  if (!cast<RankedTensorType>(indices.getType()).getElementType().isInteger(64))
    return failAt(node, "indices must be int64 or int32");
  int64_t axis = c.integer("axis", 0);
  if (axis < 0)
    axis += cast<RankedTensorType>(x.getType()).getRank();
  c.out = tag(b.create<GatherOp>(c.loc, c.result, x, indices,
                                 b.getI64IntegerAttr(axis)),
              node);
  return true;
}

bool OnnxImporter::convertScatterND(const onnx::NodeProto &node, NodeCall &c) {
  // Float data with constant indices (integer ones were folded at import):
  // Swin-V2 zeroes the key third of its qkv bias so. The data's leading k
  // axes flatten to rows; the result is data * keep + rows of the updates
  // gathered into place * (1 - keep), keep a frozen 0/1 mask per row --
  // exact, and differentiable in the data and the updates.
  if (c.attrs.count("reduction") && c.attrs["reduction"]->s() != "none")
    return failAt(node, "only reduction 'none' is supported");
  Value data = c.input(0), updates = c.input(2);
  std::vector<int64_t> indices;
  if (!data || !updates || !constantInts(node.input(1), indices))
    return false;
  const onnx::TensorProto *indexTensor = constantTensor(node.input(1));
  std::vector<int64_t> indexShape(indexTensor->dims().begin(),
                                  indexTensor->dims().end());
  auto dataType = cast<RankedTensorType>(data.getType());
  ArrayRef<int64_t> dims = dataType.getShape();
  int64_t k = indexShape.empty() ? 0 : indexShape.back();
  if (k < 1 || k > dataType.getRank())
    return failAt(node, "the indices' last dimension must be in [1, " +
                            std::to_string(dataType.getRank()) + "]");
  int64_t rows = 1, count = static_cast<int64_t>(indices.size()) / k;
  for (int64_t i = 0; i < k; ++i)
    rows *= dims[i];
  std::vector<int64_t> rest(dims.begin() + k, dims.end());
  std::vector<int64_t> rowOf(rows, 0);
  std::vector<bool> written(rows, false);
  for (int64_t u = 0; u < count; ++u) {
    int64_t row = 0;
    for (int64_t i = 0; i < k; ++i) {
      int64_t at = indices[u * k + i];
      if (at < -dims[i] || at >= dims[i])
        return failAt(node, "index " + std::to_string(at) +
                                " out of range for size " +
                                std::to_string(dims[i]));
      row = row * dims[i] + (at < 0 ? at + dims[i] : at);
    }
    if (written[row])
      return failAt(node, "an element is written twice");
    written[row] = true;
    rowOf[row] = u;
  }
  std::vector<int64_t> rowShape = {rows};
  rowShape.insert(rowShape.end(), rest.begin(), rest.end());
  std::vector<int64_t> updateShape = {count};
  updateShape.insert(updateShape.end(), rest.begin(), rest.end());
  Type element = dataType.getElementType();
  auto rowsType = RankedTensorType::get(rowShape, element);
  auto reshaped = [&](Value v, RankedTensorType type) -> Value {
    return v.getType() == type ? v
                               : tag(b.create<ReshapeOp>(c.loc, type, v), node);
  };
  Value dataRows = reshaped(data, rowsType);
  Value updateRows =
      reshaped(updates, RankedTensorType::get(updateShape, element));
  if (cast<RankedTensorType>(updates.getType()).getNumElements() !=
      count * (rows ? dataType.getNumElements() / rows : 0))
    return failAt(node, "the updates do not match the indices and the data");
  std::vector<int64_t> maskShape(rowShape.size(), 1);
  maskShape[0] = rows;
  ::dtfm::format::Tensor keep(maskShape, 1.0f), put(maskShape, 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    if (written[r]) {
      keep.data[r] = 0;
      put.data[r] = 1;
    }
  auto rowIndex =
      b.create<ConstantOp>(c.loc, RankedTensorType::get({rows}, b.getI64Type()),
                           b.getDenseI64ArrayAttr(rowOf));
  tag(rowIndex, node);
  Value placed = tag(b.create<GatherOp>(c.loc, rowsType, updateRows, rowIndex,
                                        b.getI64IntegerAttr(0)),
                     node);
  Value kept =
      tag(b.create<MulOp>(c.loc, rowsType, dataRows,
                          tensorConstant(node.output(0) + ".keep", keep)),
          node);
  Value put2 =
      tag(b.create<MulOp>(c.loc, rowsType, placed,
                          tensorConstant(node.output(0) + ".put", put)),
          node);
  Value sum = tag(b.create<AddOp>(c.loc, rowsType, kept, put2), node);
  c.out = reshaped(sum, c.result);
  return true;
}

bool OnnxImporter::convertWhere(const onnx::NodeProto &node, NodeCall &c) {
  Value condition = integerValueOf(node.input(0));
  if (!condition)
    return false;
  if (!cast<RankedTensorType>(condition.getType())
           .getElementType()
           .isInteger(1))
    return failAt(node, "the condition must be bool");
  Value lhs = c.input(1), rhs = c.input(2);
  if (!lhs || !rhs)
    return false;
  c.out = tag(b.create<WhereOp>(c.loc, c.result, condition, lhs, rhs), node);
  return true;
}

bool OnnxImporter::convertConcat(const onnx::NodeProto &node, NodeCall &c) {
  SmallVector<Value> parts;
  for (int i = 0; i < node.input_size(); ++i) {
    Value v = c.input(i);
    if (!v)
      return false;
    parts.push_back(v);
  }
  int64_t axis = c.integer("axis", 0);
  if (axis < 0)
    axis += c.result.getRank();
  c.out =
      tag(b.create<ConcatOp>(c.loc, c.result, parts, b.getI64IntegerAttr(axis)),
          node);
  return true;
}

bool OnnxImporter::convertSlice(const onnx::NodeProto &node, NodeCall &c) {
  Value x = c.input(0);
  if (!x)
    return false;
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t rank = xType.getRank();
  auto makeSlice = [&](std::vector<int64_t> starts, std::vector<int64_t> ends,
                       std::vector<int64_t> steps) {
    std::vector<int64_t> shape;
    for (int64_t i = 0; i < rank; ++i)
      shape.push_back((ends[i] - starts[i] + steps[i] - 1) / steps[i]);
    return tag(b.create<SliceOp>(
                   c.loc, RankedTensorType::get(shape, xType.getElementType()),
                   x, b.getDenseI64ArrayAttr(starts),
                   b.getDenseI64ArrayAttr(ends), b.getDenseI64ArrayAttr(steps)),
               node);
  };
  std::vector<int64_t> full(xType.getShape().begin(), xType.getShape().end());
  if (c.type == "Split") {
    int64_t axis = c.integer("axis", 0);
    if (axis < 0)
      axis += rank;
    std::vector<int64_t> sizes = c.ints("split", {});
    if (node.input_size() > 1 && !node.input(1).empty() &&
        !constantInts(node.input(1), sizes))
      return false;
    int parts = node.output_size();
    if (sizes.empty()) {
      if (full[axis] % parts != 0)
        return failAt(node, "an even split of " + std::to_string(full[axis]) +
                                " into " + std::to_string(parts));
      sizes.assign(parts, full[axis] / parts);
    }
    if (static_cast<int>(sizes.size()) != parts)
      return failAt(node, "split sizes and outputs differ in number");
    int64_t begin = 0;
    for (int i = 0; i < parts; ++i) {
      std::vector<int64_t> starts(rank, 0), ends = full, steps(rank, 1);
      starts[axis] = begin;
      ends[axis] = begin + sizes[i];
      begin += sizes[i];
      if (sizes[i] <= 0 || ends[axis] > full[axis])
        return failAt(node, "split sizes do not fit the axis");
      values[node.output(i)] = makeSlice(starts, ends, steps);
    }
    c.done = true;
    return true;
  }
  std::vector<int64_t> starts, ends, axes, steps;
  if (!constantInts(node.input(1), starts) ||
      !constantInts(node.input(2), ends))
    return false;
  if (node.input_size() > 3 && !node.input(3).empty() &&
      !constantInts(node.input(3), axes))
    return false;
  if (node.input_size() > 4 && !node.input(4).empty() &&
      !constantInts(node.input(4), steps))
    return false;
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(static_cast<int64_t>(i));
  if (steps.empty())
    steps.assign(starts.size(), 1);
  std::vector<int64_t> s0(rank, 0), e0 = full, st0(rank, 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a < 0 || a >= rank || steps[i] < 1)
      return failAt(node, "only slices with positive steps on valid axes");
    auto clampIndex = [&](int64_t v) {
      if (v < 0)
        v += full[a];
      return std::max<int64_t>(0, std::min(v, full[a]));
    };
    s0[a] = clampIndex(starts[i]);
    e0[a] = clampIndex(ends[i]);
    st0[a] = steps[i];
    if (s0[a] >= e0[a])
      return failAt(node, "an empty slice");
  }
  c.out = makeSlice(s0, e0, st0);
  return true;
}

bool OnnxImporter::convertTranspose(const onnx::NodeProto &node, NodeCall &c) {
  Value x = c.input(0);
  if (!x)
    return false;
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  std::vector<int64_t> perm = c.ints("perm", {});
  if (perm.empty()) // default: reverse the dimensions
    for (int64_t i = rank; i-- > 0;)
      perm.push_back(i);
  c.out = tag(
      b.create<TransposeOp>(c.loc, c.result, x, b.getDenseI64ArrayAttr(perm)),
      node);
  return true;
}

bool OnnxImporter::convertCast(const onnx::NodeProto &node, NodeCall &c) {
  Value x = c.input(0);
  if (!x)
    return false;
  if (cast<RankedTensorType>(x.getType()).getElementType() !=
      c.result.getElementType())
    return failAt(node, "casts between float and integer tensors are not "
                        "supported");
  c.out = x; // float to float, or integer to integer: the same tensor here
  layerOfValue[node.output(0)] = layerOfValue[node.input(0)];
  return true;
}

bool OnnxImporter::convertSoftmax(const onnx::NodeProto &node, NodeCall &c) {
  Value x = c.input(0);
  if (!x)
    return false;
  int64_t rank = c.result.getRank(), axis = c.integer("axis", -1);
  if (axis < 0)
    axis += rank;
  if (axis == rank - 1) {
    c.out = tag(
        b.create<SoftmaxOp>(c.loc, c.result, x, b.getI64IntegerAttr(-1)), node);
  } else { // swap the axis with the last, softmax, swap back
    SmallVector<int64_t> perm, swapped(c.result.getShape());
    for (int64_t i = 0; i < rank; ++i)
      perm.push_back(i);
    std::swap(perm[axis], perm[rank - 1]);
    std::swap(swapped[axis], swapped[rank - 1]);
    auto swappedType = floatType(swapped);
    Value t = tag(b.create<TransposeOp>(c.loc, swappedType, x,
                                        b.getDenseI64ArrayAttr(perm)),
                  node);
    t = tag(b.create<SoftmaxOp>(c.loc, swappedType, t, b.getI64IntegerAttr(-1)),
            node);
    c.out = tag(
        b.create<TransposeOp>(c.loc, c.result, t, b.getDenseI64ArrayAttr(perm)),
        node);
  }
  return true;
}

bool OnnxImporter::convertMatMul(const onnx::NodeProto &node, NodeCall &c) {
  Value lhs = c.input(0), rhs = c.input(1);
  if (!lhs || !rhs)
    return false;
  c.out = tag(b.create<MatmulOp>(c.loc, c.result, lhs, rhs, UnitAttr()), node);
  return true;
}

bool OnnxImporter::convertGemm(const onnx::NodeProto &node, NodeCall &c) {
  double alpha = c.real("alpha", 1), beta = c.real("beta", 1);
  const onnx::TensorProto *weight = initializer(node.input(1));
  bool transB = c.integer("transB", 0) != 0;
  Value x = c.input(0);
  if (!x)
    return false;
  if (c.integer("transA", 0) != 0) { // A^T as a transpose of its own
    auto a = cast<RankedTensorType>(x.getType());
    x = tag(b.create<TransposeOp>(c.loc,
                                  floatType({a.getDimSize(1), a.getDimSize(0)}),
                                  x, b.getDenseI64ArrayAttr({1, 0})),
            node);
  }
  Value w;
  if (weight && transB) {
    // A Linear layer: store W^T ([K, N]) as the parameter, as
    // dtfm.linear wants it.
    std::vector<float> data;
    if (!floats(*weight, data))
      return false;
    int64_t n = weight->dims(0), k = weight->dims(1);
    ::dtfm::format::Tensor t({k, n});
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < k; ++j)
        t.data[j * n + i] = data[i * k + j];
    std::string name = node.input(1);
    ParamOp param = externalParam(name, std::move(t), /*frozen=*/false);
    param->setAttr(kLayerAttrName, b.getStringAttr(layerOfParameter(name)));
    w = param.getResult();
  } else {
    w = c.input(1);
  }
  Value bias = c.input(2);
  if (!w || (node.input_size() > 2 && !bias))
    return false;
  bool vectorBias =
      !bias || cast<RankedTensorType>(bias.getType()).getShape() ==
                   ArrayRef<int64_t>{c.result.getShape().back()};
  if (weight && transB && vectorBias && alpha == 1 && beta == 1) {
    c.out = tag(b.create<LinearOp>(c.loc, c.result, x, w, bias), node);
  } else {
    // B used as it is (transposed by the matmul), any broadcastable C.
    bool transposed = transB && !weight;
    Value product =
        tag(b.create<MatmulOp>(c.loc, c.result, x, w,
                               transposed ? b.getUnitAttr() : UnitAttr()),
            node);
    if (weight && transB) // W^T was stored: a plain product
      product.getDefiningOp()->removeAttr("transpose_rhs");
    // alpha * A B + beta * C, each scale a frozen scalar of its own.
    if (alpha != 1)
      product =
          tag(b.create<MulOp>(c.loc, c.result, product,
                              scalarConstant(node.output(0) + ".alpha", alpha)),
              node);
    if (bias && beta != 1)
      bias =
          tag(b.create<MulOp>(c.loc, bias.getType(), bias,
                              scalarConstant(node.output(0) + ".beta", beta)),
              node);
    c.out = bias ? tag(b.create<AddOp>(c.loc, c.result, product, bias), node)
                 : product;
  }
  return true;
}

bool OnnxImporter::convertFusedLayerNorm(const onnx::NodeProto &node,
                                         NodeCall &c) {
  Value x = c.input(0), gamma = c.input(1), beta = c.input(2);
  if (!x || !gamma || !beta)
    return false;
  c.out = tag(b.create<LayerNormOp>(c.loc, c.result, x, gamma, beta,
                                    b.getF64FloatAttr(c.real("epsilon", 1e-5))),
              node);
  return true;
}

bool OnnxImporter::convertFusedRmsNorm(const onnx::NodeProto &node,
                                       NodeCall &c) {
  Value x = c.input(0), gamma = c.input(1);
  if (!x || !gamma)
    return false;
  c.out = tag(b.create<RmsNormOp>(c.loc, c.result, x, gamma,
                                  b.getF64FloatAttr(c.real("epsilon", 1e-5))),
              node);
  return true;
}

bool OnnxImporter::convertFusedSilu(const onnx::NodeProto &node, NodeCall &c) {
  Value x = c.input(0);
  if (!x)
    return false;
  c.out = tag(b.create<SiluOp>(c.loc, c.result, x), node);
  return true;
}

bool OnnxImporter::convertFusedGelu(const onnx::NodeProto &node, NodeCall &c) {
  Value x = c.input(0);
  if (!x)
    return false;
  c.out = tag(b.create<GeluOp>(c.loc, c.result, x, UnitAttr()), node);
  return true;
}

bool OnnxImporter::convertFusedLinear(const onnx::NodeProto &node,
                                      NodeCall &c) {
  Value x = c.input(0), w = c.input(1), bias = c.input(2);
  if (!x || !w || (node.input_size() > 2 && !bias))
    return false;
  c.out = tag(b.create<LinearOp>(c.loc, c.result, x, w, bias), node);
  return true;
}

bool OnnxImporter::convertFusedEmbedding(const onnx::NodeProto &node,
                                         NodeCall &c) {
  // The indices may be token ids (an input) or a constant (MaxViT's and
  // Swin's relative-position index gathering a bias table).
  Value indices = integerValueOf(node.input(0)), table = c.input(1);
  if (!indices || !table)
    return false;
  c.out =
      tag(b.create<EmbeddingOp>(c.loc, c.result, indices, table, IntegerAttr()),
          node);
  return true;
}

bool OnnxImporter::convertFusedAttention(const onnx::NodeProto &node,
                                         NodeCall &c) {
  Value q = c.input(0), k = c.input(1), v = c.input(2);
  if (!q || !k || !v)
    return false;
  int64_t heads = c.integer("num_heads", 1);
  int64_t hidden = cast<RankedTensorType>(q.getType()).getShape().back();
  double expected = std::sqrt(static_cast<double>(hidden / heads));
  if (std::fabs(c.real("divisor", 0) - expected) > 1e-4 * expected)
    return failAt(node,
                  "attention scores scaled by " +
                      std::to_string(c.real("divisor", 0)) +
                      ", not sqrt(head dim) = " + std::to_string(expected));
  // Llama: rotary embeddings of Q and K (on their heads) before it, and
  // fewer key/value heads.
  int64_t kvHeads = c.integer("num_kv_heads", heads);
  auto rotate = [&](Value x, const char *theta, int64_t count) {
    double base = c.real(theta, 0);
    if (base == 0)
      return x;
    return tag(b.create<RotaryOp>(c.loc, x.getType(), x,
                                  b.getI64IntegerAttr(count),
                                  b.getF64FloatAttr(base)),
               node);
  };
  q = rotate(q, "rotary_query_theta", heads);
  k = rotate(k, "rotary_key_theta", kvHeads);
  c.out =
      tag(b.create<CausalAttentionOp>(
              c.loc, c.result, q, k, v, b.getI64IntegerAttr(heads),
              kvHeads == heads ? IntegerAttr() : b.getI64IntegerAttr(kvHeads)),
          node);
  return true;
}
