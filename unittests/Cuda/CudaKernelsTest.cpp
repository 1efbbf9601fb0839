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

#include "dtfm/Format/Int8.h"
#include "dtfm/Format/Sparse.h"
#include "dtfm/Runtime/Backend.h"
#include "dtfm/Runtime/Cpu/Kernels.h"
#include "dtfm/Runtime/Cuda/Attention.h"
#include "dtfm/Runtime/Cuda/Device.h"
#include "dtfm/Runtime/Cuda/Kernels.h"
#include "dtfm/Runtime/FlashAttention.h"
#include "dtfm/Support/ElementMath.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <utility>

using namespace dtfm;
using namespace dtfm::runtime;
using namespace dtfm::math;
using cpu::Tensor;

namespace {

class CudaKernelsTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    if (cuda::deviceCount(&why) == 0)
      GTEST_SKIP() << "no CUDA device (" << why << "): the GPU tests need one";
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
  void expectNear(const std::vector<float> &got, const std::vector<float> &want,
                  double rtol, const char *what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], rtol * std::max(1.0f, std::fabs(want[i])))
          << what << " at " << i;
  }

  std::mt19937 rng{42};
  cudaStream_t stream = nullptr;
};

TEST_F(CudaKernelsTest, TheMemoryProbeMeasuresTheDevice) {
  std::string error;
  std::unique_ptr<StageExecutor> executor =
      makeExecutor(Backend::Cuda, StageProgram(), 0, GpuOptions(), error);
  ASSERT_TRUE(executor) << error;
  double bandwidth = executor->measureMemoryBandwidth();
  // Any GPU with CUDA 13 streams between 50 GB/s and 20 TB/s.
  EXPECT_GT(bandwidth, 5e10);
  EXPECT_LT(bandwidth, 2e13);
}

