//===- FusePatterns.cpp - PyTorch's decompositions back into fused ops ----===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// PyTorch 1.13 exports LayerNorm, GELU, a Linear on a 3-D input, an
// embedding lookup and causal self-attention -- and Llama's RMSNorm, SiLU,
// rotary embedding and grouped-query attention (repeated key/value heads) --
// as chains of primitive ONNX ops. The planner wants them whole (their costs,
// their activations, one op per layer piece), so each chain is recognised and
// replaced by one node of a dtfm-only op type ("dtfm.LayerNorm", ...), placed
// where the chain ended; the importer maps those. A chain is fused only when
// every intermediate value is read inside it alone; anything left over is
// reported as unsupported like any other op.
//
//===----------------------------------------------------------------------===//

#include "FusePatterns.h"
#include "FoldConstants.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace {

class Fuser {
public:
  Fuser(onnx::GraphProto &graph) : graph(graph) {}

  int run() {
    int fused = 0;
    index();
    for (int i = 0; i < graph.node_size(); ++i)
      if (!dead.count(i) && tryAttention(i))
        ++fused;
    for (int i = 0; i < graph.node_size(); ++i)
      if (!dead.count(i) && (tryLayerNorm(i) || tryGelu(i) || tryRmsNorm(i) ||
                             trySilu(i) || tryPaddedAveragePool(i)))
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
  bool near(double a, double b) { return std::fabs(a - b) <= 1e-5 * std::max(1.0, std::fabs(b)); }
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
  bool tryLayerNorm(int mean) {
    if (!is(mean, "ReduceMean") || ints(mean, "axes") != std::vector<int64_t>{-1})
      return false;
    std::string x = node(mean)->input(0);
    int sub = onlyUser(node(mean)->output(0));
    if (!is(sub, "Sub") || node(sub)->input(0) != x)
      return false;
    const auto &centred = users[node(sub)->output(0)];
    if (centred.size() != 2)
      return false;
    int pow = is(centred[0], "Pow") ? centred[0] : centred[1];
    int div = pow == centred[0] ? centred[1] : centred[0];
    double two, eps;
    if (!is(pow, "Pow") || !scalar(node(pow)->input(1), two) || !near(two, 2))
      return false;
    int var = onlyUser(node(pow)->output(0));
    if (!is(var, "ReduceMean") || ints(var, "axes") != std::vector<int64_t>{-1})
      return false;
    int add = onlyUser(node(var)->output(0));
    if (!is(add, "Add") || !scalar(other(add, node(var)->output(0)), eps))
      return false;
    int sqrt = onlyUser(node(add)->output(0));
    if (!is(sqrt, "Sqrt") || onlyUser(node(sqrt)->output(0)) != div ||
        !is(div, "Div") || node(div)->input(0) != node(sub)->output(0))
      return false;
    int mul = onlyUser(node(div)->output(0));
    if (!is(mul, "Mul"))
      return false;
    std::string weight = other(mul, node(div)->output(0));
    int shift = onlyUser(node(mul)->output(0));
    if (!is(shift, "Add"))
      return false;
    std::string bias = other(shift, node(mul)->output(0));
    if (weight.empty() || bias.empty())
      return false;
    onnx::NodeProto fused;
    fused.set_op_type("dtfm.LayerNorm");
    fused.add_input(x);
    fused.add_input(weight);
    fused.add_input(bias);
    fused.add_output(node(shift)->output(0));
    auto *a = fused.add_attribute();
    a->set_name("epsilon");
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(static_cast<float>(eps));
    fuse({mean, sub, pow, var, add, sqrt, div, mul, shift}, shift, fused);
    return true;
  }

  // x / sqrt(2) -> Erf -> + 1 -> x * . -> * 0.5.
  bool tryGelu(int div) {
    double c, one, half;
    if (!is(div, "Div") || !scalar(node(div)->input(1), c) ||
        !near(c, std::sqrt(2.0)))
      return false;
    std::string x = node(div)->input(0);
    int erf = onlyUser(node(div)->output(0));
    if (!is(erf, "Erf"))
      return false;
    int add = onlyUser(node(erf)->output(0));
    if (!is(add, "Add") || !scalar(other(add, node(erf)->output(0)), one) ||
        !near(one, 1))
      return false;
    int mul = onlyUser(node(add)->output(0));
    if (!is(mul, "Mul") || other(mul, node(add)->output(0)) != x)
      return false;
    int scale = onlyUser(node(mul)->output(0));
    if (!is(scale, "Mul") || !scalar(other(scale, node(mul)->output(0)), half) ||
        !near(half, 0.5))
      return false;
    onnx::NodeProto fused;
    fused.set_op_type("dtfm.Gelu");
    fused.add_input(x);
    fused.add_output(node(scale)->output(0));
    fuse({div, erf, add, mul, scale}, scale, fused);
    return true;
  }

  // x -> Pow 2 -> ReduceMean(-1) -> Add eps -> Sqrt -> 1 / . (Div or
  // Reciprocal) -> x * . -> * weight (Hugging Face's LlamaRMSNorm).
  bool tryRmsNorm(int pow) {
    double two, eps, one;
    if (!is(pow, "Pow") || !scalar(node(pow)->input(1), two) || !near(two, 2))
      return false;
    std::string x = node(pow)->input(0);
    int mean = onlyUser(node(pow)->output(0));
    if (!is(mean, "ReduceMean") ||
        ints(mean, "axes") != std::vector<int64_t>{-1})
      return false;
    int add = onlyUser(node(mean)->output(0));
    if (!is(add, "Add") || !scalar(other(add, node(mean)->output(0)), eps))
      return false;
    int sqrt = onlyUser(node(add)->output(0));
    if (!is(sqrt, "Sqrt"))
      return false;
    int inverse = onlyUser(node(sqrt)->output(0));
    bool reciprocal = is(inverse, "Reciprocal");
    if (!reciprocal && !(is(inverse, "Div") &&
                         node(inverse)->input(1) == node(sqrt)->output(0) &&
                         scalar(node(inverse)->input(0), one) && near(one, 1)))
      return false;
    int scale = onlyUser(node(inverse)->output(0));
    if (!is(scale, "Mul") || other(scale, node(inverse)->output(0)) != x)
      return false;
    int gain = onlyUser(node(scale)->output(0));
    if (!is(gain, "Mul"))
      return false;
    std::string weight = other(gain, node(scale)->output(0));
    if (weight.empty() || !initializers.count(weight) ||
        initializers[weight]->dims_size() != 1)
      return false;
    onnx::NodeProto fused;
    fused.set_op_type("dtfm.RmsNorm");
    fused.add_input(x);
    fused.add_input(weight);
    fused.add_output(node(gain)->output(0));
    auto *a = fused.add_attribute();
    a->set_name("epsilon");
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(static_cast<float>(eps));
    fuse({pow, mean, add, sqrt, inverse, scale, gain}, gain, fused);
    return true;
  }

  // x * Sigmoid(x) (torch.nn.functional.silu).
  bool trySilu(int sigmoid) {
    if (!is(sigmoid, "Sigmoid"))
      return false;
    std::string x = node(sigmoid)->input(0);
    int mul = onlyUser(node(sigmoid)->output(0));
    if (!is(mul, "Mul") || other(mul, node(sigmoid)->output(0)) != x)
      return false;
    onnx::NodeProto fused;
    fused.set_op_type("dtfm.Silu");
    fused.add_input(x);
    fused.add_output(node(mul)->output(0));
    fuse({sigmoid, mul}, mul, fused);
    return true;
  }

  // Pad(x, zeros on H and W) -> AveragePool without pads: what torch
  // exports for avg_pool2d(padding=p, count_include_pad=True) (Inception-v3).
  // The zeros are cells the average counts: one AveragePool with those
  // pads, counting them.
  bool tryPaddedAveragePool(int pad) {
    if (!is(pad, "Pad"))
      return false;
    const onnx::AttributeProto *mode = attr(pad, "mode");
    if (mode && mode->s() != "constant")
      return false;
    std::vector<int64_t> pads = ints(pad, "pads");
    if (node(pad)->input_size() > 1 && !node(pad)->input(1).empty() &&
        !constantInts(node(pad)->input(1), pads))
      return false;
    double value = 0;
    if (node(pad)->input_size() > 2 && !node(pad)->input(2).empty() &&
        !scalar(node(pad)->input(2), value))
      return false;
    // [n, c, h, w] begins then ends: only h and w padded.
    if (value != 0 || pads.size() != 8 || pads[0] || pads[1] || pads[4] ||
        pads[5] ||
        std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p < 0; }))
      return false;
    int pool = onlyUser(node(pad)->output(0));
    if (!is(pool, "AveragePool") ||
        node(pool)->input(0) != node(pad)->output(0))
      return false;
    std::vector<int64_t> poolPads = ints(pool, "pads");
    const onnx::AttributeProto *ceil = attr(pool, "ceil_mode");
    const onnx::AttributeProto *autoPad = attr(pool, "auto_pad");
    if ((ceil && ceil->i() != 0) ||
        (autoPad && autoPad->s() != "NOTSET" && !autoPad->s().empty()) ||
        std::any_of(poolPads.begin(), poolPads.end(),
                    [](int64_t p) { return p != 0; }))
      return false;
    onnx::NodeProto fused = *node(pool);
    fused.set_input(0, node(pad)->input(0));
    fused.clear_attribute();
    for (const auto &a : node(pool)->attribute())
      if (a.name() != "pads" && a.name() != "count_include_pad" &&
          a.name() != "auto_pad")
        *fused.add_attribute() = a;
    auto *p = fused.add_attribute();
    p->set_name("pads");
    p->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : {pads[2], pads[3], pads[6], pads[7]})
      p->add_ints(v);
    auto *count = fused.add_attribute();
    count->set_name("count_include_pad");
    count->set_type(onnx::AttributeProto::INT);
    count->set_i(1);
    fuse({pad, pool}, pool, fused);
    return true;
  }

  // MatMul(x, W [K, N]) (+ bias [N]) on any rank of x, W an initializer.
  bool tryLinear(int matmul) {
    if (!is(matmul, "MatMul"))
      return false;
    const onnx::TensorProto *w = tensorOf(node(matmul)->input(1));
    if (!w || w->dims_size() != 2 || !initializers.count(node(matmul)->input(1)))
      return false;
    onnx::NodeProto fused;
    fused.set_op_type("dtfm.Linear");
    fused.add_input(node(matmul)->input(0));
    fused.add_input(node(matmul)->input(1));
    int add = onlyUser(node(matmul)->output(0));
    std::string bias =
        is(add, "Add") ? other(add, node(matmul)->output(0)) : "";
    const onnx::TensorProto *b =
        initializers.count(bias) ? initializers[bias] : nullptr;
    if (!b || b->dims_size() != 1 || b->dims(0) != w->dims(1)) {
      // No bias (torch.nn.Linear(..., bias=False)).
      fused.add_output(node(matmul)->output(0));
      fuse({matmul}, matmul, fused);
      return true;
    }
    fused.add_input(bias);
    fused.add_output(node(add)->output(0));
    fuse({matmul, add}, add, fused);
    return true;
  }

  // Gather(table [V, H], integer indices) on axis 0.
  bool tryEmbedding(int gather) {
    if (!is(gather, "Gather"))
      return false;
    const onnx::AttributeProto *axis = attr(gather, "axis");
    if (axis && axis->i() != 0)
      return false;
    if (!initializers.count(node(gather)->input(0)) ||
        initializers[node(gather)->input(0)]->dims_size() != 2)
      return false;
    onnx::NodeProto fused;
    fused.set_op_type("dtfm.Embedding");
    fused.add_input(node(gather)->input(1));
    fused.add_input(node(gather)->input(0));
    fused.add_output(node(gather)->output(0));
    fuse({gather}, gather, fused);
    return true;
  }

  /// Reshape(v, [b, t, heads, d]) -> Transpose(perm): returns v and the
  /// Reshape / Transpose indices. `shared`: the transposed value may have
  /// other readers (a rotary embedding's three, all in its chain).
  bool splitHeads(const std::string &value, std::vector<int64_t> perm,
                  std::string &source, int &reshape, int &transpose,
                  int64_t &heads, bool shared = false) {
    transpose = producerOf(value);
    if (!is(transpose, "Transpose") || ints(transpose, "perm") != perm ||
        (!shared && onlyUser(value) < 0))
      return false;
    reshape = producerOf(node(transpose)->input(0));
    if (!is(reshape, "Reshape") || onlyUser(node(reshape)->output(0)) != transpose)
      return false;
    std::vector<int64_t> dims;
    if (!constantInts(node(reshape)->input(1), dims) || dims.size() != 4)
      return false;
    heads = dims[2];
    source = node(reshape)->input(0);
    return true;
  }

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
                     int64_t &group, std::vector<int> &chain) {
    int reshape = producerOf(value);
    if (!is(reshape, "Reshape"))
      return false;
    int expand = producerOf(node(reshape)->input(0));
    if (!is(expand, "Expand") || onlyUser(node(expand)->output(0)) != reshape)
      return false;
    int unsqueeze = producerOf(node(expand)->input(0));
    if (!is(unsqueeze, "Unsqueeze") ||
        onlyUser(node(unsqueeze)->output(0)) != expand)
      return false;
    std::vector<int64_t> axes = ints(unsqueeze, "axes"), target, merged;
    if (axes.empty() && node(unsqueeze)->input_size() > 1 &&
        !constantInts(node(unsqueeze)->input(1), axes))
      return false;
    if (axes != std::vector<int64_t>{2} ||
        !constantInts(node(expand)->input(1), target) || target.size() != 5 ||
        !constantInts(node(reshape)->input(1), merged) || merged.size() != 4 ||
        target[2] < 1 || merged[1] != target[1] * target[2])
      return false;
    source = node(unsqueeze)->input(0);
    group = target[2];
    chain.insert(chain.end(), {reshape, expand, unsqueeze});
    return true;
  }

  /// q * cos + rotate_half(q) * sin with rotate_half(q) = Concat(-q[...,
  /// d/2:], q[..., :d/2]) and cos/sin constants [.., s, d] of the rotary
  /// angles p * theta^(-2i/d) (Llama's apply_rotary_pos_emb); returns q
  /// and theta, read from the constants and checked against every entry.
  bool rotaryOf(const std::string &value, std::string &source, double &theta,
                std::vector<int> &chain) {
    int add = producerOf(value);
    if (!is(add, "Add") || node(add)->input_size() != 2)
      return false;
    for (int order = 0; order < 2; ++order) {
      int cosMul = producerOf(node(add)->input(order));
      int sinMul = producerOf(node(add)->input(1 - order));
      if (!is(cosMul, "Mul") || !is(sinMul, "Mul") ||
          onlyUser(node(cosMul)->output(0)) != add ||
          onlyUser(node(sinMul)->output(0)) != add)
        continue;
      for (int c = 0; c < 2; ++c) {
        std::string q = node(cosMul)->input(c),
                    cosine = node(cosMul)->input(1 - c);
        for (int r = 0; r < 2; ++r) {
          int concat = producerOf(node(sinMul)->input(r));
          std::string sine = node(sinMul)->input(1 - r);
          std::vector<int> nodes;
          int64_t half = 0;
          if (is(concat, "Concat") &&
              onlyUser(node(concat)->output(0)) == sinMul &&
              rotateHalf(concat, q, half, nodes) &&
              rotaryAngles(cosine, sine, half, theta)) {
            source = q;
            chain.insert(chain.end(), {add, cosMul, sinMul, concat});
            chain.insert(chain.end(), nodes.begin(), nodes.end());
            return true;
          }
        }
      }
    }
    return false;
  }

  /// Concat(Neg(Slice(q, d/2 : end)), Slice(q, 0 : d/2)) on the last axis.
  bool rotateHalf(int concat, const std::string &q, int64_t &half,
                  std::vector<int> &nodes) {
    const onnx::AttributeProto *axis = attr(concat, "axis");
    if (!axis || !lastOfFour(axis->i()) || node(concat)->input_size() != 2)
      return false;
    int neg = producerOf(node(concat)->input(0));
    if (!is(neg, "Neg") || onlyUser(node(neg)->output(0)) != concat)
      return false;
    int upper = producerOf(node(neg)->input(0));
    int lower = producerOf(node(concat)->input(1));
    int64_t upperStart, upperEnd, lowerStart, lowerEnd;
    if (!lastAxisSlice(upper, q, upperStart, upperEnd) ||
        !lastAxisSlice(lower, q, lowerStart, lowerEnd) ||
        onlyUser(node(upper)->output(0)) != neg ||
        onlyUser(node(lower)->output(0)) != concat || lowerStart != 0 ||
        upperStart != lowerEnd || upperStart < 1 || upperEnd < upperStart)
      return false;
    // The upper half runs to the end (checked against cos/sin's width).
    half = upperStart;
    nodes = {neg, upper, lower};
    return true;
  }

  /// The last axis of a [b, heads, s, d] tensor.
  static bool lastOfFour(int64_t axis) { return axis == -1 || axis == 3; }

  /// Slice(q, [start], [end], [last axis] (, [1])).
  bool lastAxisSlice(int slice, const std::string &q, int64_t &start,
                     int64_t &end) {
    if (!is(slice, "Slice") || node(slice)->input(0) != q ||
        node(slice)->input_size() < 4)
      return false;
    int64_t axis, step = 1;
    if (!scalarInt(node(slice)->input(1), start) ||
        !scalarInt(node(slice)->input(2), end) ||
        !scalarInt(node(slice)->input(3), axis) || !lastOfFour(axis) ||
        (node(slice)->input_size() > 4 &&
         !scalarInt(node(slice)->input(4), step)) ||
        step != 1)
      return false;
    return true;
  }

  /// cos/sin [.., s, d] (d = 2 * halfWidth) of the angles
  /// p * theta^(-2i/d), i = column mod d/2; theta from position 1.
  bool rotaryAngles(const std::string &cosName, const std::string &sinName,
                    int64_t halfWidth, double &theta) {
    std::vector<float> cosine, sine;
    std::vector<int64_t> dims, sinDims;
    if (!constantFloats(cosName, cosine, &dims) ||
        !constantFloats(sinName, sine, &sinDims) || dims != sinDims ||
        dims.size() < 2)
      return false;
    int64_t d = dims.back(), seq = dims[dims.size() - 2], half = d / 2;
    if (d != 2 * halfWidth || static_cast<int64_t>(cosine.size()) != seq * d)
      return false;
    theta = 10000; // any base turns a head of 2 alike
    if (half > 1 && seq > 1) {
      double angle = std::atan2(sine[d + 1], cosine[d + 1]); // p 1, i 1
      if (!(angle > 0))
        return false;
      theta = std::pow(angle, -static_cast<double>(d) / 2);
      // Models use whole bases (10000, 500000); float32 angles read back
      // give them to about 1e-6. The check below holds either way.
      if (std::fabs(std::round(theta) - theta) <= 1e-4 * theta)
        theta = std::round(theta);
    }
    if (!(theta > 1 && std::isfinite(theta)))
      return false;
    for (int64_t p = 0; p < seq; ++p)
      for (int64_t j = 0; j < d; ++j) {
        double angle = static_cast<double>(p) *
                       std::pow(theta, -2.0 * static_cast<double>(j % half) /
                                           static_cast<double>(d));
        if (std::fabs(cosine[p * d + j] - std::cos(angle)) > 1e-4 ||
            std::fabs(sine[p * d + j] - std::sin(angle)) > 1e-4)
          return false;
      }
    return true;
  }

  /// The operand of a product at `value`: [b, heads, s, d], or
  /// [b, heads, d, s] for a key (`key`). Passes, from the product back: a
  /// key's transpose, repeated heads, a rotary embedding, the head split.
  bool headsOf(const std::string &value, bool key, HeadsSource &out) {
    int reshape, transpose;
    if (key && splitHeads(value, {0, 2, 3, 1}, out.value, reshape, transpose,
                          out.heads)) { // GPT-2: K split straight to K^T
      out.chain.insert(out.chain.end(), {reshape, transpose});
      return true;
    }
    std::string current = value;
    if (key) {
      int swap = producerOf(current);
      if (!is(swap, "Transpose") ||
          ints(swap, "perm") != std::vector<int64_t>{0, 1, 3, 2} ||
          onlyUser(current) < 0)
        return false;
      out.chain.push_back(swap);
      current = node(swap)->input(0);
    }
    std::string repeated;
    if (repeatedHeads(current, repeated, out.group, out.chain))
      current = repeated;
    std::string rotated;
    bool rotary = rotaryOf(current, rotated, out.theta, out.chain);
    if (rotary)
      current = rotated;
    if (!splitHeads(current, {0, 2, 1, 3}, out.value, reshape, transpose,
                    out.heads, rotary))
      return false;
    out.chain.insert(out.chain.end(), {reshape, transpose});
    return true;
  }

  // Q K^T / sqrt(d), causal mask (Where on a strictly upper Trilu), Softmax,
  // times V, heads merged back; Q and K possibly through a rotary
  // embedding, K and V through repeated heads (grouped-query attention).
  bool tryAttention(int scores) {
    if (!is(scores, "MatMul"))
      return false;
    HeadsSource q, k, v;
    if (!headsOf(node(scores)->input(0), false, q) || q.group != 1 ||
        !headsOf(node(scores)->input(1), true, k))
      return false;
    int scale = onlyUser(node(scores)->output(0));
    double divisor;
    if (!is(scale, "Div") || !scalar(node(scale)->input(1), divisor))
      return false;
    int where = onlyUser(node(scale)->output(0));
    double fill;
    if (!is(where, "Where") || node(where)->input(2) != node(scale)->output(0) ||
        !scalar(node(where)->input(1), fill) || !std::isinf(fill) || fill > 0)
      return false;
    int cast = producerOf(node(where)->input(0));
    int trilu = is(cast, "Cast") ? producerOf(node(cast)->input(0)) : -1;
    const onnx::AttributeProto *upper = trilu >= 0 ? attr(trilu, "upper") : nullptr;
    int64_t diagonal = 0;
    if (!is(trilu, "Trilu") || !upper || upper->i() != 1 ||
        node(trilu)->input_size() < 2 ||
        !scalarInt(node(trilu)->input(1), diagonal) || diagonal != 1)
      return false;
    int softmax = onlyUser(node(where)->output(0));
    const onnx::AttributeProto *axis = softmax >= 0 ? attr(softmax, "axis") : nullptr;
    if (!is(softmax, "Softmax") || (axis && axis->i() != -1 && axis->i() != 3))
      return false;
    int mixed = onlyUser(node(softmax)->output(0));
    if (!is(mixed, "MatMul") ||
        node(mixed)->input(0) != node(softmax)->output(0) ||
        !headsOf(node(mixed)->input(1), false, v) || v.theta != 0)
      return false;
    int back = onlyUser(node(mixed)->output(0));
    if (!is(back, "Transpose") ||
        ints(back, "perm") != std::vector<int64_t>{0, 2, 1, 3})
      return false;
    int merged = onlyUser(node(back)->output(0));
    // Every query head reads one key/value head: as many key and value
    // heads, each repeated to the query's count.
    if (!is(merged, "Reshape") || k.heads != v.heads || k.group != v.group ||
        k.heads * k.group != q.heads)
      return false;
    onnx::NodeProto fused;
    fused.set_op_type("dtfm.CausalAttention");
    fused.add_input(q.value);
    fused.add_input(k.value);
    fused.add_input(v.value);
    fused.add_output(node(merged)->output(0));
    auto addInt = [&](const char *name, int64_t value) {
      auto *a = fused.add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(value);
    };
    auto addFloat = [&](const char *name, double value) {
      auto *a = fused.add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto::FLOAT);
      a->set_f(static_cast<float>(value));
    };
    addInt("num_heads", q.heads);
    if (k.heads != q.heads)
      addInt("num_kv_heads", k.heads);
    addFloat("divisor", divisor);
    if (q.theta != 0)
      addFloat("rotary_query_theta", q.theta);
    if (k.theta != 0)
      addFloat("rotary_key_theta", k.theta);
    std::vector<int> chain = {scores, scale, where, softmax,
                              mixed,  back,  merged};
    for (const HeadsSource *source : {&q, &k, &v})
      chain.insert(chain.end(), source->chain.begin(), source->chain.end());
    // The mask's own nodes go too when nothing else reads them.
    if (onlyUser(node(cast)->output(0)) == where) {
      chain.push_back(cast);
      if (onlyUser(node(trilu)->output(0)) == cast)
        chain.push_back(trilu);
    }
    fuse(chain, merged, fused);
    return true;
  }

  onnx::GraphProto &graph;
  std::map<std::string, std::vector<int>> users;
  std::map<std::string, int> producer;
  std::set<std::string> outputs;
  std::map<std::string, const onnx::TensorProto *> initializers;
  std::set<int> dead;
};

} // namespace

