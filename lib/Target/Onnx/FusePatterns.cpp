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
// reported as unsupported like any other op. The fuser and its helpers are
// in Fuser.h, the attention patterns in FuseAttention.cpp.
//
//===----------------------------------------------------------------------===//

#include "FusePatterns.h"
#include "Fuser.h"

#include <onnx/onnx_pb.h>

#include <set>

using namespace mlir::dtfm::fuse;
bool Fuser::tryLayerNorm(int mean) {
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
  // dtfm.layernorm takes a gain and a bias per element of the last axis:
  // a chain scaling per channel (GroupNorm(C, C) on [B, C, T] multiplies by
  // w[:, None]) stays unfused, its ops imported one by one.
  const onnx::TensorProto *gain = tensorOf(weight), *shiftBy = tensorOf(bias);
  if (!gain || !shiftBy || gain->dims_size() != 1 ||
      shiftBy->dims_size() != 1 || gain->dims(0) != shiftBy->dims(0))
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

bool Fuser::tryGelu(int div) {
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

bool Fuser::tryRmsNorm(int pow) {
  double two, eps, one;
  if (!is(pow, "Pow") || !scalar(node(pow)->input(1), two) || !near(two, 2))
    return false;
  std::string x = node(pow)->input(0);
  int mean = onlyUser(node(pow)->output(0));
  if (!is(mean, "ReduceMean") || ints(mean, "axes") != std::vector<int64_t>{-1})
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

bool Fuser::trySilu(int sigmoid) {
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

bool Fuser::tryPaddedAveragePool(int pad) {
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
  if (!is(pool, "AveragePool") || node(pool)->input(0) != node(pad)->output(0))
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

bool Fuser::tryShiftedSoftmax(int max) {
  if (!is(max, "ReduceMax") || ints(max, "axes") != std::vector<int64_t>{-1})
    return false;
  if (const onnx::AttributeProto *keep = attr(max, "keepdims");
      keep && keep->i() != 1)
    return false;
  std::string x = node(max)->input(0);
  int sub = onlyUser(node(max)->output(0));
  if (!is(sub, "Sub") || node(sub)->input(0) != x ||
      node(sub)->input(1) != node(max)->output(0))
    return false;
  int softmax = onlyUser(node(sub)->output(0));
  const onnx::AttributeProto *axis =
      softmax >= 0 ? attr(softmax, "axis") : nullptr;
  if (!is(softmax, "Softmax") || !axis || axis->i() != -1)
    return false;
  onnx::NodeProto fused;
  fused.set_op_type("Softmax");
  fused.add_input(x);
  fused.add_output(node(softmax)->output(0));
  *fused.add_attribute() = *axis;
  fuse({max, sub, softmax}, softmax, fused);
  return true;
}

bool Fuser::tryLinear(int matmul) {
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
  std::string bias = is(add, "Add") ? other(add, node(matmul)->output(0)) : "";
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

bool Fuser::tryEmbedding(int gather) {
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

int mlir::dtfm::fuseOnnxPatterns(onnx::GraphProto &graph,
                                  std::vector<std::string> *remarks) {
  Fuser fuser(graph);
  int fused = fuser.run();
  if (remarks)
    *remarks = std::move(fuser.remarks);
  return fused;
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
