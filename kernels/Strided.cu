//===- Strided.cu - Broadcasting, permuting, slicing, reducing, gather ----===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Grid-stride loops over the views and per-element math of ElementMath.h:
// the arithmetic is the host-tested one, the kernels only distribute it.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"
#include "dtfm/Runtime/Cuda/Kernels.h"

#include <cuda_runtime.h>

using namespace dtfm::runtime::cuda;
using namespace dtfm::runtime::cuda::detail;
using namespace dtfm::math;

namespace {

/// Kernel parameters cannot be arrays of pointers.
struct Operands {
  const float *p[ReductionViews::kOperands];
};

__global__ void copyStridedKernel(const float *src, StridedView srcView,
                                  float *dst, StridedView dstView, int64_t n,
                                  float alpha, bool accumulate) {
  DTFM_GRID_STRIDE(i, n) {
    float value = alpha * src[srcView.at(i)];
    int64_t at = dstView.at(i);
    dst[at] = accumulate ? dst[at] + value : value;
  }
}

__global__ void binaryStridedKernel(BinaryOp op, const float *a,
                                    StridedView aView, const float *b,
                                    StridedView bView, float *out, int64_t n) {
  DTFM_GRID_STRIDE(i, n) out[i] = applyBinary(op, a[aView.at(i)], b[bView.at(i)]);
}

__global__ void whereStridedKernel(const float *c, StridedView cView,
                                   const float *a, StridedView aView,
                                   const float *b, StridedView bView,
                                   float *out, int64_t n) {
  DTFM_GRID_STRIDE(i, n)
  out[i] = c[cView.at(i)] != 0 ? a[aView.at(i)] : b[bView.at(i)];
}

__device__ float termAt(ReduceTerm term, int count, const Operands &ops,
                        const ReductionViews &v, const int64_t *base,
                        int64_t r) {
  float x[ReductionViews::kOperands] = {0, 0, 0};
  for (int k = 0; k < count; ++k)
    x[k] = ops.p[k][base[k] + v.reduced[k].at(r)];
  return reduceTerm(term, x[0], x[1], x[2]);
}

/// One thread per result element, summing its reduction in order.
__global__ void reducePerThreadKernel(ReduceTerm term, Operands ops,
                                      ReductionViews v, float *out,
                                      float alpha, bool accumulate) {
  int count = reduceTermOperands(term);
  DTFM_GRID_STRIDE(j, v.keptCount) {
    int64_t base[ReductionViews::kOperands] = {0, 0, 0};
    for (int k = 0; k < count; ++k)
      base[k] = v.kept[k].at(j);
    float sum = 0;
    for (int64_t r = 0; r < v.reducedCount; ++r)
      sum += termAt(term, count, ops, v, base, r);
    int64_t at = v.result.at(j);
    out[at] = (accumulate ? out[at] : 0.0f) + alpha * sum;
  }
}

/// One block per result element: long reductions onto few elements (a
/// bias gradient, a mean over the last axis).
__global__ void reducePerBlockKernel(ReduceTerm term, Operands ops,
                                     ReductionViews v, float *out,
                                     float alpha, bool accumulate) {
  __shared__ float scratch[32];
  int count = reduceTermOperands(term);
  for (int64_t j = blockIdx.x; j < v.keptCount; j += gridDim.x) {
    int64_t base[ReductionViews::kOperands] = {0, 0, 0};
    for (int k = 0; k < count; ++k)
      base[k] = v.kept[k].at(j);
    float partial = 0;
    for (int64_t r = threadIdx.x; r < v.reducedCount; r += blockDim.x)
      partial += termAt(term, count, ops, v, base, r);
    float sum = blockSum(partial, scratch);
    if (threadIdx.x == 0) {
      int64_t at = v.result.at(j);
      out[at] = (accumulate ? out[at] : 0.0f) + alpha * sum;
    }
  }
}

/// One thread per result element: its reduction's extremum.
__device__ float extremumAt(bool maximum, const float *x,
                            const ReductionViews &v, int64_t base) {
  float acc = x[base + v.reduced[0].at(0)];
  for (int64_t r = 1; r < v.reducedCount; ++r)
    acc = extremumStep(maximum, acc, x[base + v.reduced[0].at(r)]);
  return acc;
}

__global__ void reduceExtremumKernel(bool maximum, const float *x,
                                     ReductionViews v, float *out) {
  DTFM_GRID_STRIDE(j, v.keptCount)
  out[v.result.at(j)] = extremumAt(maximum, x, v, v.kept[0].at(j));
}

/// Each element of x belongs to one result: no two threads write one dx.
__global__ void reduceExtremumBackwardKernel(bool maximum, const float *x,
                                             const float *dy,
                                             ReductionViews v, float *dx) {
  DTFM_GRID_STRIDE(j, v.keptCount) {
    int64_t base = v.kept[0].at(j);
    float value = extremumAt(maximum, x, v, base);
    int64_t ties = 0;
    for (int64_t r = 0; r < v.reducedCount; ++r)
      ties += x[base + v.reduced[0].at(r)] == value;
    if (ties == 0) // a NaN extremum: no element equals it
      continue;
    float share = dy[v.result.at(j)] / static_cast<float>(ties);
    for (int64_t r = 0; r < v.reducedCount; ++r) {
      int64_t at = base + v.reduced[0].at(r);
      if (x[at] == value)
        dx[at] += share;
    }
  }
}

__global__ void unaryKernel(UnaryOp op, const float *x, float *y, int64_t n,
                            UnaryParams params) {
  DTFM_GRID_STRIDE(i, n) y[i] = applyUnary(op, x[i], params);
}

__global__ void unaryBackwardKernel(UnaryOp op, const float *x, const float *dy,
                                    float *dx, int64_t n, UnaryParams params) {
  DTFM_GRID_STRIDE(i, n) dx[i] += unaryGradient(op, x[i], dy[i], params);
}

__global__ void rotaryKernel(const float *x, float *y, int64_t n, int64_t s,
                             int64_t hidden, int64_t dh, double theta, int sign,
                             bool accumulate) {
  DTFM_GRID_STRIDE(i, n) {
    float turned = rotaryElement(x, i, s, hidden, dh, theta, sign);
    y[i] = accumulate ? y[i] + turned : turned;
  }
}

__global__ void gatherKernel(const float *x, const float *indices,
                             GatherGeometry g, float *out, int *badIndex,
                             int64_t n) {
  DTFM_GRID_STRIDE(i, n) {
    int64_t source = g.source(indices, i);
    if (source < 0) {
      *badIndex = 1;
      out[i] = 0;
    } else {
      out[i] = x[source];
    }
  }
}

__global__ void gatherBackwardKernel(const float *indices, const float *dOut,
                                     GatherGeometry g, float *dx, int64_t n) {
  DTFM_GRID_STRIDE(i, n) {
    int64_t source = g.source(indices, i);
    if (source >= 0)
      atomicAdd(dx + source, dOut[i]);
  }
}

} // namespace

