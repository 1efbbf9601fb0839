//===- Codecs.cu - Compressed exchanges encoded on the GPU ----------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// A data-parallel gradient's compression with error feedback, on the
// device: the residual the last exchange left plus the gradient, encoded as
// the wire codec carries it, the rest kept as the new residual. Only the
// message leaves the GPU. The int8 math is format/Int8Math.h's (the host
// encoder's), the top-k selection the AdaTopK select's (ties to the
// lower index, as format::largestMagnitudes), so the host decodes exactly
// what its own encoder would have sent.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"
#include "dtfm/Format/Int8.h"
#include "dtfm/Format/Int8Math.h"
#include "dtfm/Runtime/Cuda/Kernels.h"

#include <cuda_runtime.h>

using namespace dtfm::runtime::cuda::detail;
namespace int8 = dtfm::format::int8;

namespace {

constexpr int kBlock = static_cast<int>(dtfm::format::kInt8Block);
static_assert(kBlock == kThreads, "one thread per value of an int8 block");

/// Block b of the format per CUDA block (striding over the format's
/// blocks): each thread adds its value's residual (when there is one), the
/// block's largest magnitude gives the scale, each thread writes its byte
/// and keeps what the byte does not carry.
__global__ void int8FeedbackKernel(const float *grad, float *residual,
                                   int64_t n, int64_t blocks, float *scales,
                                   int8_t *bytes) {
  __shared__ float scratch[32];
  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    int64_t i = b * kBlock + threadIdx.x;
    float pending = i < n ? (residual ? residual[i] : 0.0f) + grad[i] : 0.0f;
    float largest = blockMax(i < n ? int8::magnitude(pending) : 0.0f, scratch);
    float scale = int8::blockScale(largest);
    if (threadIdx.x == 0)
      scales[b] = scale;
    if (i < n) {
      int8_t q = int8::quantize(pending, scale);
      bytes[i] = q;
      if (residual)
        residual[i] = pending - int8::dequantize(q, scale);
    }
    __syncthreads(); // scratch is reused by the next block's maximum
  }
}

__global__ void int8DecodeKernel(const float *scales, const int8_t *bytes,
                                 int64_t n, float *out) {
  DTFM_GRID_STRIDE(i, n) out[i] = int8::dequantize(bytes[i], scales[i / kBlock]);
}

__global__ void addKernel(const float *grad, float *residual, int64_t n) {
  DTFM_GRID_STRIDE(i, n) residual[i] += grad[i];
}

__global__ void clearKeptKernel(const uint32_t *indices, int64_t k,
                                float *residual) {
  DTFM_GRID_STRIDE(i, k) residual[indices[i]] = 0.0f;
}

} // namespace

namespace dtfm::runtime::cuda {

void int8WithFeedback(const float *grad, float *residual, int64_t n,
                      void *message, cudaStream_t stream) {
  if (n <= 0)
    return;
  int64_t blocks = (n + kBlock - 1) / kBlock;
  auto *scales = static_cast<float *>(message);
  auto *bytes = reinterpret_cast<int8_t *>(scales + blocks);
  unsigned grid = static_cast<unsigned>(blocks > 65535 ? 65535 : blocks);
  int8FeedbackKernel<<<grid, kBlock, 0, stream>>>(grad, residual, n, blocks,
                                                   scales, bytes);
}

void int8Encode(const float *x, int64_t n, void *message,
                cudaStream_t stream) {
  int8WithFeedback(x, nullptr, n, message, stream);
}

void int8Decode(const void *message, int64_t n, float *out,
                cudaStream_t stream) {
  if (n <= 0)
    return;
  int64_t blocks = (n + kBlock - 1) / kBlock;
  const auto *scales = static_cast<const float *>(message);
  const auto *bytes = reinterpret_cast<const int8_t *>(scales + blocks);
  int8DecodeKernel<<<blocksFor(n), kThreads, 0, stream>>>(scales, bytes, n,
                                                          out);
}

void topKWithFeedback(const float *grad, float *residual, int64_t n, int64_t k,
                      float *values, uint32_t *indices, void *workspace,
                      cudaStream_t stream) {
  if (n <= 0 || k <= 0)
    return;
  if (k > n)
    k = n;
  addKernel<<<blocksFor(n), kThreads, 0, stream>>>(grad, residual, n);
  topKExact(residual, n, k, values, indices, workspace, stream);
  clearKeptKernel<<<blocksFor(k), kThreads, 0, stream>>>(indices, k, residual);
}

} // namespace dtfm::runtime::cuda
