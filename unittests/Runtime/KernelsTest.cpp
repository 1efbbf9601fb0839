//===- KernelsTest.cpp - CPU kernels against finite differences -----------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Each backward is checked against central finite differences of the
// forward (in double precision around fp32 inputs) on small random inputs:
// L = sum(out * R) for a random R, so dOut = R.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Cpu/Kernels.h"
#include "dtfm/Support/OpShapes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <tuple>

using namespace dtfm::runtime::cpu;
namespace math = dtfm::math;

namespace {

Tensor random(std::vector<int64_t> shape, std::mt19937_64 &rng,
              double scale = 1.0) {
  Tensor t(shape);
  std::normal_distribution<double> normal(0, scale);
  for (float &x : t.data)
    x = static_cast<float>(normal(rng));
  return t;
}

double dotWith(const Tensor &a, const Tensor &r) {
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    s += static_cast<double>(a.data[i]) * r.data[i];
  return s;
}

/// Compares `analytic` (the gradient of sum(forward() * R) w.r.t. `input`)
/// with central differences.
void expectGradient(Tensor &input, const Tensor &analytic,
                    const std::function<Tensor()> &forward, const Tensor &r,
                    const char *what, double eps = 1e-2, double tol = 2e-2) {
  ASSERT_EQ(analytic.shape, input.shape) << what;
  for (int64_t i = 0; i < input.numel(); ++i) {
    float saved = input.data[i];
    input.data[i] = saved + static_cast<float>(eps);
    double plus = dotWith(forward(), r);
    input.data[i] = saved - static_cast<float>(eps);
    double minus = dotWith(forward(), r);
    input.data[i] = saved;
    double numeric = (plus - minus) / (2 * eps);
    EXPECT_NEAR(analytic.data[i], numeric,
                tol * std::max(1.0, std::fabs(numeric)))
        << what << " element " << i;
  }
}

TEST(Kernels, MatmulAgainstNaiveAndGradients) {
  std::mt19937_64 rng(1);
  for (bool transpose : {false, true})
    for (bool batched : {false, true}) {
      Tensor a = random({2, 3, 4}, rng);
      Tensor b = batched ? random(transpose ? std::vector<int64_t>{2, 5, 4}
                                            : std::vector<int64_t>{2, 4, 5},
                                  rng)
                         : random(transpose ? std::vector<int64_t>{5, 4}
                                            : std::vector<int64_t>{4, 5},
                                  rng);
      Tensor c = matmul(a, b, transpose);
      ASSERT_EQ(c.shape, (std::vector<int64_t>{2, 3, 5}));
      for (int n = 0; n < 2; ++n)
        for (int i = 0; i < 3; ++i)
          for (int j = 0; j < 5; ++j) {
            double s = 0;
            for (int k = 0; k < 4; ++k) {
              int64_t bi = transpose ? j * 4 + k : k * 5 + j;
              if (batched)
                bi += n * 20;
              s += a.data[(n * 3 + i) * 4 + k] * b.data[bi];
            }
            EXPECT_NEAR(c.data[(n * 3 + i) * 5 + j], s, 1e-4);
          }
      Tensor r = random(c.shape, rng);
      Tensor da, db;
      matmulBackward(a, b, transpose, r, &da, &db);
      auto f = [&]() { return matmul(a, b, transpose); };
      expectGradient(a, da, f, r, "dA");
      expectGradient(b, db, f, r, "dB");
    }
}

TEST(Kernels, BinaryMathWithBroadcasting) {
  std::mt19937_64 rng(12);
  Tensor a = random({2, 3, 4}, rng), b = random({3, 1}, rng);
  for (float &x : b.data) // keep divisors away from zero
    x = x > 0 ? x + 0.5f : x - 0.5f;
  Tensor r = random({2, 3, 4}, rng);
  Tensor sum = binaryMath(a, b, math::BinaryOp::Add),
         s = binaryMath(a, b, math::BinaryOp::Sub),
         m = binaryMath(a, b, math::BinaryOp::Mul),
         q = binaryMath(a, b, math::BinaryOp::Div);
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        int64_t at = (n * 3 + i) * 4 + j;
        EXPECT_FLOAT_EQ(sum.data[at], a.data[at] + b.data[i]);
        EXPECT_FLOAT_EQ(s.data[at], a.data[at] - b.data[i]);
        EXPECT_FLOAT_EQ(m.data[at], a.data[at] * b.data[i]);
        EXPECT_FLOAT_EQ(q.data[at], a.data[at] / b.data[i]);
      }
  Tensor hi = binaryMath(a, b, math::BinaryOp::Maximum),
         lo = binaryMath(a, b, math::BinaryOp::Minimum),
         pr = binaryMath(a, b, math::BinaryOp::Prelu);
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        int64_t at = (n * 3 + i) * 4 + j;
        float x = a.data[at], y = b.data[i];
        EXPECT_EQ(hi.data[at], std::max(x, y));
        EXPECT_EQ(lo.data[at], std::min(x, y));
        EXPECT_EQ(pr.data[at], x > 0 ? x : y * x);
      }
  // Finite differences, away from the kinks (random values: no ties, no
  // element within the step of 0 or of the other operand).
  for (auto [op, what] : {std::pair{math::BinaryOp::Add, "add"},
                          {math::BinaryOp::Sub, "sub"},
                          {math::BinaryOp::Mul, "mul"},
                          {math::BinaryOp::Div, "div"},
                          {math::BinaryOp::Maximum, "maximum"},
                          {math::BinaryOp::Minimum, "minimum"},
                          {math::BinaryOp::Prelu, "prelu"}}) {
    Tensor da(a.shape), db(b.shape);
    binaryMathBackward(a, b, op, r, &da, &db);
    auto forward = [&, op = op]() { return binaryMath(a, b, op); };
    expectGradient(a, da, forward, r, what);
    expectGradient(b, db, forward, r, what, 1e-3);
  }
  // Ties split the gradient evenly (PyTorch's maximum / minimum); NaN wins.
  Tensor tie({3}), other({3}), one({3});
  tie.data = {1.0f, 2.0f, std::nanf("")};
  other.data = {1.0f, 3.0f, 0.0f};
  one.data = {1.0f, 1.0f, 1.0f};
  for (math::BinaryOp op : {math::BinaryOp::Maximum, math::BinaryOp::Minimum}) {
    Tensor dt(tie.shape), dother(other.shape);
    binaryMathBackward(tie, other, op, one, &dt, &dother);
    EXPECT_EQ(dt.data[0], 0.5f);
    EXPECT_EQ(dother.data[0], 0.5f);
    EXPECT_EQ(dt.data[1], op == math::BinaryOp::Maximum ? 0.0f : 1.0f);
    EXPECT_TRUE(std::isnan(binaryMath(tie, other, op).data[2]));
    EXPECT_TRUE(std::isnan(binaryMath(other, tie, op).data[2]));
  }
}

