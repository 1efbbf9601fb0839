//===- FlashAttentionTest.cpp - The fused attention's math ----------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The GPU's fused attention runs FlashAttention.h's row types; here the
// host reference runs them in the kernels' chunks and is compared with a
// float64 oracle written out from the definition (scores, mask, softmax,
// and the gradients through the probabilities), and with the CPU kernels.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/FlashAttention.h"
#include "dtfm/Runtime/Cpu/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

using namespace dtfm::runtime;
using dtfm::runtime::cpu::Tensor;

namespace {

Tensor randomTensor(std::vector<int64_t> shape, std::mt19937_64 &rng,
                    double scale) {
  Tensor t(shape);
  std::normal_distribution<double> normal(0, scale);
  for (float &x : t.data)
    x = static_cast<float>(normal(rng));
  return t;
}

/// Causal attention and its gradients in float64, from the definition.
struct Oracle {
  std::vector<double> out, logSumExp, dq, dk, dv;

  Oracle(const flash::Layout &l, const Tensor &q, const Tensor &k,
         const Tensor &v, const Tensor &dOut) {
    out.assign(q.data.size(), 0);
    dq.assign(q.data.size(), 0);
    dk.assign(k.data.size(), 0);
    dv.assign(v.data.size(), 0);
    logSumExp.assign(static_cast<size_t>(l.rows()), 0);
    double scale = 1.0 / std::sqrt(static_cast<double>(l.headDim));
    int64_t s = l.seq, dh = l.headDim;
    std::vector<double> p(static_cast<size_t>(s)), dp(p.size());
    for (int64_t n = 0; n < l.batch; ++n)
      for (int64_t h = 0; h < l.heads; ++h) {
        int64_t kh = h / l.group();
        for (int64_t i = 0; i < s; ++i) {
          int64_t qi = l.query(n, i, h);
          double peak = -INFINITY;
          for (int64_t j = 0; j <= i; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < dh; ++d)
              dot += static_cast<double>(q.data[qi + d]) *
                     k.data[l.key(n, j, kh) + d];
            p[j] = dot * scale;
            peak = std::max(peak, p[j]);
          }
          double sum = 0;
          for (int64_t j = 0; j <= i; ++j)
            sum += std::exp(p[j] - peak);
          logSumExp[l.row(n, h, i)] = peak + std::log(sum);
          for (int64_t j = 0; j <= i; ++j)
            p[j] = std::exp(p[j] - peak) / sum;
          double rowDot = 0;
          for (int64_t j = 0; j <= i; ++j) {
            int64_t kj = l.key(n, j, kh);
            dp[j] = 0;
            for (int64_t d = 0; d < dh; ++d) {
              out[qi + d] += p[j] * v.data[kj + d];
              dp[j] += static_cast<double>(dOut.data[qi + d]) * v.data[kj + d];
              dv[kj + d] += p[j] * dOut.data[qi + d];
            }
            rowDot += p[j] * dp[j];
          }
          for (int64_t j = 0; j <= i; ++j) {
            double ds = p[j] * (dp[j] - rowDot) * scale;
            int64_t kj = l.key(n, j, kh);
            for (int64_t d = 0; d < dh; ++d) {
              dq[qi + d] += ds * k.data[kj + d];
              dk[kj + d] += ds * q.data[qi + d];
            }
          }
        }
      }
  }
};

/// Largest |got - want| over max(1, largest |want|).
double relativeError(const std::vector<float> &got,
                     const std::vector<double> &want) {
  double worst = 0, size = 1;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::fabs(got[i] - want[i]));
    size = std::max(size, std::fabs(want[i]));
  }
  return worst / size;
}

struct Case {
  int64_t batch, seq, heads, kvHeads, headDim;
  double spread; // of q and k: large values give scores in the hundreds
};

class FlashAttention : public ::testing::TestWithParam<Case> {};

