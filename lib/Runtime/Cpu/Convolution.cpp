//===- Convolution.cpp - CPU convolution, batchnorm, pooling -------------===//
//
// Part of dtfm. Convolutional networks (NCHW): convolution as im2col + sgemm,
// batch normalisation, max/average/global pooling, forward and backward.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"
#include "dtfm/Format/Sparse.h"
#include "dtfm/Support/ElementMath.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

using namespace dtfm::runtime::cpu;
using namespace dtfm::math;
namespace math = dtfm::math;

//===----------------------------------------------------------------------===//
// convolution (im2col + sgemm), batchnorm, pooling
//===----------------------------------------------------------------------===//

namespace {
struct ConvShape {
  int64_t n, c, h, w, o, kh, kw, ho, wo, cg, og;
};

/// The convolution of an input of shape x by filters of shape w.
ConvShape convShape(const std::vector<int64_t> &x, const std::vector<int64_t> &w,
                    const Window &win, int64_t groups) {
  ConvShape s;
  s.n = x[0], s.c = x[1], s.h = x[2], s.w = x[3];
  s.o = w[0], s.kh = w[2], s.kw = w[3];
  s.ho = (s.h + win.padTop + win.padBottom - win.dilationH * (s.kh - 1) - 1) /
             win.strideH +
         1;
  s.wo = (s.w + win.padLeft + win.padRight - win.dilationW * (s.kw - 1) - 1) /
             win.strideW +
         1;
  s.cg = s.c / groups;
  s.og = s.o / groups;
  return s;
}

/// Column matrix [cg*kh*kw, ho*wo] of image n, group g (zeros for padding).
void im2col(const Tensor &x, const ConvShape &s, const Window &win, int64_t n,
            int64_t g, std::vector<float> &col) {
  col.assign(s.cg * s.kh * s.kw * s.ho * s.wo, 0.0f);
  for (int64_t c = 0; c < s.cg; ++c)
    for (int64_t i = 0; i < s.kh; ++i)
      for (int64_t j = 0; j < s.kw; ++j) {
        float *row = col.data() + ((c * s.kh + i) * s.kw + j) * s.ho * s.wo;
        const float *image =
            x.data.data() + ((n * s.c) + g * s.cg + c) * s.h * s.w;
        for (int64_t y = 0; y < s.ho; ++y) {
          int64_t iy = y * win.strideH - win.padTop + i * win.dilationH;
          if (iy < 0 || iy >= s.h)
            continue;
          for (int64_t xo = 0; xo < s.wo; ++xo) {
            int64_t ix = xo * win.strideW - win.padLeft + j * win.dilationW;
            if (ix >= 0 && ix < s.w)
              row[y * s.wo + xo] = image[iy * s.w + ix];
          }
        }
      }
}

/// Adds a column matrix back into image n, group g of `dx`.
void col2im(const std::vector<float> &col, const ConvShape &s,
            const Window &win, int64_t n, int64_t g, Tensor &dx) {
  for (int64_t c = 0; c < s.cg; ++c)
    for (int64_t i = 0; i < s.kh; ++i)
      for (int64_t j = 0; j < s.kw; ++j) {
        const float *row =
            col.data() + ((c * s.kh + i) * s.kw + j) * s.ho * s.wo;
        float *image = dx.data.data() + ((n * s.c) + g * s.cg + c) * s.h * s.w;
        for (int64_t y = 0; y < s.ho; ++y) {
          int64_t iy = y * win.strideH - win.padTop + i * win.dilationH;
          if (iy < 0 || iy >= s.h)
            continue;
          for (int64_t xo = 0; xo < s.wo; ++xo) {
            int64_t ix = xo * win.strideW - win.padLeft + j * win.dilationW;
            if (ix >= 0 && ix < s.w)
              image[iy * s.w + ix] += row[y * s.wo + xo];
          }
        }
      }
}
/// out [N, O, ho, wo] (+)= the convolution of x by w.
void convolve(const Tensor &x, const Tensor &w, const ConvShape &s,
              const Window &win, int64_t groups, float *out, bool accumulate) {
  std::vector<float> col;
  int64_t k = s.cg * s.kh * s.kw, spatial = s.ho * s.wo;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t g = 0; g < groups; ++g) {
      im2col(x, s, win, n, g, col);
      gemm(w.data.data() + g * s.og * k, col.data(),
           out + (n * s.o + g * s.og) * spatial, s.og, spatial, k, false, false,
           accumulate);
    }
}

