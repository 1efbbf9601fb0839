//===- FuseAttention.cpp - PyTorch's attention back into one op -----------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The fuser's attention patterns (Fuser.h): causal self-attention as
// PyTorch 1.13 exports GPT-2's, and Llama's with its rotary embedding and
// grouped-query attention's repeated key/value heads, traced back from the
// score product to the values the heads were split from.
//
//===----------------------------------------------------------------------===//

#include "Fuser.h"

using namespace mlir::dtfm::fuse;

bool Fuser::splitHeads(const std::string &value, std::vector<int64_t> perm,
                       std::string &source, int &reshape, int &transpose,
                       int64_t &heads, bool shared) {
  transpose = producerOf(value);
  if (!is(transpose, "Transpose") || ints(transpose, "perm") != perm ||
      (!shared && onlyUser(value) < 0))
    return false;
  reshape = producerOf(node(transpose)->input(0));
  if (!is(reshape, "Reshape") ||
      onlyUser(node(reshape)->output(0)) != transpose)
    return false;
  std::vector<int64_t> dims;
  if (!constantInts(node(reshape)->input(1), dims) || dims.size() != 4)
    return false;
  heads = dims[2];
  source = node(reshape)->input(0);
  return true;
}

bool Fuser::repeatedHeads(const std::string &value, std::string &source,
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

bool Fuser::rotaryOf(const std::string &value, std::string &source,
                     double &theta, std::vector<int> &chain) {
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

bool Fuser::rotateHalf(int concat, const std::string &q, int64_t &half,
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

bool Fuser::lastAxisSlice(int slice, const std::string &q, int64_t &start,
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

bool Fuser::rotaryAngles(const std::string &cosName, const std::string &sinName,
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

bool Fuser::headsOf(const std::string &value, bool key, HeadsSource &out) {
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

bool Fuser::isCausalMask(const std::string &value) {
  // Cast(Trilu(ones, k = 1, upper)) as exported, or the constant the folder
  // made of it (or of a mask buffer): true exactly above the diagonal.
  int cast = producerOf(value);
  int trilu = is(cast, "Cast") ? producerOf(node(cast)->input(0)) : -1;
  if (is(trilu, "Trilu")) {
    const onnx::AttributeProto *upper = attr(trilu, "upper");
    int64_t diagonal = 0;
    return upper && upper->i() == 1 && node(trilu)->input_size() >= 2 &&
           scalarInt(node(trilu)->input(1), diagonal) && diagonal == 1;
  }
  const onnx::TensorProto *t = tensorOf(value);
  std::vector<int64_t> mask;
  if (!t || t->data_type() != onnx::TensorProto::BOOL || t->dims_size() < 2 ||
      !constantInts(value, mask))
    return false;
  int64_t rows = t->dims(t->dims_size() - 2), cols = t->dims(t->dims_size() - 1);
  if (rows != cols || static_cast<int64_t>(mask.size()) != rows * cols)
    return false; // leading dimensions other than 1
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      if ((mask[i * cols + j] != 0) != (j > i))
        return false;
  return true;
}

bool Fuser::tryAttention(int scores) {
  if (!is(scores, "MatMul"))
    return false;
  HeadsSource q, k, v;
  if (!headsOf(node(scores)->input(0), false, q) || q.group != 1)
    return miss("the query is not one Reshape into heads and a Transpose "
                "[0, 2, 1, 3], with or without the rotary embedding");
  if (!headsOf(node(scores)->input(1), true, k))
    return miss("the key is not one Reshape into heads and a Transpose "
                "[0, 2, 3, 1], with or without the rotary embedding and a "
                "repeat of its heads");
  int scale = onlyUser(node(scores)->output(0));
  double divisor;
  if (!is(scale, "Div") || !scalar(node(scale)->input(1), divisor))
    return miss("the scores are not divided by one constant");
  int where = onlyUser(node(scale)->output(0));
  double fill;
  if (!is(where, "Where") || node(where)->input(2) != node(scale)->output(0) ||
      !scalar(node(where)->input(1), fill) || !std::isinf(fill) || fill > 0)
    return miss("no Where filling the scores with -inf: only causal "
                "attention is fused");
  if (!isCausalMask(node(where)->input(0)))
    return miss("the mask is not causal: a constant lower triangle");
  int softmax = onlyUser(node(where)->output(0));
  const onnx::AttributeProto *axis =
      softmax >= 0 ? attr(softmax, "axis") : nullptr;
  if (!is(softmax, "Softmax") || (axis && axis->i() != -1 && axis->i() != 3))
    return miss("no Softmax over the last axis after the mask");
  int mixed = onlyUser(node(softmax)->output(0));
  if (!is(mixed, "MatMul") ||
      node(mixed)->input(0) != node(softmax)->output(0) ||
      !headsOf(node(mixed)->input(1), false, v) || v.theta != 0)
    return miss("the probabilities do not multiply value heads split as "
                "the query's");
  int back = onlyUser(node(mixed)->output(0));
  if (!is(back, "Transpose") ||
      ints(back, "perm") != std::vector<int64_t>{0, 2, 1, 3})
    return miss("the heads are not merged back by a Transpose [0, 2, 1, 3]");
  int merged = onlyUser(node(back)->output(0));
  // Every query head reads one key/value head: as many key and value
  // heads, each repeated to the query's count.
  if (!is(merged, "Reshape"))
    return miss("the heads are not merged back by a Reshape");
  if (k.heads != v.heads || k.group != v.group || k.heads * k.group != q.heads)
    return miss("the query, key and value head counts do not fit: " +
                std::to_string(q.heads) + ", " + std::to_string(k.heads) +
                " repeated " + std::to_string(k.group) + " times, " +
                std::to_string(v.heads));
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
  std::vector<int> chain = {scores, scale, where, softmax, mixed, back, merged};
  for (const HeadsSource *source : {&q, &k, &v})
    chain.insert(chain.end(), source->chain.begin(), source->chain.end());
  // The mask's own nodes (Cast, Trilu; or the folded Constant) go too when
  // nothing else reads them.
  int cast = producerOf(node(where)->input(0));
  if (cast >= 0 && onlyUser(node(cast)->output(0)) == where) {
    chain.push_back(cast);
    int trilu = is(cast, "Cast") ? producerOf(node(cast)->input(0)) : -1;
    if (trilu >= 0 && onlyUser(node(trilu)->output(0)) == cast)
      chain.push_back(trilu);
  }
  fuse(chain, merged, fused);
  return true;
}
