//===- Kernels.cpp - CPU kernels of the dtfm ops, forward and backward ----===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"

#include "dtfm/Support/OpShapes.h"

#include <cblas.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <limits>

using namespace dtfm::runtime::cpu;

void dtfm::runtime::cpu::gemm(const float *a, const float *b, float *c,
                              int64_t m, int64_t n, int64_t k, bool transposeA,
                              bool transposeB, bool accumulate) {
  cblas_sgemm(CblasRowMajor, transposeA ? CblasTrans : CblasNoTrans,
              transposeB ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a,
              transposeA ? m : k, b, transposeB ? k : n,
              accumulate ? 1.0f : 0.0f, c, n);
}

//===----------------------------------------------------------------------===//
// matmul, linear
//===----------------------------------------------------------------------===//

Tensor dtfm::runtime::cpu::matmul(const Tensor &lhs, const Tensor &rhs,
                                  bool transposeRhs) {
  int64_t k = lhs.dim(-1), m = lhs.dim(-2);
  int64_t n = transposeRhs ? rhs.dim(-2) : rhs.dim(-1);
  int64_t batch = lhs.numel() / (m * k);
  bool shared = rhs.shape.size() == 2;
  std::vector<int64_t> shape(lhs.shape.begin(), lhs.shape.end() - 1);
  shape.push_back(n);
  Tensor out(shape);
  if (shared) // one GEMM over all rows
    gemm(lhs.data.data(), rhs.data.data(), out.data.data(), batch * m, n, k,
         false, transposeRhs, false);
  else
    for (int64_t i = 0; i < batch; ++i)
      gemm(lhs.data.data() + i * m * k, rhs.data.data() + i * k * n,
           out.data.data() + i * m * n, m, n, k, false, transposeRhs, false);
  return out;
}

void dtfm::runtime::cpu::matmulBackward(const Tensor &lhs, const Tensor &rhs,
                                        bool transposeRhs, const Tensor &dOut,
                                        Tensor *dLhs, Tensor *dRhs) {
  int64_t k = lhs.dim(-1), m = lhs.dim(-2);
  int64_t n = transposeRhs ? rhs.dim(-2) : rhs.dim(-1);
  int64_t batch = lhs.numel() / (m * k);
  bool shared = rhs.shape.size() == 2;
  ensure(dLhs, lhs.shape);
  ensure(dRhs, rhs.shape);
  int64_t rows = shared ? batch * m : m;
  int64_t steps = shared ? 1 : batch;
  for (int64_t i = 0; i < steps; ++i) {
    const float *a = lhs.data.data() + i * m * k;
    const float *b = rhs.data.data() + (shared ? 0 : i * k * n);
    const float *g = dOut.data.data() + i * m * n;
    // dA = dC * B^T (B [K,N]) or dC * B (B [N,K]).
    if (dLhs)
      gemm(g, b, dLhs->data.data() + i * m * k, rows, k, n, false,
           !transposeRhs, true);
    // dB = A^T * dC [K,N], or dC^T * A [N,K].
    if (dRhs) {
      float *db = dRhs->data.data() + (shared ? 0 : i * k * n);
      if (transposeRhs)
        gemm(g, a, db, n, k, rows, true, false, true);
      else
        gemm(a, g, db, k, n, rows, true, false, true);
    }
  }
}

Tensor dtfm::runtime::cpu::linear(const Tensor &x, const Tensor &w,
                                  const Tensor *bias) {
  int64_t k = x.dim(-1), n = w.dim(1), rows = x.numel() / k;
  std::vector<int64_t> shape(x.shape.begin(), x.shape.end() - 1);
  shape.push_back(n);
  Tensor out(shape);
  gemm(x.data.data(), w.data.data(), out.data.data(), rows, n, k, false, false,
       false);
  if (bias)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j)
        out.data[r * n + j] += bias->data[j];
  return out;
}

