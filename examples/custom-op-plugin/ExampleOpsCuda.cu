//===- ExampleOpsCuda.cu - The example plugin's GPU kernels ---------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// swiglu and rmsnorm on the GPU, with the CPU kernels' math (ExampleOps.cpp):
// rmsnorm's row sums in double, one block per row. The weight gradient of
// rmsnorm is summed over rows with atomics (its order varies from run to
// run in the last bits, as PyTorch's does).
//
//===----------------------------------------------------------------------===//

#include "ExampleOpsCuda.h"

#include <cuda_runtime.h>

#include <string>
#include <variant>

using dtfm::CustomOpCall;
using dtfm::DeviceTensor;

namespace {

constexpr int kThreads = 256;

int64_t elementsOf(const DeviceTensor &t) {
  int64_t n = 1;
  for (int64_t d : t.shape)
    n *= d;
  return n;
}

unsigned blocksFor(int64_t n) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 ? 65535 : blocks));
}

/// The launch's outcome as the plugin API wants it.
bool launched(const char *what, std::string &error) {
  cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess)
    return true;
  error = std::string(what) + ": " + cudaGetErrorString(status);
  return false;
}

__device__ float sigmoidOf(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void swigluKernel(const float *gate, const float *up, float *out,
                             int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < n; i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    out[i] = gate[i] * sigmoidOf(gate[i]) * up[i];
}

__global__ void swigluBackwardKernel(const float *gate, const float *up,
                                     const float *dOut, float *dGate,
                                     float *dUp, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < n; i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    float s = sigmoidOf(gate[i]);
    if (dGate)
      dGate[i] = dOut[i] * up[i] * (s + gate[i] * s * (1 - s));
    if (dUp)
      dUp[i] = dOut[i] * gate[i] * s;
  }
}

/// Sum over the block in double (every thread gets it); `scratch` holds
/// one value per thread.
__device__ double blockSum(double value, double *scratch) {
  scratch[threadIdx.x] = value;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride)
      scratch[threadIdx.x] += scratch[threadIdx.x + stride];
    __syncthreads();
  }
  double total = scratch[0];
  __syncthreads();
  return total;
}

__global__ void rmsnormKernel(const float *x, const float *w, float *out,
                              int64_t d, double epsilon) {
  __shared__ double scratch[kThreads];
  const float *row = x + blockIdx.x * d;
  double sum = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    sum += double(row[j]) * row[j];
  sum = blockSum(sum, scratch);
  float scale = static_cast<float>(1 / sqrt(sum / d + epsilon));
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    out[blockIdx.x * d + j] = row[j] * scale * w[j];
}

__global__ void rmsnormBackwardKernel(const float *x, const float *w,
                                      const float *dOut, float *dx, float *dw,
                                      int64_t d, double epsilon) {
  __shared__ double scratch[kThreads];
  const float *xr = x + blockIdx.x * d, *dy = dOut + blockIdx.x * d;
  double sum = 0, dot = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    sum += double(xr[j]) * xr[j];
    dot += double(dy[j]) * w[j] * xr[j];
  }
  sum = blockSum(sum, scratch);
  dot = blockSum(dot, scratch);
  double scale = 1 / sqrt(sum / d + epsilon);
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    if (dx)
      dx[blockIdx.x * d + j] = static_cast<float>(
          scale * w[j] * dy[j] - scale * scale * scale / d * xr[j] * dot);
    if (dw)
      atomicAdd(&dw[j], static_cast<float>(dy[j] * xr[j] * scale));
  }
}

double epsilonOf(const CustomOpCall &call) {
  return std::get<double>(call.params.at("epsilon"));
}

cudaStream_t streamOf(void *stream) { return static_cast<cudaStream_t>(stream); }

} // namespace

bool example::swigluCudaForward(const CustomOpCall &,
                                const std::vector<const DeviceTensor *> &in,
                                const std::vector<DeviceTensor> &out,
                                void *stream, std::string &error) {
  int64_t n = elementsOf(*in[0]);
  swigluKernel<<<blocksFor(n), kThreads, 0, streamOf(stream)>>>(
      in[0]->data, in[1]->data, out[0].data, n);
  return launched("swiglu", error);
}

bool example::swigluCudaBackward(const CustomOpCall &,
                                 const std::vector<const DeviceTensor *> &in,
                                 const DeviceTensor &dOut,
                                 const std::vector<bool> &wanted,
                                 const std::vector<DeviceTensor> &grads,
                                 void *stream, std::string &error) {
  int64_t n = elementsOf(*in[0]);
  swigluBackwardKernel<<<blocksFor(n), kThreads, 0, streamOf(stream)>>>(
      in[0]->data, in[1]->data, dOut.data, wanted[0] ? grads[0].data : nullptr,
      wanted[1] ? grads[1].data : nullptr, n);
  return launched("swiglu backward", error);
}

bool example::rmsnormCudaForward(const CustomOpCall &call,
                                 const std::vector<const DeviceTensor *> &in,
                                 const std::vector<DeviceTensor> &out,
                                 void *stream, std::string &error) {
  int64_t d = in[0]->shape.back(), rows = elementsOf(*in[0]) / d;
  if (rows == 0)
    return true;
  rmsnormKernel<<<static_cast<unsigned>(rows), kThreads, 0,
                  streamOf(stream)>>>(in[0]->data, in[1]->data, out[0].data, d,
                                      epsilonOf(call));
  return launched("rmsnorm", error);
}

bool example::rmsnormCudaBackward(const CustomOpCall &call,
                                  const std::vector<const DeviceTensor *> &in,
                                  const DeviceTensor &dOut,
                                  const std::vector<bool> &wanted,
                                  const std::vector<DeviceTensor> &grads,
                                  void *stream, std::string &error) {
  int64_t d = in[0]->shape.back(), rows = elementsOf(*in[0]) / d;
  if (rows == 0)
    return true;
  rmsnormBackwardKernel<<<static_cast<unsigned>(rows), kThreads, 0,
                          streamOf(stream)>>>(
      in[0]->data, in[1]->data, dOut.data, wanted[0] ? grads[0].data : nullptr,
      wanted[1] ? grads[1].data : nullptr, d, epsilonOf(call));
  return launched("rmsnorm backward", error);
}
