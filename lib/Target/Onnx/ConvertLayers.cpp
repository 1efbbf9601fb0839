//===- ConvertLayers.cpp - Convolution, norms, pooling, matmuls -----------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Converters of ONNX nodes (ConvertOps.cpp has the table that lists them).
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

/// One-dimensional spatial attributes as the 2-D ones of a map of height 1:
/// [a] -> [fill, a] (kernel, strides, dilations), [b, e] -> [0, b, 0, e]
/// (pads).
static std::vector<int64_t> liftAttribute(std::vector<int64_t> values,
                                          int64_t fill, bool pads) {
  if (pads && values.size() == 2)
    return {0, values[0], 0, values[1]};
  if (!pads && values.size() == 1)
    return {fill, values[0]};
  return values; // refused by the 2-D checks
}

Value OnnxImporter::withHeightOne(const onnx::NodeProto &node, NodeCall &c,
                                  Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape.insert(shape.begin() + 2, 1);
  return tag(b.create<ReshapeOp>(c.loc, floatType(shape), v), node);
}

bool OnnxImporter::convertConv(const onnx::NodeProto &node, NodeCall &c) {
  Value x = c.input(0), w = c.input(1), bias = c.input(2);
  if (!x || !w || (node.input_size() > 2 && !bias))
    return false;
  auto wType = cast<RankedTensorType>(w.getType());
  auto xType = cast<RankedTensorType>(x.getType());
  // A 1-D convolution (speech, text) is the 2-D one over a map of height 1:
  // the same kernels, the input and the weight viewed with a unit axis.
  bool oneD = xType.getRank() == 3 && wType.getRank() == 3;
  std::vector<int64_t> kernel = c.ints(
      "kernel_shape", std::vector<int64_t>(wType.getShape().drop_front(2)));
  std::vector<int64_t> strides = c.ints("strides", oneD ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 1}),
                       dilations = c.ints("dilations", oneD ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 1}),
                       pads = c.ints("pads", oneD ? std::vector<int64_t>{0, 0} : std::vector<int64_t>{0, 0, 0, 0}),
                       outputPadding = c.ints("output_padding", oneD ? std::vector<int64_t>{0} : std::vector<int64_t>{0, 0});
  bool transposed = c.type == "ConvTranspose";
  if (oneD) {
    kernel = liftAttribute(kernel, 1, false);
    strides = liftAttribute(strides, 1, false);
    dilations = liftAttribute(dilations, 1, false);
    pads = liftAttribute(pads, 0, true);
    outputPadding = liftAttribute(outputPadding, 0, false);
    x = withHeightOne(node, c, x);
    w = withHeightOne(node, c, w);
    xType = cast<RankedTensorType>(x.getType());
  }
  if (kernel.size() != 2 || xType.getRank() != 4 || strides.size() != 2 ||
      dilations.size() != 2 || pads.size() != 4 || outputPadding.size() != 2)
    return failAt(node, "only 1-D and 2-D convolutions are supported");
  // A transposed convolution's output_shape and auto_pad derive its pads
  // from the output size; PyTorch exports explicit pads and output_padding.
  if (transposed && c.attrs.count("output_shape"))
    return failAt(node, "output_shape is not supported (give pads and "
                        "output_padding, as PyTorch exports them)");
  if (transposed && c.attrs.count("auto_pad") &&
      c.attrs["auto_pad"]->s() != "NOTSET")
    return failAt(node, "auto_pad '" + c.attrs["auto_pad"]->s() +
                            "' is not supported on ConvTranspose (give "
                            "pads, as PyTorch exports them)");
  if (!transposed && c.attrs.count("auto_pad") &&
      !explicitPads(c.attrs["auto_pad"]->s(), xType.getShape(), kernel, strides,
                    dilations, pads))
    return failAt(node, "unknown auto_pad '" + c.attrs["auto_pad"]->s() + "'");
  RankedTensorType resultType = c.result;
  if (oneD) {
    SmallVector<int64_t> shape(c.result.getShape());
    shape.insert(shape.begin() + 2, 1);
    resultType = floatType(shape);
  }
  Operation *conv =
      transposed
          ? b.create<ConvTranspose2dOp>(
                 c.loc, resultType, x, w, bias, b.getDenseI64ArrayAttr(strides),
                 b.getDenseI64ArrayAttr(pads),
                 b.getDenseI64ArrayAttr(dilations),
                 b.getDenseI64ArrayAttr(outputPadding),
                 b.getI64IntegerAttr(c.integer("group", 1)))
                .getOperation()
          : b.create<Conv2dOp>(c.loc, resultType, x, w, bias,
                               b.getDenseI64ArrayAttr(strides),
                               b.getDenseI64ArrayAttr(pads),
                               b.getDenseI64ArrayAttr(dilations),
                               b.getI64IntegerAttr(c.integer("group", 1)))
                .getOperation();
  c.out = tag(conv, node);
  if (oneD)
    c.out = tag(b.create<ReshapeOp>(c.loc, c.result, c.out), node);
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