void dtfm::runtime::cpu::linearBackward(const Tensor &x, const Tensor &w,
                                        const Tensor &dOut, Tensor *dx,
                                        Tensor *dw, Tensor *dBias) {
  int64_t k = x.dim(-1), n = w.dim(1), rows = x.numel() / k;
  ensure(dx, x.shape);
  ensure(dw, w.shape);
  ensure(dBias, {n});
  if (dx)
    gemm(dOut.data.data(), w.data.data(), dx->data.data(), rows, k, n, false,
         true, true);
  if (dw)
    gemm(x.data.data(), dOut.data.data(), dw->data.data(), k, n, rows, true,
         false, true);
  if (dBias)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j)
        dBias->data[j] += dOut.data[r * n + j];
}

//===----------------------------------------------------------------------===//
// layernorm, rms_norm, gelu, relu, softmax
//===----------------------------------------------------------------------===//

Tensor dtfm::runtime::cpu::layerNorm(const Tensor &x, const Tensor &gamma,
                                     const Tensor &beta, double epsilon,
                                     std::vector<float> &mean,
                                     std::vector<float> &rstd) {
  int64_t d = x.dim(-1), rows = x.numel() / d;
  Tensor out(x.shape);
  mean.assign(rows, 0);
  rstd.assign(rows, 0);
  for (int64_t r = 0; r < rows; ++r) {
    const float *in = x.data.data() + r * d;
    double m = 0, v = 0;
    for (int64_t j = 0; j < d; ++j)
      m += in[j];
    m /= d;
    for (int64_t j = 0; j < d; ++j)
      v += (in[j] - m) * (in[j] - m);
    v /= d;
    double s = 1.0 / std::sqrt(v + epsilon);
    mean[r] = static_cast<float>(m);
    rstd[r] = static_cast<float>(s);
    for (int64_t j = 0; j < d; ++j)
      out.data[r * d + j] =
          static_cast<float>((in[j] - m) * s) * gamma.data[j] + beta.data[j];
  }
  return out;
}

void dtfm::runtime::cpu::layerNormBackward(const Tensor &x, const Tensor &gamma,
                                           const std::vector<float> &mean,
                                           const std::vector<float> &rstd,
                                           const Tensor &dOut, Tensor *dx,
                                           Tensor *dGamma, Tensor *dBeta) {
  int64_t d = x.dim(-1), rows = x.numel() / d;
  ensure(dx, x.shape);
  ensure(dGamma, gamma.shape);
  ensure(dBeta, gamma.shape);
  for (int64_t r = 0; r < rows; ++r) {
    const float *in = x.data.data() + r * d;
    const float *g = dOut.data.data() + r * d;
    double sumDy = 0, sumDyXhat = 0;
    for (int64_t j = 0; j < d; ++j) {
      double xhat = (in[j] - mean[r]) * rstd[r];
      double dy = g[j] * gamma.data[j];
      sumDy += dy;
      sumDyXhat += dy * xhat;
      if (dGamma)
        dGamma->data[j] += static_cast<float>(g[j] * xhat);
      if (dBeta)
        dBeta->data[j] += g[j];
    }
    if (dx)
      for (int64_t j = 0; j < d; ++j) {
        double xhat = (in[j] - mean[r]) * rstd[r];
        double dy = g[j] * gamma.data[j];
        dx->data[r * d + j] += static_cast<float>(
            rstd[r] * (dy - sumDy / d - xhat * sumDyXhat / d));
      }
  }
}

Tensor dtfm::runtime::cpu::rmsNorm(const Tensor &x, const Tensor &gamma,
                                   double epsilon, std::vector<float> &rstd) {
  int64_t d = x.dim(-1), rows = x.numel() / d;
  Tensor out(x.shape);
  rstd.assign(rows, 0);
  for (int64_t r = 0; r < rows; ++r) {
    const float *in = x.data.data() + r * d;
    double squares = 0;
    for (int64_t j = 0; j < d; ++j)
      squares += static_cast<double>(in[j]) * in[j];
    double s = 1.0 / std::sqrt(squares / d + epsilon);
    rstd[r] = static_cast<float>(s);
    for (int64_t j = 0; j < d; ++j)
      out.data[r * d + j] = static_cast<float>(in[j] * s) * gamma.data[j];
  }
  return out;
}