/// dx += the convolution's input gradient: its transpose applied to dOut.
void convolveInputGradient(const Tensor &w, const float *dOut,
                           const ConvShape &s, const Window &win,
                           int64_t groups, Tensor &dx) {
  std::vector<float> dcol;
  int64_t k = s.cg * s.kh * s.kw, spatial = s.ho * s.wo;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t g = 0; g < groups; ++g) {
      dcol.assign(k * spatial, 0.0f);
      // dcol [k, spatial] = W^T [k, og] * dOut [og, spatial]
      gemm(w.data.data() + g * s.og * k, dOut + (n * s.o + g * s.og) * spatial,
           dcol.data(), k, spatial, s.og, true, false, false);
      col2im(dcol, s, win, n, g, dx);
    }
}

/// dw += the convolution's weight gradient: dOut times x's columns.
void convolveWeightGradient(const Tensor &x, const float *dOut,
                            const ConvShape &s, const Window &win,
                            int64_t groups, Tensor &dw) {
  std::vector<float> col;
  int64_t k = s.cg * s.kh * s.kw, spatial = s.ho * s.wo;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t g = 0; g < groups; ++g) {
      im2col(x, s, win, n, g, col);
      // dW [og, k] += dOut [og, spatial] * col^T [spatial, k]
      gemm(dOut + (n * s.o + g * s.og) * spatial, col.data(),
           dw.data.data() + g * s.og * k, s.og, k, spatial, false, true, true);
    }
}

/// y [N, C, ...] += bias [C] per channel, or dBias += y's sums per channel.
void addPerChannel(Tensor &y, const Tensor &bias) {
  int64_t channels = y.dim(1), plane = y.numel() / (y.dim(0) * channels);
  for (int64_t n = 0; n < y.dim(0); ++n)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t p = 0; p < plane; ++p)
        y.data[(n * channels + c) * plane + p] += bias.data[c];
}
void sumPerChannel(const Tensor &y, Tensor &sums) {
  int64_t channels = y.dim(1), plane = y.numel() / (y.dim(0) * channels);
  for (int64_t n = 0; n < y.dim(0); ++n)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t p = 0; p < plane; ++p)
        sums.data[c] += y.data[(n * channels + c) * plane + p];
}
} // namespace

Tensor dtfm::runtime::cpu::conv2d(const Tensor &x, const Tensor &w,
                                  const Tensor *bias, const Window &window,
                                  int64_t groups) {
  ConvShape s = convShape(x.shape, w.shape, window, groups);
  Tensor out({s.n, s.o, s.ho, s.wo});
  convolve(x, w, s, window, groups, out.data.data(), false);
  if (bias)
    addPerChannel(out, *bias);
  return out;
}

void dtfm::runtime::cpu::conv2dBackward(const Tensor &x, const Tensor &w,
                                        const Window &window, int64_t groups,
                                        const Tensor &dOut, Tensor *dx,
                                        Tensor *dw, Tensor *dBias) {
  ConvShape s = convShape(x.shape, w.shape, window, groups);
  ensure(dx, x.shape);
  ensure(dw, w.shape);
  ensure(dBias, {s.o});
  if (dw)
    convolveWeightGradient(x, dOut.data.data(), s, window, groups, *dw);
  if (dx)
    convolveInputGradient(w, dOut.data.data(), s, window, groups, *dx);
  if (dBias)
    sumPerChannel(dOut, *dBias);
}

std::vector<int64_t> dtfm::runtime::cpu::convTransposedShape(
    const std::vector<int64_t> &x, const std::vector<int64_t> &w,
    const Window &window, std::array<int64_t, 2> outputPadding,
    int64_t groups) {
  return {x[0], w[1] * groups,
          (x[2] - 1) * window.strideH - window.padTop - window.padBottom +
              window.dilationH * (w[2] - 1) + outputPadding[0] + 1,
          (x[3] - 1) * window.strideW - window.padLeft - window.padRight +
              window.dilationW * (w[3] - 1) + outputPadding[1] + 1};
}

Tensor dtfm::runtime::cpu::convTranspose2d(const Tensor &x, const Tensor &w,
                                           const Tensor *bias,
                                           const Window &window,
                                           std::array<int64_t, 2> outputPadding,
                                           int64_t groups) {
  // The convolution that maps the result's shape to x's, transposed.
  Tensor out(convTransposedShape(x.shape, w.shape, window, outputPadding,
                                 groups));
  ConvShape s = convShape(out.shape, w.shape, window, groups);
  assert(s.ho == x.dim(2) && s.wo == x.dim(3));
  convolveInputGradient(w, x.data.data(), s, window, groups, out);
  if (bias)
    addPerChannel(out, *bias);
  return out;
}