TEST_F(CudaKernelsTest, AddAndItsBackward) {
  // The repeated operand's gradient: a thread per column for few repeats
  // (4 and 1 here), column tiles for many (70 rows, and 45 columns that
  // leave a tile part-full).
  Tensor small = random({4, 8, 16}), b = random({8, 16}),
         same = random({4, 8, 16}), tall = random({70, 45}),
         column = random({45});
  for (auto [left, other] : {std::pair{&small, &b}, std::pair{&small, &same},
                             std::pair{&tall, &column}}) {
    const Tensor &a = *left;
    auto da = upload(a), db = upload(*other), out = zeros(a.numel());
    cuda::addRepeated(da.floats(), a.numel(), db.floats(), other->numel(),
                      out.floats(), a.numel(), stream);
    expectNear(download(out, a.numel()),
               cpu::binaryMath(a, *other, math::BinaryOp::Add).data, 1e-6,
               "add");
    Tensor dOut = random(a.shape), want(other->shape);
    cpu::binaryMathBackward(a, *other, math::BinaryOp::Add, dOut, nullptr,
                            &want);
    auto dd = upload(dOut), grad = zeros(other->numel());
    cuda::sumRepeated(dd.floats(), dOut.numel(), grad.floats(), other->numel(),
                      stream);
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
  auto gx = upload(x), gg = upload(gamma), gb = upload(beta), gdy = upload(dy),
       gy = zeros(rows * d), gm = zeros(rows), gr = zeros(rows),
       gdx = zeros(rows * d), gdg = zeros(d), gdb = zeros(d);
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

TEST_F(CudaKernelsTest, RmsNormAndBackward) {
  int64_t rows = 37, d = 300;
  Tensor x = random({rows, d}, 3), gamma = random({d}), dy = random({rows, d});
  std::vector<float> rstd;
  Tensor y = cpu::rmsNorm(x, gamma, 1e-5, rstd);
  Tensor dx, dgamma;
  cpu::rmsNormBackward(x, gamma, rstd, dy, &dx, &dgamma);
  auto gx = upload(x), gg = upload(gamma), gdy = upload(dy),
       gy = zeros(rows * d), gr = zeros(rows), gdx = zeros(rows * d),
       gdg = zeros(d);
  cuda::rmsNorm(gx.floats(), gg.floats(), gy.floats(), gr.floats(), rows, d,
                1e-5f, stream);
  cuda::rmsNormBackward(gx.floats(), gg.floats(), gr.floats(), gdy.floats(),
                        gdx.floats(), gdg.floats(), rows, d, stream);
  expectNear(download(gy, rows * d), y.data, 1e-4, "rms_norm");
  expectNear(download(gdx, rows * d), dx.data, 1e-4, "rms_norm dx");
  expectNear(download(gdg, d), dgamma.data, 1e-4, "rms_norm dgamma");
}

TEST_F(CudaKernelsTest, SoftmaxCrossEntropyAndBackwards) {
  int64_t rows = 19, classes = 513;
  Tensor x = random({rows, classes}, 4), dy = random({rows, classes});
  // Labels below 500: the loss is also taken with the last 13 as padding.
  Tensor labels = integers({rows}, 500);
  // Row 0's label far below exp(-69) in probability: the loss stays exact.
  x.data[static_cast<int64_t>(labels.data[0])] = -200;
  auto gx = upload(x), gdy = upload(dy), y = zeros(rows * classes),
       g = zeros(rows * classes);
  cuda::softmax(gx.floats(), y.floats(), rows, classes, stream);
  cuda::softmaxBackward(y.floats(), gdy.floats(), g.floats(), rows, classes,
                        stream);
  Tensor probs = cpu::softmax(x), want;
  cpu::softmaxBackward(probs, dy, &want);
  expectNear(download(y, rows * classes), probs.data, 1e-5, "softmax");
  expectNear(download(g, rows * classes), want.data, 1e-5, "softmax grad");
  auto ly = zeros(rows * classes), lg = zeros(rows * classes);
  cuda::logSoftmax(gx.floats(), ly.floats(), rows, classes, stream);
  cuda::logSoftmaxBackward(ly.floats(), gdy.floats(), lg.floats(), rows,
                           classes, stream);
  Tensor logProbs = cpu::logSoftmax(x), logWant;
  cpu::logSoftmaxBackward(logProbs, dy, &logWant);
  expectNear(download(ly, rows * classes), logProbs.data, 1e-4, "log-softmax");
  expectNear(download(lg, rows * classes), logWant.data, 1e-4,
             "log-softmax grad");

  // The loss of one member (degree 1): all classes, then the first 500 of
  // the 513 (the rest padding, no gradient).
  for (int64_t valid : {classes, int64_t(500)}) {
    float loss = cpu::crossEntropy(x, labels, probs, valid);
    Tensor dlogits;
    cpu::crossEntropyBackward(probs, labels, 0.5f, &dlogits);
    auto gl = upload(labels), sums = zeros(rows * 3), glse = zeros(rows),
         gloss = zeros(1), gd = zeros(rows * classes);
    cuda::crossEntropySliceSums(gx.floats(), gl.floats(), sums.floats(), rows,
                                classes, valid, 0, 1, stream);
    cuda::crossEntropyFromSums(sums.floats(), glse.floats(), gloss.floats(),
                               rows, 1, stream);
    cuda::crossEntropySliceBackward(gx.floats(), gl.floats(), glse.floats(),
                                    gd.floats(), rows, classes, valid, 0, 0.5f,
                                    stream);
    expectNear(download(gloss, 1), {loss}, 1e-5, "cross-entropy");
    expectNear(download(gd, rows * classes), dlogits.data, 1e-5,
               "cross-entropy grad");
  }
}

TEST_F(CudaKernelsTest, CausalAttentionAndBackward) {
  // Multi-head, then grouped-query with two query heads per key/value head.
  for (int64_t kvHeads : {4, 2}) {
    cuda::AttentionShape shape{3, 17, 64, 4, kvHeads};
    int64_t kvWidth = 64 / 4 * kvHeads;
    Tensor q = random({3, 17, 64}), k = random({3, 17, kvWidth}),
           v = random({3, 17, kvWidth}), dOut = random({3, 17, 64});
    Tensor probs, dq, dk, dv;
    Tensor out = cpu::causalAttention(q, k, v, 4, kvHeads, probs);
    cpu::causalAttentionBackward(q, k, v, 4, kvHeads, probs, dOut, &dq, &dk,
                                 &dv);
    int64_t n = q.numel(), nk = k.numel();
    auto gq = upload(q), gk = upload(k), gv = upload(v), gdo = upload(dOut),
         gout = zeros(n), gprobs = zeros(probs.numel()), gdq = zeros(n),
         gdk = zeros(nk), gdv = zeros(nk),
         scratch = zeros(shape.scratchFloats());
    cuda::Matmul matmul;
    std::string error;
    ASSERT_TRUE(cuda::causalAttention(
        matmul, shape, gq.floats(), gk.floats(), gv.floats(), gout.floats(),
        gprobs.floats(), scratch.floats(), stream, error))
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
    expectNear(download(gdk, nk), dk.data, 1e-4, "attention dk");
    expectNear(download(gdv, nk), dv.data, 1e-4, "attention dv");
  }
}

// The fused kernels against the host reference of their math (the same
// row types, FlashAttention.h) and the CPU kernels, on every kernel variant
// (head sizes 8 to 128 in one, two and four lanes, some padded; on tensor
// cores, tiles of 32, 64 and 128), sequences over several row blocks and
// chunks, and grouped-query heads; fp32 within 1e-5, the f16 and bf16
// tensor-core kernels within 4e-3 and 3e-2 (about 5 and 4 times the worst
// error of their rounding on these cases: the kernels' math emulated in
// PyTorch with q, k, v, dO and the probabilities rounded gives 7.9e-4 in
// f16 and 7.2e-3 in bf16 against float64). Gradients add to what
// the buffers hold; two backward runs agree bit for bit.
TEST_F(CudaKernelsTest, FusedAttentionAgainstTheReference) {
  struct Case {
    int64_t batch, seq, heads, kvHeads, headDim;
  };
  struct Precision {
    cuda::ElementType type;
    double tolerance;
    const char *name;
  };
  for (Case c : {Case{2, 1, 2, 2, 8}, Case{2, 45, 4, 2, 8},
                 Case{1, 200, 2, 1, 20}, Case{2, 77, 3, 3, 48},
                 Case{1, 130, 4, 2, 64}, Case{1, 70, 2, 2, 100},
                 Case{1, 96, 2, 1, 128}})
    for (Precision precision :
         {Precision{cuda::ElementType::F32, 1e-5, "f32"},
          Precision{cuda::ElementType::F16, 4e-3, "f16"},
          Precision{cuda::ElementType::BF16, 3e-2, "bf16"}}) {
      SCOPED_TRACE(std::string(precision.name) + " b" +
                   std::to_string(c.batch) + " s" + std::to_string(c.seq) +
                   " h" + std::to_string(c.heads) + " kv" +
                   std::to_string(c.kvHeads) + " d" +
                   std::to_string(c.headDim));
      double tol = precision.tolerance;
      cuda::AttentionShape shape{c.batch, c.seq, c.heads * c.headDim, c.heads,
                                 c.kvHeads};
      ASSERT_TRUE(cuda::useFusedAttention(GpuAttention::Auto, shape));
      flash::Layout layout{c.batch, c.seq, c.heads, c.kvHeads, c.headDim};
      Tensor q = random({c.batch, c.seq, c.heads * c.headDim}),
             k = random({c.batch, c.seq, c.kvHeads * c.headDim}),
             v = random(k.shape), dOut = random(q.shape);
      int64_t n = q.numel(), nk = k.numel(), rows = layout.rows();
      std::vector<float> out(n), lse(rows), delta(rows), dq(n, 1.0f),
          dk(nk, 1.0f), dv(nk, 1.0f);
      flash::forwardReference(layout, q.data.data(), k.data.data(),
                              v.data.data(), out.data(), lse.data(),
                              dOut.data.data(), delta.data());
      flash::backwardReference(layout, q.data.data(), k.data.data(),
                               v.data.data(), dOut.data.data(), lse.data(),
                               delta.data(), dq.data(), dk.data(), dv.data());
      Tensor ones(q.shape), onesKv(k.shape);
      std::fill(ones.data.begin(), ones.data.end(), 1.0f);
      std::fill(onesKv.data.begin(), onesKv.data.end(), 1.0f);
      auto gq = upload(q), gk = upload(k), gv = upload(v), gdo = upload(dOut),
           gout = zeros(n), gdq = upload(ones), gdk = upload(onesKv),
           gdv = upload(onesKv),
           scratch = zeros(cuda::fusedBackwardScratchFloats(shape));
      cuda::fusedCausalAttention(shape, precision.type, gq.floats(),
                                 gk.floats(), gv.floats(), gout.floats(),
                                 stream);
      cuda::fusedCausalAttentionBackward(
          shape, precision.type, gq.floats(), gk.floats(), gv.floats(),
          gdo.floats(), gdq.floats(), gdk.floats(), gdv.floats(),
          scratch.floats(), stream);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      expectNear(download(gout, n), out, tol, "fused attention");
      expectNear(download(scratch, rows), lse, tol, "fused log-sum-exp");
      std::vector<float> gotDq = download(gdq, n), gotDk = download(gdk, nk),
                         gotDv = download(gdv, nk);
      expectNear(gotDq, dq, tol, "fused dq");
      expectNear(gotDk, dk, tol, "fused dk");
      expectNear(gotDv, dv, tol, "fused dv");

      // The CPU kernels (probabilities in memory) agree.
      Tensor probs;
      Tensor cpuOut = cpu::causalAttention(q, k, v, c.heads, c.kvHeads, probs);
      expectNear(download(gout, n), cpuOut.data, std::max(tol, 1e-4),
                 "fused against the CPU");

      // No atomics: the same gradients again, bit for bit.
      auto gdq2 = upload(ones), gdk2 = upload(onesKv), gdv2 = upload(onesKv);
      cuda::fusedCausalAttentionBackward(
          shape, precision.type, gq.floats(), gk.floats(), gv.floats(),
          gdo.floats(), gdq2.floats(), gdk2.floats(), gdv2.floats(),
          scratch.floats(), stream);
      EXPECT_EQ(download(gdq2, n), gotDq);
      EXPECT_EQ(download(gdk2, nk), gotDk);
      EXPECT_EQ(download(gdv2, nk), gotDv);
    }
}

TEST_F(CudaKernelsTest, RotaryAndBackward) {
  int64_t b = 2, s = 9, heads = 3, dh = 8, n = b * s * heads * dh;
  Tensor x = random({b, s, heads * dh}), dOut = random({b, s, heads * dh});
  Tensor y = cpu::rotary(x, heads, 10000.0), dx;
  cpu::rotaryBackward(dOut, heads, 10000.0, &dx);
  auto gx = upload(x), gdo = upload(dOut), gy = zeros(n), gdx = zeros(n);
  cuda::rotary(gx.floats(), gy.floats(), b, s, heads, dh, 10000.0, 1, false,
               stream);
  cuda::rotary(gdo.floats(), gdx.floats(), b, s, heads, dh, 10000.0, -1, true,
               stream);
  expectNear(download(gy, n), y.data, 1e-5, "rotary");
  expectNear(download(gdx, n), dx.data, 1e-5, "rotary backward");
}

TEST_F(CudaKernelsTest, EmbeddingAndBackward) {
  Tensor table = random({50, 24}), indices = integers({4, 9}, 50),
         dOut = random({4, 9, 24});
  Tensor want(table.shape);
  cpu::embeddingBackward(indices, dOut, &want);
  auto gt = upload(table), gi = upload(indices), gd = upload(dOut),
       out = zeros(dOut.numel()), grad = zeros(table.numel());
  cuda::embedding(gi.floats(), gt.floats(), out.floats(), 36, 24, 0, 50,
                  stream);
  cuda::embeddingBackward(gi.floats(), gd.floats(), grad.floats(), 36, 24, 0,
                          50, stream);
  expectNear(download(out, dOut.numel()), cpu::embedding(indices, table).data,
             0, "embedding");
  expectNear(download(grad, table.numel()), want.data, 1e-5, "embedding grad");

  // Vocabulary-parallel: rows [20, 30) of the whole table.
  Tensor slice({10, 24});
  std::copy_n(table.data.begin() + 20 * 24, 10 * 24, slice.data.begin());
  Tensor sliceWant(slice.shape);
  cpu::embeddingBackward(indices, dOut, &sliceWant, 20);
  auto gs = upload(slice), sliceOut = zeros(dOut.numel()),
       sliceGrad = zeros(slice.numel());
  cuda::embedding(gi.floats(), gs.floats(), sliceOut.floats(), 36, 24, 20, 10,
                  stream);
  cuda::embeddingBackward(gi.floats(), gd.floats(), sliceGrad.floats(), 36, 24,
                          20, 10, stream);
  expectNear(download(sliceOut, dOut.numel()),
             cpu::embedding(indices, slice, 20).data, 0, "embedding slice");
  expectNear(download(sliceGrad, slice.numel()), sliceWant.data, 1e-5,
             "embedding slice grad");
}

// One member's vocabulary-parallel loss kernels against the CPU's: its row
// sums, the loss from rows summed as a group would (here: this member's
// and another's computed on the CPU), and its logits' gradient.
TEST_F(CudaKernelsTest, VocabularyParallelCrossEntropy) {
  const int64_t rows = 7, classes = 129, degree = 2, rank = 1;
  Tensor mine = random({rows, classes}, 3), other = random({rows, classes}, 3);
  Tensor labels = integers({rows}, degree * classes);
  int64_t width = 2 * degree + 1;
  Tensor want = cpu::crossEntropySliceSums(mine, labels, rank, degree);
  auto gm = upload(mine), gl = upload(labels), sums = zeros(rows * width);
  cuda::crossEntropySliceSums(gm.floats(), gl.floats(), sums.floats(), rows,
                              classes, classes, rank, degree, stream);
  expectNear(download(sums, rows * width), want.data, 1e-5, "row sums");

  Tensor summed = cpu::crossEntropySliceSums(other, labels, 0, degree);
  for (int64_t i = 0; i < summed.numel(); ++i)
    summed.data[i] += want.data[i];
  std::vector<float> logSumExp;
  float loss = cpu::crossEntropyFromSums(summed, degree, logSumExp);
  auto gs = upload(summed), glse = zeros(rows), gloss = zeros(1);
  cuda::crossEntropyFromSums(gs.floats(), glse.floats(), gloss.floats(), rows,
                             degree, stream);
  expectNear(download(glse, rows), logSumExp, 1e-5, "log-sum-exp");
  expectNear(download(gloss, 1), {loss}, 1e-5, "loss");

  Tensor dlogits;
  cpu::crossEntropySliceBackward(mine, labels, rank, logSumExp, 0.5f, &dlogits);
  auto gd = zeros(rows * classes);
  cuda::crossEntropySliceBackward(gm.floats(), gl.floats(), glse.floats(),
                                  gd.floats(), rows, classes, classes, rank,
                                  0.5f, stream);
  expectNear(download(gd, rows * classes), dlogits.data, 1e-5,
             "logits' gradient");
}

TEST_F(CudaKernelsTest, OptimizerSteps) {
  Tensor p = random({333}), g = random({333});
  Tensor sgdP = p, velocity, adamP = p, m, v, frozenP = p, fm, fv;
  auto gp = upload(p), gg = upload(g), gvel = zeros(333), gp2 = upload(p),
       gm = zeros(333), gv = zeros(333), gp3 = upload(p), gfm = zeros(333),
       gfv = zeros(333);
  for (int step = 1; step <= 4; ++step) {
    cpu::sgdStep(sgdP, g, velocity, 0.1, 0.9, 0.01);
    cpu::adamwStep(adamP, g, m, v, step, 0.01, 0.9, 0.999, 1e-8, 0.01);
    // The second moment frozen after step 2 (top-k's warm-up).
    cpu::adamwStep(frozenP, g, fm, fv, step, 0.01, 0.9, 0.999, 1e-8, 0.01, 2);
    cuda::sgdStep(gp.floats(), gg.floats(), gvel.floats(), 333, 0.1f, 0.9f,
                  0.01f, stream);
    cuda::adamwStep(gp2.floats(), gg.floats(), gm.floats(), gv.floats(), 333,
                    step, 0.01f, 0.9, 0.999, 1e-8f, 0.01f, 0, stream);
    cuda::adamwStep(gp3.floats(), gg.floats(), gfm.floats(), gfv.floats(),
                    333, step, 0.01f, 0.9, 0.999, 1e-8f, 0.01f, 2, stream);
  }
  expectNear(download(gp, 333), sgdP.data, 1e-5, "sgd");
  expectNear(download(gp2, 333), adamP.data, 1e-5, "adamw");
  expectNear(download(gp3, 333), frozenP.data, 1e-5, "adamw, v frozen");
  expectNear(download(gfv, 333), fv.data, 1e-7, "frozen v");
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
      cuda::topK(gx.floats(), n, k, gvals.floats(), gidx.floats(), work.data(),
                 stream);
      expectNear(download(gidx, k), indices.data, 0, "top-k indices");
      expectNear(download(gvals, k), values.data, 0, "top-k values");
      auto dense = zeros(n);
      cuda::scatterTopK(gvals.floats(), gidx.floats(), k, dense.floats(), n,
                        stream);
      expectNear(download(dense, n),
                 cpu::scatterTopK(values, indices, {n}).data, 0,
                 "top-k scatter");
    }
  }
}