bool OnnxImporter::convertInstanceNormalization(const onnx::NodeProto &node,
                                                NodeCall &c) {
  // Each (sample, channel) normalised over its positions (GroupNorm exports
  // as this over [N, G, C/G * L]): dtfm.layernorm over the positions
  // flattened into the last axis, with unit gains and zero shifts, then the
  // per-channel scale and bias -- each skipped when it is a constant that
  // changes nothing (GroupNorm's ones and zeros).
  Value x = c.input(0), scale = c.input(1), shift = c.input(2);
  if (!x || !scale || !shift)
    return false;
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t rank = xType.getRank();
  if (rank < 3)
    return failAt(node, "expected an input of rank >= 3, found rank " +
                            std::to_string(rank));
  int64_t channels = xType.getDimSize(1), positions = 1;
  for (int64_t d = 2; d < rank; ++d)
    positions *= xType.getDimSize(d);
  for (Value v : {scale, shift})
    if (cast<RankedTensorType>(v.getType()).getShape() !=
        ArrayRef<int64_t>{channels})
      return failAt(node, "expected a scale and a bias of shape [" +
                              std::to_string(channels) + "]");
  std::string name = node.output(0);
  auto flatType = floatType({xType.getDimSize(0), channels, positions});
  Value flat = rank == 3 ? x
                         : tag(b.create<ReshapeOp>(c.loc, flatType, x), node);
  Value normed = tag(
      b.create<LayerNormOp>(c.loc, flatType, flat,
                            filledConstant(name + ".ones", {positions}, 1.0),
                            filledConstant(name + ".zeros", {positions}, 0.0),
                            b.getF64FloatAttr(c.real("epsilon", 1e-5))),
      node);
  Value y = rank == 3 ? normed
                      : tag(b.create<ReshapeOp>(c.loc, c.result, normed), node);
  // A constant of all `value` (a Constant node, or a frozen initializer).
  auto constantOf = [&](int i, float value) {
    if (initializer(node.input(i)) && !frozenByImport(node.input(i)))
      return false; // a parameter: it trains away from its start
    const onnx::TensorProto *t = constantTensor(node.input(i));
    std::vector<float> data;
    std::string error;
    return t && readTensorFloats(*t, data, error) &&
           llvm::all_of(data, [&](float v) { return v == value; });
  };
  SmallVector<int64_t> perChannel(rank - 1, 1);
  perChannel[0] = channels;
  auto byChannel = [&](Value v) { // [C] -> [C, 1, ...]: broadcast per channel
    return tag(b.create<ReshapeOp>(c.loc, floatType(perChannel), v), node);
  };
  if (!constantOf(1, 1.0f))
    y = tag(b.create<MulOp>(c.loc, c.result, y, byChannel(scale)), node);
  if (!constantOf(2, 0.0f))
    y = tag(b.create<AddOp>(c.loc, c.result, y, byChannel(shift)), node);
  c.out = y;
  return true;
}

bool OnnxImporter::convertRelu(const onnx::NodeProto &node, NodeCall &c) {
  return convertToOne<ReluOp, 1>(node, c);
}