void dtfm::runtime::cpu::convTranspose2dBackward(
    const Tensor &x, const Tensor &w, const Window &window, int64_t groups,
    const Tensor &dOut, Tensor *dx, Tensor *dw, Tensor *dBias) {
  ConvShape s = convShape(dOut.shape, w.shape, window, groups);
  ensure(dx, x.shape);
  ensure(dw, w.shape);
  ensure(dBias, {dOut.dim(1)});
  if (dx) // the transpose of the transpose: the convolution of dOut
    convolve(dOut, w, s, window, groups, dx->data.data(), true);
  if (dw) // dOut plays the convolution's input, x its output gradient
    convolveWeightGradient(dOut, x.data.data(), s, window, groups, *dw);
  if (dBias)
    sumPerChannel(dOut, *dBias);
}

/// Per-channel mean and biased variance over every dimension but 1.
static void channelStats(const Tensor &x, std::vector<double> &mean,
                         std::vector<double> &var) {
  int64_t n = x.dim(0), c = x.dim(1), inner = x.numel() / (n * c);
  mean.assign(c, 0);
  var.assign(c, 0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < inner; ++i)
        mean[ch] += x.data[(b * c + ch) * inner + i];
  for (double &m : mean)
    m /= static_cast<double>(n * inner);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < inner; ++i) {
        double d = x.data[(b * c + ch) * inner + i] - mean[ch];
        var[ch] += d * d;
      }
  for (double &v : var)
    v /= static_cast<double>(n * inner);
}

Tensor dtfm::runtime::cpu::batchNorm(const Tensor &x, const Tensor &gamma,
                                     const Tensor &beta, double epsilon,
                                     Tensor *runningMean, Tensor *runningVar,
                                     double momentum) {
  int64_t n = x.dim(0), c = x.dim(1), inner = x.numel() / (n * c);
  std::vector<double> mean, var;
  channelStats(x, mean, var);
  Tensor out(x.shape);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      double rstd = 1.0 / std::sqrt(var[ch] + epsilon);
      for (int64_t i = 0; i < inner; ++i) {
        int64_t at = (b * c + ch) * inner + i;
        out.data[at] = static_cast<float>(
            (x.data[at] - mean[ch]) * rstd * gamma.data[ch] + beta.data[ch]);
      }
    }
  double count = static_cast<double>(n * inner);
  for (int64_t ch = 0; ch < c; ++ch) {
    if (runningMean)
      runningMean->data[ch] = static_cast<float>(
          (1 - momentum) * runningMean->data[ch] + momentum * mean[ch]);
    if (runningVar) // unbiased, as PyTorch keeps it
      runningVar->data[ch] = static_cast<float>(
          (1 - momentum) * runningVar->data[ch] +
          momentum * var[ch] * count / std::max(1.0, count - 1));
  }
  return out;
}

void dtfm::runtime::cpu::batchNormBackward(const Tensor &x, const Tensor &gamma,
                                           double epsilon, const Tensor &dOut,
                                           Tensor *dx, Tensor *dGamma,
                                           Tensor *dBeta) {
  int64_t n = x.dim(0), c = x.dim(1), inner = x.numel() / (n * c);
  double count = static_cast<double>(n * inner);
  std::vector<double> mean, var;
  channelStats(x, mean, var);
  ensure(dx, x.shape);
  ensure(dGamma, gamma.shape);
  ensure(dBeta, gamma.shape);
  for (int64_t ch = 0; ch < c; ++ch) {
    double rstd = 1.0 / std::sqrt(var[ch] + epsilon);
    double sumDy = 0, sumDyXhat = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t at = (b * c + ch) * inner + i;
        double xhat = (x.data[at] - mean[ch]) * rstd;
        sumDy += dOut.data[at];
        sumDyXhat += dOut.data[at] * xhat;
      }
    if (dGamma)
      dGamma->data[ch] += static_cast<float>(sumDyXhat);
    if (dBeta)
      dBeta->data[ch] += static_cast<float>(sumDy);
    if (dx)
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < inner; ++i) {
          int64_t at = (b * c + ch) * inner + i;
          double xhat = (x.data[at] - mean[ch]) * rstd;
          dx->data[at] += static_cast<float>(
              gamma.data[ch] * rstd *
              (dOut.data[at] - sumDy / count - xhat * sumDyXhat / count));
        }
  }
}

