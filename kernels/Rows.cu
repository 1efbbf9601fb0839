//===- Rows.cu - Row-wise kernels: norms, softmax, cross-entropy ----------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// One block per row; the attention helpers (head split/merge, causal softmax
// on the score matrices cuBLASLt produces) are here too.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"
#include "dtfm/Runtime/Cuda/Kernels.h"

#include <cuda_runtime.h>

#include <cfloat>

using namespace dtfm::runtime::cuda::detail;

namespace {

__global__ void layerNormKernel(const float *x, const float *gamma,
                                const float *beta, float *y, float *mean,
                                float *rstd, int64_t d, float epsilon) {
  __shared__ float scratch[32];
  const float *in = x + blockIdx.x * d;
  float *out = y + blockIdx.x * d;
  float sum = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    sum += in[j];
  float m = blockSum(sum, scratch) / d;
  float squares = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    squares += (in[j] - m) * (in[j] - m);
  float s = rsqrtf(blockSum(squares, scratch) / d + epsilon);
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    out[j] = (in[j] - m) * s * gamma[j] + beta[j];
  if (threadIdx.x == 0) {
    mean[blockIdx.x] = m;
    rstd[blockIdx.x] = s;
  }
}

__global__ void layerNormBackwardRows(const float *x, const float *gamma,
                                      const float *mean, const float *rstd,
                                      const float *dy, float *dx, int64_t d) {
  __shared__ float scratch[32];
  int64_t r = blockIdx.x;
  const float *in = x + r * d, *g = dy + r * d;
  float m = mean[r], s = rstd[r];
  float sumDy = 0, sumDyXhat = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    float dyj = g[j] * gamma[j];
    sumDy += dyj;
    sumDyXhat += dyj * (in[j] - m) * s;
  }
  sumDy = blockSum(sumDy, scratch);
  sumDyXhat = blockSum(sumDyXhat, scratch);
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    float xhat = (in[j] - m) * s;
    dx[r * d + j] += s * (g[j] * gamma[j] - sumDy / d - xhat * sumDyXhat / d);
  }
}

__global__ void layerNormBackwardColumns(const float *x, const float *mean,
                                         const float *rstd, const float *dy,
                                         float *dgamma, float *dbeta,
                                         int64_t rows, int64_t d) {
  columnTileSums<2>(
      rows, d,
      [&](int64_t r, int64_t j, float *sums) {
        float g = dy[r * d + j];
        sums[0] += g * (x[r * d + j] - mean[r]) * rstd[r];
        sums[1] += g;
      },
      [&](int64_t j, const float *sums) {
        if (dgamma)
          dgamma[j] += sums[0];
        if (dbeta)
          dbeta[j] += sums[1];
      });
}

__global__ void rmsNormKernel(const float *x, const float *gamma, float *y,
                              float *rstd, int64_t d, float epsilon) {
  __shared__ float scratch[32];
  const float *in = x + blockIdx.x * d;
  float *out = y + blockIdx.x * d;
  float squares = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    squares += in[j] * in[j];
  float s = rsqrtf(blockSum(squares, scratch) / d + epsilon);
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    out[j] = in[j] * s * gamma[j];
  if (threadIdx.x == 0)
    rstd[blockIdx.x] = s;
}

__global__ void rmsNormBackwardRows(const float *x, const float *gamma,
                                    const float *rstd, const float *dy,
                                    float *dx, int64_t d) {
  __shared__ float scratch[32];
  int64_t r = blockIdx.x;
  const float *in = x + r * d, *g = dy + r * d;
  float s = rstd[r];
  float sumDyXhat = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    sumDyXhat += g[j] * gamma[j] * in[j] * s;
  sumDyXhat = blockSum(sumDyXhat, scratch);
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    dx[r * d + j] += s * (g[j] * gamma[j] - in[j] * s * sumDyXhat / d);
}

__global__ void rmsNormBackwardColumns(const float *x, const float *rstd,
                                       const float *dy, float *dgamma,
                                       int64_t rows, int64_t d) {
  columnTileSums<1>(
      rows, d,
      [&](int64_t r, int64_t j, float *sums) {
        sums[0] += dy[r * d + j] * x[r * d + j] * rstd[r];
      },
      [&](int64_t j, const float *sums) { dgamma[j] += sums[0]; });
}

