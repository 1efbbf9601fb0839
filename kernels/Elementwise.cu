//===- Elementwise.cu - Elementwise, embedding and optimizer kernels ------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"
#include "dtfm/Runtime/Cuda/Kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>

using namespace dtfm::runtime::cuda::detail;

namespace {

/// Segments per launch: passed by value, within the 4 KiB of kernel
/// parameters every CUDA version takes.
constexpr int kSegmentsPerLaunch = 64;
struct SegmentBatch {
  dtfm::runtime::cuda::CopySegment at[kSegmentsPerLaunch];
};

/// Block row y copies segment y, its columns striding over the elements.
__global__ void copySegmentsKernel(SegmentBatch batch) {
  const dtfm::runtime::cuda::CopySegment &segment = batch.at[blockIdx.y];
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < segment.count; i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    segment.dst[i] = segment.src[i];
}

__global__ void addRepeatedKernel(const float *a, int64_t na, const float *b,
                                  int64_t nb, float *out, int64_t n) {
  DTFM_GRID_STRIDE(i, n) out[i] = a[i % na] + b[i % nb];
}

/// Few repeats (fewer than a column tile's lanes): a thread per column.
__global__ void sumFewRepeatsKernel(const float *dOut, int64_t n, float *grad,
                                    int64_t m) {
  DTFM_GRID_STRIDE(j, m) {
    float sum = 0;
    for (int64_t i = j; i < n; i += m)
      sum += dOut[i];
    grad[j] += sum;
  }
}

__global__ void sumRepeatedKernel(const float *dOut, int64_t n, float *grad,
                                  int64_t m) {
  columnTileSums<1>(
      (n + m - 1) / m, m,
      [&](int64_t r, int64_t j, float *sums) {
        int64_t i = r * m + j;
        if (i < n)
          sums[0] += dOut[i];
      },
      [&](int64_t j, const float *sums) { grad[j] += sums[0]; });
}

constexpr float kSqrt2OverPi = 0.7978845608f;
constexpr float kInvSqrt2 = 0.70710678f;
constexpr float kInvSqrt2Pi = 0.39894228f;

__global__ void roundToHalfKernel(const float *x, uint16_t *y, int64_t n,
                                  bool bfloat16) {
  DTFM_GRID_STRIDE(i, n) {
    if (bfloat16)
      y[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x[i]));
    else
      y[i] = __half_as_ushort(__float2half_rn(x[i]));
  }
}

__global__ void geluKernel(const float *x, float *y, int64_t n, bool tanhApp) {
  DTFM_GRID_STRIDE(i, n) {
    float v = x[i];
    y[i] = tanhApp
               ? 0.5f * v * (1 + tanhf(kSqrt2OverPi * (v + 0.044715f * v * v * v)))
               : 0.5f * v * (1 + erff(v * kInvSqrt2));
  }
}

__global__ void geluBackwardKernel(const float *x, const float *dy, float *dx,
                                   int64_t n, bool tanhApp) {
  DTFM_GRID_STRIDE(i, n) {
    float v = x[i], grad;
    if (tanhApp) {
      float t = tanhf(kSqrt2OverPi * (v + 0.044715f * v * v * v));
      grad = 0.5f * (1 + t) + 0.5f * v * (1 - t * t) * kSqrt2OverPi *
                                  (1 + 3 * 0.044715f * v * v);
    } else {
      grad = 0.5f * (1 + erff(v * kInvSqrt2)) +
             v * expf(-0.5f * v * v) * kInvSqrt2Pi;
    }
    dx[i] += grad * dy[i];
  }
}

__global__ void reluKernel(const float *x, float *y, int64_t n) {
  DTFM_GRID_STRIDE(i, n) y[i] = fmaxf(0.0f, x[i]);
}

__global__ void reluBackwardKernel(const float *y, const float *dy, float *dx,
                                   int64_t n) {
  DTFM_GRID_STRIDE(i, n) dx[i] += y[i] > 0 ? dy[i] : 0.0f;
}

__global__ void accumulateKernel(const float *src, float *dst, int64_t n) {
  DTFM_GRID_STRIDE(i, n) dst[i] += src[i];
}

__global__ void scaleKernel(float *x, int64_t n, float factor) {
  DTFM_GRID_STRIDE(i, n) x[i] *= factor;
}

__global__ void embeddingKernel(const float *indices, const float *table,
                                float *out, int64_t n, int64_t h,
                                int64_t firstRow, int64_t rows) {
  DTFM_GRID_STRIDE(i, n * h) {
    int64_t row = static_cast<int64_t>(indices[i / h]) - firstRow;
    out[i] = row >= 0 && row < rows ? table[row * h + i % h] : 0.0f;
  }
}

__global__ void embeddingBackwardKernel(const float *indices, const float *dOut,
                                        float *dTable, int64_t n, int64_t h,
                                        int64_t firstRow, int64_t rows) {
  DTFM_GRID_STRIDE(i, n * h) {
    int64_t row = static_cast<int64_t>(indices[i / h]) - firstRow;
    if (row >= 0 && row < rows)
      atomicAdd(&dTable[row * h + i % h], dOut[i]);
  }
}

__global__ void sgdKernel(float *param, const float *grad, float *velocity,
                          int64_t n, float lr, float momentum,
                          float weightDecay) {
  DTFM_GRID_STRIDE(i, n) {
    float g = grad[i] + weightDecay * param[i];
    float v = momentum * velocity[i] + g;
    velocity[i] = v;
    param[i] -= lr * v;
  }
}