Tensor
dtfm::runtime::cpu::batchNormInference(const Tensor &x, const Tensor &gamma,
                                       const Tensor &beta, const Tensor &mean,
                                       const Tensor &var, double epsilon) {
  int64_t n = x.dim(0), c = x.dim(1), inner = x.numel() / (n * c);
  Tensor out(x.shape);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      double rstd =
          1.0 / std::sqrt(static_cast<double>(var.data[ch]) + epsilon);
      for (int64_t i = 0; i < inner; ++i) {
        int64_t at = (b * c + ch) * inner + i;
        out.data[at] = static_cast<float>((x.data[at] - mean.data[ch]) * rstd *
                                              gamma.data[ch] +
                                          beta.data[ch]);
      }
    }
  return out;
}

void dtfm::runtime::cpu::batchNormInferenceBackward(
    const Tensor &x, const Tensor &gamma, const Tensor &mean, const Tensor &var,
    double epsilon, const Tensor &dOut, Tensor *dx, Tensor *dGamma,
    Tensor *dBeta) {
  int64_t n = x.dim(0), c = x.dim(1), inner = x.numel() / (n * c);
  ensure(dx, x.shape);
  ensure(dGamma, gamma.shape);
  ensure(dBeta, gamma.shape);
  for (int64_t ch = 0; ch < c; ++ch) {
    double rstd = 1.0 / std::sqrt(static_cast<double>(var.data[ch]) + epsilon);
    double sumDy = 0, sumDyXhat = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t at = (b * c + ch) * inner + i;
        sumDy += dOut.data[at];
        sumDyXhat += dOut.data[at] * (x.data[at] - mean.data[ch]) * rstd;
        if (dx)
          dx->data[at] +=
              static_cast<float>(gamma.data[ch] * rstd * dOut.data[at]);
      }
    if (dGamma)
      dGamma->data[ch] += static_cast<float>(sumDyXhat);
    if (dBeta)
      dBeta->data[ch] += static_cast<float>(sumDy);
  }
}

/// Output size of a pooling window along one dimension.
static int64_t pooledSize(int64_t in, int64_t k, int64_t stride, int64_t a,
                          int64_t b) {
  return (in + a + b - k) / stride + 1;
}

/// The windows of pooling x [N, C, H, W] into [N, C, ho, wo]: the same
/// geometry (and window walk) the CUDA kernels use.
math::PoolGeometry dtfm::runtime::cpu::poolGeometry(int64_t planes, int64_t h,
                                                    int64_t w, int64_t ho,
                                                    int64_t wo, int64_t kh,
                                                    int64_t kw,
                                                    const Window &win) {
  math::PoolGeometry g;
  g.planes = planes;
  g.h = h;
  g.w = w;
  g.ho = ho;
  g.wo = wo;
  g.kh = kh;
  g.kw = kw;
  g.strideH = win.strideH;
  g.strideW = win.strideW;
  g.padTop = win.padTop;
  g.padLeft = win.padLeft;
  g.countTop = win.countTop;
  g.countLeft = win.countLeft;
  g.countBottom = win.countBottom;
  g.countRight = win.countRight;
  return g;
}

/// Pooling x [N, C, H, W] into [N, C, ho, wo].
static math::PoolGeometry poolingOf(const Tensor &x, int64_t ho, int64_t wo,
                                    int64_t kh, int64_t kw, const Window &win) {
  return dtfm::runtime::cpu::poolGeometry(x.dim(0) * x.dim(1), x.dim(2),
                                          x.dim(3), ho, wo, kh, kw, win);
}

/// The pooled shape of x [N, C, H, W].
static std::vector<int64_t> pooledShape(const Tensor &x, int64_t kh,
                                        int64_t kw, const Window &win) {
  return {x.dim(0), x.dim(1),
          pooledSize(x.dim(2), kh, win.strideH, win.padTop, win.padBottom),
          pooledSize(x.dim(3), kw, win.strideW, win.padLeft, win.padRight)};
}

