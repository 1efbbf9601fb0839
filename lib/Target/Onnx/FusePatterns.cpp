//===- FusePatterns.cpp - PyTorch's decompositions back into fused ops ----===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// PyTorch 1.13 exports LayerNorm, GELU, a Linear on a 3-D input, an
// embedding lookup and causal self-attention as chains of primitive ONNX
// ops. The planner wants them whole (their costs, their activations, one op
// per layer piece), so each chain is recognised and replaced by one node of
// a dtfm-only op type ("dtfm.LayerNorm", ...), placed where the chain ended;
// the importer maps those. A chain is fused only when every intermediate
// value is read inside it alone; anything left over is reported as
// unsupported like any other op.
//
//===----------------------------------------------------------------------===//

#include "FusePatterns.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
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
      if (!dead.count(i) && (tryLayerNorm(i) || tryGelu(i)))
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
    return nullptr;
  }
  /// A one-element float constant or initializer.
  bool scalar(const std::string &value, double &out) {
    const onnx::TensorProto *t = tensorOf(value);
    if (!t || t->data_type() != onnx::TensorProto::FLOAT)
      return false;
    int64_t n = 1;
    for (int64_t d : t->dims())
      n *= d;
    if (n != 1)
      return false;
    float v;
    if (t->has_raw_data() && t->raw_data().size() == 4)
      std::memcpy(&v, t->raw_data().data(), 4);
    else if (t->float_data_size() == 1)
      v = t->float_data(0);
    else
      return false;
    out = v;
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

  // MatMul(x, W [K, N]) + bias [N] on any rank of x.
  bool tryLinear(int matmul) {
    if (!is(matmul, "MatMul"))
      return false;
    const onnx::TensorProto *w = tensorOf(node(matmul)->input(1));
    if (!w || w->dims_size() != 2 || !initializers.count(node(matmul)->input(1)))
      return false;
    int add = onlyUser(node(matmul)->output(0));
    if (!is(add, "Add"))
      return false;
    std::string bias = other(add, node(matmul)->output(0));
    const onnx::TensorProto *b = initializers.count(bias) ? initializers[bias]
                                                          : nullptr;
    if (!b || b->dims_size() != 1 || b->dims(0) != w->dims(1))
      return false;
    onnx::NodeProto fused;
    fused.set_op_type("dtfm.Linear");
    fused.add_input(node(matmul)->input(0));
    fused.add_input(node(matmul)->input(1));
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
  /// Reshape / Transpose indices.
  bool splitHeads(const std::string &value, std::vector<int64_t> perm,
                  std::string &source, int &reshape, int &transpose,
                  int64_t &heads) {
    transpose = producerOf(value);
    if (!is(transpose, "Transpose") || ints(transpose, "perm") != perm ||
        onlyUser(value) < 0)
      return false;
    reshape = producerOf(node(transpose)->input(0));
    if (!is(reshape, "Reshape") || onlyUser(node(reshape)->output(0)) != transpose)
      return false;
    const onnx::TensorProto *shape = tensorOf(node(reshape)->input(1));
    if (!shape || shape->data_type() != onnx::TensorProto::INT64)
      return false;
    std::vector<int64_t> dims;
    if (shape->has_raw_data()) {
      dims.resize(shape->raw_data().size() / 8);
      std::memcpy(dims.data(), shape->raw_data().data(), dims.size() * 8);
    } else {
      dims.assign(shape->int64_data().begin(), shape->int64_data().end());
    }
    if (dims.size() != 4)
      return false;
    heads = dims[2];
    source = node(reshape)->input(0);
    return true;
  }

  // Q K^T / sqrt(d), causal mask (Where on a strictly upper Trilu), Softmax,
  // times V, heads merged back.
  bool tryAttention(int scores) {
    if (!is(scores, "MatMul"))
      return false;
    std::string q, k, v;
    int rq, tq, rk, tk, rv, tv;
    int64_t hq, hk, hv;
    if (!splitHeads(node(scores)->input(0), {0, 2, 1, 3}, q, rq, tq, hq) ||
        !splitHeads(node(scores)->input(1), {0, 2, 3, 1}, k, rk, tk, hk))
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
    double offset;
    const onnx::AttributeProto *upper = trilu >= 0 ? attr(trilu, "upper") : nullptr;
    if (!is(trilu, "Trilu") || !upper || upper->i() != 1 ||
        node(trilu)->input_size() < 2)
      return false;
    const onnx::TensorProto *kTensor = tensorOf(node(trilu)->input(1));
    int64_t kValue = 0;
    if (!kTensor || kTensor->data_type() != onnx::TensorProto::INT64)
      return false;
    if (kTensor->has_raw_data() && kTensor->raw_data().size() == 8)
      std::memcpy(&kValue, kTensor->raw_data().data(), 8);
    else if (kTensor->int64_data_size() == 1)
      kValue = kTensor->int64_data(0);
    if (kValue != 1)
      return false;
    (void)offset;
    int softmax = onlyUser(node(where)->output(0));
    const onnx::AttributeProto *axis = softmax >= 0 ? attr(softmax, "axis") : nullptr;
    if (!is(softmax, "Softmax") || (axis && axis->i() != -1 && axis->i() != 3))
      return false;
    int mixed = onlyUser(node(softmax)->output(0));
    if (!is(mixed, "MatMul") || node(mixed)->input(0) != node(softmax)->output(0) ||
        !splitHeads(node(mixed)->input(1), {0, 2, 1, 3}, v, rv, tv, hv))
      return false;
    int back = onlyUser(node(mixed)->output(0));
    if (!is(back, "Transpose") ||
        ints(back, "perm") != std::vector<int64_t>{0, 2, 1, 3})
      return false;
    int merged = onlyUser(node(back)->output(0));
    if (!is(merged, "Reshape") || hq != hk || hk != hv)
      return false;
    onnx::NodeProto fused;
    fused.set_op_type("dtfm.CausalAttention");
    fused.add_input(q);
    fused.add_input(k);
    fused.add_input(v);
    fused.add_output(node(merged)->output(0));
    auto *h = fused.add_attribute();
    h->set_name("num_heads");
    h->set_type(onnx::AttributeProto::INT);
    h->set_i(hq);
    auto *d = fused.add_attribute();
    d->set_name("divisor");
    d->set_type(onnx::AttributeProto::FLOAT);
    d->set_f(static_cast<float>(divisor));
    std::vector<int> chain = {rq, tq, rk, tk, rv, tv, scores, scale, where,
                              softmax, mixed, back, merged};
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