// The select's hostile inputs (those of unittests/Format/TopKSelectTest on
// the host steps): every key equal, mostly zeros, keys that differ only in
// their low bits (every refining digit decides), magnitudes sorted either
// way, and a threshold bin taken whole.
TEST_F(CudaKernelsTest, TopKExactOnHostileInputs) {
  auto check = [&](const std::vector<float> &x, int64_t k, const char *what) {
    int64_t n = static_cast<int64_t>(x.size());
    std::vector<uint64_t> want = format::largestMagnitudes(x.data(), n, k);
    Tensor host({n});
    host.data = x;
    auto gx = upload(host), gvals = zeros(k);
    cuda::DeviceBuffer gidx(k * sizeof(uint32_t)),
        work(cuda::topKWorkspaceBytes(n));
    cuda::topKExact(gx.floats(), n, k, gvals.floats(),
                    static_cast<uint32_t *>(gidx.data()), work.data(), stream);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess) << what;
    std::vector<uint32_t> got(k);
    cudaMemcpy(got.data(), gidx.data(), k * sizeof(uint32_t),
               cudaMemcpyDeviceToHost);
    std::vector<float> gotValues = download(gvals, k);
    ASSERT_EQ(std::vector<uint64_t>(got.begin(), got.end()), want)
        << what << " k " << k;
    for (int64_t i = 0; i < k; ++i)
      ASSERT_EQ(gotValues[i], x[want[i]]) << what;
  };
  int64_t n = 1 << 18;
  check(std::vector<float>(n, 0.5f), 1000, "all equal");
  std::vector<float> sparse(n, 0.0f);
  sparse[n - 1] = 3;
  sparse[77] = -2;
  check(sparse, 2, "two nonzeros");
  check(sparse, 500, "mostly zeros");
  std::vector<float> close(n);
  for (float &v : close) {
    uint32_t bits = 0x3f800000u + (rng() % 64) * 0x801u;
    std::memcpy(&v, &bits, sizeof v);
  }
  for (int64_t k : {int64_t(1), int64_t(3000), n / 2, n - 1})
    check(close, k, "ties in the low bits");
  Tensor x = random({n});
  std::vector<float> sorted = x.data;
  std::sort(sorted.begin(), sorted.end(),
            [](float a, float b) { return std::fabs(a) < std::fabs(b); });
  check(sorted, n / 100, "ascending");
  std::reverse(sorted.begin(), sorted.end());
  check(sorted, n / 100, "descending");
  // Powers of two: each coarse bin holds one value, so the threshold bin
  // is taken whole (no refining).
  std::vector<float> powers(n);
  for (int64_t i = 0; i < n; ++i)
    powers[i] = std::ldexp(1.0f, static_cast<int>(i % 16));
  check(powers, n / 16 * 3, "whole bins");
}