int mlir::dtfm::fuseOnnxPatterns(onnx::GraphProto &graph) {
  return Fuser(graph).run();
}

bool mlir::dtfm::lowerEinsums(onnx::GraphProto &graph, std::string &error) {
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (const onnx::NodeProto &node : graph.node()) {
    if (node.op_type() != "Einsum") {
      *nodes.Add() = node;
      continue;
    }
    std::string equation;
    for (const auto &a : node.attribute())
      if (a.name() == "equation")
        for (char ch : a.s())
          if (ch != ' ')
            equation += ch;
    size_t comma = equation.find(','), arrow = equation.find("->");
    std::string lhs, rhs, out;
    if (comma != std::string::npos && arrow != std::string::npos &&
        comma < arrow && node.input_size() == 2 && node.output_size() == 1) {
      lhs = equation.substr(0, comma);
      rhs = equation.substr(comma + 1, arrow - comma - 1);
      out = equation.substr(arrow + 2);
    }
    size_t rank = lhs.size();
    bool product = rank >= 2 && rhs.size() == rank && out.size() == rank &&
                   lhs.find('.') == std::string::npos &&
                   lhs.compare(0, rank - 2, rhs, 0, rank - 2) == 0 &&
                   lhs.compare(0, rank - 2, out, 0, rank - 2) == 0 &&
                   std::set<char>(lhs.begin(), lhs.end()).size() == rank;
    char i = product ? lhs[rank - 2] : 0, k = product ? lhs[rank - 1] : 0;
    char j = product ? out[rank - 1] : 0;
    bool plain = product && out[rank - 2] == i && rhs[rank - 2] == k &&
                 rhs[rank - 1] == j;
    bool transposed = product && out[rank - 2] == i && rhs[rank - 1] == k &&
                      rhs[rank - 2] == j;
    if (!(plain || transposed) || j == i || j == k ||
        lhs.find(j) != std::string::npos) {
      error = "node '" + node.name() + "' (Einsum): einsum '" + equation +
              "' is not a batched matrix product (supported: ...ik,...kj->"
              "...ij and ...ik,...jk->...ij)";
      return false;
    }
    onnx::NodeProto matmul;
    matmul.set_op_type("MatMul");
    matmul.set_name(node.name());
    matmul.add_input(node.input(0));
    if (transposed) {
      onnx::NodeProto *swap = nodes.Add();
      swap->set_op_type("Transpose");
      swap->set_name(node.name() + "_rhs_transposed"); // in its scope
      swap->add_input(node.input(1));
      swap->add_output(node.output(0) + "/rhs_transposed");
      auto *perm = swap->add_attribute();
      perm->set_name("perm");
      perm->set_type(onnx::AttributeProto::INTS);
      for (size_t d = 0; d < rank; ++d)
        perm->add_ints(d + 2 < rank ? d
                                    : (d == rank - 2 ? rank - 1 : rank - 2));
      matmul.add_input(swap->output(0));
    } else {
      matmul.add_input(node.input(1));
    }
    matmul.add_output(node.output(0));
    *nodes.Add() = matmul;
  }
  graph.mutable_node()->Swap(&nodes);
  return true;
}
