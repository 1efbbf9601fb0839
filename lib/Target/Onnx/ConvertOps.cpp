//===- ConvertOps.cpp - ONNX nodes into dtfm ops --------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// converters(): the table that maps ONNX op types to their converters,
// which is also the list of what the importer accepts (the unsupported ones
// are refused up front, counted, in one diagnostic), with what every
// converter reads (attributes, pads, inputs) and the two that only record
// names (Constant, Identity). The converters themselves are one file per
// family: ConvertLayers.cpp, ConvertMath.cpp, ConvertShape.cpp,
// ConvertRecurrent.cpp and ConvertFused.cpp (the chains FusePatterns.cpp
// recognised).
//
//===----------------------------------------------------------------------===//

#include "Importer.h"

#include <algorithm>

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
      {"ConvTranspose", &OnnxImporter::convertConv},
      {"BatchNormalization", &OnnxImporter::convertBatchNormalization},
      {"InstanceNormalization", &OnnxImporter::convertInstanceNormalization},
      {"Relu", &OnnxImporter::convertRelu},
      {"MaxPool", &OnnxImporter::convertPool},
      {"AveragePool", &OnnxImporter::convertPool},
      {"GlobalAveragePool", &OnnxImporter::convertGlobalAveragePool},
      {"Add", &OnnxImporter::convertBinary},
      {"Sub", &OnnxImporter::convertBinary},
      {"Mul", &OnnxImporter::convertBinary},
      {"Div", &OnnxImporter::convertBinary},
      {"Max", &OnnxImporter::convertBinary},
      {"Min", &OnnxImporter::convertBinary},
      {"PRelu", &OnnxImporter::convertBinary},
      {"Flatten", &OnnxImporter::convertFlatten},
      {"Reshape", &OnnxImporter::convertReshape},
      {"Squeeze", &OnnxImporter::convertSqueeze},
      {"Unsqueeze", &OnnxImporter::convertSqueeze},
      {"Sqrt", &OnnxImporter::convertMath},
      {"Tanh", &OnnxImporter::convertMath},
      {"Sigmoid", &OnnxImporter::convertMath},
      {"Erf", &OnnxImporter::convertMath},
      {"Exp", &OnnxImporter::convertMath},
      {"Abs", &OnnxImporter::convertMath},
      {"Log", &OnnxImporter::convertMath},
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
      {"CumSum", &OnnxImporter::convertCumSum},
      {"ReduceMax", &OnnxImporter::convertReduceMean},
      {"ReduceMin", &OnnxImporter::convertReduceMean},
      {"Gather", &OnnxImporter::convertGather},
      {"ScatterND", &OnnxImporter::convertScatterND},
      {"Where", &OnnxImporter::convertWhere},
      {"Concat", &OnnxImporter::convertConcat},
      {"Trilu", &OnnxImporter::convertTrilu},
      {"Tile", &OnnxImporter::convertTile},
      {"Slice", &OnnxImporter::convertSlice},
      {"Split", &OnnxImporter::convertSlice},
      {"Transpose", &OnnxImporter::convertTranspose},
      {"Cast", &OnnxImporter::convertCast},
      {"Softmax", &OnnxImporter::convertSoftmax},
      {"LogSoftmax", &OnnxImporter::convertSoftmax},
      {"MatMul", &OnnxImporter::convertMatMul},
      {"Gemm", &OnnxImporter::convertGemm},
      {"LayerNormalization", &OnnxImporter::convertLayerNormalization},
      {"LSTM", &OnnxImporter::convertRecurrent},
      {"GRU", &OnnxImporter::convertRecurrent},
      {"RNN", &OnnxImporter::convertRecurrent},
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