// With xhat = x r: dx = r (gamma dy - xhat mean(gamma dy xhat)).
void dtfm::runtime::cpu::rmsNormBackward(const Tensor &x, const Tensor &gamma,
                                         const std::vector<float> &rstd,
                                         const Tensor &dOut, Tensor *dx,
                                         Tensor *dGamma) {
  int64_t d = x.dim(-1), rows = x.numel() / d;
  ensure(dx, x.shape);
  ensure(dGamma, gamma.shape);
  for (int64_t r = 0; r < rows; ++r) {
    const float *in = x.data.data() + r * d;
    const float *g = dOut.data.data() + r * d;
    double sumDyXhat = 0;
    for (int64_t j = 0; j < d; ++j) {
      double xhat = in[j] * rstd[r];
      sumDyXhat += g[j] * gamma.data[j] * xhat;
      if (dGamma)
        dGamma->data[j] += static_cast<float>(g[j] * xhat);
    }
    if (dx)
      for (int64_t j = 0; j < d; ++j) {
        double xhat = in[j] * rstd[r];
        dx->data[r * d + j] += static_cast<float>(
            rstd[r] * (g[j] * gamma.data[j] - xhat * sumDyXhat / d));
      }
  }
}

static const double kSqrt2OverPi = 0.7978845608028654;

DTFM_VECTOR_CLONES
Tensor dtfm::runtime::cpu::gelu(const Tensor &x, bool tanhApproximation) {
  Tensor out(x.shape);
  const float c = static_cast<float>(kSqrt2OverPi), r = 0.70710678f;
  int64_t n = x.numel();
  const float *in = x.data.data();
  float *o = out.data.data();
  if (tanhApproximation) {
    for (int64_t i = 0; i < n; ++i) {
      float v = in[i];
      o[i] = 0.5f * v * (1 + std::tanh(c * (v + 0.044715f * v * v * v)));
    }
    return out;
  }
  for (int64_t i = 0; i < n; ++i) { // vectorised: no library call
    float v = in[i], gaussian;
    o[i] = 0.5f * v * (1 + erfApprox(v * r, gaussian));
  }
  return out;
}

DTFM_VECTOR_CLONES
void dtfm::runtime::cpu::geluBackward(const Tensor &x, bool tanhApproximation,
                                      const Tensor &dOut, Tensor *dx) {
  ensure(dx, x.shape);
  const float c = static_cast<float>(kSqrt2OverPi), r = 0.70710678f,
              invSqrt2Pi = 0.39894228f;
  int64_t n = x.numel();
  const float *in = x.data.data(), *g = dOut.data.data();
  float *d = dx->data.data();
  if (tanhApproximation) {
    for (int64_t i = 0; i < n; ++i) {
      float v = in[i];
      float t = std::tanh(c * (v + 0.044715f * v * v * v));
      float grad = 0.5f * (1 + t) +
                   0.5f * v * (1 - t * t) * c * (1 + 3 * 0.044715f * v * v);
      d[i] += grad * g[i];
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) { // vectorised: no library call
    // d/dv [v Phi(v)] = Phi(v) + v phi(v); phi's e^(-v^2/2) is erf's.
    float v = in[i], gaussian;
    float grad = 0.5f * (1 + erfApprox(v * r, gaussian)) +
                 v * gaussian * invSqrt2Pi;
    d[i] += grad * g[i];
  }
}

Tensor dtfm::runtime::cpu::relu(const Tensor &x) {
  Tensor out(x.shape);
  for (int64_t i = 0; i < x.numel(); ++i)
    out.data[i] = std::max(0.0f, x.data[i]);
  return out;
}

void dtfm::runtime::cpu::reluBackward(const Tensor &out, const Tensor &dOut,
                                      Tensor *dx) {
  ensure(dx, out.shape);
  for (int64_t i = 0; i < out.numel(); ++i)
    if (out.data[i] > 0)
      dx->data[i] += dOut.data[i];
}

DTFM_VECTOR_CLONES
Tensor dtfm::runtime::cpu::softmax(const Tensor &x) {
  int64_t d = x.dim(-1), rows = x.numel() / d;
  Tensor out(x.shape);
  for (int64_t r = 0; r < rows; ++r) {
    const float *in = x.data.data() + r * d;
    float *o = out.data.data() + r * d;
    float peak = *std::max_element(in, in + d);
    for (int64_t j = 0; j < d; ++j) // vectorised: no library call
      o[j] = expApprox(in[j] - peak);
    double sum = 0;
    for (int64_t j = 0; j < d; ++j)
      sum += o[j];
    float inverse = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < d; ++j)
      o[j] *= inverse;
  }
  return out;
}