TEST(Kernels, ElementwiseMathPowAndReduceMean) {
  std::mt19937_64 rng(14);
  Tensor x = random({2, 3, 4}, rng, 0.5);
  Tensor positive = x;
  for (float &v : positive.data)
    v = std::fabs(v) + 0.5f;
  Tensor r = random(x.shape, rng);
  using dtfm::math::UnaryOp;
  using dtfm::math::UnaryParams;
  for (auto [op, kind] : {std::pair{UnaryOp::Sqrt, "sqrt"},
                          {UnaryOp::Log, "log"},
                          {UnaryOp::Abs, "abs"},
                          {UnaryOp::Tanh, "tanh"},
                          {UnaryOp::Erf, "erf"},
                          {UnaryOp::Exp, "exp"},
                          {UnaryOp::Sigmoid, "sigmoid"},
                          {UnaryOp::Silu, "silu"}}) {
    Tensor &in = op == UnaryOp::Sqrt || op == UnaryOp::Log ? positive : x;
    Tensor y = unaryMath(in, op, {});
    float v = in.data[5];
    EXPECT_NEAR(y.data[5],
                op == UnaryOp::Sqrt      ? std::sqrt(v)
                : op == UnaryOp::Log     ? std::log(v)
                : op == UnaryOp::Abs     ? std::fabs(v)
                : op == UnaryOp::Tanh    ? std::tanh(v)
                : op == UnaryOp::Erf     ? std::erf(v)
                : op == UnaryOp::Sigmoid ? 1 / (1 + std::exp(-v))
                : op == UnaryOp::Silu    ? v / (1 + std::exp(-v))
                                         : std::exp(v),
                1e-6);
    Tensor dx(in.shape);
    unaryMathBackward(in, op, {}, r, &dx);
    expectGradient(
        in, dx, [&]() { return unaryMath(in, op, {}); }, r, kind, 1e-3);
  }
  // Clip (ReLU6's bounds), away from the kinks: the gradient passes only
  // strictly inside.
  Tensor spread = x;
  for (int64_t i = 0; i < spread.numel(); ++i)
    spread.data[i] = 8 * x.data[i] + (i % 3 == 0 ? 3.0f : 0.0f);
  UnaryParams relu6{1, 0, 6};
  Tensor clipped = unaryMath(spread, UnaryOp::Clip, relu6);
  for (int64_t i = 0; i < spread.numel(); ++i)
    EXPECT_EQ(clipped.data[i], std::min(std::max(spread.data[i], 0.0f), 6.0f));
  Tensor dClip(spread.shape);
  unaryMathBackward(spread, UnaryOp::Clip, relu6, r, &dClip);
  expectGradient(
      spread, dClip, [&]() { return unaryMath(spread, UnaryOp::Clip, relu6); },
      r, "clip", 1e-3);
  for (double e : {2.0, 3.0, 0.5}) {
    Tensor dx(positive.shape);
    unaryMathBackward(positive, UnaryOp::Pow, {e}, r, &dx);
    expectGradient(
        positive, dx, [&]() { return unaryMath(positive, UnaryOp::Pow, {e}); },
        r, "pow", 1e-3);
  }
  for (bool keep : {true, false}) {
    Tensor m = reduceMean(x, {-1, 0}, keep);
    ASSERT_EQ(m.shape, keep ? std::vector<int64_t>({1, 3, 1})
                            : std::vector<int64_t>({3}));
    double want = 0;
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t c = 0; c < 4; ++c)
        want += x.data[(a * 3 + 1) * 4 + c];
    EXPECT_NEAR(m.data[1], want / 8, 1e-6);
    Tensor rm = random(m.shape, rng), dx(x.shape);
    reduceMeanBackward(x, {-1, 0}, rm, &dx);
    expectGradient(x, dx, [&]() { return reduceMean(x, {-1, 0}, keep); }, rm,
                   "reduce_mean");
  }
  // reduce_max / reduce_min over axes {-1, 0} of [2, 3, 4], against a
  // brute-force search; the gradient goes to the extremum, split among
  // ties.
  for (bool maximum : {true, false})
    for (bool keep : {true, false}) {
      Tensor m = reduceExtremum(x, {-1, 0}, keep, maximum);
      ASSERT_EQ(m.shape, keep ? std::vector<int64_t>({1, 3, 1})
                              : std::vector<int64_t>({3}));
      for (int64_t row = 0; row < 3; ++row) {
        float want = x.data[row * 4];
        for (int64_t a = 0; a < 2; ++a)
          for (int64_t c = 0; c < 4; ++c) {
            float v = x.data[(a * 3 + row) * 4 + c];
            want = maximum ? std::max(want, v) : std::min(want, v);
          }
        EXPECT_EQ(m.data[row], want);
      }
      Tensor rm = random(m.shape, rng), dx(x.shape);
      reduceExtremumBackward(x, {-1, 0}, maximum, rm, &dx);
      expectGradient(
          x, dx, [&]() { return reduceExtremum(x, {-1, 0}, keep, maximum); },
          rm, maximum ? "reduce_max" : "reduce_min");
    }
  Tensor ties({2, 3});
  ties.data = {1, 5, 5, 2, 2, 2};
  Tensor ones({2});
  ones.data = {1, 1};
  Tensor dTies(ties.shape);
  reduceExtremumBackward(ties, {1}, true, ones, &dTies);
  EXPECT_EQ(dTies.data, std::vector<float>({0, 0.5f, 0.5f, 1.0f / 3,
                                            1.0f / 3, 1.0f / 3}));
  ties.data[4] = std::nanf("");
  EXPECT_TRUE(std::isnan(reduceExtremum(ties, {1}, false, true).data[1]));
  EXPECT_TRUE(std::isnan(reduceExtremum(ties, {1}, false, false).data[1]));
}

