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

/// Column sums over the rows of a row-major rows x columns layout: a block
/// of 32 x 32 threads per tile of 32 columns (launch columnTiles(columns)
/// blocks of columnTileThreads()). Thread (x, y) calls term(r, j, sums) for
/// its column j and the rows y, y + 32, ...; the 32 partial sums of a column
/// are then added in the order of y, so the totals do not depend on how the
/// threads were scheduled, and store(j, totals) runs once per column. One
/// thread per column instead would leave all but a few multiprocessors idle
/// on a bias or norm gradient (768 columns of 8192 rows: 3 blocks, each
/// thread reading 8192 values one after another).
constexpr int kColumnTile = 32;
inline dim3 columnTileThreads() { return dim3(kColumnTile, kColumnTile); }
inline unsigned columnTiles(int64_t columns) {
  int64_t tiles = (columns + kColumnTile - 1) / kColumnTile;
  return static_cast<unsigned>(tiles < 1 ? 1 : tiles);
}

template <int Terms, typename Term, typename Store>
__device__ inline void columnTileSums(int64_t rows, int64_t columns, Term term,
                                      Store store) {
  __shared__ float partial[Terms][kColumnTile][kColumnTile + 1];
  int64_t j = static_cast<int64_t>(blockIdx.x) * kColumnTile + threadIdx.x;
  float sums[Terms];
  for (int t = 0; t < Terms; ++t)
    sums[t] = 0;
  if (j < columns)
    for (int64_t r = threadIdx.y; r < rows; r += kColumnTile)
      term(r, j, sums);
  for (int t = 0; t < Terms; ++t)
    partial[t][threadIdx.y][threadIdx.x] = sums[t];
  __syncthreads();
  if (threadIdx.y != 0 || j >= columns)
    return;
  for (int t = 0; t < Terms; ++t) {
    float total = 0;
    for (int y = 0; y < kColumnTile; ++y)
      total += partial[t][y][threadIdx.x];
    sums[t] = total;
  }
  store(j, sums);
}

} // namespace dtfm::runtime::cuda::detail

#endif // DTFM_KERNELS_COMMON_CUH