void dtfm::runtime::cpu::softmaxBackward(const Tensor &out, const Tensor &dOut,
                                         Tensor *dx) {
  int64_t d = out.dim(-1), rows = out.numel() / d;
  ensure(dx, out.shape);
  for (int64_t r = 0; r < rows; ++r) {
    const float *y = out.data.data() + r * d;
    const float *g = dOut.data.data() + r * d;
    double dot = 0;
    for (int64_t j = 0; j < d; ++j)
      dot += y[j] * g[j];
    for (int64_t j = 0; j < d; ++j)
      dx->data[r * d + j] += static_cast<float>(y[j] * (g[j] - dot));
  }
}

Tensor dtfm::runtime::cpu::logSoftmax(const Tensor &x) {
  int64_t d = x.dim(-1), rows = x.numel() / d;
  Tensor out(x.shape);
  for (int64_t r = 0; r < rows; ++r) {
    const float *in = x.data.data() + r * d;
    float *o = out.data.data() + r * d;
    float peak = *std::max_element(in, in + d);
    double sum = 0;
    for (int64_t j = 0; j < d; ++j)
      sum += std::exp(static_cast<double>(in[j] - peak));
    float shift = peak + static_cast<float>(std::log(sum));
    for (int64_t j = 0; j < d; ++j)
      o[j] = in[j] - shift;
  }
  return out;
}

void dtfm::runtime::cpu::logSoftmaxBackward(const Tensor &out,
                                            const Tensor &dOut, Tensor *dx) {
  int64_t d = out.dim(-1), rows = out.numel() / d;
  ensure(dx, out.shape);
  for (int64_t r = 0; r < rows; ++r) {
    const float *y = out.data.data() + r * d;
    const float *g = dOut.data.data() + r * d;
    double sum = 0;
    for (int64_t j = 0; j < d; ++j)
      sum += g[j];
    for (int64_t j = 0; j < d; ++j)
      dx->data[r * d + j] +=
          static_cast<float>(g[j] - std::exp(static_cast<double>(y[j])) * sum);
  }
}

//===----------------------------------------------------------------------===//
// causal attention
//===----------------------------------------------------------------------===//

// Attention per (batch row, head) with sgemm on the head's strided slice
// of Q, K, V (leading dimension h): S = Q K^T scale, causal softmax, O = P V.
Tensor dtfm::runtime::cpu::rotary(const Tensor &x, int64_t heads, double theta,
                                  bool inverse) {
  int64_t b = x.dim(0), s = x.dim(1), h = x.dim(2), dh = h / heads,
          half = dh / 2;
  // The turn of pair i at position t, once per (t, i).
  std::vector<double> cosines(static_cast<size_t>(s * half)),
      sines(cosines.size());
  for (int64_t t = 0; t < s; ++t)
    for (int64_t i = 0; i < half; ++i) {
      double angle = static_cast<double>(t) *
                     std::pow(theta, -2.0 * static_cast<double>(i) /
                                         static_cast<double>(dh));
      cosines[t * half + i] = std::cos(angle);
      sines[t * half + i] = (inverse ? -1 : 1) * std::sin(angle);
    }
  Tensor out(x.shape);
  for (int64_t n = 0; n < b; ++n)
    for (int64_t t = 0; t < s; ++t)
      for (int64_t hd = 0; hd < heads; ++hd) {
        int64_t base = (n * s + t) * h + hd * dh;
        for (int64_t i = 0; i < half; ++i) {
          double c = cosines[t * half + i], sn = sines[t * half + i];
          double first = x.data[base + i], second = x.data[base + i + half];
          out.data[base + i] = static_cast<float>(first * c - second * sn);
          out.data[base + i + half] =
              static_cast<float>(second * c + first * sn);
        }
      }
  return out;
}