TEST(Kernels, ConcatSliceAndGradients) {
  std::mt19937_64 rng(15);
  Tensor a = random({2, 3, 4}, rng), b = random({2, 1, 4}, rng);
  Tensor c = concat({&a, &b}, 1);
  ASSERT_EQ(c.shape, (std::vector<int64_t>{2, 4, 4}));
  EXPECT_EQ(c.data[(1 * 4 + 3) * 4 + 2], b.data[(1 * 1 + 0) * 4 + 2]);
  EXPECT_EQ(c.data[(1 * 4 + 2) * 4 + 1], a.data[(1 * 3 + 2) * 4 + 1]);
  Tensor r = random(c.shape, rng), da(a.shape), db(b.shape);
  concatBackward(r, 1, {&da, &db});
  expectGradient(a, da, [&]() { return concat({&a, &b}, 1); }, r, "concat a");
  expectGradient(b, db, [&]() { return concat({&a, &b}, 1); }, r, "concat b");
  std::vector<int64_t> starts = {0, 1, 1}, ends = {2, 3, 4}, steps = {1, 1, 2};
  Tensor s = slice(a, starts, ends, steps);
  ASSERT_EQ(s.shape, (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(s.data[(1 * 2 + 1) * 2 + 1], a.data[(1 * 3 + 2) * 4 + 3]);
  Tensor rs = random(s.shape, rng), dx(a.shape);
  sliceBackward(a, starts, steps, rs, &dx);
  expectGradient(a, dx, [&]() { return slice(a, starts, ends, steps); }, rs,
                 "slice");
}

TEST(Kernels, GatherWhereAndGradients) {
  std::mt19937_64 rng(16);
  Tensor x = random({2, 5, 3}, rng);
  Tensor indices({2, 2});
  indices.data = {4, 0, -1, 4}; // repeated and negative: gradients add up
  Tensor g;
  std::string error;
  ASSERT_TRUE(gather(x, indices, 1, g, error)) << error;
  ASSERT_EQ(g.shape, (std::vector<int64_t>{2, 2, 2, 3}));
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t c = 0; c < 3; ++c) {
        int64_t row = i == 1 ? 0 : 4;
        EXPECT_EQ(g.data[(o * 4 + i) * 3 + c], x.data[(o * 5 + row) * 3 + c]);
      }
  Tensor r = random(g.shape, rng), dx(x.shape);
  gatherBackward(x, indices, 1, r, &dx);
  auto gathered = [&]() {
    Tensor out;
    std::string why;
    gather(x, indices, 1, out, why);
    return out;
  };
  expectGradient(x, dx, gathered, r, "gather");
  Tensor outside({1});
  outside.data = {-6};
  EXPECT_FALSE(gather(x, outside, 1, g, error));
  EXPECT_EQ(error, "index -6 outside [-5, 5) on axis 1");

  Tensor condition({3, 1});
  condition.data = {1, 0, 1};
  Tensor a = random({3, 4}, rng), b = random({4}, rng);
  Tensor w = where(condition, a, b);
  ASSERT_EQ(w.shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(w.data[0 * 4 + 2], a.data[0 * 4 + 2]);
  EXPECT_EQ(w.data[1 * 4 + 2], b.data[2]);
  Tensor rw = random(w.shape, rng), da(a.shape), db(b.shape);
  whereBackward(condition, rw, &da, &db);
  expectGradient(a, da, [&]() { return where(condition, a, b); }, rw,
                 "where a");
  expectGradient(b, db, [&]() { return where(condition, a, b); }, rw,
                 "where b");
}

TEST(Kernels, TransposeAndItsGradient) {
  std::mt19937_64 rng(13);
  Tensor x = random({2, 3, 4}, rng);
  std::vector<int64_t> perm = {2, 0, 1};
  Tensor y = transpose(x, perm);
  ASSERT_EQ(y.shape, (std::vector<int64_t>{4, 2, 3}));
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 4; ++c)
        EXPECT_EQ(y.data[(c * 2 + a) * 3 + b], x.data[(a * 3 + b) * 4 + c]);
  Tensor r = random(y.shape, rng), dx(x.shape);
  transposeBackward(r, perm, &dx);
  expectGradient(x, dx, [&]() { return transpose(x, perm); }, r,
                 "transpose");
}

TEST(Kernels, LinearAddLayerNorm) {
  std::mt19937_64 rng(2);
  Tensor x = random({3, 4}, rng), w = random({4, 6}, rng),
         b = random({6}, rng);
  Tensor r = random({3, 6}, rng);
  Tensor dx, dw, db;
  linearBackward(x, w, r, &dx, &dw, &db);
  auto f = [&]() { return linear(x, w, &b); };
  expectGradient(x, dx, f, r, "linear dx");
  expectGradient(w, dw, f, r, "linear dw");
  expectGradient(b, db, f, r, "linear db");

  Tensor p = random({2, 3, 4}, rng), q = random({3, 1}, rng);
  Tensor ra = random({2, 3, 4}, rng);
  Tensor dp(p.shape), dq(q.shape);
  binaryMathBackward(p, q, math::BinaryOp::Add, ra, &dp, &dq);
  auto g = [&]() { return binaryMath(p, q, math::BinaryOp::Add); };
  expectGradient(p, dp, g, ra, "add lhs");
  expectGradient(q, dq, g, ra, "add broadcast rhs");

  Tensor y = random({3, 5}, rng), gamma = random({5}, rng),
         beta = random({5}, rng), rl = random({3, 5}, rng);
  std::vector<float> mean, rstd;
  layerNorm(y, gamma, beta, 1e-5, mean, rstd);
  Tensor dy, dg, dbeta;
  layerNormBackward(y, gamma, mean, rstd, rl, &dy, &dg, &dbeta);
  auto h = [&]() {
    std::vector<float> m, s;
    return layerNorm(y, gamma, beta, 1e-5, m, s);
  };
  expectGradient(y, dy, h, rl, "layernorm dx", 1e-3, 3e-2);
  expectGradient(gamma, dg, h, rl, "layernorm dgamma");
  expectGradient(beta, dbeta, h, rl, "layernorm dbeta");

  // RMSNorm: y = x / sqrt(mean(x^2) + eps) * gamma, by hand on one row.
  std::vector<float> rms;
  Tensor z = rmsNorm(y, gamma, 1e-5, rms);
  double squares = 0;
  for (int64_t j = 0; j < 5; ++j)
    squares += y.data[5 + j] * y.data[5 + j];
  for (int64_t j = 0; j < 5; ++j)
    EXPECT_NEAR(z.data[5 + j],
                y.data[5 + j] / std::sqrt(squares / 5 + 1e-5) * gamma.data[j],
                1e-5);
  Tensor dz, dgz;
  rmsNormBackward(y, gamma, rms, rl, &dz, &dgz);
  auto n = [&]() {
    std::vector<float> s;
    return rmsNorm(y, gamma, 1e-5, s);
  };
  expectGradient(y, dz, n, rl, "rms_norm dx", 1e-3, 3e-2);
  expectGradient(gamma, dgz, n, rl, "rms_norm dgamma");
}

TEST(Kernels, ActivationsAndSoftmax) {
  std::mt19937_64 rng(3);
  for (bool approx : {false, true}) {
    Tensor x = random({3, 4}, rng), r = random({3, 4}, rng), dx;
    geluBackward(x, approx, r, &dx);
    expectGradient(x, dx, [&]() { return gelu(x, approx); }, r, "gelu");
  }
  Tensor z = random({3, 4}, rng), rz = random({3, 4}, rng), dz;
  for (float &v : z.data) // keep away from the kink
    v += v > 0 ? 0.1f : -0.1f;
  reluBackward(relu(z), rz, &dz);
  expectGradient(z, dz, [&]() { return relu(z); }, rz, "relu");
  Tensor s = random({2, 5}, rng), rs = random({2, 5}, rng), ds;
  softmaxBackward(softmax(s), rs, &ds);
  expectGradient(s, ds, [&]() { return softmax(s); }, rs, "softmax");
  Tensor sm = softmax(s);
  for (int row = 0; row < 2; ++row) {
    double sum = 0;
    for (int j = 0; j < 5; ++j)
      sum += sm.data[row * 5 + j];
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }
  // Log-softmax: its gradient by finite differences, exp of it sums to 1,
  // and a row far apart stays finite where log(softmax) would be -inf.
  Tensor dl;
  logSoftmaxBackward(logSoftmax(s), rs, &dl);
  expectGradient(s, dl, [&]() { return logSoftmax(s); }, rs, "log-softmax");
  Tensor wide({1, 3});
  wide.data = {0.0f, -200.0f, 100.0f};
  Tensor lw = logSoftmax(wide);
  EXPECT_NEAR(lw.data[0], -100.0f, 1e-4);
  EXPECT_NEAR(lw.data[1], -300.0f, 1e-3);
  EXPECT_NEAR(lw.data[2], 0.0f, 1e-6);
}

TEST(Kernels, CausalAttention) {
  std::mt19937_64 rng(4);
  Tensor q = random({2, 4, 6}, rng, 0.5), k = random({2, 4, 6}, rng, 0.5),
         v = random({2, 4, 6}, rng);
  Tensor probs;
  Tensor out = causalAttention(q, k, v, 2, 2, probs);
  // Position 0 attends only to itself: out = v there.
  for (int c = 0; c < 6; ++c)
    EXPECT_NEAR(out.data[c], v.data[c], 1e-6);
  // Masked entries are zero, rows sum to 1.
  EXPECT_EQ(probs.data[0 * 4 + 1], 0.0f);
  Tensor r = random(out.shape, rng), dq, dk, dv;
  causalAttentionBackward(q, k, v, 2, 2, probs, r, &dq, &dk, &dv);
  auto f = [&]() {
    Tensor p;
    return causalAttention(q, k, v, 2, 2, p);
  };
  expectGradient(q, dq, f, r, "attention dq");
  expectGradient(k, dk, f, r, "attention dk");
  expectGradient(v, dv, f, r, "attention dv");
}

// Grouped-query attention equals multi-head attention on K and V whose
// heads are repeated over each group (what Llama's repeat_kv does).
TEST(Kernels, GroupedQueryAttention) {
  std::mt19937_64 rng(41);
  int64_t heads = 6, kvHeads = 2, dh = 3, group = heads / kvHeads;
  Tensor q = random({2, 5, heads * dh}, rng, 0.5),
         k = random({2, 5, kvHeads * dh}, rng, 0.5),
         v = random({2, 5, kvHeads * dh}, rng);
  Tensor kWide({2, 5, heads * dh}), vWide(kWide.shape);
  for (int64_t row = 0; row < 10; ++row)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t c = 0; c < dh; ++c) {
        int64_t from = row * kvHeads * dh + h / group * dh + c;
        kWide.data[row * heads * dh + h * dh + c] = k.data[from];
        vWide.data[row * heads * dh + h * dh + c] = v.data[from];
      }
  Tensor probs, wideProbs;
  Tensor out = causalAttention(q, k, v, heads, kvHeads, probs);
  Tensor want = causalAttention(q, kWide, vWide, heads, heads, wideProbs);
  for (int64_t i = 0; i < out.numel(); ++i)
    EXPECT_NEAR(out.data[i], want.data[i], 1e-6);
  Tensor r = random(out.shape, rng), dq, dk, dv;
  causalAttentionBackward(q, k, v, heads, kvHeads, probs, r, &dq, &dk, &dv);
  auto f = [&]() {
    Tensor p;
    return causalAttention(q, k, v, heads, kvHeads, p);
  };
  expectGradient(q, dq, f, r, "gqa dq");
  expectGradient(k, dk, f, r, "gqa dk");
  expectGradient(v, dv, f, r, "gqa dv");
}

