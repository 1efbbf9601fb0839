//===- Common.cuh - Shared helpers of dtfm's CUDA kernels ------*- CUDA -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_KERNELS_COMMON_CUH
#define DTFM_KERNELS_COMMON_CUH

#include <cstdint>

namespace dtfm::runtime::cuda::detail {

constexpr int kThreads = 256;

/// Blocks for a grid-stride loop over n elements (capped: the loops stride).
inline unsigned blocksFor(int64_t n) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks < 1)
    blocks = 1;
  return static_cast<unsigned>(blocks > 65535 ? 65535 : blocks);
}

#define DTFM_GRID_STRIDE(i, n)                                                 \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) +           \
                   threadIdx.x;                                                \
       i < (n); i += static_cast<int64_t>(blockDim.x) * gridDim.x)

/// Sum over the block (every thread gets the result); `scratch` holds 32.
/// Float for activations, double for statistics of long reductions.
template <typename T> __device__ inline T blockSum(T value, T *scratch) {
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_down_sync(0xffffffffu, value, offset);
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0)
    scratch[warp] = value;
  __syncthreads();
  int warps = (blockDim.x + 31) / 32;
  T total = 0;
  for (int w = 0; w < warps; ++w)
    total += scratch[w];
  return total;
}

/// Maximum over the block (every thread gets the result).
__device__ inline float blockMax(float value, float *scratch) {
  for (int offset = 16; offset > 0; offset /= 2)
    value = fmaxf(value, __shfl_down_sync(0xffffffffu, value, offset));
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0)
    scratch[warp] = value;
  __syncthreads();
  int warps = (blockDim.x + 31) / 32;
  float best = scratch[0];
  for (int w = 1; w < warps; ++w)
    best = fmaxf(best, scratch[w]);
  return best;
}

} // namespace dtfm::runtime::cuda::detail

#endif // DTFM_KERNELS_COMMON_CUH