namespace dtfm::runtime::cuda {

void copyStrided(const float *src, const StridedView &srcView, float *dst,
                 const StridedView &dstView, float alpha, bool accumulate,
                 cudaStream_t stream) {
  int64_t n = srcView.numel();
  if (n == 0)
    return;
  copyStridedKernel<<<blocksFor(n), kThreads, 0, stream>>>(
      src, srcView, dst, dstView, n, alpha, accumulate);
}

void binaryStrided(BinaryOp op, const float *a, const StridedView &aView,
                   const float *b, const StridedView &bView, float *out,
                   cudaStream_t stream) {
  int64_t n = aView.numel();
  if (n == 0)
    return;
  binaryStridedKernel<<<blocksFor(n), kThreads, 0, stream>>>(op, a, aView, b,
                                                             bView, out, n);
}

void whereStrided(const float *condition, const StridedView &conditionView,
                  const float *a, const StridedView &aView, const float *b,
                  const StridedView &bView, float *out, cudaStream_t stream) {
  int64_t n = aView.numel();
  if (n == 0)
    return;
  whereStridedKernel<<<blocksFor(n), kThreads, 0, stream>>>(
      condition, conditionView, a, aView, b, bView, out, n);
}

void reduceStrided(ReduceTerm term, const float *const operands[3],
                   const ReductionViews &views, float *out, float alpha,
                   bool accumulate, cudaStream_t stream) {
  if (views.keptCount == 0)
    return;
  Operands ops{{operands[0], operands[1], operands[2]}};
  // Few results with long reductions: a block each; otherwise a thread
  // each keeps the GPU busy and reads along the kept (fast) dimensions.
  if (views.keptCount < 16384 && views.reducedCount >= 128) {
    unsigned blocks = static_cast<unsigned>(
        views.keptCount > 65535 ? 65535 : views.keptCount);
    reducePerBlockKernel<<<blocks, kThreads, 0, stream>>>(term, ops, views,
                                                          out, alpha,
                                                          accumulate);
    return;
  }
  reducePerThreadKernel<<<blocksFor(views.keptCount), kThreads, 0, stream>>>(
      term, ops, views, out, alpha, accumulate);
}

void reduceExtremum(bool maximum, const float *x, const ReductionViews &views,
                    float *out, cudaStream_t stream) {
  if (views.keptCount > 0 && views.reducedCount > 0)
    reduceExtremumKernel<<<blocksFor(views.keptCount), kThreads, 0, stream>>>(
        maximum, x, views, out);
}

void reduceExtremumBackward(bool maximum, const float *x, const float *dy,
                            const ReductionViews &views, float *dx,
                            cudaStream_t stream) {
  if (views.keptCount > 0 && views.reducedCount > 0)
    reduceExtremumBackwardKernel<<<blocksFor(views.keptCount), kThreads, 0,
                                   stream>>>(maximum, x, dy, views, dx);
}

void unary(UnaryOp op, const float *x, float *y, int64_t n, UnaryParams params,
           cudaStream_t stream) {
  if (n > 0)
    unaryKernel<<<blocksFor(n), kThreads, 0, stream>>>(op, x, y, n, params);
}

void unaryBackward(UnaryOp op, const float *x, const float *dy, float *dx,
                   int64_t n, UnaryParams params, cudaStream_t stream) {
  if (n > 0)
    unaryBackwardKernel<<<blocksFor(n), kThreads, 0, stream>>>(op, x, dy, dx, n,
                                                               params);
}

void rotary(const float *x, float *y, int64_t b, int64_t s, int64_t heads,
            int64_t dh, double theta, int sign, bool accumulate,
            cudaStream_t stream) {
  int64_t n = b * s * heads * dh;
  if (n > 0)
    rotaryKernel<<<blocksFor(n), kThreads, 0, stream>>>(
        x, y, n, s, heads * dh, dh, theta, sign, accumulate);
}

void gather(const float *x, const float *indices, const GatherGeometry &g,
            float *out, int *badIndex, cudaStream_t stream) {
  int64_t n = g.resultCount();
  if (n > 0)
    gatherKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, indices, g, out,
                                                        badIndex, n);
}

void gatherBackward(const float *indices, const float *dOut,
                    const GatherGeometry &g, float *dx, cudaStream_t stream) {
  int64_t n = g.resultCount();
  if (n > 0)
    gatherBackwardKernel<<<blocksFor(n), kThreads, 0, stream>>>(indices, dOut,
                                                                g, dx, n);
}

} // namespace dtfm::runtime::cuda