TEST(Kernels, RotaryEmbedding) {
  std::mt19937_64 rng(42);
  int64_t heads = 2, dh = 4;
  Tensor x = random({2, 3, heads * dh}, rng);
  Tensor y = rotary(x, heads, 100.0);
  // Position 0 does not turn; at position 2 pair 1 of head 1 (elements 5
  // and 7) turns by 2 * 100^(-2/4) = 0.2 radians.
  for (int64_t c = 0; c < heads * dh; ++c)
    EXPECT_FLOAT_EQ(y.data[c], x.data[c]);
  int64_t base = 2 * heads * dh + dh;
  double a = x.data[base + 1], b = x.data[base + 3];
  EXPECT_NEAR(y.data[base + 1], a * std::cos(0.2) - b * std::sin(0.2), 1e-6);
  EXPECT_NEAR(y.data[base + 3], b * std::cos(0.2) + a * std::sin(0.2), 1e-6);
  // The inverse turn undoes it; the backward is that inverse.
  Tensor back = rotary(y, heads, 100.0, true);
  for (int64_t i = 0; i < x.numel(); ++i)
    EXPECT_NEAR(back.data[i], x.data[i], 1e-5);
  Tensor r = random(x.shape, rng), dx;
  rotaryBackward(r, heads, 100.0, &dx);
  expectGradient(
      x, dx, [&]() { return rotary(x, heads, 100.0); }, r, "rotary", 1e-3);
}

