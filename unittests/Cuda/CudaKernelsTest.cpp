//===- CudaKernelsTest.cpp - CUDA kernels against the CPU backend ---------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Every CUDA kernel on random inputs against the CPU kernel of the same op
// (the CPU kernels are themselves checked against finite differences and
// PyTorch). fp32 within 1e-4 relative (2e-3 for fp16/bf16 matmuls, 5e-2 for
// their inputs' rounding). Without a CUDA device every test skips and says
// why.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Cpu/Kernels.h"
#include "dtfm/Runtime/Cuda/Attention.h"
#include "dtfm/Runtime/Cuda/Device.h"
#include "dtfm/Runtime/Cuda/Kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace dtfm::runtime;
using cpu::Tensor;

namespace {

class CudaKernelsTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    if (cuda::deviceCount(&why) == 0)
      GTEST_SKIP() << "no CUDA device (" << why
                   << "): the GPU tests need one";
    cudaStreamCreate(&stream);
  }
  void TearDown() override {
    if (stream)
      cudaStreamDestroy(stream);
  }

  Tensor random(std::vector<int64_t> shape, float scale = 1) {
    Tensor t(std::move(shape));
    std::normal_distribution<float> normal(0, scale);
    for (float &x : t.data)
      x = normal(rng);
    return t;
  }
  Tensor integers(std::vector<int64_t> shape, int64_t bound) {
    Tensor t(std::move(shape));
    for (float &x : t.data)
      x = static_cast<float>(rng() % bound);
    return t;
  }
  cuda::DeviceBuffer upload(const Tensor &t) {
    cuda::DeviceBuffer b(std::max<size_t>(4, t.data.size() * 4));
    cudaMemcpy(b.data(), t.data.data(), t.data.size() * 4,
               cudaMemcpyHostToDevice);
    return b;
  }
  cuda::DeviceBuffer zeros(int64_t n) {
    cuda::DeviceBuffer b(std::max<size_t>(4, n * 4));
    cudaMemset(b.data(), 0, std::max<size_t>(4, n * 4));
    return b;
  }
  std::vector<float> download(const cuda::DeviceBuffer &b, int64_t n) {
    cudaStreamSynchronize(stream);
    std::vector<float> out(n);
    cudaMemcpy(out.data(), b.data(), n * 4, cudaMemcpyDeviceToHost);
    return out;
  }
  void expectNear(const std::vector<float> &got,
                  const std::vector<float> &want, double rtol,
                  const char *what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], rtol * std::max(1.0f, std::fabs(want[i])))
          << what << " at " << i;
  }

  std::mt19937 rng{42};
  cudaStream_t stream = nullptr;
};

TEST_F(CudaKernelsTest, AddAndItsBackward) {
  Tensor a = random({4, 8, 16}), b = random({8, 16}), same = random({4, 8, 16});
  for (const Tensor *other : {&b, &same}) {
    auto da = upload(a), db = upload(*other), out = zeros(a.numel());
    cuda::addRepeated(da.floats(), a.numel(), db.floats(), other->numel(),
                      out.floats(), a.numel(), stream);
    expectNear(download(out, a.numel()), cpu::add(a, *other).data, 1e-6,
               "add");
    Tensor dOut = random(a.shape), want(other->shape);
    cpu::addBackward(dOut, nullptr, &want);
    auto dd = upload(dOut), grad = zeros(other->numel());
    cuda::sumRepeated(dd.floats(), dOut.numel(), grad.floats(),
                      other->numel(), stream);
    expectNear(download(grad, other->numel()), want.data, 1e-5, "add grad");
  }
}

TEST_F(CudaKernelsTest, AccumulateAndScale) {
  Tensor a = random({777}), b = random({777});
  auto da = upload(a), db = upload(b);
  cuda::accumulate(db.floats(), da.floats(), a.numel(), stream);
  cuda::scale(da.floats(), a.numel(), 0.25f, stream);
  std::vector<float> want(a.data.size());
  for (size_t i = 0; i < want.size(); ++i)
    want[i] = (a.data[i] + b.data[i]) * 0.25f;
  expectNear(download(da, a.numel()), want, 1e-6, "accumulate + scale");
}