__global__ void softmaxKernel(const float *x, float *y, int64_t d) {
  __shared__ float scratch[32];
  const float *in = x + blockIdx.x * d;
  float *out = y + blockIdx.x * d;
  float peak = -INFINITY;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    peak = fmaxf(peak, in[j]);
  peak = blockMax(peak, scratch);
  float sum = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    sum += (out[j] = expf(in[j] - peak));
  float inverse = 1.0f / blockSum(sum, scratch);
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    out[j] *= inverse;
}

__global__ void softmaxBackwardKernel(const float *y, const float *dy,
                                      float *dx, int64_t d) {
  __shared__ float scratch[32];
  int64_t base = blockIdx.x * d;
  float dot = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    dot += y[base + j] * dy[base + j];
  dot = blockSum(dot, scratch);
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    dx[base + j] += y[base + j] * (dy[base + j] - dot);
}

__global__ void logSoftmaxBackwardKernel(const float *y, const float *dy,
                                         float *dx, int64_t d) {
  __shared__ float scratch[32];
  int64_t base = blockIdx.x * d;
  float sum = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    sum += dy[base + j];
  sum = blockSum(sum, scratch);
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    dx[base + j] += dy[base + j] - expf(y[base + j]) * sum;
}

/// A block's row of `classes` logits: its maximum and the sum of the
/// exponentials of the logits less it (every thread gets both).
__device__ void rowPeakAndExps(const float *in, int64_t classes, float *scratch,
                               float &peak, float &exps) {
  peak = -INFINITY;
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
    peak = fmaxf(peak, in[j]);
  peak = blockMax(peak, scratch);
  exps = 0;
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x)
    exps += expf(in[j] - peak);
  exps = blockSum(exps, scratch);
}

__global__ void logSoftmaxKernel(const float *x, float *y, int64_t d) {
  __shared__ float scratch[32];
  const float *in = x + blockIdx.x * d;
  float *out = y + blockIdx.x * d;
  float peak, exps;
  rowPeakAndExps(in, d, scratch, peak, exps);
  float shift = peak + logf(exps);
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    out[j] = in[j] - shift;
}

/// One block per row: this member's maximum and sum of exponentials over
/// its first `valid` slots (the rest are padding), and the label's logit
/// when the label is its own. Without a class (all padding) the maximum is
/// the lowest float and the sum 0: no part of the log-sum-exp.
__global__ void crossEntropySliceSumsKernel(const float *logits,
                                            const float *labels, float *sums,
                                            int64_t classes, int64_t valid,
                                            int64_t rank, int64_t degree) {
  __shared__ float scratch[32];
  int64_t r = blockIdx.x;
  const float *in = logits + r * classes;
  float *out = sums + r * (2 * degree + 1);
  float peak = -FLT_MAX, exps = 0;
  if (valid > 0)
    rowPeakAndExps(in, valid, scratch, peak, exps);
  if (threadIdx.x != 0)
    return;
  out[2 * rank] = peak;
  out[2 * rank + 1] = exps;
  int64_t label = static_cast<int64_t>(labels[r]) - rank * classes;
  if (label >= 0 && label < valid)
    out[2 * degree] = in[label];
}

__global__ void crossEntropyFromSumsKernel(const float *sums, float *logSumExp,
                                           float *loss, int64_t rows,
                                           int64_t degree) {
  DTFM_GRID_STRIDE(r, rows) {
    const float *row = sums + r * (2 * degree + 1);
    float peak = row[0];
    for (int64_t q = 1; q < degree; ++q)
      peak = fmaxf(peak, row[2 * q]);
    float exps = 0;
    for (int64_t q = 0; q < degree; ++q)
      exps += row[2 * q + 1] * expf(row[2 * q] - peak);
    float lse = peak + logf(exps);
    logSumExp[r] = lse;
    atomicAdd(loss, (lse - row[2 * degree]) / rows);
  }
}

__global__ void crossEntropySliceBackwardKernel(
    const float *logits, const float *labels, const float *logSumExp,
    float *dlogits, int64_t rows, int64_t classes, int64_t valid, int64_t rank,
    float scale) {
  DTFM_GRID_STRIDE(i, rows * classes) {
    int64_t r = i / classes, j = i % classes;
    if (j >= valid) // padding: no gradient
      continue;
    int64_t label = static_cast<int64_t>(labels[r]) - rank * classes;
    float onehot = j == label ? 1.0f : 0.0f;
    dlogits[i] += scale / rows * (expf(logits[i] - logSumExp[r]) - onehot);
  }
}