TEST(Kernels, EmbeddingAndCrossEntropy) {
  std::mt19937_64 rng(5);
  Tensor table = random({5, 3}, rng);
  Tensor ids({2, 2});
  ids.data = {1, 4, 1, 0};
  Tensor out = embedding(ids, table);
  EXPECT_EQ(out.data[3], table.data[4 * 3]);
  Tensor r = random(out.shape, rng), dTable(table.shape);
  embeddingBackward(ids, r, &dTable);
  expectGradient(table, dTable, [&]() { return embedding(ids, table); }, r,
                 "embedding");

  Tensor logits = random({3, 4}, rng), labels({3});
  labels.data = {0, 3, 1};
  Tensor probs;
  float loss = crossEntropy(logits, labels, probs);
  double expected = 0;
  for (int row = 0; row < 3; ++row) {
    double z = 0;
    for (int j = 0; j < 4; ++j)
      z += std::exp(logits.data[row * 4 + j]);
    expected -= logits.data[row * 4 + static_cast<int>(labels.data[row])] -
                std::log(z);
  }
  EXPECT_NEAR(loss, expected / 3, 1e-5);
  Tensor dLogits;
  crossEntropyBackward(probs, labels, 1.0f, &dLogits);
  Tensor one({1}, 1.0f);
  expectGradient(logits, dLogits,
                 [&]() {
                   Tensor p;
                   return Tensor({1}, crossEntropy(logits, labels, p));
                 },
                 one, "cross-entropy");

  // A label far less likely than exp(-69): the loss is the margin exactly
  // (PyTorch's), with no floor under the probability.
  Tensor confident({2, 3}), which({2});
  confident.data = {0, 250, 0, 10, 0, 0};
  which.data = {0, 0};
  Tensor confidentProbs;
  float margin = crossEntropy(confident, which, confidentProbs);
  EXPECT_NEAR(margin,
              (250 + std::log1p(2 * std::exp(-250.0)) +
               std::log1p(2 * std::exp(-10.0))) /
                  2,
              1e-3);
}

/// A vocabulary-parallel loss with its group simulated in one process: each
/// member's row sums over its slice (its first valid(rank) classes;
/// negative: all) added as the group's sum would, then the loss and each
/// row's log-sum-exp.
float groupCrossEntropy(const std::function<Tensor(int64_t)> &sliceOf,
                        const Tensor &labels, int64_t rows, int64_t degree,
                        const std::function<int64_t(int64_t)> &valid,
                        std::vector<float> &logSumExp) {
  Tensor sums({rows, dtfm::shapes::vocabParallelLossSumWidth(degree)});
  for (int64_t rank = 0; rank < degree; ++rank) {
    Tensor part =
        crossEntropySliceSums(sliceOf(rank), labels, rank, degree, valid(rank));
    for (int64_t i = 0; i < part.numel(); ++i)
      sums.data[i] += part.data[i];
  }
  return crossEntropyFromSums(sums, degree, logSumExp);
}

// Vocabulary-parallel lookup and loss, the group simulated in one process:
// the members' slices of the table or logits, their row sums added as the
// group's sum would, against the whole-vocabulary kernels.
TEST(Kernels, VocabularyParallelEmbeddingAndCrossEntropy) {
  std::mt19937_64 rng(15);
  const int64_t degree = 3, slice = 4, rows = 5;
  Tensor table = random({degree * slice, 2}, rng), ids({rows});
  ids.data = {0, 11, 4, 7, 4};
  Tensor whole = embedding(ids, table), summed(whole.shape);
  Tensor dOut = random(whole.shape, rng), dWhole(table.shape);
  embeddingBackward(ids, dOut, &dWhole);
  for (int64_t rank = 0; rank < degree; ++rank) {
    Tensor mine({slice, 2});
    std::copy_n(table.data.begin() + rank * slice * 2, slice * 2,
                mine.data.begin());
    Tensor part = embedding(ids, mine, rank * slice), dMine(mine.shape);
    for (int64_t i = 0; i < part.numel(); ++i)
      summed.data[i] += part.data[i];
    embeddingBackward(ids, dOut, &dMine, rank * slice);
    for (int64_t i = 0; i < dMine.numel(); ++i)
      EXPECT_EQ(dMine.data[i], dWhole.data[rank * slice * 2 + i]);
  }
  EXPECT_EQ(summed.data, whole.data);

  Tensor logits = random({rows, degree * slice}, rng), labels({rows});
  labels.data = {0, 11, 4, 7, 3};
  for (float &x : logits.data)
    x *= 8; // far from 0: the maxima matter
  Tensor probs, dWholeLogits;
  float wholeLoss = crossEntropy(logits, labels, probs);
  crossEntropyBackward(probs, labels, 1.0f, &dWholeLogits);
  auto sliceOfLogits = [&](int64_t rank) {
    Tensor mine({rows, slice});
    for (int64_t r = 0; r < rows; ++r)
      std::copy_n(logits.data.begin() + r * degree * slice + rank * slice,
                  slice, mine.data.begin() + r * slice);
    return mine;
  };
  std::vector<float> logSumExp;
  EXPECT_NEAR(groupCrossEntropy(sliceOfLogits, labels, rows, degree,
                                [](int64_t) { return int64_t(-1); }, logSumExp),
              wholeLoss, 1e-5 * std::abs(wholeLoss));
  for (int64_t rank = 0; rank < degree; ++rank) {
    Tensor mine = sliceOfLogits(rank), dMine;
    crossEntropySliceBackward(mine, labels, rank, logSumExp, 1.0f, &dMine);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < slice; ++j)
        EXPECT_NEAR(dMine.data[r * slice + j],
                    dWholeLogits.data[r * degree * slice + rank * slice + j],
                    1e-6)
            << "row " << r << " class " << rank * slice + j;
  }
}