TEST_F(CudaKernelsTest, GeluReluAndBackwards) {
  Tensor x = random({1000}, 2), dy = random({1000});
  for (bool tanh : {false, true}) {
    auto dx = upload(x), ddy = upload(dy), y = zeros(1000), g = zeros(1000);
    cuda::gelu(dx.floats(), y.floats(), 1000, tanh, stream);
    cuda::geluBackward(dx.floats(), ddy.floats(), g.floats(), 1000, tanh,
                       stream);
    Tensor want;
    cpu::geluBackward(x, tanh, dy, &want);
    expectNear(download(y, 1000), cpu::gelu(x, tanh).data, 1e-5, "gelu");
    expectNear(download(g, 1000), want.data, 1e-5, "gelu grad");
  }
  auto dx = upload(x), ddy = upload(dy), y = zeros(1000), g = zeros(1000);
  cuda::relu(dx.floats(), y.floats(), 1000, stream);
  cuda::reluBackward(y.floats(), ddy.floats(), g.floats(), 1000, stream);
  Tensor want;
  cpu::reluBackward(cpu::relu(x), dy, &want);
  expectNear(download(y, 1000), cpu::relu(x).data, 0, "relu");
  expectNear(download(g, 1000), want.data, 0, "relu grad");
}

TEST_F(CudaKernelsTest, LayerNormAndBackward) {
  int64_t rows = 37, d = 300;
  Tensor x = random({rows, d}, 3), gamma = random({d}), beta = random({d}),
         dy = random({rows, d});
  std::vector<float> mean, rstd;
  Tensor y = cpu::layerNorm(x, gamma, beta, 1e-5, mean, rstd);
  Tensor dx, dgamma, dbeta;
  cpu::layerNormBackward(x, gamma, mean, rstd, dy, &dx, &dgamma, &dbeta);
  auto gx = upload(x), gg = upload(gamma), gb = upload(beta),
       gdy = upload(dy), gy = zeros(rows * d), gm = zeros(rows),
       gr = zeros(rows), gdx = zeros(rows * d), gdg = zeros(d),
       gdb = zeros(d);
  cuda::layerNorm(gx.floats(), gg.floats(), gb.floats(), gy.floats(),
                  gm.floats(), gr.floats(), rows, d, 1e-5f, stream);
  cuda::layerNormBackward(gx.floats(), gg.floats(), gm.floats(), gr.floats(),
                          gdy.floats(), gdx.floats(), gdg.floats(),
                          gdb.floats(), rows, d, stream);
  expectNear(download(gy, rows * d), y.data, 1e-4, "layernorm");
  expectNear(download(gdx, rows * d), dx.data, 1e-4, "layernorm dx");
  expectNear(download(gdg, d), dgamma.data, 1e-4, "layernorm dgamma");
  expectNear(download(gdb, d), dbeta.data, 1e-4, "layernorm dbeta");
}

TEST_F(CudaKernelsTest, SoftmaxCrossEntropyAndBackwards) {
  int64_t rows = 19, classes = 513;
  Tensor x = random({rows, classes}, 4), dy = random({rows, classes});
  Tensor labels = integers({rows}, classes);
  auto gx = upload(x), gdy = upload(dy), y = zeros(rows * classes),
       g = zeros(rows * classes);
  cuda::softmax(gx.floats(), y.floats(), rows, classes, stream);
  cuda::softmaxBackward(y.floats(), gdy.floats(), g.floats(), rows, classes,
                        stream);
  Tensor probs = cpu::softmax(x), want;
  cpu::softmaxBackward(probs, dy, &want);
  expectNear(download(y, rows * classes), probs.data, 1e-5, "softmax");
  expectNear(download(g, rows * classes), want.data, 1e-5, "softmax grad");

  float loss = cpu::crossEntropy(x, labels, probs);
  Tensor dlogits;
  cpu::crossEntropyBackward(probs, labels, 0.5f, &dlogits);
  auto gl = upload(labels), gp = zeros(rows * classes), gloss = zeros(1),
       gd = zeros(rows * classes);
  cuda::crossEntropy(gx.floats(), gl.floats(), gp.floats(), gloss.floats(),
                     rows, classes, stream);
  cuda::crossEntropyBackward(gp.floats(), gl.floats(), gd.floats(), rows,
                             classes, 0.5f, stream);
  expectNear(download(gloss, 1), {loss}, 1e-5, "cross-entropy");
  expectNear(download(gd, rows * classes), dlogits.data, 1e-5,
             "cross-entropy grad");
}