bool OnnxImporter::convertPool(const onnx::NodeProto &node, NodeCall &c) {
  bool ceilMode = c.integer("ceil_mode", 0) != 0;
  Value x = c.input(0);
  if (!x)
    return false;
  auto xType = cast<RankedTensorType>(x.getType());
  // 1-D pooling: the 2-D one over a map of height 1.
  bool oneD = xType.getRank() == 3;
  std::vector<int64_t> dilations = c.ints("dilations", {});
  if (!dilations.empty() && dilations != std::vector<int64_t>(dilations.size(), 1))
    return failAt(node, "dilated pooling is not supported");
  std::vector<int64_t> pads = c.ints("pads", oneD ? std::vector<int64_t>{0, 0} : std::vector<int64_t>{0, 0, 0, 0}),
                       kernelShape = c.ints("kernel_shape", {}),
                       strides = c.ints("strides", oneD ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 1});
  if (oneD) {
    pads = liftAttribute(pads, 0, true);
    kernelShape = liftAttribute(kernelShape, 1, false);
    strides = liftAttribute(strides, 1, false);
    x = withHeightOne(node, c, x);
    xType = cast<RankedTensorType>(x.getType());
  }
  if (xType.getRank() != 4)
    return failAt(node, "only 1-D and 2-D pooling is supported");
  if (c.attrs.count("auto_pad") &&
      !explicitPads(c.attrs["auto_pad"]->s(), xType.getShape(), kernelShape,
                    strides, {1, 1}, pads))
    return failAt(node, "unknown auto_pad '" + c.attrs["auto_pad"]->s() + "'");
  if (kernelShape.size() != 2 || strides.size() != 2 || pads.size() != 4)
    return failAt(node, "expected 2-D kernel_shape, strides and pads");
  RankedTensorType resultType = c.result;
  if (oneD) {
    SmallVector<int64_t> shape(c.result.getShape());
    shape.insert(shape.begin() + 2, 1);
    resultType = floatType(shape);
  }
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
    c.out = tag(b.create<MaxPool2dOp>(c.loc, resultType, x, kernel, strideAttr,
                                      padding),
                node);
  } else {
    // All of the padding counting is the op's default: no attribute.
    DenseI64ArrayAttr divisorPadding = counted == pads
                                           ? DenseI64ArrayAttr()
                                           : b.getDenseI64ArrayAttr(counted);
    c.out = tag(b.create<AvgPool2dOp>(c.loc, resultType, x, kernel,
                                      strideAttr, padding, divisorPadding),
                node);
  }
  if (oneD)
    c.out = tag(b.create<ReshapeOp>(c.loc, c.result, c.out), node);
  return true;
}

bool OnnxImporter::convertGlobalAveragePool(const onnx::NodeProto &node,
                                            NodeCall &c) {
  return convertToOne<GlobalAvgPoolOp, 1>(node, c);
}

bool OnnxImporter::convertSoftmax(const onnx::NodeProto &node, NodeCall &c) {
  Value x = c.input(0);
  if (!x)
    return false;
  UnitAttr log = c.type == "LogSoftmax" ? b.getUnitAttr() : UnitAttr();
  int64_t rank = c.result.getRank(), axis = c.integer("axis", -1);
  if (axis < 0)
    axis += rank;
  if (axis == rank - 1) {
    c.out = tag(
        b.create<SoftmaxOp>(c.loc, c.result, x, b.getI64IntegerAttr(-1), log),
        node);
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
    t = tag(b.create<SoftmaxOp>(c.loc, swappedType, t, b.getI64IntegerAttr(-1),
                                log),
            node);
    c.out = tag(
        b.create<TransposeOp>(c.loc, c.result, t, b.getDenseI64ArrayAttr(perm)),
        node);
  }
  return true;
}

bool OnnxImporter::convertMatMul(const onnx::NodeProto &node, NodeCall &c) {
  return convertToOne<MatmulOp, 2>(node, c, UnitAttr());
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
  // A Linear layer's weight read by nothing but such Gemms is stored as
  // W^T ([K, N]), as dtfm.linear wants it: one parameter for all of them.
  // Read in another layout too (an embedding tied to a head with a bias),
  // it stays W, and the product transposes it.
  std::string name = node.input(1);
  bool storedTransposed = weight && transB && onlyTransposedByGemms(name);
  Value w;
  if (storedTransposed && values.count(name)) {
    w = values[name];
  } else if (storedTransposed) {
    std::vector<float> data;
    if (!floats(*weight, data))
      return false;
    int64_t n = weight->dims(0), k = weight->dims(1);
    ::dtfm::format::Tensor t({k, n});
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < k; ++j)
        t.data[j * n + i] = data[i * k + j];
    ParamOp param = externalParam(name, std::move(t), frozenByImport(name));
    param->setAttr(kLayerAttrName, b.getStringAttr(layerOfParameter(name)));
    param->setAttr(kOnnxTransposedAttrName, b.getUnitAttr());
    w = param.getResult();
    values[name] = w;
    layerOfValue[name] = layerOfParameter(name);
  } else {
    w = c.input(1);
  }
  Value bias = c.input(2);
  if (!w || (node.input_size() > 2 && !bias))
    return false;
  bool vectorBias =
      !bias || cast<RankedTensorType>(bias.getType()).getShape() ==
                   ArrayRef<int64_t>{c.result.getShape().back()};
  if (storedTransposed && vectorBias && alpha == 1 && beta == 1) {
    c.out = tag(b.create<LinearOp>(c.loc, c.result, x, w, bias), node);
  } else {
    // B as it is (transposed by the matmul unless W^T was stored), any
    // broadcastable C.
    Value product = tag(b.create<MatmulOp>(c.loc, c.result, x, w,
                                           transB && !storedTransposed
                                               ? b.getUnitAttr()
                                               : UnitAttr()),
                        node);
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