// A padded vocabulary: logits [rows, 12] of which the first 9 are classes.
// The loss and the classes' gradients equal those of the 9 columns alone;
// padding gets no probability and no gradient, whatever its logits. And
// split 3 ways (slices of 4: 4, 4 and 1 classes), the same from the row sums.
TEST(Kernels, CrossEntropyLeavesPaddingClassesOut) {
  std::mt19937_64 rng(16);
  const int64_t rows = 5, padded = 12, classes = 9, degree = 3, slice = 4;
  Tensor logits = random({rows, padded}, rng), labels({rows});
  labels.data = {0, 8, 4, 7, 3};
  for (int64_t r = 0; r < rows; ++r) // large padding logits must not matter
    for (int64_t j = classes; j < padded; ++j)
      logits.data[r * padded + j] = 40.0f + j;
  Tensor unpadded({rows, classes});
  for (int64_t r = 0; r < rows; ++r)
    std::copy_n(logits.data.begin() + r * padded, classes,
                unpadded.data.begin() + r * classes);
  Tensor wantProbs, want;
  float wantLoss = crossEntropy(unpadded, labels, wantProbs);
  crossEntropyBackward(wantProbs, labels, 1.0f, &want);

  Tensor probs, got;
  EXPECT_NEAR(crossEntropy(logits, labels, probs, classes), wantLoss,
              1e-6 * std::abs(wantLoss));
  crossEntropyBackward(probs, labels, 1.0f, &got);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < padded; ++j) {
      float expected = j < classes ? want.data[r * classes + j] : 0.0f;
      EXPECT_NEAR(got.data[r * padded + j], expected, 1e-7)
          << "row " << r << " column " << j;
      if (j >= classes) {
        EXPECT_EQ(probs.data[r * padded + j], 0.0f);
      }
    }

  auto sliceOf = [&](int64_t rank) {
    Tensor mine({rows, slice});
    for (int64_t r = 0; r < rows; ++r)
      std::copy_n(logits.data.begin() + r * padded + rank * slice, slice,
                  mine.data.begin() + r * slice);
    return mine;
  };
  auto validOn = [&](int64_t rank) {
    return std::clamp<int64_t>(classes - rank * slice, 0, slice);
  };
  std::vector<float> logSumExp;
  EXPECT_NEAR(
      groupCrossEntropy(sliceOf, labels, rows, degree, validOn, logSumExp),
      wantLoss, 1e-5 * std::abs(wantLoss));
  for (int64_t rank = 0; rank < degree; ++rank) {
    Tensor dMine;
    crossEntropySliceBackward(sliceOf(rank), labels, rank, logSumExp, 1.0f,
                              &dMine, validOn(rank));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < slice; ++j) {
        int64_t column = rank * slice + j;
        float expected =
            column < classes ? want.data[r * classes + column] : 0.0f;
        EXPECT_NEAR(dMine.data[r * slice + j], expected, 1e-6)
            << "row " << r << " class " << column;
      }
  }
}

TEST(Kernels, ConvolutionWithStridePaddingGroupsAndDilation) {
  std::mt19937_64 rng(6);
  Window window;
  window.strideH = 2;
  window.padTop = window.padLeft = 1;
  window.padBottom = 1;
  window.dilationW = 2;
  Tensor x = random({2, 4, 5, 6}, rng), w = random({6, 2, 3, 2}, rng),
         b = random({6}, rng);
  Tensor out = conv2d(x, w, &b, window, /*groups=*/2);
  // Output size: H (5 + 2 - 3) / 2 + 1 = 3; W (6 + 1 - 2*1 - 1) / 1 + 1 = 5.
  ASSERT_EQ(out.shape, (std::vector<int64_t>{2, 6, 3, 5}));
  // One element by hand: n 1, o 4 (group 1: input channels 2-3), y 1, x 2.
  double expected = b.data[4];
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 2; ++j) {
        int iy = 1 * 2 - 1 + i, ix = 2 - 1 + j * 2;
        if (iy >= 0 && iy < 5 && ix >= 0 && ix < 6)
          expected += x.data[((1 * 4 + 2 + c) * 5 + iy) * 6 + ix] *
                      w.data[((4 * 2 + c) * 3 + i) * 2 + j];
      }
  EXPECT_NEAR(out.data[((1 * 6 + 4) * 3 + 1) * 5 + 2], expected, 1e-4);
  Tensor r = random(out.shape, rng), dx, dw, db;
  conv2dBackward(x, w, window, 2, r, &dx, &dw, &db);
  auto f = [&]() { return conv2d(x, w, &b, window, 2); };
  expectGradient(x, dx, f, r, "conv dx");
  expectGradient(w, dw, f, r, "conv dw");
  expectGradient(b, db, f, r, "conv db");
}

TEST(Kernels, TransposedConvolutionScattersEachInputThroughTheKernel) {
  // x [2, 4, 3, 4], w [4, 3, 3, 2], groups 2 (6 output channels), stride
  // (2, 3), padding (1, 0, 0, 1), dilation (1, 2), output_padding (1, 2).
  std::mt19937_64 rng(16);
  Window window;
  window.strideH = 2, window.strideW = 3;
  window.padTop = 1, window.padRight = 1;
  window.dilationW = 2;
  std::array<int64_t, 2> outputPadding = {1, 2};
  Tensor x = random({2, 4, 3, 4}, rng), w = random({4, 3, 3, 2}, rng),
         b = random({6}, rng);
  Tensor out = convTranspose2d(x, w, &b, window, outputPadding, 2);
  // H (3 - 1) 2 - 1 + 1 (3 - 1) + 1 + 1 = 7; W (4 - 1) 3 - 1 + 2 + 2 + 1 = 13.
  ASSERT_EQ(out.shape, (std::vector<int64_t>{2, 6, 7, 13}));
  // The definition, independently: every input element adds its value times
  // each kernel cell at stride * position - padding + dilation * cell.
  Tensor want(out.shape);
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t o = 0; o < 6; ++o)
      for (int64_t p = 0; p < 7 * 13; ++p)
        want.data[(n * 6 + o) * 91 + p] = b.data[o];
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 4; ++c)
      for (int64_t iy = 0; iy < 3; ++iy)
        for (int64_t ix = 0; ix < 4; ++ix)
          for (int64_t f = 0; f < 3; ++f) // filter of c's group
            for (int64_t i = 0; i < 3; ++i)
              for (int64_t j = 0; j < 2; ++j) {
                int64_t oy = iy * 2 - 1 + i, ox = ix * 3 - 0 + j * 2;
                if (oy < 0 || oy >= 7 || ox < 0 || ox >= 13)
                  continue;
                int64_t o = (c / 2) * 3 + f;
                want.data[((n * 6 + o) * 7 + oy) * 13 + ox] +=
                    x.data[((n * 4 + c) * 3 + iy) * 4 + ix] *
                    w.data[((c * 3 + f) * 3 + i) * 2 + j];
              }
  for (int64_t i = 0; i < out.numel(); ++i)
    EXPECT_NEAR(out.data[i], want.data[i], 1e-5) << "element " << i;
  Tensor r = random(out.shape, rng), dx, dw, db;
  convTranspose2dBackward(x, w, window, 2, r, &dx, &dw, &db);
  auto f = [&]() { return convTranspose2d(x, w, &b, window, outputPadding, 2); };
  expectGradient(x, dx, f, r, "conv transpose dx");
  expectGradient(w, dw, f, r, "conv transpose dw");
  expectGradient(b, db, f, r, "conv transpose db");
}