__global__ void splitHeadsKernel(const float *x, float *y, int64_t b, int64_t s,
                                 int64_t heads, int64_t dh, int64_t group) {
  int64_t xHeads = heads / group;
  DTFM_GRID_STRIDE(i, b * heads * s * dh) {
    // i indexes y [b, heads, s, dh]; x is [b, s, heads / group, dh].
    int64_t c = i % dh, t = (i / dh) % s, hd = (i / (dh * s)) % heads,
            n = i / (dh * s * heads);
    y[i] = x[((n * s + t) * xHeads + hd / group) * dh + c];
  }
}

__global__ void mergeHeadsKernel(const float *x, float *y, int64_t b, int64_t s,
                                 int64_t heads, int64_t dh, int64_t group) {
  int64_t yHeads = heads / group;
  DTFM_GRID_STRIDE(i, b * s * yHeads * dh) {
    // i indexes y [b, s, heads / group, dh]; x is [b, heads, s, dh].
    int64_t c = i % dh, kh = (i / dh) % yHeads, t = (i / (dh * yHeads)) % s,
            n = i / (dh * yHeads * s);
    float sum = 0;
    for (int64_t g = 0; g < group; ++g)
      sum += x[((n * heads + kh * group + g) * s + t) * dh + c];
    y[i] += sum;
  }
}

/// One block per (matrix, row) of the score matrices.
__global__ void causalSoftmaxKernel(float *scores, int64_t s, float scale) {
  __shared__ float scratch[32];
  int64_t row = blockIdx.x % s;
  float *p = scores + blockIdx.x * s;
  float peak = -INFINITY;
  for (int64_t j = threadIdx.x; j <= row; j += blockDim.x)
    peak = fmaxf(peak, p[j] * scale);
  peak = blockMax(peak, scratch);
  float sum = 0;
  for (int64_t j = threadIdx.x; j <= row; j += blockDim.x)
    sum += (p[j] = expf(p[j] * scale - peak));
  float inverse = 1.0f / blockSum(sum, scratch);
  for (int64_t j = threadIdx.x; j < s; j += blockDim.x)
    p[j] = j <= row ? p[j] * inverse : 0.0f;
}

__global__ void causalSoftmaxBackwardKernel(const float *probs, float *grad,
                                            int64_t s, float scale) {
  __shared__ float scratch[32];
  int64_t row = blockIdx.x % s;
  const float *p = probs + blockIdx.x * s;
  float *g = grad + blockIdx.x * s;
  float dot = 0;
  for (int64_t j = threadIdx.x; j <= row; j += blockDim.x)
    dot += p[j] * g[j];
  dot = blockSum(dot, scratch);
  for (int64_t j = threadIdx.x; j < s; j += blockDim.x)
    g[j] = j <= row ? p[j] * (g[j] - dot) * scale : 0.0f;
}

unsigned rowBlocks(int64_t rows) { return static_cast<unsigned>(rows); }

} // namespace

