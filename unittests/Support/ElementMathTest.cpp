//===- ElementMathTest.cpp - Both backends' element math on the host ------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The CUDA kernels of the strided, gather, convolution and pooling ops are
// grid-stride loops over the functions of dtfm/Support/ElementMath.h. Here
// the same functions run in plain loops on the host -- one iteration per GPU
// thread, as the kernels distribute them -- and must reproduce the CPU
// kernels (themselves checked against finite differences and PyTorch). Runs
// on every machine; the GPU tests (unittests/Cuda) cover the launches.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Support/ElementMath.h"
#include "dtfm/Runtime/Cpu/Kernels.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>

using namespace dtfm;
using namespace dtfm::runtime;
using namespace dtfm::math;
using cpu::Tensor;

namespace {

Tensor random(std::vector<int64_t> shape, std::mt19937 &rng) {
  Tensor t(std::move(shape));
  std::normal_distribution<float> normal(0, 1);
  for (float &x : t.data)
    x = normal(rng);
  return t;
}

void expectNear(const Tensor &got, const Tensor &want, double rtol,
                const char *what) {
  ASSERT_EQ(got.shape, want.shape) << what;
  for (size_t i = 0; i < got.data.size(); ++i)
    ASSERT_NEAR(got.data[i], want.data[i],
                rtol * std::max(1.0f, std::fabs(want.data[i])))
        << what << " at " << i;
}

/// copyStrided's kernel, one iteration per thread.
void copy(const Tensor &src, const StridedView &srcView, Tensor &dst,
          const StridedView &dstView, float alpha, bool accumulate) {
  for (int64_t i = 0; i < srcView.numel(); ++i) {
    float value = alpha * src.data[srcView.at(i)];
    float &to = dst.data[dstView.at(i)];
    to = accumulate ? to + value : value;
  }
}

/// reduceStrided's per-thread kernel.
void reduce(ReduceTerm term, std::vector<const Tensor *> operands,
            const ReductionViews &v, Tensor &out, float alpha,
            bool accumulate) {
  int count = reduceTermOperands(term);
  for (int64_t j = 0; j < v.keptCount; ++j) {
    float sum = 0;
    for (int64_t r = 0; r < v.reducedCount; ++r) {
      float x[3] = {0, 0, 0};
      for (int k = 0; k < count; ++k)
        x[k] = operands[k]->data[v.kept[k].at(j) + v.reduced[k].at(r)];
      sum += reduceTerm(term, x[0], x[1], x[2]);
    }
    float &to = out.data[v.result.at(j)];
    to = (accumulate ? to : 0.0f) + alpha * sum;
  }
}

std::vector<int64_t> broadcast(std::vector<int64_t> a, std::vector<int64_t> b) {
  while (a.size() < b.size())
    a.insert(a.begin(), 1);
  while (b.size() < a.size())
    b.insert(b.begin(), 1);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = std::max(a[i], b[i]);
  return a;
}

/// The gradient of operand `x` of a broadcasting op as the executor
/// computes it: a reduction of `term` over x's broadcast dimensions.
Tensor operandGradient(ReduceTerm term, const Tensor &x,
                       const std::vector<const Tensor *> &operands,
                       const std::vector<int64_t> &out) {
  std::vector<StridedView> views;
  for (const Tensor *t : operands)
    views.push_back(broadcastView(t->shape, out));
  Tensor grad(x.shape);
  reduce(term, operands, reductionOnto(x.shape, out, views), grad, 1.0f, true);
  return grad;
}

TEST(ElementMath, BroadcastingBinaryOpsAndTheirGradients) {
  std::mt19937 rng(1);
  for (auto [sa, sb] : {std::pair<std::vector<int64_t>, std::vector<int64_t>>{
                            {4, 1, 5}, {3, 1}},
                        {{2, 3, 4}, {2, 3, 4}},
                        {{6}, {2, 3, 6}},
                        {{2, 1, 3, 1}, {1, 4, 1, 5}}}) {
    Tensor a = random(sa, rng), b = random(sb, rng);
    for (float &y : b.data)
      y += y < 0 ? -0.5f : 0.5f; // away from 0 for div
    std::vector<int64_t> out = broadcast(sa, sb);
    Tensor dOut = random(out, rng);
    for (BinaryOp op :
         {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div,
          BinaryOp::Maximum, BinaryOp::Minimum, BinaryOp::Prelu}) {
      StridedView va = broadcastView(sa, out), vb = broadcastView(sb, out);
      Tensor got(out);
      for (int64_t i = 0; i < va.numel(); ++i)
        got.data[i] = applyBinary(op, a.data[va.at(i)], b.data[vb.at(i)]);
      Tensor want = cpu::binaryMath(a, b, op);
      expectNear(got, want, 1e-6, "forward");

      // The CPU's per-element partials against the reductions the CUDA
      // executor runs (math::binaryGradient's table).
      Tensor wantA(sa), wantB(sb);
      cpu::binaryMathBackward(a, b, op, dOut, &wantA, &wantB);
      const Tensor *sources[3] = {&dOut, &a, &b};
      for (int i = 0; i < 2; ++i) {
        BinaryGradient g = binaryGradient(op, i);
        std::vector<const Tensor *> operands;
        for (int k = 0; k < reduceTermOperands(g.term); ++k)
          operands.push_back(sources[g.sources[k]]);
        Tensor got = operandGradient(g.term, i == 0 ? a : b, operands, out);
        for (float &v : got.data)
          v *= g.alpha;
        expectNear(got, i == 0 ? wantA : wantB, 1e-5,
                   i == 0 ? "lhs gradient" : "rhs gradient");
      }
    }
  }
}

TEST(ElementMath, WhereAndItsGradients) {
  std::mt19937 rng(2);
  Tensor condition({3, 1}), a = random({2, 3, 4}, rng), b = random({4}, rng);
  condition.data = {1, 0, 1};
  std::vector<int64_t> out = {2, 3, 4};
  StridedView vc = broadcastView(condition.shape, out),
              va = broadcastView(a.shape, out),
              vb = broadcastView(b.shape, out);
  Tensor got(out);
  for (int64_t i = 0; i < va.numel(); ++i)
    got.data[i] =
        condition.data[vc.at(i)] != 0 ? a.data[va.at(i)] : b.data[vb.at(i)];
  expectNear(got, cpu::where(condition, a, b), 0, "where");
  Tensor dOut = random(out, rng), wantA(a.shape), wantB(b.shape);
  cpu::whereBackward(condition, dOut, &wantA, &wantB);
  expectNear(
      operandGradient(ReduceTerm::WhereTrue, a, {&dOut, &condition}, out),
      wantA, 1e-6, "where true side");
  expectNear(
      operandGradient(ReduceTerm::WhereFalse, b, {&dOut, &condition}, out),
      wantB, 1e-6, "where false side");
}

TEST(ElementMath, TransposeSliceAndConcat) {
  std::mt19937 rng(3);
  for (std::vector<int64_t> perm :
       {std::vector<int64_t>{2, 0, 1}, {1, 0, 2}, {0, 1, 2}}) {
    Tensor x = random({2, 3, 4}, rng);
    Tensor want = cpu::transpose(x, perm);
    Tensor got(want.shape);
    copy(x, permutedView(x.shape, perm), got, contiguousView(got.shape), 1,
         false);
    expectNear(got, want, 0, "transpose");
    Tensor dOut = random(want.shape, rng), dx(x.shape), wantDx(x.shape);
    cpu::transposeBackward(dOut, perm, &wantDx);
    copy(dOut, contiguousView(dOut.shape), dx, permutedView(x.shape, perm), 1,
         true);
    expectNear(dx, wantDx, 0, "transpose gradient");
  }

  Tensor x = random({5, 6, 7}, rng);
  std::vector<int64_t> starts = {1, 0, 2}, ends = {5, 6, 7}, steps = {2, 1, 3};
  Tensor want = cpu::slice(x, starts, ends, steps);
  Tensor got(want.shape);
  copy(x, sliceView(x.shape, want.shape, starts, steps), got,
       contiguousView(want.shape), 1, false);
  expectNear(got, want, 0, "slice");
  Tensor dOut = random(want.shape, rng), dx(x.shape), wantDx(x.shape);
  cpu::sliceBackward(x, starts, steps, dOut, &wantDx);
  copy(dOut, contiguousView(dOut.shape), dx,
       sliceView(x.shape, dOut.shape, starts, steps), 1, true);
  expectNear(dx, wantDx, 0, "slice gradient");

  Tensor p0 = random({2, 1, 3}, rng), p1 = random({2, 4, 3}, rng),
         p2 = random({2, 2, 3}, rng);
  Tensor joined = cpu::concat({&p0, &p1, &p2}, 1);
  Tensor mine(joined.shape);
  int64_t begin = 0;
  for (const Tensor *p : {&p0, &p1, &p2}) {
    copy(*p, contiguousView(p->shape), mine,
         axisBlockView(joined.shape, 1, begin, p->shape), 1, false);
    begin += p->shape[1];
  }
  expectNear(mine, joined, 0, "concat");
  Tensor dJoined = random(joined.shape, rng);
  Tensor w0(p0.shape), w1(p1.shape), w2(p2.shape);
  cpu::concatBackward(dJoined, 1, {&w0, &w1, &w2});
  begin = 0;
  for (auto [p, w] : {std::pair{&p0, &w0}, {&p1, &w1}, {&p2, &w2}}) {
    Tensor g(p->shape);
    copy(dJoined, axisBlockView(joined.shape, 1, begin, p->shape), g,
         contiguousView(p->shape), 1, true);
    expectNear(g, *w, 0, "concat gradient");
    begin += p->shape[1];
  }
}

TEST(ElementMath, MeansAndTheirGradients) {
  std::mt19937 rng(4);
  Tensor x = random({3, 4, 5, 6}, rng);
  for (auto [axes, keepdims] :
       {std::pair<std::vector<int64_t>, bool>{{1, 3}, false},
        {{-1}, true},
        {{0, 1, 2, 3}, false},
        {{2, 3}, true}}) {
    Tensor want = cpu::reduceMean(x, axes, keepdims);
    MeanShape m = meanShape(x.shape, axes);
    Tensor got(want.shape);
    reduce(ReduceTerm::Value, {&x},
           reductionOnto(m.kept, x.shape, {contiguousView(x.shape)}), got,
           1.0f / static_cast<float>(m.count), false);
    expectNear(got, want, 1e-5, "mean");
    Tensor dOut = random(want.shape, rng), dx(x.shape), wantDx(x.shape);
    cpu::reduceMeanBackward(x, axes, dOut, &wantDx);
    copy(dOut, broadcastView(m.kept, x.shape), dx, contiguousView(x.shape),
         1.0f / static_cast<float>(m.count), true);
    expectNear(dx, wantDx, 1e-6, "mean gradient");
  }
}

TEST(ElementMath, GatherAlongAnAxisWithNegativeAndBadIndices) {
  std::mt19937 rng(5);
  Tensor x = random({3, 5, 4}, rng), indices({2, 3});
  indices.data = {0, 4, -1, 2, -5, 2};
  Tensor want;
  std::string error;
  ASSERT_TRUE(cpu::gather(x, indices, 1, want, error)) << error;
  GatherGeometry g = gatherGeometry(x.shape, 1, indices.numel());
  EXPECT_EQ(g.resultCount(), want.numel());
  Tensor got(want.shape);
  for (int64_t i = 0; i < g.resultCount(); ++i)
    got.data[i] = x.data[g.source(indices.data.data(), i)];
  expectNear(got, want, 0, "gather");
  Tensor dOut = random(want.shape, rng), dx(x.shape), wantDx(x.shape);
  cpu::gatherBackward(x, indices, 1, dOut, &wantDx);
  for (int64_t i = 0; i < g.resultCount(); ++i)
    dx.data[g.source(indices.data.data(), i)] += dOut.data[i];
  expectNear(dx, wantDx, 1e-6, "gather gradient");
  indices.data[3] = 5;
  EXPECT_EQ(g.source(indices.data.data(), 3 * 4), -1);
  indices.data[3] = -6;
  EXPECT_EQ(g.source(indices.data.data(), 3 * 4), -1);
}

TEST(ElementMath, ConvolutionThroughColumnMatrices) {
  std::mt19937 rng(6);
  struct Case {
    int64_t n, c, h, w, o, kh, kw, groups;
    math::Window window;
  };
  math::Window strided;
  strided.strideH = 2;
  strided.strideW = 1;
  strided.padTop = 1;
  strided.padLeft = 2;
  strided.padBottom = 0;
  strided.padRight = 1;
  math::Window dilated;
  dilated.dilationH = 2;
  dilated.dilationW = 2;
  dilated.padTop = dilated.padBottom = dilated.padLeft = dilated.padRight = 2;
  for (const Case &k : {Case{2, 4, 7, 6, 6, 3, 3, 2, strided},
                        Case{3, 3, 8, 8, 4, 3, 2, 1, dilated},
                        Case{1, 2, 5, 5, 2, 1, 1, 1, math::Window()}}) {
    Tensor x = random({k.n, k.c, k.h, k.w}, rng);
    Tensor w = random({k.o, k.c / k.groups, k.kh, k.kw}, rng);
    Tensor want = cpu::conv2d(x, w, nullptr, k.window, k.groups);
    ConvGeometry g;
    g.n = k.n, g.c = k.c, g.h = k.h, g.w = k.w, g.o = k.o, g.kh = k.kh,
    g.kw = k.kw, g.groups = k.groups;
    g.ho = want.shape[2], g.wo = want.shape[3];
    g.strideH = k.window.strideH, g.strideW = k.window.strideW;
    g.padTop = k.window.padTop, g.padLeft = k.window.padLeft;
    g.dilationH = k.window.dilationH, g.dilationW = k.window.dilationW;
    int64_t rows = g.columnRows(), spatial = g.spatial();
    Tensor dOut = random(want.shape, rng), wantDx, wantDw;
    cpu::conv2dBackward(x, w, k.window, k.groups, dOut, &wantDx, &wantDw,
                        nullptr);
    // As the executor: columns of two images at a time, the filters'
    // products per image, col2im of the column gradients.
    Tensor got(want.shape), dx(x.shape), dw(w.shape);
    for (int64_t first = 0; first < k.n; first += 2) {
      int64_t images = std::min<int64_t>(2, k.n - first);
      for (int64_t grp = 0; grp < k.groups; ++grp) {
        std::vector<float> columns(images * rows * spatial),
            dcolumns(columns.size());
        for (size_t i = 0; i < columns.size(); ++i)
          columns[i] = g.column(x.data.data(), first, grp, i);
        const float *filters = w.data.data() + grp * g.filtersPerGroup() * rows;
        for (int64_t image = 0; image < images; ++image) {
          int64_t outAt =
              ((first + image) * g.o + grp * g.filtersPerGroup()) * spatial;
          float *col = columns.data() + image * rows * spatial;
          cpu::gemm(filters, col, got.data.data() + outAt, g.filtersPerGroup(),
                    spatial, rows, false, false, false);
          cpu::gemm(dOut.data.data() + outAt, col,
                    dw.data.data() + grp * g.filtersPerGroup() * rows,
                    g.filtersPerGroup(), rows, spatial, false, true, true);
          cpu::gemm(filters, dOut.data.data() + outAt,
                    dcolumns.data() + image * rows * spatial, rows, spatial,
                    g.filtersPerGroup(), true, false, false);
        }
        for (int64_t i = 0; i < images * g.channelsPerGroup() * g.h * g.w;
             ++i) {
          int64_t at;
          float sum = g.columnGradient(dcolumns.data(), first, grp, i, at);
          dx.data[at] += sum;
        }
      }
    }
    expectNear(got, want, 1e-5, "conv2d");
    expectNear(dw, wantDw, 1e-4, "conv2d filter gradient");
    expectNear(dx, wantDx, 1e-5, "conv2d input gradient");
  }
}

TEST(ElementMath, PoolingWindowsOverlappingAndPadded) {
  std::mt19937 rng(7);
  for (auto [kh, kw, sh, sw, pt, pl, pb, pr] :
       {std::array<int64_t, 8>{3, 3, 2, 2, 1, 1, 1, 1},
        {2, 2, 2, 2, 0, 0, 0, 0},
        {3, 2, 1, 2, 0, 1, 2, 0}}) {
    Tensor x = random({2, 3, 7, 6}, rng);
    // Ties inside windows: the first in window order wins, as on the CPU.
    x.data[5] = x.data[6] = x.data[12] = 3.0f;
    math::Window win;
    win.strideH = sh, win.strideW = sw;
    win.padTop = pt, win.padLeft = pl, win.padBottom = pb, win.padRight = pr;
    // The divisor counts the top and right padding only.
    win.countTop = pt, win.countRight = pr;
    Tensor wantMax = cpu::maxPool2d(x, kh, kw, win);
    Tensor wantAvg = cpu::avgPool2d(x, kh, kw, win);
    PoolGeometry g;
    g.planes = 6, g.h = 7, g.w = 6, g.ho = wantMax.shape[2],
    g.wo = wantMax.shape[3], g.kh = kh, g.kw = kw, g.strideH = sh,
    g.strideW = sw, g.padTop = pt, g.padLeft = pl;
    g.countTop = pt, g.countRight = pr;
    Tensor gotMax(wantMax.shape), gotAvg(wantAvg.shape);
    for (int64_t i = 0; i < gotMax.numel(); ++i) {
      int64_t at = g.argMax(x.data.data(), i);
      gotMax.data[i] = at < 0 ? -INFINITY : x.data[at];
      gotAvg.data[i] = g.average(x.data.data(), i);
    }
    expectNear(gotMax, wantMax, 0, "max pool");
    expectNear(gotAvg, wantAvg, 1e-6, "average pool");
    Tensor dOut = random(wantMax.shape, rng);
    Tensor wantDmax(x.shape), wantDavg(x.shape), dmax(x.shape), davg(x.shape);
    cpu::maxPool2dBackward(x, kh, kw, win, dOut, &wantDmax);
    cpu::avgPool2dBackward(x, kh, kw, win, dOut, &wantDavg);
    for (int64_t i = 0; i < x.numel(); ++i) {
      dmax.data[i] += g.maxGradient(x.data.data(), dOut.data.data(), i);
      davg.data[i] += g.averageGradient(dOut.data.data(), i);
    }
    expectNear(dmax, wantDmax, 1e-6, "max pool gradient");
    expectNear(davg, wantDavg, 1e-6, "average pool gradient");
  }
}

TEST(ElementMath, RotaryElementsTurnAsTheCpuKernel) {
  std::mt19937 rng(9);
  int64_t b = 2, s = 7, heads = 3, dh = 6, hidden = heads * dh;
  Tensor x = random({b, s, hidden}, rng);
  for (int sign : {1, -1}) {
    Tensor want = cpu::rotary(x, heads, 500.0, sign < 0), got(x.shape);
    for (int64_t i = 0; i < x.numel(); ++i)
      got.data[i] = rotaryElement(x.data.data(), i, s, hidden, dh, 500.0, sign);
    expectNear(got, want, 1e-6, "rotary");
  }
}

double sigmoidOf(double v) { return 1 / (1 + std::exp(-v)); }

// The oracle: each function and its derivative in double precision,
// written here from their definitions (the CPU and CUDA kernels both run
// applyUnary / unaryGradient, so neither can be the other's oracle).
TEST(ElementMath, UnaryMathAndGradients) {
  std::mt19937 rng(8);
  Tensor x = random({200}, rng), dOut = random({200}, rng);
  for (float &v : x.data)
    v = std::fabs(v) + 0.1f; // sqrt and fractional powers need x > 0
  struct Case {
    UnaryOp op;
    UnaryParams params;
    double (*value)(double, UnaryParams);
    double (*derivative)(double, UnaryParams);
    const char *name;
  };
  const double pi = 3.14159265358979323846;
  std::vector<Case> cases = {
      {UnaryOp::Sqrt,
       {},
       [](double v, UnaryParams) { return std::sqrt(v); },
       [](double v, UnaryParams) { return 0.5 / std::sqrt(v); },
       "sqrt"},
      {UnaryOp::Tanh,
       {},
       [](double v, UnaryParams) { return std::tanh(v); },
       [](double v, UnaryParams) { return 1 - std::tanh(v) * std::tanh(v); },
       "tanh"},
      {UnaryOp::Erf,
       {},
       [](double v, UnaryParams) { return std::erf(v); },
       nullptr,
       "erf"},
      {UnaryOp::Exp,
       {},
       [](double v, UnaryParams) { return std::exp(v); },
       [](double v, UnaryParams) { return std::exp(v); },
       "exp"},
      {UnaryOp::Sigmoid,
       {},
       [](double v, UnaryParams) { return sigmoidOf(v); },
       [](double v, UnaryParams) { return sigmoidOf(v) * (1 - sigmoidOf(v)); },
       "sigmoid"},
      {UnaryOp::Silu,
       {},
       [](double v, UnaryParams) { return v * sigmoidOf(v); },
       [](double v, UnaryParams) {
         return sigmoidOf(v) * (1 + v * (1 - sigmoidOf(v)));
       },
       "silu"},
      {UnaryOp::Clip,
       {1, 0.3, 0.9},
       [](double v, UnaryParams p) {
         return std::min(std::max(v, p.low), p.high);
       },
       [](double v, UnaryParams p) {
         return v > p.low && v < p.high ? 1.0 : 0.0;
       },
       "clip"},
      {UnaryOp::Abs,
       {},
       [](double v, UnaryParams) { return std::fabs(v); },
       [](double v, UnaryParams) { return v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0; },
       "abs"},
      {UnaryOp::Log,
       {},
       [](double v, UnaryParams) { return std::log(v); },
       [](double v, UnaryParams) { return 1 / v; },
       "log"},
  };
  for (double exponent : {2.0, 0.5, -1.5, 3.0})
    cases.push_back(
        {UnaryOp::Pow,
         {exponent},
         [](double v, UnaryParams p) { return std::pow(v, p.exponent); },
         [](double v, UnaryParams p) {
           return p.exponent * std::pow(v, p.exponent - 1);
         },
         "pow"});
  for (const Case &c : cases) {
    Tensor want(x.shape), wantDx(x.shape), got(x.shape), dx(x.shape);
    for (int64_t i = 0; i < x.numel(); ++i) {
      double v = x.data[i];
      double derivative = c.derivative
                              ? c.derivative(v, c.params)
                              : 2 / std::sqrt(pi) * std::exp(-v * v); // erf
      want.data[i] = static_cast<float>(c.value(v, c.params));
      wantDx.data[i] = static_cast<float>(dOut.data[i] * derivative);
      got.data[i] = applyUnary(c.op, x.data[i], c.params);
      dx.data[i] += unaryGradient(c.op, x.data[i], dOut.data[i], c.params);
    }
    expectNear(got, want, 1e-5, c.name);
    expectNear(dx, wantDx, 1e-5, c.name);
  }
  // The CPU kernels are these functions over a tensor.
  Tensor viaKernel = cpu::unaryMath(x, UnaryOp::Silu, {}), viaDx(x.shape);
  cpu::unaryMathBackward(x, UnaryOp::Silu, {}, dOut, &viaDx);
  for (int64_t i = 0; i < x.numel(); ++i) {
    EXPECT_EQ(viaKernel.data[i], applyUnary(UnaryOp::Silu, x.data[i], {}));
    EXPECT_EQ(viaDx.data[i],
              unaryGradient(UnaryOp::Silu, x.data[i], dOut.data[i], {}));
  }
}

} // namespace