TEST_P(FlashAttention, MatchesTheDefinitionAndTheCpuKernels) {
  Case c = GetParam();
  flash::Layout l;
  l.batch = c.batch;
  l.seq = c.seq;
  l.heads = c.heads;
  l.kvHeads = c.kvHeads;
  l.headDim = c.headDim;
  std::mt19937_64 rng(static_cast<uint64_t>(c.seq * 131 + c.headDim));
  Tensor q = randomTensor({c.batch, c.seq, c.heads * c.headDim}, rng, c.spread),
         k = randomTensor({c.batch, c.seq, c.kvHeads * c.headDim}, rng,
                          c.spread),
         v = randomTensor(k.shape, rng, 1.0),
         dOut = randomTensor(q.shape, rng, 1.0);
  Oracle want(l, q, k, v, dOut);

  std::vector<float> out(q.data.size(), 0), lse(static_cast<size_t>(l.rows())),
      delta(lse.size());
  flash::forwardReference(l, q.data.data(), k.data.data(), v.data.data(),
                          out.data(), lse.data(), dOut.data.data(),
                          delta.data());
  EXPECT_LT(relativeError(out, want.out), 2e-6);
  EXPECT_LT(relativeError(lse, want.logSumExp), 2e-6);
  // D = rowsum(dOut * out).
  std::vector<double> wantDelta(lse.size(), 0);
  for (int64_t n = 0; n < l.batch; ++n)
    for (int64_t h = 0; h < l.heads; ++h)
      for (int64_t i = 0; i < l.seq; ++i)
        for (int64_t d = 0; d < l.headDim; ++d)
          wantDelta[l.row(n, h, i)] +=
              dOut.data[l.query(n, i, h) + d] * want.out[l.query(n, i, h) + d];
  EXPECT_LT(relativeError(delta, wantDelta), 2e-6);

  // The gradients add to what the buffers hold.
  std::vector<float> dq(q.data.size(), 1.0f), dk(k.data.size(), 1.0f),
      dv(v.data.size(), 1.0f);
  flash::backwardReference(l, q.data.data(), k.data.data(), v.data.data(),
                           dOut.data.data(), lse.data(), delta.data(),
                           dq.data(), dk.data(), dv.data());
  for (auto *g : {&want.dq, &want.dk, &want.dv})
    for (double &x : *g)
      x += 1.0;
  EXPECT_LT(relativeError(dq, want.dq), 1e-5);
  EXPECT_LT(relativeError(dk, want.dk), 1e-5);
  EXPECT_LT(relativeError(dv, want.dv), 1e-5);

  // A gradient not asked for is not written.
  std::vector<float> dvOnly(v.data.size(), 0);
  flash::backwardReference(l, q.data.data(), k.data.data(), v.data.data(),
                           dOut.data.data(), lse.data(), delta.data(), nullptr,
                           nullptr, dvOnly.data());
  for (double &x : want.dv)
    x -= 1.0;
  EXPECT_LT(relativeError(dvOnly, want.dv), 1e-5);

  // The CPU kernels (which keep the probabilities) agree.
  Tensor probs, cq, ck, cv;
  Tensor cpuOut = cpu::causalAttention(q, k, v, c.heads, c.kvHeads, probs);
  cpu::causalAttentionBackward(q, k, v, c.heads, c.kvHeads, probs, dOut, &cq,
                               &ck, &cv);
  std::vector<double> cpuOut64(cpuOut.data.begin(), cpuOut.data.end()),
      cq64(cq.data.begin(), cq.data.end());
  EXPECT_LT(relativeError(out, cpuOut64), 1e-5);
  for (float &x : dq)
    x -= 1.0f;
  EXPECT_LT(relativeError(dq, cq64), 2e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FlashAttention,
    ::testing::Values(
        Case{1, 1, 1, 1, 4, 1.0},    // one token sees itself
        Case{2, 37, 4, 2, 16, 0.7},  // chunks with a partial last one; GQA
        Case{1, 70, 2, 1, 64, 0.5},  // two query heads on one key head
        Case{1, 33, 2, 2, 128, 0.3}, // the largest head with a fused kernel
        Case{2, 20, 3, 3, 20, 0.8},  // a head size that is not a power of 2
        Case{1, 48, 2, 2, 8, 6.0}),  // scores in the hundreds: no overflow
    [](const ::testing::TestParamInfo<Case> &info) {
      const Case &c = info.param;
      return "b" + std::to_string(c.batch) + "_s" + std::to_string(c.seq) +
             "_h" + std::to_string(c.heads) + "_kv" +
             std::to_string(c.kvHeads) + "_d" + std::to_string(c.headDim);
    });

TEST(FlashAttentionRule, HeadSizes) {
  EXPECT_TRUE(flash::supportsHeadDim(1));
  EXPECT_TRUE(flash::supportsHeadDim(64));
  EXPECT_TRUE(flash::supportsHeadDim(128));
  EXPECT_FALSE(flash::supportsHeadDim(129));
  EXPECT_FALSE(flash::supportsHeadDim(256));
  EXPECT_FALSE(flash::supportsHeadDim(0));
  EXPECT_TRUE(flash::supportsSequence(1));
  EXPECT_TRUE(flash::supportsSequence(flash::kMaxSequence));
  EXPECT_FALSE(flash::supportsSequence(flash::kMaxSequence + 1));
}

} // namespace