TEST_F(CudaKernelsTest, CausalAttentionAndBackward) {
  cuda::AttentionShape shape{3, 17, 64, 4};
  Tensor q = random({3, 17, 64}), k = random({3, 17, 64}),
         v = random({3, 17, 64}), dOut = random({3, 17, 64});
  Tensor probs, dq, dk, dv;
  Tensor out = cpu::causalAttention(q, k, v, 4, probs);
  cpu::causalAttentionBackward(q, k, v, 4, probs, dOut, &dq, &dk, &dv);
  int64_t n = q.numel();
  auto gq = upload(q), gk = upload(k), gv = upload(v), gdo = upload(dOut),
       gout = zeros(n), gprobs = zeros(probs.numel()), gdq = zeros(n),
       gdk = zeros(n), gdv = zeros(n), scratch = zeros(shape.scratchFloats());
  cuda::Matmul matmul;
  std::string error;
  ASSERT_TRUE(cuda::causalAttention(matmul, shape, gq.floats(), gk.floats(),
                                    gv.floats(), gout.floats(),
                                    gprobs.floats(), scratch.floats(), stream,
                                    error))
      << error;
  ASSERT_TRUE(cuda::causalAttentionBackward(
      matmul, shape, gq.floats(), gk.floats(), gv.floats(), gprobs.floats(),
      gdo.floats(), gdq.floats(), gdk.floats(), gdv.floats(),
      scratch.floats(), stream, error))
      << error;
  expectNear(download(gout, n), out.data, 1e-4, "attention");
  expectNear(download(gprobs, probs.numel()), probs.data, 1e-4,
             "attention probabilities");
  expectNear(download(gdq, n), dq.data, 1e-4, "attention dq");
  expectNear(download(gdk, n), dk.data, 1e-4, "attention dk");
  expectNear(download(gdv, n), dv.data, 1e-4, "attention dv");
}

TEST_F(CudaKernelsTest, EmbeddingAndBackward) {
  Tensor table = random({50, 24}), indices = integers({4, 9}, 50),
         dOut = random({4, 9, 24});
  Tensor want(table.shape);
  cpu::embeddingBackward(indices, dOut, &want);
  auto gt = upload(table), gi = upload(indices), gd = upload(dOut),
       out = zeros(dOut.numel()), grad = zeros(table.numel());
  cuda::embedding(gi.floats(), gt.floats(), out.floats(), 36, 24, stream);
  cuda::embeddingBackward(gi.floats(), gd.floats(), grad.floats(), 36, 24,
                          stream);
  expectNear(download(out, dOut.numel()), cpu::embedding(indices, table).data,
             0, "embedding");
  expectNear(download(grad, table.numel()), want.data, 1e-5,
             "embedding grad");
}

TEST_F(CudaKernelsTest, OptimizerSteps) {
  Tensor p = random({333}), g = random({333});
  Tensor sgdP = p, velocity, adamP = p, m, v;
  auto gp = upload(p), gg = upload(g), gvel = zeros(333), gp2 = upload(p),
       gm = zeros(333), gv = zeros(333);
  for (int step = 1; step <= 3; ++step) {
    cpu::sgdStep(sgdP, g, velocity, 0.1, 0.9, 0.01);
    cpu::adamwStep(adamP, g, m, v, step, 0.01, 0.9, 0.999, 1e-8, 0.01);
    cuda::sgdStep(gp.floats(), gg.floats(), gvel.floats(), 333, 0.1f, 0.9f,
                  0.01f, stream);
    cuda::adamwStep(gp2.floats(), gg.floats(), gm.floats(), gv.floats(), 333,
                    step, 0.01f, 0.9f, 0.999f, 1e-8f, 0.01f, stream);
  }
  expectNear(download(gp, 333), sgdP.data, 1e-5, "sgd");
  expectNear(download(gp2, 333), adamP.data, 1e-5, "adamw");
}