Tensor dtfm::runtime::cpu::maxPool2d(const Tensor &x, int64_t kh, int64_t kw,
                                     const Window &win) {
  Tensor out(pooledShape(x, kh, kw, win));
  math::PoolGeometry g = poolingOf(x, out.dim(2), out.dim(3), kh, kw, win);
  for (int64_t flat = 0; flat < out.numel(); ++flat) {
    float best = -std::numeric_limits<float>::infinity();
    g.forEachCell(flat, [&](int64_t at) { best = std::max(best, x.data[at]); });
    out.data[flat] = best;
  }
  return out;
}

void dtfm::runtime::cpu::maxPool2dBackward(const Tensor &x, int64_t kh,
                                           int64_t kw, const Window &win,
                                           const Tensor &dOut, Tensor *dx) {
  ensure(dx, x.shape);
  math::PoolGeometry g = poolingOf(x, dOut.dim(2), dOut.dim(3), kh, kw, win);
  for (int64_t flat = 0; flat < dOut.numel(); ++flat) {
    // The first cell in window order among equals takes the gradient.
    float best = -std::numeric_limits<float>::infinity();
    int64_t arg = -1;
    g.forEachCell(flat, [&](int64_t at) {
      if (x.data[at] > best) {
        best = x.data[at];
        arg = at;
      }
    });
    if (arg >= 0)
      dx->data[arg] += dOut.data[flat];
  }
}

Tensor dtfm::runtime::cpu::avgPool2d(const Tensor &x, int64_t kh, int64_t kw,
                                     const Window &win) {
  Tensor out(pooledShape(x, kh, kw, win));
  math::PoolGeometry g = poolingOf(x, out.dim(2), out.dim(3), kh, kw, win);
  for (int64_t flat = 0; flat < out.numel(); ++flat)
    out.data[flat] = g.average(x.data.data(), flat);
  return out;
}

void dtfm::runtime::cpu::avgPool2dBackward(const Tensor &x, int64_t kh,
                                           int64_t kw, const Window &win,
                                           const Tensor &dOut, Tensor *dx) {
  ensure(dx, x.shape);
  math::PoolGeometry g = poolingOf(x, dOut.dim(2), dOut.dim(3), kh, kw, win);
  for (int64_t flat = 0; flat < dOut.numel(); ++flat) {
    int64_t cells = g.divisor(flat);
    if (cells == 0)
      continue;
    float share = dOut.data[flat] / static_cast<float>(cells);
    g.forEachCell(flat, [&](int64_t at) { dx->data[at] += share; });
  }
}

Tensor dtfm::runtime::cpu::globalAvgPool(const Tensor &x) {
  int64_t n = x.dim(0), c = x.dim(1), inner = x.numel() / (n * c);
  std::vector<int64_t> shape{n, c};
  for (size_t d = 2; d < x.shape.size(); ++d)
    shape.push_back(1);
  Tensor out(shape);
  for (int64_t p = 0; p < n * c; ++p) {
    double sum = 0;
    for (int64_t i = 0; i < inner; ++i)
      sum += x.data[p * inner + i];
    out.data[p] = static_cast<float>(sum / inner);
  }
  return out;
}

void dtfm::runtime::cpu::globalAvgPoolBackward(const Tensor &x,
                                               const Tensor &dOut, Tensor *dx) {
  int64_t n = x.dim(0), c = x.dim(1), inner = x.numel() / (n * c);
  ensure(dx, x.shape);
  for (int64_t p = 0; p < n * c; ++p)
    for (int64_t i = 0; i < inner; ++i)
      dx->data[p * inner + i] += dOut.data[p] / inner;
}

void dtfm::runtime::cpu::topK(const Tensor &x, int64_t k, Tensor &values,
                              Tensor &indices) {
  std::vector<uint64_t> kept = format::largestMagnitudes(
      x.data.data(), x.data.size(),
      static_cast<size_t>(std::max<int64_t>(0, k)));
  int64_t n = static_cast<int64_t>(kept.size());
  values = Tensor({n});
  indices = Tensor({n});
  for (int64_t i = 0; i < n; ++i) {
    values.data[i] = x.data[kept[i]];
    indices.data[i] = static_cast<float>(kept[i]);
  }
}

Tensor dtfm::runtime::cpu::scatterTopK(const Tensor &values,
                                       const Tensor &indices,
                                       const std::vector<int64_t> &shape) {
  Tensor out(shape);
  int64_t n = out.numel();
  for (int64_t i = 0; i < values.numel() && i < indices.numel(); ++i) {
    int64_t at = static_cast<int64_t>(indices.data[i]);
    if (at >= 0 && at < n)
      out.data[at] = values.data[i];
  }
  return out;
}
