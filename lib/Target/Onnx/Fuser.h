//===- Fuser.h - The ONNX fuser's graph index and patterns ------*- C++ -*-===//
//
// Part of dtfm. Private to lib/Target/Onnx: the fuser of FusePatterns.h, its
// index of the graph and its helpers; the patterns are defined in
// FusePatterns.cpp (norms, activations, pooling, linear, embedding) and
// FuseAttention.cpp (causal attention with its rotary embedding and
// repeated heads).
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_LIB_TARGET_ONNX_FUSER_H
#define DTFM_LIB_TARGET_ONNX_FUSER_H

#include "FoldConstants.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace mlir::dtfm::fuse {

class Fuser {
public:
  Fuser(onnx::GraphProto &graph) : graph(graph) {}

  /// One line per attention that looked like one but was not fused.
  std::vector<std::string> remarks;

  int run() {
    int fused = 0;
    index();
    for (int i = 0; i < graph.node_size(); ++i) {
      if (dead.count(i))
        continue;
      missed.clear();
      if (tryAttention(i)) {
        ++fused;
        continue;
      }
      // An attention the pattern did not take runs as its ops: say why.
      int softmax = attentionSoftmax(i);
      if (softmax >= 0 && !missed.empty())
        remarks.push_back("attention at node '" + node(softmax)->name() +
                          "' not fused into dtfm.causal_attention: " +
                          missed + "; it runs as its MatMul, Softmax and "
                          "MatMul ops");
    }
    for (int i = 0; i < graph.node_size(); ++i)
      if (!dead.count(i) && (tryLayerNorm(i) || tryGelu(i) || tryRmsNorm(i) ||
                             trySilu(i) || tryPaddedAveragePool(i) ||
                             tryShiftedSoftmax(i)))
        ++fused;
    index();
    for (int i = 0; i < graph.node_size(); ++i)
      if (!dead.count(i) && (tryLinear(i) || tryEmbedding(i)))
        ++fused;
    // Drop the fused chains' nodes, keeping the order of the rest.
    google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
    for (int i = 0; i < graph.node_size(); ++i)
      if (!dead.count(i))
        *kept.Add() = graph.node(i);
    graph.mutable_node()->Swap(&kept);
    return fused;
  }

private:
  void index() {
    users.clear();
    producer.clear();
    for (int i = 0; i < graph.node_size(); ++i) {
      if (dead.count(i))
        continue;
      for (const std::string &in : graph.node(i).input())
        users[in].push_back(i);
      for (const std::string &out : graph.node(i).output())
        producer[out] = i;
    }
    outputs.clear();
    for (const auto &o : graph.output())
      outputs.insert(o.name());
    initializers.clear();
    for (const auto &t : graph.initializer())
      initializers[t.name()] = &t;
  }