void dtfm::runtime::cpu::rotaryBackward(const Tensor &dOut, int64_t heads,
                                        double theta, Tensor *dx) {
  if (!dx)
    return;
  Tensor turned = rotary(dOut, heads, theta, /*inverse=*/true);
  ensure(dx, turned.shape);
  for (int64_t i = 0; i < turned.numel(); ++i)
    dx->data[i] += turned.data[i];
}

Tensor dtfm::runtime::cpu::causalAttention(const Tensor &q, const Tensor &k,
                                           const Tensor &v, int64_t heads,
                                           int64_t kvHeads, Tensor &probs) {
  int64_t b = q.dim(0), s = q.dim(1), h = q.dim(2), dh = h / heads;
  int64_t hk = k.dim(2), group = heads / kvHeads;
  float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dh)));
  Tensor out(q.shape);
  probs = Tensor({b, heads, s, s});
  for (int64_t n = 0; n < b; ++n)
    for (int64_t hd = 0; hd < heads; ++hd) {
      float *p = probs.data.data() + ((n * heads + hd) * s) * s;
      size_t offset = static_cast<size_t>(n * s * h + hd * dh);
      size_t kvOffset = static_cast<size_t>(n * s * hk + hd / group * dh);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s, s, dh, scale,
                  q.data.data() + offset, h, k.data.data() + kvOffset, hk, 0.0f,
                  p, s);
      for (int64_t i = 0; i < s; ++i) {
        float *row = p + i * s;
        float peak = *std::max_element(row, row + i + 1);
        for (int64_t j = 0; j <= i; ++j) // vectorised: no library call
          row[j] = expApprox(row[j] - peak);
        float sum = 0;
        for (int64_t j = 0; j <= i; ++j)
          sum += row[j];
        float inverse = 1.0f / sum;
        for (int64_t j = 0; j <= i; ++j)
          row[j] *= inverse;
        std::fill(row + i + 1, row + s, 0.0f); // masked
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, dh, s, 1.0f, p,
                  s, v.data.data() + kvOffset, hk, 0.0f,
                  out.data.data() + offset, h);
    }
  return out;
}