TEST_F(CudaKernelsTest, TopKMatchesTheCpuWithTies) {
  for (int64_t n : {1, 100, 4097, 1 << 20}) {
    Tensor x = random({n});
    // Ties: magnitudes repeat, signs differ.
    for (int64_t i = 0; i + 7 < n; i += 7)
      x.data[i + 7] = -x.data[i];
    for (int64_t k : {int64_t(1), n / 10 + 1, n}) {
      Tensor values, indices;
      cpu::topK(x, k, values, indices);
      auto gx = upload(x), gvals = zeros(k), gidx = zeros(k),
           work = cuda::DeviceBuffer(cuda::topKWorkspaceBytes(n));
      cuda::topK(gx.floats(), n, k, gvals.floats(), gidx.floats(),
                 work.data(), stream);
      expectNear(download(gidx, k), indices.data, 0, "top-k indices");
      expectNear(download(gvals, k), values.data, 0, "top-k values");
      auto dense = zeros(n);
      cuda::scatterTopK(gvals.floats(), gidx.floats(), k, dense.floats(), n,
                        stream);
      expectNear(download(dense, n), cpu::scatterTopK(values, indices, {n}).data,
                 0, "top-k scatter");
    }
  }
}

TEST_F(CudaKernelsTest, MatmulsThroughCublasLt) {
  cuda::Matmul matmul;
  std::string error;
  int64_t m = 33, n = 47, k = 65, batch = 3;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool acc : {false, true}) {
        Tensor a = random({batch, m * k}), b = random({batch, k * n}),
               c = random({batch, m * n});
        Tensor want = c;
        for (int64_t i = 0; i < batch; ++i)
          cpu::gemm(a.data.data() + i * m * k, b.data.data() + i * k * n,
                    want.data.data() + i * m * n, m, n, k, ta, tb, acc);
        cuda::MatmulShape s;
        s.transA = ta;
        s.transB = tb;
        s.m = m;
        s.n = n;
        s.k = k;
        s.batch = batch;
        s.strideA = m * k;
        s.strideB = k * n;
        s.strideC = m * n;
        s.accumulate = acc;
        auto ga = upload(a), gb = upload(b), gc = upload(c);
        ASSERT_TRUE(matmul.run(s, ga.data(), gb.data(), gc.data(), stream,
                               error))
            << error;
        expectNear(download(gc, batch * m * n), want.data, 1e-4, "matmul");
      }
  EXPECT_EQ(matmul.cachedShapes(), 8u);
  // Half precisions with fp32 accumulation, against the CPU on the rounded
  // inputs.
  for (cuda::ElementType type : {cuda::ElementType::F16,
                                 cuda::ElementType::BF16}) {
    Tensor a = random({m, k}), b = random({k, n}), want({m, n});
    std::vector<uint16_t> ha(a.numel()), hb(b.numel());
    for (auto [src, dst] : {std::pair{&a, &ha}, std::pair{&b, &hb}})
      for (size_t i = 0; i < src->data.size(); ++i) {
        float x = src->data[i];
        if (type == cuda::ElementType::F16) {
          __half h = __float2half(x);
          (*dst)[i] = *reinterpret_cast<uint16_t *>(&h);
          src->data[i] = __half2float(h);
        } else {
          __nv_bfloat16 h = __float2bfloat16(x);
          (*dst)[i] = *reinterpret_cast<uint16_t *>(&h);
          src->data[i] = __bfloat162float(h);
        }
      }
    cpu::gemm(a.data.data(), b.data.data(), want.data.data(), m, n, k, false,
              false, false);
    cuda::DeviceBuffer ga(ha.size() * 2), gb(hb.size() * 2), gc(m * n * 2);
    cudaMemcpy(ga.data(), ha.data(), ha.size() * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(gb.data(), hb.data(), hb.size() * 2, cudaMemcpyHostToDevice);
    cuda::MatmulShape s;
    s.m = m;
    s.n = n;
    s.k = k;
    s.type = type;
    ASSERT_TRUE(matmul.run(s, ga.data(), gb.data(), gc.data(), stream, error))
        << error;
    cudaStreamSynchronize(stream);
    std::vector<uint16_t> hc(m * n);
    cudaMemcpy(hc.data(), gc.data(), hc.size() * 2, cudaMemcpyDeviceToHost);
    double tolerance = type == cuda::ElementType::F16 ? 2e-3 : 1e-2;
    for (int64_t i = 0; i < m * n; ++i) {
      float got = type == cuda::ElementType::F16
                      ? __half2float(*reinterpret_cast<__half *>(&hc[i]))
                      : __bfloat162float(
                            *reinterpret_cast<__nv_bfloat16 *>(&hc[i]));
      ASSERT_NEAR(got, want.data[i],
                  tolerance * std::max(8.0f, std::fabs(want.data[i])))
          << i;
    }
  }
}

} // namespace
