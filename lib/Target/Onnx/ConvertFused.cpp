//===- ConvertFused.cpp - Recognised chains, one dtfm op each -------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Converters of ONNX nodes (ConvertOps.cpp has the table that lists them).
//
//===----------------------------------------------------------------------===//

#include "Importer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

using namespace mlir;
using namespace mlir::dtfm;
using namespace mlir::dtfm::onnximport;

bool OnnxImporter::convertFusedLayerNorm(const onnx::NodeProto &node,
                                         NodeCall &c) {
  return convertToOne<LayerNormOp, 3>(
      node, c, b.getF64FloatAttr(c.real("epsilon", 1e-5)));
}

bool OnnxImporter::convertLayerNormalization(const onnx::NodeProto &node,
                                             NodeCall &c) {
  // Opset 17's op: dtfm.layernorm normalises the last dimension with a
  // gain and a bias of its size.
  Value x = c.input(0), gamma = c.input(1), beta = c.input(2);
  if (!x || !gamma || (node.input_size() > 2 && !node.input(2).empty() &&
                       !beta))
    return false;
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t rank = xType.getRank(), axis = c.integer("axis", -1);
  if (axis != -1 && axis != rank - 1)
    return failAt(node, "normalising from axis " + std::to_string(axis) +
                            " of a rank-" + std::to_string(rank) +
                            " input: only the last axis is supported");
  for (int i = 1; i < node.output_size(); ++i)
    if (!node.output(i).empty() && consumed.count(node.output(i)))
      return failAt(node, "its mean and inverse standard deviation outputs "
                          "are read: only the normalised output is "
                          "supported");
  int64_t size = xType.getShape().back();
  for (Value v : {gamma, beta})
    if (v && cast<RankedTensorType>(v.getType()).getShape() !=
                 ArrayRef<int64_t>{size})
      return failAt(node, "expected a scale and a bias of shape [" +
                              std::to_string(size) + "]");
  if (!beta) // no bias: zeros
    beta = filledConstant(node.output(0) + ".bias", {size}, 0.0);
  c.out = tag(b.create<LayerNormOp>(c.loc, c.result, x, gamma, beta,
                                    b.getF64FloatAttr(c.real("epsilon", 1e-5))),
              node);
  return true;
}

bool OnnxImporter::convertFusedRmsNorm(const onnx::NodeProto &node,
                                       NodeCall &c) {
  return convertToOne<RmsNormOp, 2>(
      node, c, b.getF64FloatAttr(c.real("epsilon", 1e-5)));
}

bool OnnxImporter::convertFusedSilu(const onnx::NodeProto &node, NodeCall &c) {
  return convertToOne<SiluOp, 1>(node, c);
}

bool OnnxImporter::convertFusedGelu(const onnx::NodeProto &node, NodeCall &c) {
  return convertToOne<GeluOp, 1>(node, c, UnitAttr());
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