void dtfm::runtime::cpu::causalAttentionBackward(
    const Tensor &q, const Tensor &k, const Tensor &v, int64_t heads,
    int64_t kvHeads, const Tensor &probs, const Tensor &dOut, Tensor *dq,
    Tensor *dk, Tensor *dv) {
  int64_t b = q.dim(0), s = q.dim(1), h = q.dim(2), dh = h / heads;
  int64_t hk = k.dim(2), group = heads / kvHeads;
  float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dh)));
  ensure(dq, q.shape);
  ensure(dk, k.shape);
  ensure(dv, v.shape);
  std::vector<float> dp(static_cast<size_t>(s * s));
  for (int64_t n = 0; n < b; ++n)
    for (int64_t hd = 0; hd < heads; ++hd) {
      const float *p = probs.data.data() + ((n * heads + hd) * s) * s;
      size_t offset = static_cast<size_t>(n * s * h + hd * dh);
      size_t kvOffset = static_cast<size_t>(n * s * hk + hd / group * dh);
      const float *go = dOut.data.data() + offset;
      // dV += P^T dO; dP = dO V^T (a key/value head sums over its group).
      if (dv)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s, dh, s, 1.0f, p,
                    s, go, h, 1.0f, dv->data.data() + kvOffset, hk);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s, s, dh, 1.0f, go,
                  h, v.data.data() + kvOffset, hk, 0.0f, dp.data(), s);
      // dS = P (dP - rowsum(P dP)) scale, zero above the diagonal.
      for (int64_t i = 0; i < s; ++i) {
        const float *pi = p + i * s;
        float *di = dp.data() + i * s;
        float dot = 0;
        for (int64_t j = 0; j <= i; ++j)
          dot += pi[j] * di[j];
        for (int64_t j = 0; j <= i; ++j)
          di[j] = pi[j] * (di[j] - dot) * scale;
        std::fill(di + i + 1, di + s, 0.0f);
      }
      // dQ += dS K; dK += dS^T Q.
      if (dq)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, dh, s, 1.0f,
                    dp.data(), s, k.data.data() + kvOffset, hk, 1.0f,
                    dq->data.data() + offset, h);
      if (dk)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s, dh, s, 1.0f,
                    dp.data(), s, q.data.data() + offset, h, 1.0f,
                    dk->data.data() + kvOffset, hk);
    }
}

//===----------------------------------------------------------------------===//
// embedding, cross-entropy
//===----------------------------------------------------------------------===//

std::string dtfm::runtime::cpu::indexRangeProblem(const Tensor &indices,
                                                  int64_t limit,
                                                  const char *what) {
  for (int64_t i = 0; i < indices.numel(); ++i) {
    float v = indices.data[i];
    // Compared as floats first: NaN, infinities and huge values have no
    // int64 value to cast to.
    if (v >= 0 && v < static_cast<float>(limit) && v == std::floor(v) &&
        static_cast<int64_t>(v) < limit)
      continue;
    char shown[32];
    std::snprintf(shown, sizeof shown, "%.9g", static_cast<double>(v));
    return std::string(what) + " " + shown + " at position " +
           std::to_string(i) + " is outside [0, " + std::to_string(limit) +
           ")";
  }
  return "";
}

Tensor dtfm::runtime::cpu::embedding(const Tensor &indices, const Tensor &table,
                                     int64_t firstRow) {
  int64_t rows = table.dim(0), h = table.dim(1);
  std::vector<int64_t> shape = indices.shape;
  shape.push_back(h);
  Tensor out(shape);
  for (int64_t i = 0; i < indices.numel(); ++i) {
    int64_t row = static_cast<int64_t>(indices.data[i]) - firstRow;
    if (row >= 0 && row < rows)
      std::copy(table.data.begin() + row * h,
                table.data.begin() + (row + 1) * h, out.data.begin() + i * h);
  }
  return out;
}

void dtfm::runtime::cpu::embeddingBackward(const Tensor &indices,
                                           const Tensor &dOut, Tensor *dTable,
                                           int64_t firstRow) {
  if (!dTable)
    return;
  int64_t rows = dTable->dim(0), h = dTable->dim(1);
  for (int64_t i = 0; i < indices.numel(); ++i) {
    int64_t row = static_cast<int64_t>(indices.data[i]) - firstRow;
    if (row < 0 || row >= rows)
      continue;
    for (int64_t c = 0; c < h; ++c)
      dTable->data[row * h + c] += dOut.data[i * h + c];
  }
}