TEST(Kernels, BatchNormAndPooling) {
  std::mt19937_64 rng(7);
  Tensor x = random({3, 2, 3, 3}, rng), gamma = random({2}, rng),
         beta = random({2}, rng), r = random({3, 2, 3, 3}, rng);
  Tensor mean({2}, 0.0f), var({2}, 1.0f);
  Tensor y = batchNorm(x, gamma, beta, 1e-5, &mean, &var, 0.1);
  EXPECT_NE(mean.data[0], 0.0f); // running statistics moved
  Tensor dx, dg, db;
  batchNormBackward(x, gamma, 1e-5, r, &dx, &dg, &db);
  auto f = [&]() {
    return batchNorm(x, gamma, beta, 1e-5, nullptr, nullptr, 0.1);
  };
  expectGradient(x, dx, f, r, "batchnorm dx", 1e-3, 3e-2);
  expectGradient(gamma, dg, f, r, "batchnorm dgamma");
  expectGradient(beta, db, f, r, "batchnorm dbeta");

  // Inference mode: the running statistics (left as they are), by hand.
  Tensor runMean = random({2}, rng), runVar = random({2}, rng);
  for (float &v : runVar.data)
    v = std::fabs(v) + 0.5f;
  Tensor frozenMean = runMean, frozenVar = runVar;
  Tensor yi = batchNormInference(x, gamma, beta, runMean, runVar, 1e-5);
  EXPECT_NEAR(yi.data[9 + 4],
              (x.data[9 + 4] - runMean.data[1]) /
                      std::sqrt(runVar.data[1] + 1e-5) * gamma.data[1] +
                  beta.data[1],
              1e-5);
  EXPECT_EQ(runMean.data, frozenMean.data);
  EXPECT_EQ(runVar.data, frozenVar.data);
  Tensor dxi, dgi, dbi;
  batchNormInferenceBackward(x, gamma, runMean, runVar, 1e-5, r, &dxi, &dgi,
                             &dbi);
  auto fi = [&]() {
    return batchNormInference(x, gamma, beta, runMean, runVar, 1e-5);
  };
  expectGradient(x, dxi, fi, r, "inference batchnorm dx", 1e-3);
  expectGradient(gamma, dgi, fi, r, "inference batchnorm dgamma");
  expectGradient(beta, dbi, fi, r, "inference batchnorm dbeta");

  Window window;
  window.strideH = window.strideW = 2;
  window.padTop = window.padLeft = 1;
  Tensor z = random({1, 2, 5, 5}, rng);
  Tensor m = maxPool2d(z, 3, 3, window);
  ASSERT_EQ(m.shape, (std::vector<int64_t>{1, 2, 2, 2}));
  Tensor rm = random(m.shape, rng), dz;
  maxPool2dBackward(z, 3, 3, window, rm, &dz);
  expectGradient(z, dz, [&]() { return maxPool2d(z, 3, 3, window); }, rm,
                 "max pool", 1e-3);
  Tensor a = avgPool2d(z, 3, 3, window), ra = random(a.shape, rng), da;
  avgPool2dBackward(z, 3, 3, window, ra, &da);
  expectGradient(z, da, [&]() { return avgPool2d(z, 3, 3, window); }, ra,
                 "avg pool");
  Tensor g = globalAvgPool(z), rg = random(g.shape, rng), dg2;
  ASSERT_EQ(g.shape, (std::vector<int64_t>{1, 2, 1, 1}));
  globalAvgPoolBackward(z, rg, &dg2);
  expectGradient(z, dg2, [&]() { return globalAvgPool(z); }, rg,
                 "global avg pool");
}

// Average pooling divides each window's sum by its cells inside the input
// and the padding that counts: all of it (count_include_pad), none, or
// part (ceil mode's end padding never counts). Brute force per window.
TEST(Kernels, AveragePoolingDividesByTheCountedCells) {
  std::mt19937_64 rng(11);
  Tensor x = random({1, 2, 5, 5}, rng);
  for (std::array<int64_t, 4> counted : {std::array<int64_t, 4>{0, 0, 0, 0},
                                         std::array<int64_t, 4>{1, 1, 1, 1},
                                         std::array<int64_t, 4>{1, 0, 2, 1}}) {
    Window win;
    win.strideH = win.strideW = 2;
    win.padTop = win.padLeft = 1;
    win.padBottom = win.padRight = 2;
    win.countTop = counted[0], win.countLeft = counted[1];
    win.countBottom = counted[2], win.countRight = counted[3];
    Tensor y = avgPool2d(x, 3, 3, win);
    ASSERT_EQ(y.shape, (std::vector<int64_t>{1, 2, 3, 3}));
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t oy = 0; oy < 3; ++oy)
        for (int64_t ox = 0; ox < 3; ++ox) {
          double sum = 0;
          int cells = 0;
          for (int64_t iy = oy * 2 - 1; iy < oy * 2 + 2; ++iy)
            for (int64_t ix = ox * 2 - 1; ix < ox * 2 + 2; ++ix) {
              if (iy >= -counted[0] && iy < 5 + counted[2] &&
                  ix >= -counted[1] && ix < 5 + counted[3])
                ++cells;
              if (iy >= 0 && iy < 5 && ix >= 0 && ix < 5)
                sum += x.data[(c * 5 + iy) * 5 + ix];
            }
          EXPECT_NEAR(y.data[(c * 3 + oy) * 3 + ox], sum / cells, 1e-6)
              << "counted " << counted[0] << counted[1] << counted[2]
              << counted[3] << " at " << c << "," << oy << "," << ox;
        }
    Tensor r = random(y.shape, rng), dx;
    avgPool2dBackward(x, 3, 3, win, r, &dx);
    expectGradient(x, dx, [&]() { return avgPool2d(x, 3, 3, win); }, r,
                   "avg pool, counted padding");
  }
}