namespace dtfm::runtime::cuda {

void layerNorm(const float *x, const float *gamma, const float *beta,
               float *y, float *mean, float *rstd, int64_t rows, int64_t d,
               float epsilon, cudaStream_t stream) {
  layerNormKernel<<<rowBlocks(rows), kThreads, 0, stream>>>(
      x, gamma, beta, y, mean, rstd, d, epsilon);
}

void layerNormBackward(const float *x, const float *gamma, const float *mean,
                       const float *rstd, const float *dy, float *dx,
                       float *dgamma, float *dbeta, int64_t rows, int64_t d,
                       cudaStream_t stream) {
  if (dx)
    layerNormBackwardRows<<<rowBlocks(rows), kThreads, 0, stream>>>(
        x, gamma, mean, rstd, dy, dx, d);
  if (dgamma || dbeta)
    layerNormBackwardColumns<<<columnTiles(d), columnTileThreads(), 0,
                               stream>>>(x, mean, rstd, dy, dgamma, dbeta,
                                         rows, d);
}

void rmsNorm(const float *x, const float *gamma, float *y, float *rstd,
             int64_t rows, int64_t d, float epsilon, cudaStream_t stream) {
  rmsNormKernel<<<rowBlocks(rows), kThreads, 0, stream>>>(x, gamma, y, rstd, d,
                                                          epsilon);
}

void rmsNormBackward(const float *x, const float *gamma, const float *rstd,
                     const float *dy, float *dx, float *dgamma, int64_t rows,
                     int64_t d, cudaStream_t stream) {
  if (dx)
    rmsNormBackwardRows<<<rowBlocks(rows), kThreads, 0, stream>>>(
        x, gamma, rstd, dy, dx, d);
  if (dgamma)
    rmsNormBackwardColumns<<<columnTiles(d), columnTileThreads(), 0, stream>>>(
        x, rstd, dy, dgamma, rows, d);
}

void softmax(const float *x, float *y, int64_t rows, int64_t d,
             cudaStream_t stream) {
  softmaxKernel<<<rowBlocks(rows), kThreads, 0, stream>>>(x, y, d);
}

void softmaxBackward(const float *y, const float *dy, float *dx, int64_t rows,
                     int64_t d, cudaStream_t stream) {
  softmaxBackwardKernel<<<rowBlocks(rows), kThreads, 0, stream>>>(y, dy, dx,
                                                                  d);
}

void logSoftmax(const float *x, float *y, int64_t rows, int64_t d,
                cudaStream_t stream) {
  logSoftmaxKernel<<<rowBlocks(rows), kThreads, 0, stream>>>(x, y, d);
}

void logSoftmaxBackward(const float *y, const float *dy, float *dx,
                        int64_t rows, int64_t d, cudaStream_t stream) {
  logSoftmaxBackwardKernel<<<rowBlocks(rows), kThreads, 0, stream>>>(y, dy,
                                                                     dx, d);
}

void crossEntropySliceSums(const float *logits, const float *labels,
                           float *sums, int64_t rows, int64_t classes,
                           int64_t valid, int64_t rank, int64_t degree,
                           cudaStream_t stream) {
  cudaMemsetAsync(sums, 0, sizeof(float) * rows * (2 * degree + 1), stream);
  crossEntropySliceSumsKernel<<<rowBlocks(rows), kThreads, 0, stream>>>(
      logits, labels, sums, classes, valid, rank, degree);
}

void crossEntropyFromSums(const float *sums, float *logSumExp, float *loss,
                          int64_t rows, int64_t degree, cudaStream_t stream) {
  cudaMemsetAsync(loss, 0, sizeof(float), stream);
  crossEntropyFromSumsKernel<<<blocksFor(rows), kThreads, 0, stream>>>(
      sums, logSumExp, loss, rows, degree);
}

void crossEntropySliceBackward(const float *logits, const float *labels,
                               const float *logSumExp, float *dlogits,
                               int64_t rows, int64_t classes, int64_t valid,
                               int64_t rank, float scale, cudaStream_t stream) {
  crossEntropySliceBackwardKernel<<<blocksFor(rows * classes), kThreads, 0,
                                    stream>>>(
      logits, labels, logSumExp, dlogits, rows, classes, valid, rank, scale);
}

void splitHeads(const float *x, float *y, int64_t b, int64_t s, int64_t heads,
                int64_t dh, int64_t group, cudaStream_t stream) {
  splitHeadsKernel<<<blocksFor(b * s * heads * dh), kThreads, 0, stream>>>(
      x, y, b, s, heads, dh, group);
}

void mergeHeads(const float *x, float *y, int64_t b, int64_t s, int64_t heads,
                int64_t dh, int64_t group, cudaStream_t stream) {
  mergeHeadsKernel<<<blocksFor(b * s * heads / group * dh), kThreads, 0,
                     stream>>>(x, y, b, s, heads, dh, group);
}

void causalSoftmax(float *scores, int64_t count, int64_t s, float scale,
                   cudaStream_t stream) {
  causalSoftmaxKernel<<<rowBlocks(count * s), 128, 0, stream>>>(scores, s,
                                                                scale);
}

void causalSoftmaxBackward(const float *probs, float *grad, int64_t count,
                           int64_t s, float scale, cudaStream_t stream) {
  causalSoftmaxBackwardKernel<<<rowBlocks(count * s), 128, 0, stream>>>(
      probs, grad, s, scale);
}

} // namespace dtfm::runtime::cuda