float dtfm::runtime::cpu::crossEntropy(const Tensor &logits,
                                       const Tensor &labels, Tensor &probs,
                                       int64_t valid) {
  int64_t v = logits.dim(-1), rows = logits.numel() / v;
  if (valid < 0 || valid > v)
    valid = v;
  if (valid == v) {
    probs = softmax(logits);
  } else {
    // Padding classes: no probability.
    probs = Tensor(logits.shape);
    for (int64_t r = 0; r < rows; ++r) {
      const float *row = logits.data.data() + r * v;
      float *out = probs.data.data() + r * v;
      float peak = *std::max_element(row, row + valid);
      double sum = 0;
      for (int64_t j = 0; j < valid; ++j)
        sum += out[j] = std::exp(row[j] - peak);
      for (int64_t j = 0; j < valid; ++j)
        out[j] = static_cast<float>(out[j] / sum);
    }
  }
  // log-sum-exp minus the label's logit: exact however unlikely the label
  // (a floor under its probability would cap each row's loss at 69).
  double loss = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = logits.data.data() + r * v;
    float peak = *std::max_element(row, row + valid);
    double exps = 0;
    for (int64_t j = 0; j < valid; ++j)
      exps += std::exp(static_cast<double>(row[j]) - peak);
    int64_t label = static_cast<int64_t>(labels.data[r]);
    loss += peak + std::log(exps) - row[label];
  }
  return static_cast<float>(loss / rows);
}

void dtfm::runtime::cpu::crossEntropyBackward(const Tensor &probs,
                                              const Tensor &labels, float dLoss,
                                              Tensor *dLogits) {
  int64_t v = probs.dim(-1), rows = probs.numel() / v;
  ensure(dLogits, probs.shape);
  float scale = dLoss / static_cast<float>(rows);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t label = static_cast<int64_t>(labels.data[r]);
    for (int64_t j = 0; j < v; ++j)
      dLogits->data[r * v + j] +=
          scale * (probs.data[r * v + j] - (j == label ? 1.0f : 0.0f));
  }
}

Tensor dtfm::runtime::cpu::crossEntropySliceSums(const Tensor &logits,
                                                 const Tensor &labels,
                                                 int64_t rank, int64_t degree,
                                                 int64_t valid) {
  int64_t v = logits.dim(-1), rows = logits.numel() / v;
  if (valid < 0 || valid > v)
    valid = v;
  int64_t width = shapes::vocabParallelLossSumWidth(degree);
  Tensor sums({rows, width});
  for (int64_t r = 0; r < rows; ++r) {
    const float *x = logits.data.data() + r * v;
    float *out = sums.data.data() + r * width;
    // Without a class (all padding): no part of the log-sum-exp.
    float max = valid > 0 ? *std::max_element(x, x + valid)
                          : std::numeric_limits<float>::lowest();
    double exps = 0;
    for (int64_t j = 0; j < valid; ++j)
      exps += std::exp(static_cast<double>(x[j] - max));
    out[2 * rank] = max;
    out[2 * rank + 1] = static_cast<float>(exps);
    int64_t label = static_cast<int64_t>(labels.data[r]) - rank * v;
    if (label >= 0 && label < valid)
      out[2 * degree] = x[label];
  }
  return sums;
}

float dtfm::runtime::cpu::crossEntropyFromSums(const Tensor &sums,
                                               int64_t degree,
                                               std::vector<float> &logSumExp) {
  int64_t width = shapes::vocabParallelLossSumWidth(degree);
  int64_t rows = sums.numel() / width;
  logSumExp.assign(rows, 0);
  double loss = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = sums.data.data() + r * width;
    float max = row[0];
    for (int64_t q = 1; q < degree; ++q)
      max = std::max(max, row[2 * q]);
    double exps = 0;
    for (int64_t q = 0; q < degree; ++q)
      exps += static_cast<double>(row[2 * q + 1]) *
              std::exp(static_cast<double>(row[2 * q] - max));
    logSumExp[r] = max + static_cast<float>(std::log(exps));
    loss += logSumExp[r] - row[2 * degree];
  }
  return static_cast<float>(loss / static_cast<double>(rows));
}

void dtfm::runtime::cpu::crossEntropySliceBackward(
    const Tensor &logits, const Tensor &labels, int64_t rank,
    const std::vector<float> &logSumExp, float dLoss, Tensor *dLogits,
    int64_t valid) {
  if (!dLogits)
    return;
  int64_t v = logits.dim(-1), rows = logits.numel() / v;
  if (valid < 0 || valid > v)
    valid = v;
  ensure(dLogits, logits.shape);
  float scale = dLoss / static_cast<float>(rows);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t label = static_cast<int64_t>(labels.data[r]) - rank * v;
    for (int64_t j = 0; j < valid; ++j)
      dLogits->data[r * v + j] +=
          scale * (std::exp(logits.data[r * v + j] - logSumExp[r]) -
                   (j == label ? 1.0f : 0.0f));
  }
}