  const onnx::NodeProto *node(int i) { return &graph.node(i); }
  /// The only live node reading `value` (and not a graph output), or -1.
  int onlyUser(const std::string &value) {
    auto it = users.find(value);
    if (outputs.count(value) || it == users.end() || it->second.size() != 1)
      return -1;
    return it->second[0];
  }
  int producerOf(const std::string &value) {
    auto it = producer.find(value);
    return it == producer.end() ? -1 : it->second;
  }
  bool is(int i, const char *type) {
    return i >= 0 && !dead.count(i) && graph.node(i).op_type() == type;
  }
  const onnx::AttributeProto *attr(int i, const char *name) {
    for (const auto &a : graph.node(i).attribute())
      if (a.name() == name)
        return &a;
    return nullptr;
  }
  std::vector<int64_t> ints(int i, const char *name) {
    const onnx::AttributeProto *a = attr(i, name);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end())
             : std::vector<int64_t>();
  }
  const onnx::TensorProto *tensorOf(const std::string &value) {
    auto init = initializers.find(value);
    if (init != initializers.end())
      return init->second;
    int p = producerOf(value);
    if (is(p, "Constant"))
      if (const onnx::AttributeProto *a = attr(p, "value"))
        return &a->t();
    if (is(p, "Identity")) // a buffer shared between layers
      return tensorOf(node(p)->input(0));
    return nullptr;
  }
  /// The elements of an integer constant or initializer.
  bool constantInts(const std::string &value, std::vector<int64_t> &out) {
    const onnx::TensorProto *t = tensorOf(value);
    std::string error;
    return t && mlir::dtfm::readTensorInts(*t, out, error);
  }
  /// The elements and dims of a float constant or initializer.
  bool constantFloats(const std::string &value, std::vector<float> &out,
                      std::vector<int64_t> *dims = nullptr) {
    const onnx::TensorProto *t = tensorOf(value);
    std::string error;
    if (!t || t->data_type() != onnx::TensorProto::FLOAT ||
        !mlir::dtfm::readTensorFloats(*t, out, error))
      return false;
    if (dims)
      dims->assign(t->dims().begin(), t->dims().end());
    return true;
  }
  /// A one-element float constant or initializer.
  bool scalar(const std::string &value, double &out) {
    std::vector<float> v;
    if (!constantFloats(value, v) || v.size() != 1)
      return false;
    out = v[0];
    return true;
  }
  /// A one-element integer constant or initializer.
  bool scalarInt(const std::string &value, int64_t &out) {
    std::vector<int64_t> v;
    if (!constantInts(value, v) || v.size() != 1)
      return false;
    out = v[0];
    return true;
  }
  bool near(double a, double b) {
    return std::fabs(a - b) <= 1e-5 * std::max(1.0, std::fabs(b));
  }
  /// The operand of binary node `i` that is not `known`, or "".
  std::string other(int i, const std::string &known) {
    const auto &n = graph.node(i);
    if (n.input_size() != 2)
      return "";
    if (n.input(0) == known)
      return n.input(1);
    if (n.input(1) == known)
      return n.input(0);
    return "";
  }

  /// Replaces the chain: the fused node takes the last node's place.
  void fuse(const std::vector<int> &chain, int last, onnx::NodeProto fused) {
    for (int i : chain)
      if (i != last)
        dead.insert(i);
    fused.set_name(graph.node(last).name());
    *graph.mutable_node(last) = fused;
  }

  // x -> ReduceMean -> Sub -> Pow 2 -> ReduceMean -> Add eps -> Sqrt;
  // Sub / Sqrt -> Mul weight -> Add bias.
  bool tryLayerNorm(int mean);

  // x / sqrt(2) -> Erf -> + 1 -> x * . -> * 0.5.
  bool tryGelu(int div);

  // x -> Pow 2 -> ReduceMean(-1) -> Add eps -> Sqrt -> 1 / . (Div or
  // Reciprocal) -> x * . -> * weight (Hugging Face's LlamaRMSNorm).
  bool tryRmsNorm(int pow);

  // x * Sigmoid(x) (torch.nn.functional.silu).
  bool trySilu(int sigmoid);

  // Softmax(x - ReduceMax(x)) over the last axis (attention written as
  // `w - w.max(-1)`, torchaudio's wav2vec2): Softmax(x), which subtracts
  // the maximum itself; the shift's gradient sums to zero.
  bool tryShiftedSoftmax(int max);

  // Pad(x, zeros on H and W) -> AveragePool without pads: what torch
  // exports for avg_pool2d(padding=p, count_include_pad=True) (Inception-v3).
  // The zeros are cells the average counts: one AveragePool with those
  // pads, counting them.
  bool tryPaddedAveragePool(int pad);

  // MatMul(x, W [K, N]) (+ bias [N]) on any rank of x, W an initializer.
  bool tryLinear(int matmul);

  // Gather(table [V, H], integer indices) on axis 0.
  bool tryEmbedding(int gather);

  /// Reshape(v, [b, t, heads, d]) -> Transpose(perm): returns v and the
  /// Reshape / Transpose indices. `shared`: the transposed value may have
  /// other readers (a rotary embedding's three, all in its chain).
  bool splitHeads(const std::string &value, std::vector<int64_t> perm,
                  std::string &source, int &reshape, int &transpose,
                  int64_t &heads, bool shared = false);

  /// One operand of an attention, traced back from the [b, heads, s, d]
  /// value the score or mixing product reads to the [b, s, heads * d] value
  /// it was split from.
  struct HeadsSource {
    std::string value;      // before the split
    int64_t heads = 0;      // heads of `value`
    int64_t group = 1;      // query heads per head of `value` (repeat_kv)
    double theta = 0;       // base of its rotary embedding; 0: none
    std::vector<int> chain; // the nodes it passed
  };

  /// Hugging Face's repeat_kv: Unsqueeze(x, 2) -> Expand([b, kv, rep, s,
  /// d]) -> Reshape([b, kv * rep, s, d]); returns x and rep.
  bool repeatedHeads(const std::string &value, std::string &source,
                     int64_t &group, std::vector<int> &chain);

  /// q * cos + rotate_half(q) * sin with rotate_half(q) = Concat(-q[...,
  /// d/2:], q[..., :d/2]) and cos/sin constants [.., s, d] of the rotary
  /// angles p * theta^(-2i/d) (Llama's apply_rotary_pos_emb); returns q
  /// and theta, read from the constants and checked against every entry.
  bool rotaryOf(const std::string &value, std::string &source, double &theta,
                std::vector<int> &chain);

  /// Concat(Neg(Slice(q, d/2 : end)), Slice(q, 0 : d/2)) on the last axis.
  bool rotateHalf(int concat, const std::string &q, int64_t &half,
                  std::vector<int> &nodes);

  /// The last axis of a [b, heads, s, d] tensor.
  static bool lastOfFour(int64_t axis) { return axis == -1 || axis == 3; }

  /// Slice(q, [start], [end], [last axis] (, [1])).
  bool lastAxisSlice(int slice, const std::string &q, int64_t &start,
                     int64_t &end);

  /// cos/sin [.., s, d] (d = 2 * halfWidth) of the angles
  /// p * theta^(-2i/d), i = column mod d/2; theta from position 1.
  bool rotaryAngles(const std::string &cosName, const std::string &sinName,
                    int64_t halfWidth, double &theta);

  /// The operand of a product at `value`: [b, heads, s, d], or
  /// [b, heads, d, s] for a key (`key`). Passes, from the product back: a
  /// key's transpose, repeated heads, a rotary embedding, the head split.
  bool headsOf(const std::string &value, bool key, HeadsSource &out);

  // Q K^T / sqrt(d), causal mask (Where on a strictly upper Trilu), Softmax,
  // times V, heads merged back; Q and K possibly through a rotary
  // embedding, K and V through repeated heads (grouped-query attention).
  /// Whether `value` masks the scores above the diagonal (FuseAttention.cpp).
  bool isCausalMask(const std::string &value);
  bool tryAttention(int scores);
  /// Why tryAttention last gave up, once it had a MatMul of query and key
  /// heads (empty before).
  std::string missed;
  bool miss(const std::string &why) {
    missed = why;
    return false;
  }
  /// The Softmax of an attention-like chain from MatMul `scores`: through
  /// at most four scaling and masking nodes (Div, Mul, Add, Sub, Where,
  /// Cast) to a Softmax that a MatMul reads; -1 when there is none.
  int attentionSoftmax(int scores) {
    if (!is(scores, "MatMul"))
      return -1;
    int at = onlyUser(node(scores)->output(0));
    for (int step = 0; step < 5 && at >= 0; ++step) {
      if (is(at, "Softmax"))
        return is(onlyUser(node(at)->output(0)), "MatMul") ? at : -1;
      if (!is(at, "Div") && !is(at, "Mul") && !is(at, "Add") &&
          !is(at, "Sub") && !is(at, "Where") && !is(at, "Cast"))
        return -1;
      at = onlyUser(node(at)->output(0));
    }
    return -1;
  }

  onnx::GraphProto &graph;
  std::map<std::string, std::vector<int>> users;
  std::map<std::string, int> producer;
  std::set<std::string> outputs;
  std::map<std::string, const onnx::TensorProto *> initializers;
  std::set<int> dead;
};

} // namespace mlir::dtfm::fuse

#endif // DTFM_LIB_TARGET_ONNX_FUSER_H