__global__ void adamwKernel(float *param, const float *grad, float *m,
                            float *v, int64_t n, float c1, float c2, float lr,
                            float beta1, float beta2, float gain1,
                            float gain2, float epsilon, float weightDecay,
                            bool frozen) {
  DTFM_GRID_STRIDE(i, n) {
    float g = grad[i];
    float mi = beta1 * m[i] + gain1 * g;
    float vi = frozen ? v[i] : beta2 * v[i] + gain2 * g * g;
    m[i] = mi;
    v[i] = vi;
    float p = param[i];
    p -= lr * weightDecay * p;
    p -= lr * (mi / c1) / (sqrtf(vi / c2) + epsilon);
    param[i] = p;
  }
}

} // namespace

namespace dtfm::runtime::cuda {

void roundToHalf(const float *x, uint16_t *y, int64_t n, bool bfloat16,
                 cudaStream_t stream) {
  if (n > 0)
    roundToHalfKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, y, n,
                                                             bfloat16);
}

void addRepeated(const float *a, int64_t na, const float *b, int64_t nb,
                 float *out, int64_t n, cudaStream_t stream) {
  addRepeatedKernel<<<blocksFor(n), kThreads, 0, stream>>>(a, na, b, nb, out,
                                                           n);
}

void sumRepeated(const float *dOut, int64_t n, float *grad, int64_t m,
                 cudaStream_t stream) {
  if (m <= 0)
    return;
  // A same-shape operand's gradient (one repeat) or a position embedding's
  // (a few): a thread per column keeps every lane busy; many repeats onto
  // few columns (a bias) take the column tiles.
  if ((n + m - 1) / m < kColumnTile) {
    sumFewRepeatsKernel<<<blocksFor(m), kThreads, 0, stream>>>(dOut, n, grad,
                                                               m);
    return;
  }
  sumRepeatedKernel<<<columnTiles(m), columnTileThreads(), 0, stream>>>(
      dOut, n, grad, m);
}

void gelu(const float *x, float *y, int64_t n, bool tanhApproximation,
          cudaStream_t stream) {
  geluKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, y, n,
                                                    tanhApproximation);
}

void geluBackward(const float *x, const float *dy, float *dx, int64_t n,
                  bool tanhApproximation, cudaStream_t stream) {
  geluBackwardKernel<<<blocksFor(n), kThreads, 0, stream>>>(
      x, dy, dx, n, tanhApproximation);
}

void relu(const float *x, float *y, int64_t n, cudaStream_t stream) {
  reluKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, y, n);
}

void reluBackward(const float *y, const float *dy, float *dx, int64_t n,
                  cudaStream_t stream) {
  reluBackwardKernel<<<blocksFor(n), kThreads, 0, stream>>>(y, dy, dx, n);
}

void accumulate(const float *src, float *dst, int64_t n, cudaStream_t stream) {
  accumulateKernel<<<blocksFor(n), kThreads, 0, stream>>>(src, dst, n);
}

void copySegments(const CopySegment *segments, size_t count,
                  cudaStream_t stream) {
  for (size_t first = 0; first < count; first += kSegmentsPerLaunch) {
    SegmentBatch batch{};
    int used = 0;
    int64_t longest = 0;
    for (size_t s = first; s < count && used < kSegmentsPerLaunch; ++s) {
      batch.at[used++] = segments[s];
      longest = segments[s].count > longest ? segments[s].count : longest;
    }
    if (longest == 0)
      continue;
    dim3 grid(blocksFor(longest) > 1024 ? 1024 : blocksFor(longest), used);
    copySegmentsKernel<<<grid, kThreads, 0, stream>>>(batch);
  }
}

void scale(float *x, int64_t n, float factor, cudaStream_t stream) {
  scaleKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, n, factor);
}

void embedding(const float *indices, const float *table, float *out, int64_t n,
               int64_t h, int64_t firstRow, int64_t rows, cudaStream_t stream) {
  embeddingKernel<<<blocksFor(n * h), kThreads, 0, stream>>>(
      indices, table, out, n, h, firstRow, rows);
}

void embeddingBackward(const float *indices, const float *dOut, float *dTable,
                       int64_t n, int64_t h, int64_t firstRow, int64_t rows,
                       cudaStream_t stream) {
  embeddingBackwardKernel<<<blocksFor(n * h), kThreads, 0, stream>>>(
      indices, dOut, dTable, n, h, firstRow, rows);
}

void sgdStep(float *param, const float *grad, float *velocity, int64_t n,
             float lr, float momentum, float weightDecay,
             cudaStream_t stream) {
  sgdKernel<<<blocksFor(n), kThreads, 0, stream>>>(param, grad, velocity, n,
                                                   lr, momentum, weightDecay);
}

void adamwStep(float *param, const float *grad, float *m, float *v, int64_t n,
               int64_t step, float lr, double beta1, double beta2,
               float epsilon, float weightDecay,
               int64_t freezeSecondMomentAfter,
               cudaStream_t stream) {
  bool frozen = freezeSecondMomentAfter > 0 && step > freezeSecondMomentAfter;
  float c1 = static_cast<float>(1 - std::pow(beta1, static_cast<double>(step)));
  float c2 = static_cast<float>(
      1 - std::pow(beta2, static_cast<double>(frozen ? freezeSecondMomentAfter
                                                     : step)));
  // 1 - beta from the double, as the CPU kernel (1 - 0.999f is 4.7e-5 off).
  float gain1 = static_cast<float>(1 - beta1),
        gain2 = static_cast<float>(1 - beta2);
  adamwKernel<<<blocksFor(n), kThreads, 0, stream>>>(
      param, grad, m, v, n, c1, c2, lr, static_cast<float>(beta1),
      static_cast<float>(beta2), gain1, gain2, epsilon,
      weightDecay, frozen);
}

} // namespace dtfm::runtime::cuda