//===----------------------------------------------------------------------===//
// optimizers
//===----------------------------------------------------------------------===//

void dtfm::runtime::cpu::sgdStep(Tensor &param, const Tensor &grad,
                                 Tensor &velocity, double lr, double momentum,
                                 double weightDecay, ElementSlice slice) {
  int64_t count = slice.count < 0 ? param.numel() - slice.first : slice.count;
  ensure(&velocity, slice.count < 0 ? param.shape
                                    : std::vector<int64_t>{count});
  float *pp = param.data.data() + slice.first;
  const float *gp = grad.data.data() + slice.first;
  for (int64_t i = 0; i < count; ++i) {
    double g = gp[i] + weightDecay * pp[i];
    double vel = momentum * velocity.data[i] + g;
    velocity.data[i] = static_cast<float>(vel);
    pp[i] -= static_cast<float>(lr * vel);
  }
}

void dtfm::runtime::cpu::nesterovOuterStep(Tensor &anchor, const Tensor &delta,
                                           Tensor &velocity, double lr,
                                           double momentum) {
  ensure(&velocity, anchor.shape);
  for (int64_t i = 0; i < anchor.numel(); ++i) {
    double vel = momentum * velocity.data[i] + delta.data[i];
    velocity.data[i] = static_cast<float>(vel);
    anchor.data[i] -= static_cast<float>(lr * (delta.data[i] + momentum * vel));
  }
}

DTFM_VECTOR_CLONES
void dtfm::runtime::cpu::adamwStep(Tensor &param, const Tensor &grad, Tensor &m,
                                   Tensor &v, int64_t step, double lr,
                                   double beta1, double beta2, double epsilon,
                                   double weightDecay,
                                   int64_t freezeSecondMomentAfter,
                                   ElementSlice slice) {
  int64_t count = slice.count < 0 ? param.numel() - slice.first : slice.count;
  std::vector<int64_t> stateShape =
      slice.count < 0 ? param.shape : std::vector<int64_t>{count};
  ensure(&m, stateShape);
  ensure(&v, stateShape);
  bool frozen = freezeSecondMomentAfter > 0 && step > freezeSecondMomentAfter;
  // In float, as the CUDA kernel and PyTorch compute it, so that the loop
  // vectorises (it was 7% of a CPU step of the tiny GPT in double).
  auto f = [](double x) { return static_cast<float>(x); };
  float c1 = f(1 - std::pow(beta1, static_cast<double>(step)));
  float c2 = f(1 - std::pow(beta2, static_cast<double>(
                                       frozen ? freezeSecondMomentAfter : step)));
  // 1 - beta in double: 1 - 0.999f is 4.7e-5 off 0.001 (PyTorch also
  // takes it from the double).
  float b1 = f(beta1), g1 = f(1 - beta1), rate = f(lr), eps = f(epsilon),
        decay = f(weightDecay), vFrom = frozen ? 1.0f : f(beta2),
        vGain = frozen ? 0.0f : f(1 - beta2);
  float *pp = param.data.data() + slice.first, *mp = m.data.data(),
        *vp = v.data.data();
  const float *gp = grad.data.data() + slice.first;
  for (int64_t i = 0; i < count; ++i) {
    float g = gp[i];
    float mi = b1 * mp[i] + g1 * g;
    float vi = vFrom * vp[i] + vGain * g * g; // frozen: v unchanged
    mp[i] = mi;
    vp[i] = vi;
    float p = pp[i];
    p -= rate * decay * p;
    p -= rate * (mi / c1) / (std::sqrt(vi / c2) + eps);
    pp[i] = p;
  }
}
