//===- Convolution.cu - im2col, batchnorm and pooling kernels -------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Convolutions are im2col + cuBLASLt (lib/Runtime/Cuda/Executor.cpp): the
// same algorithm as the CPU kernels, no cuDNN dependency, and the column
// and window arithmetic shared with the host tests (ElementMath.h). The
// backward kernels gather -- each input element sums what reads it -- so
// they need no atomics and are deterministic. Batchnorm takes one block per
// channel with its statistics in double, as the CPU kernel.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"
#include "dtfm/Runtime/Cuda/Kernels.h"

#include <cuda_runtime.h>

#include <cmath>

using namespace dtfm::runtime::cuda;
using namespace dtfm::runtime::cuda::detail;
using namespace dtfm::math;

namespace {

__global__ void im2colKernel(const float *x, ConvGeometry g, int64_t first,
                             int64_t group, float *columns, int64_t n) {
  DTFM_GRID_STRIDE(i, n) columns[i] = g.column(x, first, group, i);
}

__global__ void col2imKernel(const float *dcolumns, ConvGeometry g,
                             int64_t first, int64_t group, float *dx,
                             int64_t n) {
  DTFM_GRID_STRIDE(i, n) {
    int64_t at;
    float sum = g.columnGradient(dcolumns, first, group, i, at);
    dx[at] += sum;
  }
}

/// Offset of the t-th element of channel ch in x viewed as [n, c, inner].
__device__ inline int64_t channelElement(int64_t t, int64_t ch, int64_t c,
                                         int64_t inner) {
  return ((t / inner) * c + ch) * inner + t % inner;
}

/// Mean and biased variance of channel blockIdx.x (two passes).
__device__ void channelStats(const float *x, int64_t n, int64_t c,
                             int64_t inner, double *scratch, double &mean,
                             double &variance) {
  int64_t ch = blockIdx.x, count = n * inner;
  double sum = 0;
  for (int64_t t = threadIdx.x; t < count; t += blockDim.x)
    sum += x[channelElement(t, ch, c, inner)];
  mean = blockSum(sum, scratch) / static_cast<double>(count);
  double squares = 0;
  for (int64_t t = threadIdx.x; t < count; t += blockDim.x) {
    double d = x[channelElement(t, ch, c, inner)] - mean;
    squares += d * d;
  }
  variance = blockSum(squares, scratch) / static_cast<double>(count);
}

__global__ void batchNormKernel(const float *x, const float *gamma,
                                const float *beta, float *y, float *mean,
                                float *variance, int64_t n, int64_t c,
                                int64_t inner, float epsilon,
                                const float *fixedMean,
                                const float *fixedVariance) {
  __shared__ double scratch[32];
  int64_t ch = blockIdx.x, count = n * inner;
  double m, v;
  if (fixedMean) {
    m = fixedMean[ch];
    v = fixedVariance[ch];
  } else {
    channelStats(x, n, c, inner, scratch, m, v);
  }
  double rstd = 1.0 / sqrt(v + epsilon);
  for (int64_t t = threadIdx.x; t < count; t += blockDim.x) {
    int64_t at = channelElement(t, ch, c, inner);
    y[at] = static_cast<float>((x[at] - m) * rstd * gamma[ch] + beta[ch]);
  }
  if (threadIdx.x == 0 && !fixedMean) {
    mean[ch] = static_cast<float>(m);
    variance[ch] = static_cast<float>(v);
  }
}

__global__ void runningStatsKernel(float *runningMean, float *runningVariance,
                                   const float *mean, const float *variance,
                                   int64_t c, double count, double momentum) {
  DTFM_GRID_STRIDE(ch, c) {
    if (runningMean)
      runningMean[ch] = static_cast<float>((1 - momentum) * runningMean[ch] +
                                           momentum * mean[ch]);
    if (runningVariance)
      runningVariance[ch] = static_cast<float>(
          (1 - momentum) * runningVariance[ch] +
          momentum * variance[ch] * count / fmax(1.0, count - 1));
  }
}

__global__ void batchNormBackwardKernel(const float *x, const float *gamma,
                                        const float *dy, float *dx,
                                        float *dgamma, float *dbeta, int64_t n,
                                        int64_t c, int64_t inner, float epsilon,
                                        const float *fixedMean,
                                        const float *fixedVariance) {
  __shared__ double scratch[32];
  int64_t ch = blockIdx.x, count = n * inner;
  double m, v;
  if (fixedMean) {
    m = fixedMean[ch];
    v = fixedVariance[ch];
  } else {
    channelStats(x, n, c, inner, scratch, m, v);
  }
  double rstd = 1.0 / sqrt(v + epsilon);
  double sumDy = 0, sumDyXhat = 0;
  for (int64_t t = threadIdx.x; t < count; t += blockDim.x) {
    int64_t at = channelElement(t, ch, c, inner);
    sumDy += dy[at];
    sumDyXhat += dy[at] * (x[at] - m) * rstd;
  }
  sumDy = blockSum(sumDy, scratch);
  sumDyXhat = blockSum(sumDyXhat, scratch);
  if (threadIdx.x == 0) {
    if (dgamma)
      dgamma[ch] += static_cast<float>(sumDyXhat);
    if (dbeta)
      dbeta[ch] += static_cast<float>(sumDy);
  }
  if (!dx)
    return;
  // Fixed statistics are constants: no terms through the mean and
  // variance.
  double total = static_cast<double>(count);
  double meanDy = fixedMean ? 0 : sumDy / total;
  double meanDyXhat = fixedMean ? 0 : sumDyXhat / total;
  for (int64_t t = threadIdx.x; t < count; t += blockDim.x) {
    int64_t at = channelElement(t, ch, c, inner);
    double xhat = (x[at] - m) * rstd;
    dx[at] += static_cast<float>(gamma[ch] * rstd *
                                 (dy[at] - meanDy - xhat * meanDyXhat));
  }
}

__global__ void maxPoolKernel(const float *x, PoolGeometry g, float *y,
                              int64_t n) {
  DTFM_GRID_STRIDE(i, n) {
    int64_t at = g.argMax(x, i);
    y[i] = at < 0 ? -INFINITY : x[at];
  }
}

__global__ void maxPoolBackwardKernel(const float *x, const float *dy,
                                      PoolGeometry g, float *dx, int64_t n) {
  DTFM_GRID_STRIDE(i, n) dx[i] += g.maxGradient(x, dy, i);
}

__global__ void avgPoolKernel(const float *x, PoolGeometry g, float *y,
                              int64_t n) {
  DTFM_GRID_STRIDE(i, n) y[i] = g.average(x, i);
}

__global__ void avgPoolBackwardKernel(const float *dy, PoolGeometry g,
                                      float *dx, int64_t n) {
  DTFM_GRID_STRIDE(i, n) dx[i] += g.averageGradient(dy, i);
}

} // namespace