// Compressed exchanges encoded on the device: the message and the residual
// bit for bit the host's (format::moveInt8 / moveTopK), over three steps of
// error feedback; the message is all that would come down (int8Bytes), and
// infinities and NaNs are sent as 0 as on the host. An 8-bit pipeline
// transfer's encoding (no feedback) and decoding are the host's too.
TEST_F(CudaKernelsTest, DeviceCodecsEqualTheHostsWithErrorFeedback) {
  for (int64_t n : {1, 255, 256, 257, 4097, 1 << 20}) {
    Tensor residual(std::vector<int64_t>{n});
    auto gres = zeros(n);
    for (int step = 0; step < 3; ++step) {
      Tensor grad = random({n});
      if (n > 300) {
        grad.data[3] = INFINITY;
        grad.data[260] = NAN;
      }
      // Host: pending = residual + grad, then moveInt8.
      std::vector<float> sent(n);
      for (int64_t i = 0; i < n; ++i)
        residual.data[i] += grad.data[i];
      std::vector<char> want;
      format::encodeInt8(residual.data.data(), n, want);
      format::moveInt8(residual.data.data(), n, sent.data());
      size_t bytes = format::int8Bytes(n);
      auto ggrad = upload(grad), message = cuda::DeviceBuffer(bytes + 4);
      cuda::int8WithFeedback(ggrad.floats(), gres.floats(), n, message.data(),
                             stream);
      cudaStreamSynchronize(stream);
      std::vector<char> got(bytes);
      cudaMemcpy(got.data(), message.data(), bytes, cudaMemcpyDeviceToHost);
      ASSERT_EQ(got, want) << "int8 message, n " << n << " step " << step;
      // Without feedback (8-bit pipeline transfers): the host's encoding.
      std::vector<char> plain;
      format::encodeInt8(grad.data.data(), n, plain);
      cuda::int8Encode(ggrad.floats(), n, message.data(), stream);
      cudaStreamSynchronize(stream);
      cudaMemcpy(got.data(), message.data(), bytes, cudaMemcpyDeviceToHost);
      ASSERT_EQ(got, plain) << "int8 transfer, n " << n;
      // And decoded on the receiving device: the host's decoding.
      std::vector<float> decoded(n);
      ASSERT_TRUE(format::decodeInt8(plain.data(), bytes, n, decoded.data()));
      auto out = zeros(n);
      cuda::int8Decode(message.data(), n, out.floats(), stream);
      ASSERT_EQ(download(out, n), decoded) << "int8 decode, n " << n;
      std::vector<float> deviceResidual = download(gres, n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(std::isnan(deviceResidual[i]) ? 0 : deviceResidual[i],
                  std::isnan(residual.data[i]) ? 0 : residual.data[i])
            << "int8 residual at " << i;
    }
  }
  for (int64_t n : {1, 100, 4097, 1 << 20}) {
    int64_t k = n / 10 + 1;
    Tensor residual(std::vector<int64_t>{n});
    auto gres = zeros(n);
    for (int step = 0; step < 3; ++step) {
      Tensor grad = random({n});
      for (int64_t i = 0; i + 7 < n; i += 7) // ties
        grad.data[i + 7] = -grad.data[i];
      for (int64_t i = 0; i < n; ++i)
        residual.data[i] += grad.data[i];
      std::vector<float> sent(n);
      format::moveTopK(residual.data.data(), n, k, sent.data());
      auto ggrad = upload(grad), values = zeros(k), indices = zeros(k),
           work = cuda::DeviceBuffer(cuda::topKWorkspaceBytes(n));
      cuda::topKWithFeedback(ggrad.floats(), gres.floats(), n, k,
                             values.floats(),
                             static_cast<uint32_t *>(indices.data()),
                             work.data(), stream);
      std::vector<float> gotValues = download(values, k);
      std::vector<uint32_t> gotIndices(k);
      cudaMemcpy(gotIndices.data(), indices.data(), k * 4,
                 cudaMemcpyDeviceToHost);
      std::vector<float> dense(n, 0.0f);
      for (int64_t j = 0; j < k; ++j) {
        ASSERT_LT(gotIndices[j], static_cast<uint32_t>(n));
        if (j > 0)
          ASSERT_LT(gotIndices[j - 1], gotIndices[j]) << "index order";
        dense[gotIndices[j]] = gotValues[j];
      }
      ASSERT_EQ(dense, sent) << "top-k message, n " << n << " step " << step;
      ASSERT_EQ(download(gres, n), residual.data) << "top-k residual";
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
        ASSERT_TRUE(
            matmul.run(s, ga.data(), gb.data(), gc.data(), stream, error))
            << error;
        expectNear(download(gc, batch * m * n), want.data, 1e-4, "matmul");
      }
  EXPECT_EQ(matmul.cachedShapes(), 8u);
  // Half precisions with fp32 accumulation, against the CPU on the rounded
  // inputs.
  for (cuda::ElementType type :
       {cuda::ElementType::F16, cuda::ElementType::BF16}) {
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
      float got =
          type == cuda::ElementType::F16
              ? __half2float(*reinterpret_cast<__half *>(&hc[i]))
              : __bfloat162float(*reinterpret_cast<__nv_bfloat16 *>(&hc[i]));
      ASSERT_NEAR(got, want.data[i],
                  tolerance * std::max(8.0f, std::fabs(want.data[i])))
          << i;
    }
  }
}

TEST_F(CudaKernelsTest, BroadcastingBinaryOpsWhereAndTheirGradients) {
  // [64, 1, 40] op [33, 40]: dOut [64, 33, 40]; the rhs gradient reduces
  // 64 rows onto 1320 elements (a block each), the lhs one 33 rows onto
  // 2560 (likewise); the large case below takes a thread each.
  for (auto [sa, sb] : {std::pair<std::vector<int64_t>, std::vector<int64_t>>{
                            {64, 1, 40}, {33, 40}},
                        {{300, 200}, {300, 1}},
                        {{20000, 3}, {3}}}) {
    Tensor a = random(sa), b = random(sb);
    for (float &y : b.data)
      y += y < 0 ? -0.5f : 0.5f;
    Tensor probe = cpu::binaryMath(a, b, math::BinaryOp::Mul);
    std::vector<int64_t> out = probe.shape;
    Tensor dOut = random(out);
    auto ga = upload(a), gb = upload(b), gd = upload(dOut);
    math::StridedView va = math::broadcastView(sa, out),
                      vb = math::broadcastView(sb, out);
    for (math::BinaryOp op :
         {math::BinaryOp::Sub, math::BinaryOp::Mul, math::BinaryOp::Div,
          math::BinaryOp::Maximum, math::BinaryOp::Minimum,
          math::BinaryOp::Prelu}) {
      auto gout = zeros(probe.numel());
      cuda::binaryStrided(op, ga.floats(), va, gb.floats(), vb, gout.floats(),
                          stream);
      Tensor want = cpu::binaryMath(a, b, op);
      expectNear(download(gout, want.numel()), want.data, 1e-6, "binary");
      Tensor wantA(sa), wantB(sb);
      cpu::binaryMathBackward(a, b, op, dOut, &wantA, &wantB);
      auto gda = zeros(a.numel()), gdb = zeros(b.numel());
      // Each side as the executor reduces it (math::binaryGradient).
      const float *sources[3] = {gd.floats(), ga.floats(), gb.floats()};
      math::StridedView sourceViews[3] = {math::contiguousView(out), va, vb};
      for (int i = 0; i < 2; ++i) {
        math::BinaryGradient g = math::binaryGradient(op, i);
        const float *ops[3] = {nullptr, nullptr, nullptr};
        std::vector<math::StridedView> views;
        for (int k = 0; k < math::reduceTermOperands(g.term); ++k) {
          ops[k] = sources[g.sources[k]];
          views.push_back(sourceViews[g.sources[k]]);
        }
        cuda::reduceStrided(g.term, ops,
                            math::reductionOnto(i == 0 ? sa : sb, out, views),
                            (i == 0 ? gda : gdb).floats(), g.alpha, true,
                            stream);
      }
      expectNear(download(gda, a.numel()), wantA.data, 1e-4, "lhs gradient");
      expectNear(download(gdb, b.numel()), wantB.data, 1e-4, "rhs gradient");
    }
  }
  Tensor condition = integers({7, 1}, 2), a = random({5, 7, 9}),
         b = random({9});
  std::vector<int64_t> out = {5, 7, 9};
  Tensor dOut = random(out), wantA(a.shape), wantB(b.shape);
  cpu::whereBackward(condition, dOut, &wantA, &wantB);
  auto gc = upload(condition), ga = upload(a), gb = upload(b),
       gd = upload(dOut), gout = zeros(5 * 7 * 9), gda = zeros(a.numel()),
       gdb = zeros(b.numel());
  math::StridedView vc = math::broadcastView(condition.shape, out);
  cuda::whereStrided(gc.floats(), vc, ga.floats(),
                     math::broadcastView(a.shape, out), gb.floats(),
                     math::broadcastView(b.shape, out), gout.floats(), stream);
  expectNear(download(gout, 5 * 7 * 9), cpu::where(condition, a, b).data, 0,
             "where");
  const float *ops[3] = {gd.floats(), gc.floats(), nullptr};
  cuda::reduceStrided(
      math::ReduceTerm::WhereTrue, ops,
      math::reductionOnto(a.shape, out, {math::contiguousView(out), vc}),
      gda.floats(), 1.0f, true, stream);
  cuda::reduceStrided(
      math::ReduceTerm::WhereFalse, ops,
      math::reductionOnto(b.shape, out, {math::contiguousView(out), vc}),
      gdb.floats(), 1.0f, true, stream);
  expectNear(download(gda, a.numel()), wantA.data, 1e-5, "where true side");
  expectNear(download(gdb, b.numel()), wantB.data, 1e-5, "where false side");
}

TEST_F(CudaKernelsTest, MeansTransposeSliceConcat) {
  Tensor x = random({16, 24, 300});
  for (std::vector<int64_t> axes :
       {std::vector<int64_t>{2}, std::vector<int64_t>{0, 1}}) {
    Tensor want = cpu::reduceMean(x, axes, true);
    math::MeanShape m = math::meanShape(x.shape, axes);
    auto gx = upload(x), gout = zeros(want.numel());
    const float *ops[3] = {gx.floats(), nullptr, nullptr};
    cuda::reduceStrided(
        math::ReduceTerm::Value, ops,
        math::reductionOnto(m.kept, x.shape, {math::contiguousView(x.shape)}),
        gout.floats(), 1.0f / m.count, false, stream);
    expectNear(download(gout, want.numel()), want.data, 1e-4, "mean");
    Tensor dOut = random(want.shape), wantDx(x.shape);
    cpu::reduceMeanBackward(x, axes, dOut, &wantDx);
    auto gd = upload(dOut), gdx = zeros(x.numel());
    cuda::copyStrided(gd.floats(), math::broadcastView(m.kept, x.shape),
                      gdx.floats(), math::contiguousView(x.shape),
                      1.0f / m.count, true, stream);
    expectNear(download(gdx, x.numel()), wantDx.data, 1e-5, "mean grad");
    for (bool maximum : {true, false}) {
      Tensor extremum = cpu::reduceExtremum(x, axes, true, maximum);
      Tensor wantGrad(x.shape);
      cpu::reduceExtremumBackward(x, axes, maximum, dOut, &wantGrad);
      math::ReductionViews views =
          math::reductionOnto(m.kept, x.shape, {math::contiguousView(x.shape)});
      auto gext = zeros(extremum.numel()), gdext = zeros(x.numel());
      cuda::reduceExtremum(maximum, gx.floats(), views, gext.floats(), stream);
      cuda::reduceExtremumBackward(maximum, gx.floats(), gd.floats(), views,
                                   gdext.floats(), stream);
      expectNear(download(gext, extremum.numel()), extremum.data, 0,
                 maximum ? "reduce_max" : "reduce_min");
      expectNear(download(gdext, x.numel()), wantGrad.data, 1e-6,
                 maximum ? "reduce_max grad" : "reduce_min grad");
    }
  }
  std::vector<int64_t> perm = {2, 0, 1};
  Tensor t = cpu::transpose(x, perm);
  auto gx = upload(x), gt = zeros(t.numel()), gback = zeros(x.numel());
  cuda::copyStrided(gx.floats(), math::permutedView(x.shape, perm), gt.floats(),
                    math::contiguousView(t.shape), 1, false, stream);
  expectNear(download(gt, t.numel()), t.data, 0, "transpose");
  cuda::copyStrided(gt.floats(), math::contiguousView(t.shape), gback.floats(),
                    math::permutedView(x.shape, perm), 1, true, stream);
  expectNear(download(gback, x.numel()), x.data, 0, "transpose back");
  std::vector<int64_t> starts = {1, 0, 5}, ends = {16, 24, 300},
                       steps = {3, 1, 7};
  Tensor sliced = cpu::slice(x, starts, ends, steps);
  auto gs = zeros(sliced.numel());
  cuda::copyStrided(
      gx.floats(), math::sliceView(x.shape, sliced.shape, starts, steps),
      gs.floats(), math::contiguousView(sliced.shape), 1, false, stream);
  expectNear(download(gs, sliced.numel()), sliced.data, 0, "slice");
  Tensor p = random({16, 5, 300});
  Tensor joined = cpu::concat({&x, &p}, 1);
  auto gp = upload(p), gj = zeros(joined.numel());
  cuda::copyStrided(gx.floats(), math::contiguousView(x.shape), gj.floats(),
                    math::axisBlockView(joined.shape, 1, 0, x.shape), 1, false,
                    stream);
  cuda::copyStrided(gp.floats(), math::contiguousView(p.shape), gj.floats(),
                    math::axisBlockView(joined.shape, 1, 24, p.shape), 1, false,
                    stream);
  expectNear(download(gj, joined.numel()), joined.data, 0, "concat");
}

TEST_F(CudaKernelsTest, UnaryMathAndGather) {
  Tensor x = random({5000}), dy = random({5000});
  for (float &v : x.data)
    v = std::fabs(v) + 0.1f;
  auto gx = upload(x), gdy = upload(dy);
  // The device kernels against the host's run of the same per-element math
  // (checked against its definitions in ElementMathTest).
  for (auto [op, params, kind] :
       {std::tuple{math::UnaryOp::Sqrt, math::UnaryParams{}, "sqrt"},
        {math::UnaryOp::Tanh, math::UnaryParams{}, "tanh"},
        {math::UnaryOp::Erf, math::UnaryParams{}, "erf"},
        {math::UnaryOp::Exp, math::UnaryParams{}, "exp"},
        {math::UnaryOp::Sigmoid, math::UnaryParams{}, "sigmoid"},
        {math::UnaryOp::Silu, math::UnaryParams{}, "silu"},
        {math::UnaryOp::Pow, math::UnaryParams{1.5}, "pow"},
        {math::UnaryOp::Clip, math::UnaryParams{1, 0.3, 0.9}, "clip"},
        {math::UnaryOp::Abs, math::UnaryParams{}, "abs"},
        {math::UnaryOp::Log, math::UnaryParams{}, "log"}}) {
    auto gy = zeros(5000), gdx = zeros(5000);
    cuda::unary(op, gx.floats(), gy.floats(), 5000, params, stream);
    cuda::unaryBackward(op, gx.floats(), gdy.floats(), gdx.floats(), 5000,
                        params, stream);
    Tensor want;
    cpu::unaryMathBackward(x, op, params, dy, &want);
    expectNear(download(gy, 5000), cpu::unaryMath(x, op, params).data, 1e-5,
               kind);
    expectNear(download(gdx, 5000), want.data, 1e-5, kind);
  }

  Tensor table = random({3, 50, 8}), indices({4, 6});
  for (int64_t i = 0; i < indices.numel(); ++i)
    indices.data[i] =
        static_cast<float>(static_cast<int64_t>(rng() % 100) - 50);
  Tensor want, dOut;
  std::string error;
  ASSERT_TRUE(cpu::gather(table, indices, 1, want, error)) << error;
  dOut = random(want.shape);
  Tensor wantDx(table.shape);
  cpu::gatherBackward(table, indices, 1, dOut, &wantDx);
  math::GatherGeometry g = math::gatherGeometry(table.shape, 1, 24);
  auto gt = upload(table), gi = upload(indices), gd = upload(dOut),
       gout = zeros(want.numel()), gdx = zeros(table.numel()), flag = zeros(1);
  cuda::gather(gt.floats(), gi.floats(), g, gout.floats(),
               static_cast<int *>(flag.data()), stream);
  cuda::gatherBackward(gi.floats(), gd.floats(), g, gdx.floats(), stream);
  expectNear(download(gout, want.numel()), want.data, 0, "gather");
  expectNear(download(gdx, table.numel()), wantDx.data, 1e-5, "gather grad");
  auto flagged = [&] {
    int value = 0;
    cudaStreamSynchronize(stream);
    cudaMemcpy(&value, flag.data(), sizeof value, cudaMemcpyDeviceToHost);
    return value;
  };
  EXPECT_EQ(flagged(), 0);
  indices.data[7] = 50;
  auto bad = upload(indices);
  cuda::gather(gt.floats(), bad.floats(), g, gout.floats(),
               static_cast<int *>(flag.data()), stream);
  EXPECT_NE(flagged(), 0) << "an index out of range is flagged";
}

TEST_F(CudaKernelsTest, ColumnsBatchNormAndPooling) {
  math::ConvGeometry g;
  g.n = 3, g.c = 4, g.h = 9, g.w = 7, g.o = 6, g.kh = 3, g.kw = 3, g.groups = 2,
  g.strideH = 2, g.padTop = 1, g.padLeft = 1, g.dilationW = 2;
  g.ho = (9 + 2 - 3) / 2 + 1, g.wo = (7 + 2 - 2 * 2 - 1) + 1;
  Tensor x = random({3, 4, 9, 7});
  int64_t columns = 2 * g.columnRows() * g.spatial();
  Tensor dcol = random({columns});
  std::vector<float> want(columns), wantDx(x.numel(), 0.0f);
  for (int64_t i = 0; i < columns; ++i)
    want[i] = g.column(x.data.data(), 1, 1, i);
  for (int64_t i = 0; i < 2 * g.channelsPerGroup() * g.h * g.w; ++i) {
    int64_t at;
    float sum = g.columnGradient(dcol.data.data(), 1, 1, i, at);
    wantDx[at] += sum;
  }
  auto gx = upload(x), gcol = zeros(columns), gdcol = upload(dcol),
       gdx = zeros(x.numel());
  cuda::im2col(gx.floats(), g, 1, 2, 1, gcol.floats(), stream);
  cuda::col2im(gdcol.floats(), g, 1, 2, 1, gdx.floats(), stream);
  expectNear(download(gcol, columns), want, 0, "im2col");
  expectNear(download(gdx, x.numel()), wantDx, 1e-6, "col2im");

  Tensor bx = random({8, 16, 5, 5}, 3), gamma = random({16}),
         beta = random({16}), dy = random({8, 16, 5, 5});
  Tensor runMean = random({16}), runVar = random({16});
  for (float &v : runVar.data)
    v = std::fabs(v);
  Tensor wantMean = runMean, wantVar = runVar;
  Tensor y = cpu::batchNorm(bx, gamma, beta, 1e-5, &wantMean, &wantVar, 0.1);
  Tensor dbx, dgamma, dbeta;
  cpu::batchNormBackward(bx, gamma, 1e-5, dy, &dbx, &dgamma, &dbeta);
  auto gbx = upload(bx), gg = upload(gamma), gb = upload(beta),
       gdy = upload(dy), gy = zeros(bx.numel()), gm = zeros(16), gv = zeros(16),
       grm = upload(runMean), grv = upload(runVar), gdbx = zeros(bx.numel()),
       gdg = zeros(16), gdb = zeros(16);
  cuda::batchNorm(gbx.floats(), gg.floats(), gb.floats(), gy.floats(),
                  gm.floats(), gv.floats(), 8, 16, 25, 1e-5f, stream);
  cuda::batchNormRunningStats(grm.floats(), grv.floats(), gm.floats(),
                              gv.floats(), 16, 8 * 25, 0.1f, stream);
  cuda::batchNormBackward(gbx.floats(), gg.floats(), gdy.floats(),
                          gdbx.floats(), gdg.floats(), gdb.floats(), 8, 16, 25,
                          1e-5f, stream);
  expectNear(download(gy, bx.numel()), y.data, 1e-5, "batchnorm");
  expectNear(download(grm, 16), wantMean.data, 1e-5, "running mean");
  expectNear(download(grv, 16), wantVar.data, 1e-5, "running variance");
  expectNear(download(gdbx, bx.numel()), dbx.data, 1e-4, "batchnorm dx");
  expectNear(download(gdg, 16), dgamma.data, 1e-4, "batchnorm dgamma");
  expectNear(download(gdb, 16), dbeta.data, 1e-4, "batchnorm dbeta");
  {
    // Inference mode: the running statistics as constants.
    Tensor yi = cpu::batchNormInference(bx, gamma, beta, runMean, runVar, 1e-5);
    Tensor dxi, dgi, dbi;
    cpu::batchNormInferenceBackward(bx, gamma, runMean, runVar, 1e-5, dy, &dxi,
                                    &dgi, &dbi);
    auto fm = upload(runMean), fv = upload(runVar), gyi = zeros(bx.numel()),
         gdxi = zeros(bx.numel()), gdgi = zeros(16), gdbi = zeros(16);
    cuda::batchNorm(gbx.floats(), gg.floats(), gb.floats(), gyi.floats(),
                    nullptr, nullptr, 8, 16, 25, 1e-5f, stream, fm.floats(),
                    fv.floats());
    cuda::batchNormBackward(gbx.floats(), gg.floats(), gdy.floats(),
                            gdxi.floats(), gdgi.floats(), gdbi.floats(), 8, 16,
                            25, 1e-5f, stream, fm.floats(), fv.floats());
    expectNear(download(gyi, bx.numel()), yi.data, 1e-5, "inference bn");
    expectNear(download(gdxi, bx.numel()), dxi.data, 1e-4, "inference bn dx");
    expectNear(download(gdgi, 16), dgi.data, 1e-4, "inference bn dgamma");
    expectNear(download(gdbi, 16), dbi.data, 1e-4, "inference bn dbeta");
  }

  math::Window window;
  window.strideH = window.strideW = 2;
  window.padTop = window.padLeft = window.padBottom = window.padRight = 1;
  window.countTop = window.countLeft = 1; // the bottom and right do not count
  Tensor px = random({4, 8, 17, 17}), pmax = cpu::maxPool2d(px, 3, 3, window);
  Tensor pavg = cpu::avgPool2d(px, 3, 3, window), pdy = random(pmax.shape);
  Tensor wantMax, wantAvg;
  cpu::maxPool2dBackward(px, 3, 3, window, pdy, &wantMax);
  cpu::avgPool2dBackward(px, 3, 3, window, pdy, &wantAvg);
  math::PoolGeometry pg;
  pg.planes = 32, pg.h = pg.w = 17, pg.ho = pmax.shape[2],
  pg.wo = pmax.shape[3], pg.kh = pg.kw = 3, pg.strideH = pg.strideW = 2,
  pg.padTop = pg.padLeft = 1;
  pg.countTop = pg.countLeft = 1;
  auto gpx = upload(px), gpdy = upload(pdy), gmax = zeros(pmax.numel()),
       gavg = zeros(pmax.numel()), gdmax = zeros(px.numel()),
       gdavg = zeros(px.numel());
  cuda::maxPool2d(gpx.floats(), pg, gmax.floats(), stream);
  cuda::avgPool2d(gpx.floats(), pg, gavg.floats(), stream);
  cuda::maxPool2dBackward(gpx.floats(), gpdy.floats(), pg, gdmax.floats(),
                          stream);
  cuda::avgPool2dBackward(gpdy.floats(), pg, gdavg.floats(), stream);
  expectNear(download(gmax, pmax.numel()), pmax.data, 0, "max pool");
  expectNear(download(gavg, pmax.numel()), pavg.data, 1e-6, "avg pool");
  expectNear(download(gdmax, px.numel()), wantMax.data, 1e-6, "max pool grad");
  expectNear(download(gdavg, px.numel()), wantAvg.data, 1e-6, "avg pool grad");
}

TEST_F(CudaKernelsTest, MixedPrecisionProductsKeepFloatResults) {
  // The executor's fp16/bf16 matmuls: fp32 tensors rounded on the device,
  // multiplied on tensor cores, results in fp32 -- equal to the CPU's
  // product of the rounded inputs up to fp32 accumulation order.
  cuda::Matmul matmul;
  std::string error;
  int64_t m = 64, n = 48, k = 96;
  for (cuda::ElementType type :
       {cuda::ElementType::F16, cuda::ElementType::BF16}) {
    bool bf16 = type == cuda::ElementType::BF16;
    Tensor a = random({m, k}), b = random({k, n}), c = random({m, n});
    auto ga = upload(a), gb = upload(b), gc = upload(c);
    cuda::DeviceBuffer ha(a.numel() * 2), hb(b.numel() * 2);
    cuda::roundToHalf(ga.floats(), static_cast<uint16_t *>(ha.data()),
                      a.numel(), bf16, stream);
    cuda::roundToHalf(gb.floats(), static_cast<uint16_t *>(hb.data()),
                      b.numel(), bf16, stream);
    for (Tensor *t : {&a, &b})
      for (float &x : t->data)
        x = bf16 ? __bfloat162float(__float2bfloat16(x))
                 : __half2float(__float2half(x));
    std::vector<uint16_t> rounded(a.numel());
    cudaStreamSynchronize(stream);
    cudaMemcpy(rounded.data(), ha.data(), rounded.size() * 2,
               cudaMemcpyDeviceToHost);
    for (int64_t i = 0; i < a.numel(); ++i) {
      float back = bf16
                       ? __bfloat162float(
                             *reinterpret_cast<__nv_bfloat16 *>(&rounded[i]))
                       : __half2float(*reinterpret_cast<__half *>(&rounded[i]));
      ASSERT_EQ(back, a.data[i]) << "rounding to nearest at " << i;
    }
    Tensor want = c;
    cpu::gemm(a.data.data(), b.data.data(), want.data.data(), m, n, k, false,
              false, true);
    cuda::MatmulShape s;
    s.m = m;
    s.n = n;
    s.k = k;
    s.type = type;
    s.floatOutput = true;
    s.accumulate = true;
    ASSERT_TRUE(matmul.run(s, ha.data(), hb.data(), gc.data(), stream, error))
        << error;
    expectNear(download(gc, m * n), want.data, 1e-4, "mixed-precision matmul");
  }
}

} // namespace