// GELU and softmax compute e^x and erf without libm, so that their loops
// vectorise: checked against double-precision libm over the float range,
// with NaN and the infinities passing through as libm's would.
TEST(Kernels, VectorisedExpAndErfMatchLibm) {
  std::vector<float> inputs;
  for (float v = -12.0f; v <= 12.0f; v += 0.0009765625f)
    inputs.push_back(v);
  for (float v : {-1e30f, -200.0f, -90.0f, -87.5f, 87.5f, 200.0f, 1e30f})
    inputs.push_back(v);
  Tensor x({static_cast<int64_t>(inputs.size())});
  x.data = inputs;
  Tensor y = gelu(x, false), ones(x.shape, 1.0f), dy;
  geluBackward(x, false, ones, &dy);
  double worstValue = 0, worstSlope = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    double v = inputs[i], phi = 0.5 * (1 + std::erf(v / std::sqrt(2.0)));
    double slope = phi + v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
    // Absolute error relative to the scale of the value (1 + |v|).
    worstValue = std::max(worstValue, std::fabs(y.data[i] - v * phi) /
                                          (1 + std::fabs(v)));
    worstSlope = std::max(worstSlope, std::fabs(dy.data[i] - slope));
  }
  EXPECT_LT(worstValue, 3e-7);
  EXPECT_LT(worstSlope, 3e-7);
  Tensor special({3});
  special.data = {std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity()};
  Tensor g = gelu(special, false);
  EXPECT_TRUE(std::isnan(g.data[0]));
  EXPECT_EQ(g.data[1], std::numeric_limits<float>::infinity());

  // Softmax rows spanning the exponent range, against double precision.
  for (float spread : {1.0f, 30.0f, 80.0f, 200.0f}) {
    Tensor logits({4, 257});
    for (int64_t i = 0; i < logits.numel(); ++i)
      logits.data[i] = spread * std::sin(0.37f * static_cast<float>(i));
    Tensor p = softmax(logits);
    for (int64_t r = 0; r < 4; ++r) {
      const float *row = logits.data.data() + r * 257;
      // The difference is rounded to float, as in the kernel (and libm's
      // expf of it); what is checked is e^ of that float.
      float peak = *std::max_element(row, row + 257);
      double sum = 0;
      for (int64_t j = 0; j < 257; ++j)
        sum += std::exp(double(row[j] - peak));
      for (int64_t j = 0; j < 257; ++j) {
        double want = std::exp(double(row[j] - peak)) / sum;
        EXPECT_NEAR(p.data[r * 257 + j], want, 2e-7 * want + 1e-37)
            << "spread " << spread << " row " << r << " column " << j;
      }
    }
  }
  Tensor withNan({1, 3});
  withNan.data = {0.0f, std::numeric_limits<float>::quiet_NaN(), 1.0f};
  EXPECT_TRUE(std::isnan(softmax(withNan).data[1]));
}

TEST(Kernels, Optimizers) {
  Tensor p({2}, 1.0f), g({2}, 0.5f), vel, m, v;
  sgdStep(p, g, vel, 0.1, 0.9, 0.0);
  EXPECT_FLOAT_EQ(p.data[0], 1.0f - 0.05f);
  sgdStep(p, g, vel, 0.1, 0.9, 0.0); // v = 0.9 * 0.5 + 0.5
  EXPECT_FLOAT_EQ(p.data[0], 0.95f - 0.1f * 0.95f);
  Tensor q({1}, 1.0f), gq({1}, 2.0f);
  adamwStep(q, gq, m, v, 1, 0.1, 0.9, 0.999, 1e-8, 0.0);
  // First step: m^ = g, v^ = g^2: update = lr * sign(g).
  EXPECT_NEAR(q.data[0], 0.9, 1e-6);
  adamwStep(q, gq, m, v, 2, 0.1, 0.9, 0.999, 1e-8, 0.5);
  EXPECT_NEAR(q.data[0], 0.9 - 0.1 * 0.5 * 0.9 - 0.1, 1e-6);

  // Top-k's warm-up: after step 2 the second moment (and its bias
  // correction) stay as at step 2, while the first moment goes on. By hand,
  // gradients 2 then 4 then 4, beta1 0.5, beta2 0.5, no decay or epsilon.
  Tensor f({1}, 0.0f), fm, fv;
  adamwStep(f, Tensor({1}, 2.0f), fm, fv, 1, 1.0, 0.5, 0.5, 0.0, 0.0, 2);
  adamwStep(f, Tensor({1}, 4.0f), fm, fv, 2, 1.0, 0.5, 0.5, 0.0, 0.0, 2);
  // m = 1, 2.5; v = 2, 9 (v^ at step 2: 9 / 0.75 = 12).
  EXPECT_FLOAT_EQ(fv.data[0], 9.0f);
  float before = f.data[0];
  adamwStep(f, Tensor({1}, 4.0f), fm, fv, 3, 1.0, 0.5, 0.5, 0.0, 0.0, 2);
  EXPECT_FLOAT_EQ(fv.data[0], 9.0f); // frozen
  EXPECT_FLOAT_EQ(fm.data[0], 3.25f);
  // m^ = 3.25 / (1 - 0.125); v^ = 12 (step 2's correction).
  EXPECT_NEAR(before - f.data[0], 3.25 / 0.875 / std::sqrt(12.0), 1e-6);
  // Without freezing the same step reads v = 12.5, v^ = 12.5 / 0.875.
  Tensor u({1}, 0.0f), um, uv;
  for (int step = 1; step <= 3; ++step)
    adamwStep(u, Tensor({1}, step == 1 ? 2.0f : 4.0f), um, uv, step, 1.0, 0.5,
              0.5, 0.0, 0.0);
  EXPECT_FLOAT_EQ(uv.data[0], 12.5f);

  // DiLoCo's outer Nesterov step, by hand: delta 0.5, lr 0.7, momentum 0.9.
  // v = 0.5; anchor -= 0.7 * (0.5 + 0.9 * 0.5) = 0.665. Then v = 0.95;
  // anchor -= 0.7 * (0.5 + 0.855) = 0.9485.
  Tensor anchor({2}, 1.0f), delta({2}, 0.5f), outer;
  nesterovOuterStep(anchor, delta, outer, 0.7, 0.9);
  EXPECT_FLOAT_EQ(anchor.data[1], 1.0f - 0.665f);
  EXPECT_FLOAT_EQ(outer.data[1], 0.5f);
  nesterovOuterStep(anchor, delta, outer, 0.7, 0.9);
  EXPECT_NEAR(anchor.data[0], 1.0 - 0.665 - 0.9485, 1e-6);
  // Outer lr 1 without momentum: the anchor moves by the mean delta, to
  // where plain averaging of the replicas would put it.
  Tensor plain({1}, 2.0f), d({1}, 0.25f), none;
  nesterovOuterStep(plain, d, none, 1.0, 0.0);
  EXPECT_FLOAT_EQ(plain.data[0], 1.75f);
}

} // namespace