namespace dtfm::runtime::cuda {

void im2col(const float *x, const ConvGeometry &g, int64_t first,
            int64_t images, int64_t group, float *columns,
            cudaStream_t stream) {
  int64_t n = images * g.columnRows() * g.spatial();
  if (n > 0)
    im2colKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, g, first, group,
                                                        columns, n);
}

void col2im(const float *dcolumns, const ConvGeometry &g, int64_t first,
            int64_t images, int64_t group, float *dx, cudaStream_t stream) {
  int64_t n = images * g.channelsPerGroup() * g.h * g.w;
  if (n > 0)
    col2imKernel<<<blocksFor(n), kThreads, 0, stream>>>(dcolumns, g, first,
                                                        group, dx, n);
}

void batchNorm(const float *x, const float *gamma, const float *beta, float *y,
               float *mean, float *variance, int64_t n, int64_t c,
               int64_t inner, float epsilon, cudaStream_t stream,
               const float *fixedMean, const float *fixedVariance) {
  if (c > 0)
    batchNormKernel<<<static_cast<unsigned>(c), kThreads, 0, stream>>>(
        x, gamma, beta, y, mean, variance, n, c, inner, epsilon, fixedMean,
        fixedVariance);
}

void batchNormRunningStats(float *runningMean, float *runningVariance,
                           const float *mean, const float *variance,
                           int64_t c, int64_t count, float momentum,
                           cudaStream_t stream) {
  if (c > 0 && (runningMean || runningVariance))
    runningStatsKernel<<<blocksFor(c), kThreads, 0, stream>>>(
        runningMean, runningVariance, mean, variance, c,
        static_cast<double>(count), static_cast<double>(momentum));
}

void batchNormBackward(const float *x, const float *gamma, const float *dy,
                       float *dx, float *dgamma, float *dbeta, int64_t n,
                       int64_t c, int64_t inner, float epsilon,
                       cudaStream_t stream, const float *fixedMean,
                       const float *fixedVariance) {
  if (c > 0)
    batchNormBackwardKernel<<<static_cast<unsigned>(c), kThreads, 0, stream>>>(
        x, gamma, dy, dx, dgamma, dbeta, n, c, inner, epsilon, fixedMean,
        fixedVariance);
}

void maxPool2d(const float *x, const PoolGeometry &g, float *y,
               cudaStream_t stream) {
  int64_t n = g.planes * g.ho * g.wo;
  if (n > 0)
    maxPoolKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, g, y, n);
}

void maxPool2dBackward(const float *x, const float *dy, const PoolGeometry &g,
                       float *dx, cudaStream_t stream) {
  int64_t n = g.planes * g.h * g.w;
  if (n > 0)
    maxPoolBackwardKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, dy, g, dx,
                                                                 n);
}

void avgPool2d(const float *x, const PoolGeometry &g, float *y,
               cudaStream_t stream) {
  int64_t n = g.planes * g.ho * g.wo;
  if (n > 0)
    avgPoolKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, g, y, n);
}

void avgPool2dBackward(const float *dy, const PoolGeometry &g, float *dx,
                       cudaStream_t stream) {
  int64_t n = g.planes * g.h * g.w;
  if (n > 0)
    avgPoolBackwardKernel<<<blocksFor(n), kThreads, 0, stream>>>(dy, g, dx, n);
}

} // namespace dtfm::runtime::cuda
